"""Disk usage of a sandbox's writable folders (workspace and temp folder), for the workspace quota."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Usage:
    """Allocated bytes and directory entries under some folders (hard links counted once)."""

    bytes: int
    entries: int
    truncated: bool = False
    """True when counting stopped at ``max_entries``."""

    @property
    def mib(self) -> float:
        return self.bytes / (1 << 20)


def measure(folders: list[Path], max_entries: int) -> Usage:
    """Walk ``folders`` without following links: allocated bytes and directory entries."""
    seen: set[tuple[int, int]] = set()
    total = entries = 0
    stack = [str(folder) for folder in folders]
    while stack:
        folder = stack.pop()
        try:
            iterator = os.scandir(folder)
        except PermissionError:
            with contextlib.suppress(OSError):  # the agent took our access away: the harness owns its sandbox
                os.chmod(folder, 0o700)
            try:
                iterator = os.scandir(folder)
            except OSError:
                continue
        except OSError:
            continue
        with iterator:
            for entry in iterator:
                entries += 1
                if entries > max_entries:
                    return Usage(total, entries, truncated=True)
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                total += max(info.st_blocks * 512, 0)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return Usage(total, entries)
