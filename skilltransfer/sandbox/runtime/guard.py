"""The worker's Python audit hook: no writes outside the workspace, no internet, optionally no reads outside a list.

One layer of several (see ``skilltransfer.sandbox.runner``), and the only file/network layer when the harness is not
root. Best effort: code in C extensions and subprocesses is not audited.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from .isolation import HIDDEN_IN_DEV, READABLE_SYSTEM, WRITE_FLAGS

PATH_EVENTS = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime", "os.symlink",
               "os.link", "os.rename", "shutil.rmtree", "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr",
               "os.mkfifo", "os.mknod"}
NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
LOOKUPS = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.gethostbyname_ex",
           "socket.getnameinfo"}


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

    def resolve(path: Any) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            return os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None

    def may_write(path: Any) -> bool:
        real = resolve(path)
        return real is None or real == os.devnull or _under(real, roots) is not None

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
        elif event in ("os.listdir", "os.scandir"):
            if not may_read(args[0] if args[0] is not None else "."):
                raise PermissionError(f"sandbox: listing outside the workspace is not allowed: {args[0]!r}")
        elif event in PATH_EVENTS:
            targets = args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]
            for target in targets:
                if not may_write(target):
                    raise PermissionError(f"sandbox: changing files outside the workspace is not allowed: {target!r}")
        elif event in NET_EVENTS:
            if getattr(args[0], "family", None) in (socket.AF_INET, socket.AF_INET6):
                raise PermissionError("sandbox: network access is not allowed")
        elif event in LOOKUPS:
            raise PermissionError("sandbox: network access is not allowed")

    sys.addaudithook(hook)
