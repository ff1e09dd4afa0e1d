"""Service stubs for the agent's namespace, built from a JSON binding spec (see ``skilltransfer.sandbox.services``).

A binding is one of:

* ``{"kind": "function", "service": "apis.email.send_email", "name": "send_email", "doc": "...", "lenient": false,
  "lookup_note": "..."}``: a function that sends its arguments (JSON) to the harness service and returns its result or
  raises its error; ``lenient`` arguments are converted (numpy values, sets, anything else ``str``) instead of
  refused; ``lookup_note`` (optional) is added to the errors of failing lookups in its results;
* ``{"kind": "tree", "children": {name: binding}, "repr": "...", "missing": "... {name} ..."}``: an attribute
  namespace (e.g. ``apis`` and ``apis.email``) whose ``dir()`` lists its children; ``missing`` is the message of
  the AttributeError for an unknown name (``{name}`` is replaced by its repr);
* ``{"kind": "value", "value": ...}``: a plain JSON value (e.g. the user name the agent acts for).

A stub holds its service name and the transport (the worker's channel, or the in-process runner's direct
transport) and nothing else. Results come back as ``explain.ApiList``/``ApiDict``, whose failing lookups name the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .explain import explained


class StubTree:
    """An attribute namespace of service stubs."""

    def __init__(self, children: dict[str, Any], text: str, missing: str | None) -> None:
        self.__dict__.update(children)
        self.__dict__["_stub_names"] = sorted(children)
        self.__dict__["_stub_text"] = text
        self.__dict__["_stub_missing"] = missing

    def __dir__(self) -> list[str]:
        return list(self.__dict__["_stub_names"])

    def __repr__(self) -> str:
        return str(self.__dict__["_stub_text"])

    def __getattr__(self, name: str) -> Any:
        missing = self.__dict__.get("_stub_missing")
        if name.startswith("_") or not missing:
            raise AttributeError(name if name.startswith("_") else f"{self!r} has no attribute {name!r}")
        raise AttributeError(str(missing).replace("{name}", repr(name)))


def _function(service: str, name: str, doc: str | None, lenient: bool, note: str,
              transport: Any) -> Callable[..., Any]:
    def stub(*args: Any, **kwargs: Any) -> Any:
        return explained(transport.call(service, list(args), kwargs, lenient=lenient), service, note)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = doc
    return stub


def build(bindings: dict[str, Any], transport: Any) -> dict[str, Any]:
    """Namespace entries for ``bindings`` whose functions call services through ``transport``."""
    return {name: _node(name, spec, transport) for name, spec in bindings.items()}


def _node(name: str, spec: dict[str, Any], transport: Any) -> Any:
    kind = spec.get("kind")
    if kind == "function":
        return _function(str(spec["service"]), str(spec.get("name") or name), spec.get("doc"),
                         bool(spec.get("lenient")), str(spec.get("lookup_note") or ""), transport)
    if kind == "tree":
        children = {child: _node(child, sub, transport) for child, sub in dict(spec.get("children") or {}).items()}
        return StubTree(children, str(spec.get("repr") or f"<{name}>"), spec.get("missing"))
    if kind == "value":
        return spec.get("value")
    raise ValueError(f"unknown binding kind {kind!r} for {name!r}")
