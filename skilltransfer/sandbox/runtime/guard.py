"""The worker's Python audit hook: no writes outside the workspace, no internet, optionally no reads outside a list.

One layer of several (see ``skilltransfer.sandbox.runner``), and the only file/network layer when the harness is not
root. Best effort: code in C extensions and subprocesses is not audited.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from typing import Any

from .isolation import HIDDEN_IN_DEV, READABLE_SYSTEM, WRITE_FLAGS

PATH_EVENTS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),), "os.truncate": ((0, None),), "os.utime": ((0, 3),), "os.symlink": ((0, None), (1, 2)),
    "os.link": ((0, 2), (1, 3)), "os.rename": ((0, 2), (1, 3)), "shutil.rmtree": ((0, 1),),
    "os.chflags": ((0, None),), "os.lchflags": ((0, None),), "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),), "os.mkfifo": ((0, 2),), "os.mknod": ((0, 3),),
}
"""Audit event -> (index of a path argument it changes, index of that path's ``dir_fd`` argument or None)."""
NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
LOOKUPS = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.gethostbyname_ex",
           "socket.getnameinfo"}
SQLITE_ATTACH = 24
"""sqlite3's authorizer action code for ``ATTACH DATABASE``."""


def sqlite_path(database: Any) -> str | None:
    """The file a ``sqlite3.connect`` argument opens (None: in memory)."""
    name = os.fsdecode(database) if isinstance(database, str | bytes | os.PathLike) else str(database)
    if name in ("", ":memory:"):
        return None
    if name.startswith("file:"):
        name, _, query = name[5:].partition("?")
        if "mode=memory" in query or name in ("", ":memory:"):
            return None
        if name.startswith("//"):  # file://host/path: the host part is empty or localhost
            name = "/" + name[2:].partition("/")[2]
    return name


def _under(real: str, folders: list[str]) -> str | None:
    """The longest of ``folders`` that is ``real`` or contains it, if any."""
    best = None
    for root in folders:
        if (real == root or real.startswith(root.rstrip(os.sep) + os.sep)) and (best is None or len(root) > len(best)):
            best = root
    return best


def install_guard(allowed: list[str], readable: list[str] | None = None, hidden: list[str] | None = None) -> None:
    """Audit hook: refuse writes outside ``allowed`` folders and internet sockets.

    With ``readable`` (used when the mount namespace does not already hide the rest of the file system), opening a
    file for reading or listing a folder is refused too unless it lies in ``allowed``, ``readable``,
    ``READABLE_SYSTEM`` (``/usr``, ``/lib*``, ``/etc``, ``/dev`` but ``/dev/shm``, ...) or ``/proc/self``; and
    paths in ``hidden`` (the toolkit's own package) are refused unless a more specific allowed folder holds them.
    """
    roots = [os.path.realpath(p) for p in allowed]
    read_roots = None if readable is None else roots + [os.path.realpath(p) for p in readable]
    system = [os.path.realpath(p) for p in READABLE_SYSTEM]
    denied = [os.path.realpath(p) for p in hidden or []]
    own_proc = [f"/proc/{os.getpid()}"]

    def resolve(path: Any, dir_fd: Any = None) -> str | None:
        """The real path named, relative to ``dir_fd`` (a folder's descriptor) when given; an unresolvable one
        is "/" (outside everything)."""
        if isinstance(path, int) or path is None:
            return None
        try:
            name = os.fsdecode(path)
            if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(name):
                name = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
            return os.path.realpath(name)
        except (TypeError, ValueError, OSError):
            return "/"

    def may_write(path: Any, dir_fd: Any = None) -> bool:
        real = resolve(path, dir_fd)
        return real is None or real == os.devnull or _under(real, roots) is not None

    def outside_folder(path: Any) -> bool:
        """Whether ``path`` is a folder outside the writable ones: a descriptor of it would let ``dir_fd`` calls
        (whose ``open`` event carries no ``dir_fd``) write outside."""
        real = resolve(path)
        return real is not None and _under(real, roots) is None and os.path.isdir(real)

    def authorizer(action: int, first: Any, *_: Any) -> int:
        return 1 if action == SQLITE_ATTACH and first and not may_write(first) else 0  # 1 = SQLITE_DENY

    def may_read(path: Any) -> bool:
        real = resolve(path)
        if real is None or real == os.devnull:
            return True
        if read_roots is None:
            return True
        allow = _under(real, read_roots)
        deny = _under(real, denied)
        if allow is not None and (deny is None or len(allow) > len(deny)):
            return True
        if deny is not None:
            return False
        # the system folders, but not other episodes' /dev/shm; /proc only for this process
        return (_under(real, system) is not None and _under(real, list(HIDDEN_IN_DEV)) is None) or \
            _under(real, own_proc) is not None

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if writes and not may_write(path):
                raise PermissionError(f"sandbox: writing outside the workspace is not allowed: {path!r}")
            if not writes and not may_read(path):
                raise PermissionError(f"sandbox: reading outside the workspace is not allowed: {path!r}")
            if not writes and read_roots is not None and outside_folder(path):  # else the mounts are read-only
                raise PermissionError(f"sandbox: opening a folder outside the workspace is not allowed: {path!r}")
        elif event == "sqlite3.connect":
            target = sqlite_path(args[0]) if args else None
            if target is not None and not may_write(target):
                raise PermissionError(f"sandbox: a database outside the workspace is not allowed: {args[0]!r}")
        elif event == "sqlite3.connect/handle" and args:
            with contextlib.suppress(Exception):  # ATTACH DATABASE opens files too (best effort: it can be unset)
                args[0].set_authorizer(authorizer)
        elif event in ("os.listdir", "os.scandir"):
            if not may_read(args[0] if args[0] is not None else "."):
                raise PermissionError(f"sandbox: listing outside the workspace is not allowed: {args[0]!r}")
        elif event in PATH_EVENTS:
            for index, fd_index in PATH_EVENTS[event]:
                target = args[index] if index < len(args) else None
                dir_fd = args[fd_index] if fd_index is not None and fd_index < len(args) else None
                if not may_write(target, dir_fd):
                    raise PermissionError(f"sandbox: changing files outside the workspace is not allowed: {target!r}")
        elif event in NET_EVENTS:
            if getattr(args[0], "family", None) in (socket.AF_INET, socket.AF_INET6):
                raise PermissionError("sandbox: network access is not allowed")
        elif event in LOOKUPS:
            raise PermissionError("sandbox: network access is not allowed")

    sys.addaudithook(hook)
