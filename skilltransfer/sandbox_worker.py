"""The sandbox worker process: isolates itself, builds the env namespace, then runs code actions sent over a pipe.

Started by :class:`skilltransfer.sandbox.SandboxRunner` as ``python -P -s -m skilltransfer.sandbox_worker RFD WFD``.
Messages both ways are length-prefixed JSON (4-byte big-endian length, then UTF-8 JSON). The first message from the
harness is the configuration; the worker answers ``{"ready": true, "isolation": {...}}`` or ``{"fatal": reason}``,
then serves ``{"op": "exec", "code": ...}`` -> ``{"output": ..., "error": ...}`` and ``{"op": "check", "code": ...,
"name": ...}`` -> ``{"reason": ...}`` until the pipe closes.

Isolation happens here, before any agent code is imported or run, in this order: new network, mount and PID
namespaces with everything but the system folders hidden, the needed paths bound back, and every mount read-only
except the workspace and temp folder (root only), resource limits, privilege drop to the configured unprivileged
uid/gid (root only; no capability kept when reads are confined), importing the setup function, then a Python audit
hook that refuses writes outside the allowed folders (and reads outside the allow-list when the namespace does not
confine them) and any internet socket. Only the standard library (and the stdlib-only
``skilltransfer.sandbox_isolation``, which holds the isolation steps) is imported before isolation.
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import io
import json
import math
import os
import pickle
import resource
import socket
import struct
import sys
import traceback
from typing import Any

from skilltransfer.sandbox_isolation import (
    HIDDEN_IN_DEV,
    READABLE_SYSTEM,
    WRITE_FLAGS,
    drop_privileges,
    enter_namespaces,
    installed_paths,
    limit_processes,
    set_limits,
    world_reachable,
)


def send(fd: int, message: dict[str, Any]) -> None:
    """Write one length-prefixed JSON message to ``fd``."""
    data = json.dumps(message).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(fd: int) -> dict[str, Any] | None:
    """Read one length-prefixed JSON message; None at end of stream."""
    header = _read_exact(fd, 4)
    if header is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


class LimitedWriter(io.TextIOBase):
    """A text sink that keeps the head and tail of what is written (at most ``limit`` characters in all)."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = ""
        self.tail = ""
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head += text[:take]
            text = text[take:]
        if text:
            self.tail += text
            if len(self.tail) > 2 * self.half:
                self.dropped += len(self.tail) - self.half
                self.tail = self.tail[-self.half:]
        return len(text)

    def getvalue(self) -> str:
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            self.tail = self.tail[-self.half:]
        if not self.dropped:
            return self.head + self.tail
        return f"{self.head}\n... [{self.dropped} characters truncated] ...\n{self.tail}"


def install_guard(allowed: list[str], readable: list[str] | None = None) -> None:
    """Audit hook: refuse writes outside ``allowed`` folders and internet sockets (one layer of several).

    With ``readable`` (used when the mount namespace does not already hide the rest of the file system), opening a
    file for reading or listing a folder is refused too unless it lies in ``allowed``, ``readable``,
    ``READABLE_SYSTEM`` (``/usr``, ``/lib*``, ``/etc``, ``/dev`` but ``/dev/shm``, ...) or ``/proc/self``. Best effort:
    code in C extensions and subprocesses is not audited (the mount namespace is the layer that holds there).
    """
    roots = [os.path.realpath(p) for p in allowed]
    read_roots = None if readable is None else roots + [os.path.realpath(p) for p in readable]
    system = [os.path.realpath(p) for p in READABLE_SYSTEM]
    path_events = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
                   "os.symlink", "os.link", "os.rename", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr",
                   "os.removexattr", "os.mkfifo", "os.mknod"}
    net_events = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
    lookups = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.gethostbyname_ex",
               "socket.getnameinfo"}
    inside = os.path.realpath

    def under(real: str, folders: Any) -> bool:
        return any(real == r or real.startswith(r + os.sep) for r in folders)

    def ok(path: Any, within: list[str], *, reading: bool = False) -> bool:
        if isinstance(path, int) or path is None:
            return True
        try:
            real = inside(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        if real == os.devnull or under(real, within):
            return True
        # reading: /proc/self (resolved to this pid) and the system folders, but not other episodes' /dev/shm
        return reading and ((under(real, system) and not under(real, HIDDEN_IN_DEV))
                            or under(real, [f"/proc/{os.getpid()}"]))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if writes and not ok(path, roots):
                raise PermissionError(f"sandbox: writing outside the workspace is not allowed: {path!r}")
            if read_roots is not None and not writes and not ok(path, read_roots, reading=True):
                raise PermissionError(f"sandbox: reading outside the workspace is not allowed: {path!r}")
        elif event in ("os.listdir", "os.scandir"):
            if read_roots is not None and not ok(args[0] if args[0] is not None else ".", read_roots, reading=True):
                raise PermissionError(f"sandbox: listing outside the workspace is not allowed: {args[0]!r}")
        elif event in path_events:
            targets = args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]
            for target in targets:
                if not ok(target, roots):
                    raise PermissionError(f"sandbox: changing files outside the workspace is not allowed: {target!r}")
        elif event in net_events:
            sock = args[0]
            if getattr(sock, "family", None) in (socket.AF_INET, socket.AF_INET6):
                raise PermissionError("sandbox: network access is not allowed")
        elif event in lookups:
            raise PermissionError("sandbox: network access is not allowed")

    sys.addaudithook(hook)


