"""Harness services: named callables the agent's namespace reaches through stubs (JSON in, JSON out).

An episode registers its services (``complete_task``, an env's APIs, later a simulator's ``act`` or
``load_skill``) and describes how they appear in the agent's namespace with bindings (:func:`function`,
:func:`tree`, :func:`value`; see ``skilltransfer.sandbox.runtime.stubs``). The sandboxed runner dispatches the
worker's call frames to :meth:`Services.dispatch` while an action runs; the in-process runner calls it directly. A
service sees only JSON values and may raise any exception: the agent's stub raises an exception of the same class
name and module with the same arguments (builtins are the real classes).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from skilltransfer.sandbox.runtime.channel import depth_problem

MAX_REPLY_BYTES = 8 << 20
"""Default cap of one service result (JSON bytes); a larger result is an error for the agent."""

MAX_ARGUMENT_DEPTH = 64
"""Deepest nesting (lists/dicts) of a service call's arguments; deeper is an error for the agent (nothing harness-side
that stores, logs or compares an argument then meets a recursion limit)."""


def error_info(exc: BaseException) -> dict[str, Any]:
    """How an exception travels to the agent: class name, module, and JSON arguments (else its text)."""
    try:
        args = json.loads(json.dumps(list(exc.args)))
    except (TypeError, ValueError):
        args = [str(exc)]
    return {"type": type(exc).__name__, "module": type(exc).__module__, "args": args}


class Services:
    """The harness-side services of one episode.

    Args:
        max_reply_bytes: largest JSON result a service may return to the agent.
    """

    def __init__(self, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        self._functions: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        self.max_reply_bytes = max_reply_bytes
        self.calls = 0
        self._refusal: str | None = None

    @contextlib.contextmanager
    def refusing(self, reason: str) -> Iterator[None]:
        """While inside, every call is refused with ``reason`` (e.g. while a code skill loads)."""
        self._refusal = reason
        try:
            yield
        finally:
            self._refusal = None

    def register(self, name: str, function: Callable[..., Any]) -> None:
        """Make ``function(*args, **kwargs)`` callable by agent code as service ``name``."""
        self._functions[name] = function

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def names(self) -> list[str]:
        return sorted(self._functions)

    def dispatch(self, name: str, args: Any, kwargs: Any) -> str:
        """Call service ``name``; the JSON text of ``{"ok": result}`` or ``{"error": error_info}``.

        Calls are serialised per episode (a service never runs twice at once for one agent).
        """
        function = self._functions.get(name) if isinstance(name, str) else None
        if self._refusal is not None:
            return json.dumps({"error": error_info(PermissionError(f"{name}: {self._refusal}"))})
        if function is None:
            return json.dumps({"error": error_info(NameError(f"no harness service named {name!r}"))})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            return json.dumps({"error": error_info(TypeError(f"{name}: malformed call"))})
        if depth_problem([args, kwargs], MAX_ARGUMENT_DEPTH + 1) is not None:
            problem = ValueError(f"{name}: the arguments nest more than {MAX_ARGUMENT_DEPTH} levels deep; "
                                 "send flatter data")
            return json.dumps({"error": error_info(problem)})
        try:
            with self._lock:
                self.calls += 1
                result = function(*args, **kwargs)
            text = json.dumps({"ok": result})
        except Exception as exc:  # noqa: BLE001 - the agent's call failed: it gets the exception
            return json.dumps({"error": error_info(exc)})
        if len(text) > self.max_reply_bytes:
            error = ValueError(f"{name}: the result is {len(text)} bytes of JSON, over the {self.max_reply_bytes} "
                               "byte limit; ask for less (e.g. a smaller page)")
            return json.dumps({"error": error_info(error)})
        return text


def function(service: str, name: str | None = None, doc: str | None = None, *, lenient: bool = False,
             lookup_note: str = "") -> dict[str, Any]:
    """A binding: a function calling ``service`` (``lenient``: convert arguments that are not JSON, e.g. numpy;
    ``lookup_note``: added to the error of a failing key or index lookup in its result)."""
    return {"kind": "function", "service": service, "name": name or service.rsplit(".", 1)[-1], "doc": doc,
            "lenient": lenient, "lookup_note": lookup_note}


def tree(children: dict[str, dict[str, Any]], text: str, missing: str | None = None) -> dict[str, Any]:
    """A binding: an attribute namespace; ``text`` is its repr, ``missing`` the AttributeError message template."""
    return {"kind": "tree", "children": children, "repr": text, "missing": missing}


def value(data: Any) -> dict[str, Any]:
    """A binding: a plain JSON value."""
    return {"kind": "value", "value": json.loads(json.dumps(data))}
