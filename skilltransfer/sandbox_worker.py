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
confine them) and any internet socket. Only the standard library is imported before isolation.
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
import stat
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
_SYSTEM_TOP = {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "sys", "dev"}
_HIDDEN_IN_DEV = ("/dev/shm", "/dev/mqueue")
_READABLE_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/dev")
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


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    return _libc().mount(source and source.encode(), target.encode(), fstype and fstype.encode(), flags,
                         data and data.encode()) == 0


def _hidden_roots() -> tuple[list[str], list[str]]:
    """What to hide: top-level folders but the system ones, plus ``/dev/shm``; and top-level files.

    Returns:
        (folders to cover with an empty tmpfs, files such as ``/container_info.json`` to cover with ``/dev/null``).
    """
    names = [f"/{name}" for name in sorted(os.listdir("/")) if name not in _SYSTEM_TOP]
    folders = [path for path in [*names, *_HIDDEN_IN_DEV] if os.path.isdir(path) and not os.path.islink(path)]
    files = [path for path in names if os.path.isfile(path) and not os.path.islink(path)]
    return folders, files


def _world_reachable(path: str) -> bool:
    """Whether every folder above ``path`` may be traversed by any user (so no capability is needed to reach it)."""
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def installed_paths() -> list[str]:
    """Import locations the interpreter set up itself, which the worker may read.

    These are the ``sys.path`` entries not from PYTHONPATH (stdlib, site-packages, ``.pth`` files) and the folders
    of editable installs (the ``MAPPING`` of setuptools' editable finders).
    """
    from_env = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
    paths = [entry for entry in sys.path if entry and entry not in from_env]
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            paths.extend(value for value in mapping.values() if isinstance(value, str))
    return [path for path in paths if os.path.exists(path) and os.path.realpath(path) != "/"]


def _confine_file_system(writable: list[str], readable: list[str]) -> tuple[bool, bool]:
    """In a fresh mount namespace: hide what the agent may not read, make everything read-only but ``writable``.

    Every top-level folder except the system ones (``_SYSTEM_TOP``), plus ``/dev/shm``, is covered with an empty
    tmpfs; ``readable`` paths (read-only) and ``writable`` folders are then bind-mounted back at their real paths
    from descriptors opened before anything was covered. Returns (read-only outside ``writable``, reads confined).
    """
    if not _mount("none", "/", None, MS_REC | MS_PRIVATE):  # nothing propagates back to the host
        return False, False
    wanted = {os.path.realpath(p): False for p in readable if os.path.exists(p) and os.path.realpath(p) != "/"}
    wanted.update({os.path.realpath(p): True for p in writable})
    handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in wanted}
    confined = True
    try:
        folders, files = _hidden_roots()
        for root in folders:
            confined = _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m") and confined
        for path in files:
            confined = _mount(os.devnull, path, None, MS_BIND) and confined
        for path in sorted(wanted, key=lambda p: (p.count("/"), p)):  # parents before children
            if not os.path.exists(path):  # its mount point inside a covering tmpfs
                if os.path.isdir(f"/proc/self/fd/{handles[path]}"):
                    os.makedirs(path, 0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            if not _mount(f"/proc/self/fd/{handles[path]}", path, None, MS_BIND | MS_REC):
                raise OSError(f"could not bind-mount {path} into the sandbox (errno {ctypes.get_errno()})")
    finally:
        for fd in handles.values():
            os.close(fd)
    keep = set(_KEEP_WRITABLE) | {path for path, write in wanted.items() if write}
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
        _mount(None, point, None, flags)
    return True, confined


def _enter_namespaces(keep_fds: tuple[int, int], writable: list[str], readable: list[str]) -> dict[str, bool]:
    """New network, mount and PID namespaces; returns only in the worker process, PID 2 of the new namespace.

    The file system becomes read-only except ``writable``, and only ``readable``, ``writable`` and the system
    folders stay visible (see ``_confine_file_system``); ``/proc`` is remounted for the new PID namespace. The
    calling process waits in the old namespace and exits like the worker; PID 1 of the new namespace reaps orphans
    and exits when the worker does, at which point the kernel kills and reaps every process left in the namespace,
    so fork bombs and daemonised children cannot outlive the worker.
    """
    before = os.readlink("/proc/self/ns/mnt")
    if _libc().unshare(CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS) != 0:
        return {"namespaces": False, "read_only_fs": False, "reads_confined": False, "private_proc": False}
    if os.readlink("/proc/self/ns/mnt") == before:  # never remount the host's file systems
        raise OSError("unshare(CLONE_NEWNS) did not give a new mount namespace")
    read_only, confined = _confine_file_system(writable, readable)
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
    # the host's /proc would list every host process; this one shows only the namespace's own
    private_proc = _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    return {"namespaces": True, "read_only_fs": read_only, "reads_confined": confined and private_proc,
            "private_proc": private_proc}


def _set_limits(limits: dict[str, Any]) -> None:
    mem = int(limits["memory_mb"]) * 1024 * 1024
    fsize = int(limits["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _drop_privileges(uid: int, gid: int, keep_read: bool) -> bool:
    """Become ``uid``/``gid`` with no capabilities, or (``keep_read``) only CAP_DAC_READ_SEARCH.

    CAP_DAC_READ_SEARCH (read/traverse any file; no write, no kill) is only kept when reads are not confined by
    the mount namespace: it would let ``open_by_handle_at`` reach hidden files, and when they are confined the
    Python installation is reachable without it (the covering tmpfs folders are world-readable).
    """
    libc = _libc()
    libc.prctl(PR_SET_KEEPCAPS, int(keep_read), 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if not keep_read:
        return False
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


def install_guard(allowed: list[str], readable: list[str] | None = None) -> None:
    """Audit hook: refuse writes outside ``allowed`` folders and internet sockets (one layer of several).

    With ``readable`` (used when the mount namespace does not already hide the rest of the file system), opening a
    file for reading or listing a folder is refused too unless it lies in ``allowed``, ``readable``,
    ``_READABLE_SYSTEM`` (``/usr``, ``/lib*``, ``/etc``, ``/dev`` but ``/dev/shm``, ...) or ``/proc/self``. Best effort:
    code in C extensions and subprocesses is not audited (the mount namespace is the layer that holds there).
    """
    roots = [os.path.realpath(p) for p in allowed]
    read_roots = None if readable is None else roots + [os.path.realpath(p) for p in readable]
    system = [os.path.realpath(p) for p in _READABLE_SYSTEM]
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
        return reading and ((under(real, system) and not under(real, _HIDDEN_IN_DEV))
                            or under(real, [f"/proc/{os.getpid()}"]))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
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
            isolation.update(_enter_namespaces((rfd, wfd), writable, readable))
        os.chdir(config["workspace"])
        _set_limits(config["limits"])
        dropped = False
        if privileged:
            keep_read = not isolation["reads_confined"] or not all(_world_reachable(p) for p in readable)
            isolation["read_capability"] = _drop_privileges(int(config["uid"]), int(config["gid"]), keep_read)
            dropped = True
            isolation["uid"] = os.getuid()
        _limit_processes(int(config["limits"]["max_processes"]), dropped)
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
