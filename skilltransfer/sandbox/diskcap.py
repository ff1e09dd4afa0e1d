"""A sandbox's writable folders on one size-limited file system: the kernel holds the workspace quota.

`WorkspaceMount.create` (root only) mounts a tmpfs of ``size`` bytes and ``nr_inodes`` entries in a private staging
folder, copies the workspace the env made into it (folders and regular files), and bind-mounts it over the workspace
path; the worker's temp folder is the same tmpfs's ``tmp/``. A write past the quota then fails with ``ENOSPC`` in the
agent's process (no burst, ``posix_fallocate`` included, can outgrow it), and usage is one ``statvfs``. Closing
copies the workspace back to its folder (so it reads as before for anyone keeping it) and unmounts. The tmpfs's
source is named ``skilltransfer-ws-<pid>``: mounts of a harness killed with SIGKILL are unmounted by the next
toolkit process (`sweep_stale_mounts`). Pages of the tmpfs are memory: with a control group they count against the
sandbox's memory limit.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
from pathlib import Path

from skilltransfer.sandbox.quota import Usage
from skilltransfer.util.trees import copy_tree, remove_tree

MS_BIND = 4096
MNT_DETACH = 2
SOURCE_PREFIX = "skilltransfer-ws-"
_RESERVED_INODES = 3
"""The tmpfs's root, ``ws/`` and ``tmp/``."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: Path, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc().mount(source.encode(), str(target).encode(), fstype and fstype.encode(), flags,
                     data and data.encode()) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _unmount(target: Path | str) -> None:
    _libc().umount2(str(target).encode(), MNT_DETACH)


class WorkspaceMount:
    """The workspace and temp folder of one sandbox on a tmpfs of the quota's size (see the module docstring)."""

    def __init__(self, workspace: Path, staging: Path, quota_bytes: int, max_entries: int) -> None:
        self.workspace = workspace
        self.staging = staging
        self.quota_bytes = quota_bytes
        self.max_entries = max_entries
        self.tmp = staging / "tmp"
        self.closed = False

    @classmethod
    def create(cls, workspace: Path, staging: Path, quota_bytes: int, max_entries: int) -> WorkspaceMount:
        """Mount it (see the module docstring).

        Raises:
            OSError: not permitted here, or the workspace does not fit in the quota (nothing is left mounted).
        """
        _mount(f"{SOURCE_PREFIX}{os.getpid()}", staging, "tmpfs", 0,
               f"size={quota_bytes},nr_inodes={max_entries + _RESERVED_INODES},mode=0711")
        mount = cls(workspace, staging, quota_bytes, max_entries)
        try:
            (staging / "ws").mkdir(mode=0o755)
            mount.tmp.mkdir(mode=0o700)
            left = copy_tree(workspace, staging / "ws", max_bytes=quota_bytes, max_entries=max_entries)
            if any("not copied:" in item or "limit" in item for item in left):
                raise OSError(f"the workspace does not fit its quota: {left[0]}")
            _mount(str(staging / "ws"), workspace, None, MS_BIND)
        except BaseException:
            _unmount(staging)
            raise
        return mount

    def usage(self) -> Usage:
        """Bytes and entries held (the workspace and temp folder together)."""
        info = os.statvfs(self.staging)
        used = (info.f_blocks - info.f_bfree) * info.f_frsize
        entries = max(0, info.f_files - info.f_ffree - _RESERVED_INODES)
        return Usage(used, entries)

    def full(self) -> bool:
        """Whether a write could not grow it any further (bytes or entries at the quota)."""
        info = os.statvfs(self.staging)
        return info.f_bavail * info.f_frsize < (64 << 10) or info.f_favail == 0

    def close(self) -> None:
        """Copy the workspace back into its folder and unmount (idempotent)."""
        if self.closed:
            return
        self.closed = True
        _unmount(self.workspace)
        with contextlib.suppress(OSError):
            for name in os.listdir(self.workspace):  # what the env made before the mount: replaced by the result
                remove_tree(self.workspace / name)
            copy_tree(self.staging / "ws", self.workspace, max_bytes=self.quota_bytes, max_entries=self.max_entries)
        _unmount(self.staging)
        with contextlib.suppress(OSError):
            self.staging.rmdir()


def sweep_stale_mounts() -> list[str]:
    """Unmount the workspace file systems of toolkit processes that no longer run (killed with SIGKILL before they
    could); returns the mount points. Only mounts whose source names a dead toolkit process are touched."""
    removed: list[str] = []
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return removed
    for line in reversed(lines):  # the bind mounts on workspaces came after their tmpfs
        fields = line.split()
        dash = fields.index("-")
        source = fields[dash + 2]
        owner = source[len(SOURCE_PREFIX):] if source.startswith(SOURCE_PREFIX) else ""
        if not owner.isdigit() or int(owner) == os.getpid() or os.path.exists(f"/proc/{owner}"):
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        _unmount(point)
        removed.append(point)
    return removed
