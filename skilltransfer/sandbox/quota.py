"""Disk usage of a sandbox's writable folders (workspace and temp folder), for the workspace quota.

Measured with the deep-safe walker of `skilltransfer.util.trees`: no link followed, any depth (a folder chain longer
than ``PATH_MAX`` hides nothing), access the agent took away restored.
"""

from __future__ import annotations

from pathlib import Path

from skilltransfer.util.trees import Usage, usage

__all__ = ["Usage", "measure"]


def measure(folders: list[Path], max_entries: int) -> Usage:
    """Allocated bytes and directory entries under ``folders``, without following links (counting stops past
    ``max_entries``)."""
    return usage(folders, max_entries)