def format_error(exc: BaseException) -> str:
    """A traceback keeping only the frames of the agent's own code."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(line for line in lines if 'File "' not in line or "<action>" in line or "<skill>" in line)


class Worker:
    """Runs actions in a persistent namespace; output captured at Python and file-descriptor level."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.limits = config["limits"]
        self.namespace: dict[str, Any] = {"__name__": "__episode__"}
        self.capture_path = os.path.join(config["tmpdir"], ".fd_output")
        self.capture = os.open(self.capture_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(self.capture, 1)
        os.dup2(self.capture, 2)
        self.offset = 0
        self.setup_function: Any = None

    def load(self, setup: str | None) -> None:
        """Import the setup function (before the audit hook, which may refuse listing the folder of its module)."""
        self.setup_function = None
        if setup:
            module_name, _, attr = setup.partition(":")
            self.setup_function = getattr(importlib.import_module(module_name), attr)

    def build(self, workspace: str, setup_kwargs: dict[str, Any]) -> None:
        """Fill the namespace by calling the setup function."""
        if self.setup_function is not None:
            from pathlib import Path

            self.namespace.update(self.setup_function(Path(workspace), **setup_kwargs))

    def _fd_output(self) -> str:
        end = os.lseek(self.capture, 0, os.SEEK_END)
        if end <= self.offset:
            return ""
        limit = int(self.limits["max_output_chars"])
        os.lseek(self.capture, self.offset, os.SEEK_SET)
        data = os.read(self.capture, min(end - self.offset, 4 * limit))
        self.offset = end
        return data.decode(errors="replace")

    def _arm_cpu(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + float(self.limits["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))

    def run(self, code: str, filename: str, namespace: dict[str, Any]) -> tuple[str, str | None]:
        writer = LimitedWriter(int(self.limits["max_output_chars"]))
        error: str | None = None
        self._arm_cpu()
        with contextlib.redirect_stdout(writer), contextlib.redirect_stderr(writer):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except BaseException as exc:  # noqa: BLE001 - agent code may raise anything, incl. SystemExit
                error = format_error(exc)
            with contextlib.suppress(Exception):
                sys.stdout.flush()
        extra = self._fd_output()
        if extra:
            writer.write(extra)
        return writer.getvalue(), error

    def check(self, code: str, name: str) -> str | None:
        namespace: dict[str, Any] = {"__name__": "skill"}
        _, error = self.run(code, "<skill>", namespace)
        if error is not None:
            last = error.strip().splitlines()[-1] if error.strip() else "an exception"
            return f"loading raised {last}"[:500]
        if not callable(namespace.get(name)):
            return f"after loading, {name!r} is not a callable"
        return None


def main() -> None:
    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    config = receive(rfd)
    if config is None:
        return
    privileged = os.getuid() == 0 and config.get("uid") is not None
    isolation: dict[str, Any] = {"namespaces": False, "read_only_fs": False, "reads_confined": False,
                                 "private_proc": False, "uid": os.getuid(), "read_capability": False}
    writable = [config["workspace"], config["tmpdir"]]
    readable = [*(config.get("readable") or []), *installed_paths()]
    try:
        if privileged:
            isolation.update(enter_namespaces((rfd, wfd), writable, readable))
        os.chdir(config["workspace"])
        set_limits(config["limits"])
        dropped = False
        if privileged:
            keep_read = not isolation["reads_confined"] or not all(world_reachable(p) for p in readable)
            isolation["read_capability"] = drop_privileges(int(config["uid"]), int(config["gid"]), keep_read)
            dropped = True
            isolation["uid"] = os.getuid()
        limit_processes(int(config["limits"]["max_processes"]), dropped)
        worker = Worker(config)
        worker.load(config.get("setup"))
        # the kernel hides the rest when reads are confined; otherwise the hook refuses reads outside the allow-list
        install_guard(writable, None if isolation["reads_confined"] else readable)
        kwargs = pickle.loads(base64.b64decode(config["setup_kwargs"])) if config.get("setup_kwargs") else {}
        worker.build(config["workspace"], kwargs)
    except BaseException as exc:  # noqa: BLE001 - report any setup failure to the harness
        send(wfd, {"fatal": "".join(traceback.format_exception_only(type(exc), exc)).strip()})
        return
    send(wfd, {"ready": True, "isolation": isolation})
    while (message := receive(rfd)) is not None:
        if message.get("op") == "check":
            send(wfd, {"reason": worker.check(message["code"], message["name"])})
        else:
            output, error = worker.run(message["code"], "<action>", worker.namespace)
            send(wfd, {"output": output, "error": error})


if __name__ == "__main__":
    main()
