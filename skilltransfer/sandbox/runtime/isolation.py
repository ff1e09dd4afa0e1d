"""Process isolation for the sandbox worker: namespaces, a confined file-system view, limits, privilege drop.

Standard library only: it runs in the worker before any agent or env code is imported. See
``sandbox_runtime.worker`` for the order in which these steps are applied.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import signal
import stat
import sys
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
_KEEP_WRITABLE = {"/dev", "/dev/pts"}
_SYSTEM_TOP = {"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "proc", "sys", "dev"}
HIDDEN_IN_DEV = ("/dev/shm", "/dev/mqueue")
READABLE_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/dev")
PR_SET_KEEPCAPS = 8
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
CAP_DAC_READ_SEARCH = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


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
    folders = [path for path in [*names, *HIDDEN_IN_DEV] if os.path.isdir(path) and not os.path.islink(path)]
    files = [path for path in names if os.path.isfile(path) and not os.path.islink(path)]
    return folders, files


def world_reachable(path: str) -> bool:
    """Whether every folder above ``path`` may be traversed by any user (so no capability is needed to reach it)."""
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def editable_mappings() -> dict[str, str]:
    """Top-level package -> folder, for the editable installs of this interpreter (setuptools' ``MAPPING``)."""
    found: dict[str, str] = {}
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            found.update({str(k): v for k, v in mapping.items() if isinstance(v, str)})
    return found


def installed_paths(hidden_packages: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Import locations the interpreter set up itself, which the worker may read.

    These are the ``sys.path`` entries not from PYTHONPATH (stdlib, site-packages, ``.pth`` files) and the folders
    of editable installs (the ``MAPPING`` of setuptools' editable finders) but those of ``hidden_packages``.
    """
    from_env = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))
    paths = [entry for entry in sys.path if entry and entry not in from_env]
    paths.extend(path for name, path in editable_mappings().items() if name not in hidden_packages)
    return [path for path in paths if os.path.exists(path) and os.path.realpath(path) != "/"]


def _confine_file_system(writable: list[str], readable: list[str], hidden: list[str]) -> tuple[bool, bool]:
    """In a fresh mount namespace: hide what the agent may not read, make everything read-only but ``writable``.

    Every top-level folder except the system ones (``_SYSTEM_TOP``), plus ``/dev/shm``, is covered with an empty
    tmpfs; ``readable`` paths (read-only) and ``writable`` folders are then bind-mounted back at their real paths
    from descriptors opened before anything was covered; ``hidden`` folders inside them (the toolkit's own package
    in site-packages) are covered again with an empty tmpfs. Returns (read-only outside ``writable``, reads
    confined).
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
        for path in hidden:
            if os.path.isdir(path) and not os.path.islink(path):
                confined = _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=4k") and confined
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


def enter_namespaces(keep_fds: tuple[int, int], writable: list[str], readable: list[str],
                     hidden: list[str]) -> dict[str, bool]:
    """New network, mount and PID namespaces; returns only in the worker process, PID 2 of the new namespace.

    The file system becomes read-only except ``writable``, and only ``readable`` (less ``hidden``), ``writable`` and
    the system folders stay visible (see ``_confine_file_system``); ``/proc`` is remounted for the new PID namespace.
    The calling process waits in the old namespace and exits like the worker; PID 1 of the new namespace reaps orphans
    and exits when the worker does, at which point the kernel kills and reaps every process left in the namespace,
    so fork bombs and daemonised children cannot outlive the worker.
    """
    before = os.readlink("/proc/self/ns/mnt")
    if _libc().unshare(CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWNS) != 0:
        return {"namespaces": False, "read_only_fs": False, "reads_confined": False, "private_proc": False}
    if os.readlink("/proc/self/ns/mnt") == before:  # never remount the host's file systems
        raise OSError("unshare(CLONE_NEWNS) did not give a new mount namespace")
    read_only, confined = _confine_file_system(writable, readable, hidden)
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


def set_limits(limits: dict[str, Any]) -> None:
    mem = int(limits["memory_mb"]) * 1024 * 1024
    fsize = int(limits["file_size_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def drop_privileges(uid: int, gid: int, keep_read: bool) -> bool:
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


def limit_processes(max_processes: int, dropped: bool) -> None:
    extra = 0
    if not dropped:  # RLIMIT_NPROC counts all of this user's processes: allow that many more
        me = os.getuid()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}").st_uid == me:
                        extra += 1
    resource.setrlimit(resource.RLIMIT_NPROC, (max_processes + extra, max_processes + extra))
