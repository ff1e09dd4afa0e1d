"""The sandbox worker process: isolates itself, builds the env namespace, then runs code actions sent over a pipe.

Started by :class:`skilltransfer.sandbox.SandboxRunner` as ``python -P -s -m skilltransfer.sandbox_worker RFD WFD``.
Messages both ways are length-prefixed JSON (4-byte big-endian length, then UTF-8 JSON). The first message from the
harness is the configuration; the worker answers ``{"ready": true, "isolation": {...}}`` or ``{"fatal": reason}``,
then serves ``{"op": "exec", "code": ...}`` -> ``{"output": ..., "error": ...}`` and ``{"op": "check", "code": ...,
"name": ...}`` -> ``{"reason": ...}`` until the pipe closes.

Isolation happens here, before any agent code is imported or run, in this order: new network, mount and PID
namespaces with every mount read-only except the workspace and temp folder (root only), resource limits, privilege
drop to the configured unprivileged uid/gid (root only; the file-system read/search capability is kept so the Python
installation stays readable, nothing else), then a Python audit hook that refuses writes outside the allowed folders
and any internet socket. Only the standard library is imported before isolation.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import io
import json
import math
import os
import pickle
import re
import resource
import signal
import socket
import struct
import sys
import traceback
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
_KEEP_WRITABLE = {"/dev", "/dev/pts"}
PR_SET_KEEPCAPS = 8
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
CAP_DAC_READ_SEARCH = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


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


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _exit_like(status: int) -> None:
    """Exit with a child's wait status: its exit code, or 128 + signal number."""
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def _read_only_except(writable: list[str]) -> bool:
    """In a fresh mount namespace: keep ``writable`` folders writable, remount every other mount read-only."""
    libc = _libc()
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:  # nothing propagates back to the host
        return False
    keep = set(_KEEP_WRITABLE)
    for folder in writable:
        real = os.path.realpath(folder)
        if libc.mount(real.encode(), real.encode(), None, MS_BIND | MS_REC, None) != 0:
            return False
        keep.add(real)
    with open("/proc/self/mountinfo") as handle:
        mounts = [line.split() for line in handle]
    for fields in mounts:
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if point in keep:
            continue
        options = fields[5].split(",")
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
            flags |= bit if name in options else 0
        libc.mount(None, point.encode(), None, flags, None)
    return True


def _enter_namespaces(keep_fds: tuple[int, int], writable: list[str]) -> dict[str, bool]:
    """New network, mount and PID namespaces; returns only in the worker process, PID 2 of the new namespace.

    The file system becomes read-only except ``writable``. The calling process waits in the old namespace and
    exits like the worker; PID 1 of the new namespace reaps orphans and exits when the worker does, at which point
    the kernel kills and reaps every process left in the namespace, so fork bombs and daemonised children cannot
    outlive the worker.
    """
    before = os.readlink("/proc/self/ns/mnt")
    if _libc().unshare(CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS) != 0:
        return {"namespaces": False, "read_only_fs": False}
    if os.readlink("/proc/self/ns/mnt") == before:  # never remount the host's file systems
        raise OSError("unshare(CLONE_NEWNS) did not give a new mount namespace")
    read_only = _read_only_except(writable)
    outer_child = os.fork()
    if outer_child:  # old namespace: mirror the worker's fate (a signal becomes 128+n, re-raised here)
        for fd in keep_fds:
            os.close(fd)
        _, status = os.waitpid(outer_child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code - 128 in set(signal.valid_signals()):
            with contextlib.suppress(OSError, ValueError):
                signal.signal(code - 128, signal.SIG_DFL)
                os.kill(os.getpid(), code - 128)
        os._exit(code)
    worker = os.fork()
    if worker:  # PID 1 of the namespace
        for fd in keep_fds:
            os.close(fd)
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                os._exit(1)
            if pid == worker:
                _exit_like(status)
    return {"namespaces": True, "read_only_fs": read_only}


def _set_limits(limits: dict[str, Any]) -> None:
    mem = int(limits["memory_mb"]) * 1024 * 1024
    fsize = int(limits["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _drop_privileges(uid: int, gid: int) -> bool:
    """Become ``uid``/``gid``, keeping only CAP_DAC_READ_SEARCH (read/traverse any file; no write, no kill)."""
    libc = _libc()
    libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    bit = 1 << CAP_DAC_READ_SEARCH
    data = (ctypes.c_uint32 * 6)(bit, bit, bit, 0, 0, 0)  # effective, permitted, inheritable (low 32 caps)
    kept = libc.capset(ctypes.byref(header), ctypes.byref(data)) == 0
    if kept:  # ambient: child processes (e.g. `python script.py`) can still read the Python installation
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0)
    return kept


def _limit_processes(max_processes: int, dropped: bool) -> None:
    extra = 0
    if not dropped:  # RLIMIT_NPROC counts all of this user's processes: allow that many more
        me = os.getuid()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}").st_uid == me:
                        extra += 1
    resource.setrlimit(resource.RLIMIT_NPROC, (max_processes + extra, max_processes + extra))


def install_guard(allowed: list[str]) -> None:
    """Audit hook: refuse writes outside ``allowed`` folders and internet sockets (one layer of several)."""
    roots = [os.path.realpath(p) for p in allowed]
    path_events = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
                   "os.symlink", "os.link", "os.rename", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr",
                   "os.removexattr", "os.mkfifo", "os.mknod"}
    net_events = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
    lookups = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.gethostbyname_ex",
               "socket.getnameinfo"}
    inside = os.path.realpath

    def ok(path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return True
        try:
            real = inside(os.fsdecode(path))
        except (TypeError, ValueError):
            return True
        return real == os.devnull or any(real == r or real.startswith(r + os.sep) for r in roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            if writes and not ok(path):
                raise PermissionError(f"sandbox: writing outside the workspace is not allowed: {path!r}")
        elif event in path_events:
            targets = args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]
            for target in targets:
                if not ok(target):
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

    def build(self, setup: str | None, workspace: str, setup_kwargs: dict[str, Any]) -> None:
        if setup:
            from pathlib import Path

            module_name, _, attr = setup.partition(":")
            function = getattr(importlib.import_module(module_name), attr)
            self.namespace.update(function(Path(workspace), **setup_kwargs))

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
    isolation: dict[str, Any] = {"namespaces": False, "read_only_fs": False, "uid": os.getuid(),
                                 "read_capability": False}
    try:
        if privileged:
            isolation.update(_enter_namespaces((rfd, wfd), [config["workspace"], config["tmpdir"]]))
        os.chdir(config["workspace"])
        _set_limits(config["limits"])
        dropped = False
        if privileged:
            isolation["read_capability"] = _drop_privileges(int(config["uid"]), int(config["gid"]))
            dropped = True
            isolation["uid"] = os.getuid()
        _limit_processes(int(config["limits"]["max_processes"]), dropped)
        worker = Worker(config)
        install_guard([config["workspace"], config["tmpdir"]])
        kwargs = pickle.loads(base64.b64decode(config["setup_kwargs"])) if config.get("setup_kwargs") else {}
        worker.build(config.get("setup"), config["workspace"], kwargs)
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
