"""Harness-side work on untrusted input (an evaluation check over workspace files and task data, rendering an
artifact) run in a forked child under a wall-clock and a memory limit: a hostile check (catastrophic regex, nested
powers, a format string that builds gigabytes) or file (a sheet of millions of cells) costs a failed check, never the
run's time or the harness's memory.

The child is a ``fork`` of the harness: ``fn`` needs no pickling (closures, open handles to read-only data are
fine) and its result or exception comes back pickled. It runs with ``RLIMIT_AS`` at its address space at the fork
plus ``memory_mb`` (so an allocation past it raises ``MemoryError`` in the child) and is killed at ``timeout_s``. The
child has only the forking thread; it must not use locks other harness threads may hold (it touches no logging,
no model, no sandbox) and it exits with ``os._exit`` (no ``atexit`` handlers, no flushed parent buffers).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import select
import signal
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class BoundedCallError(Exception):
    """The call was stopped at its time or memory limit, or its child died; the message says which."""


def _address_space() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _child(fn: Callable[[], object], write: int, memory_mb: int, timeout_s: float) -> None:
    try:
        limit = _address_space() + (memory_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        cpu = math.ceil(timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        try:
            outcome: tuple[str, object] = ("ok", fn())
        except BaseException as exc:  # noqa: BLE001 - whatever it raised goes back to the caller
            outcome = ("error", exc)
        try:
            data = pickle.dumps(outcome)
        except Exception as exc:  # noqa: BLE001 - a result or exception that cannot be pickled
            data = pickle.dumps(("error", BoundedCallError(f"its result could not be sent back "
                                                           f"({type(exc).__name__}: {exc})")))
        view = memoryview(data)
        while view:
            view = view[os.write(write, view):]
    finally:
        os._exit(0)


def call_bounded(fn: Callable[[], T], *, timeout_s: float, memory_mb: int, what: str = "the call") -> T:
    """``fn()`` run in a forked child under ``timeout_s`` seconds and ``memory_mb`` MiB more address space.

    Returns:
        What ``fn`` returned (it must be picklable).

    Raises:
        BoundedCallError: the child was stopped at the time limit or died (e.g. killed for CPU or memory), naming
            ``what`` and the limit. Whatever ``fn`` raised is raised again here (``MemoryError`` past the limit).
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read)
        _child(fn, write, memory_mb, timeout_s)
    os.close(write)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    stopped = False
    try:
        poller = select.poll()
        poller.register(read, select.POLLIN | select.POLLHUP)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                if time.monotonic() >= deadline:
                    stopped = True
                    break
                continue
            chunk = os.read(read, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        if stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if stopped:
        raise BoundedCallError(f"{what} did not finish within {timeout_s:g} s (stopped)")
    if not chunks:
        code = os.waitstatus_to_exitcode(status)
        reason = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        raise BoundedCallError(f"{what} died ({reason}; limits {timeout_s:g} s, {memory_mb} MiB)")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "error":
        assert isinstance(value, BaseException)
        raise value
    return value
