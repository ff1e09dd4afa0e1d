"""The worker<->harness channel: length-prefixed JSON frames, and calls of harness services from the worker.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON holding one object. The harness writes
configuration, actions (``{"op": "exec"|"check", "n": nonce, ...}``) and service replies
(``{"op": "reply", "id": k, "ok": value}`` or ``{"op": "reply", "id": k, "error": {...}}``); the worker writes its
start-up reply, service calls (``{"t": "call", "n": nonce, "id": k, "svc": name, "args": [...], "kwargs": {...}}``)
and action results (``{"t": "result", "n": nonce, ...}``). Every worker frame carries the nonce of the action it
belongs to; the harness discards frames with any other nonce (see ``skilltransfer.sandbox.runner``).
"""

from __future__ import annotations

import builtins
import json
import os
import struct
import threading
from typing import Any

HEADER = struct.Struct(">I")


def encode(message: dict[str, Any]) -> bytes:
    """One frame holding ``message``."""
    data = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(data)) + data


MAX_DEPTH = 66
"""Deepest nesting of a frame (a service call's arguments sit two levels down; a service caps them at 64)."""


def decode(body: bytes, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The object in a frame's body; ValueError if it is not a JSON object nested at most ``max_depth`` deep (any
    depth, any bytes: never another exception)."""
    try:
        message = json.loads(body)
    except (RecursionError, MemoryError) as exc:
        raise ValueError(f"frame is not decodable ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise ValueError("frame is not a JSON object")
    problem = depth_problem(message, max_depth)
    if problem is not None:
        raise ValueError(f"frame {problem}")
    return message


def depth_problem(value: Any, max_depth: int) -> str | None:
    """Why a decoded value nests too deeply (more than ``max_depth`` lists/dicts), else None; iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > max_depth:
            return f"nests more than {max_depth} levels deep"
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return None


def _strict(value: Any) -> Any:
    raise TypeError(f"got a {type(value).__name__}")


def _lenient(value: Any) -> Any:
    """Numpy/pandas values become Python values, sets lists, anything else its ``str``."""
    for method in ("tolist", "item"):
        convert = getattr(value, method, None)
        if callable(convert):
            try:
                return convert()
            except (TypeError, ValueError):
                continue
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


_ERRORS: dict[tuple[str, str], type[Exception]] = {}


def rebuild_error(info: Any) -> Exception:
    """The exception a harness service raised, as an instance of the same-named class (builtins: the real one)."""
    info = info if isinstance(info, dict) else {}
    name, module = str(info.get("type") or "ServiceError"), str(info.get("module") or "builtins")
    args = info.get("args")
    if not isinstance(args, list):
        args = [str(info.get("message", ""))]
    if not name.isidentifier():
        name = "ServiceError"
    if module == "builtins":
        cls = getattr(builtins, name, None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                return cls(*args)
            except Exception:  # noqa: BLE001 - a constructor that wants other arguments
                return cls(*map(str, args))
        module = "sandbox_runtime"
    cls = _ERRORS.get((module, name))
    if cls is None:
        cls = _ERRORS[(module, name)] = type(name, (Exception,), {"__module__": module})
    return cls(*args)


class WorkerChannel:
    """The worker's end of the channel, and the transport of the namespace's service stubs.

    Holds only the two pipe descriptors, the size limit and the nonce of the action now running (None between
    actions, when services cannot be called).
    """

    def __init__(self, rfd: int, wfd: int, max_bytes: int) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self.max_bytes = max_bytes
        self.nonce: str | None = None
        self._seq = 0
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        while data:
            data = data[os.write(self.wfd, data):]

    def _read_exact(self, n: int) -> bytes | None:
        chunks = []
        while n:
            chunk = os.read(self.rfd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> dict[str, Any] | None:
        """The harness's next frame (blocking); None when the harness closed the channel."""
        header = self._read_exact(HEADER.size)
        if header is None:
            return None
        body = self._read_exact(HEADER.unpack(header)[0])
        return None if body is None else decode(body)

    def call(self, service: str, args: list[Any], kwargs: dict[str, Any], *, lenient: bool = False) -> Any:
        """Call a harness service and return its JSON result, or raise the exception it raised."""
        with self._lock:
            if self.nonce is None:
                raise RuntimeError(f"{service}: harness services can only be called while an action runs")
            self._seq += 1
            call_id = self._seq
            message = {"t": "call", "n": self.nonce, "id": call_id, "svc": service, "args": args, "kwargs": kwargs}
            data = encode_call(service, message, self.max_bytes, lenient)
            while data:
                data = data[os.write(self.wfd, data):]
            while True:
                reply = self.receive()
                if reply is None:
                    os._exit(0)  # the harness is gone
                if reply.get("op") == "reply" and reply.get("id") == call_id:
                    break
        if "error" in reply:
            raise rebuild_error(reply["error"])
        return reply.get("ok")


def encode_call(service: str, message: dict[str, Any], max_bytes: int, lenient: bool) -> bytes:
    """A service call as a frame; TypeError/ValueError (naming the service) for arguments that cannot be sent."""
    try:
        data = json.dumps(message, separators=(",", ":"), default=_lenient if lenient else _strict).encode()
    except TypeError as exc:
        raise TypeError(f"{service}: arguments must be JSON-like values (str, int, float, bool, None, list, dict); "
                        f"{exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{service}: arguments cannot be sent: {exc}") from None
    if depth_problem(message, MAX_DEPTH) is not None:
        raise ValueError(f"{service}: the arguments nest more than {MAX_DEPTH - 2} levels deep; send flatter data")
    if len(data) > max_bytes:
        raise ValueError(f"{service}: the arguments are {len(data)} bytes of JSON, over the harness channel's limit "
                         f"of {max_bytes} bytes")
    return HEADER.pack(len(data)) + data


class DirectTransport:
    """The in-process runner's transport: calls harness services directly, with the same JSON round trip."""

    def __init__(self, services: Any, max_bytes: int = 8 << 20) -> None:
        self._services = services
        self.max_bytes = max_bytes

    def call(self, service: str, args: list[Any], kwargs: dict[str, Any], *, lenient: bool = False) -> Any:
        message = {"args": args, "kwargs": kwargs}
        sent = decode(encode_call(service, message, self.max_bytes, lenient)[HEADER.size:])
        reply = json.loads(self._services.dispatch(service, sent["args"], sent["kwargs"]))
        if "error" in reply:
            raise rebuild_error(reply["error"])
        return reply.get("ok")
