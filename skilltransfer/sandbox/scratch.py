"""The toolkit's temporary folders: one per-process root, removed at exit and, after a crash, at the next start.

Every temporary folder skilltransfer makes (episode workspaces of envs without ``--workdir``, sandbox temp folders,
code-skill load checks, the sandbox runtime copy) lives under ``<tmp>/skilltransfer-<pid>-<random>/``, whose
``.owner`` marker names the process (pid, its kernel start time and the boot id). The root is removed when the
process exits; a process killed with SIGKILL cannot do that, so the first toolkit process to need a root afterwards
removes every ``skilltransfer-*`` folder whose marker names a process that no longer runs. Folders without a valid
marker (other programs', older versions') are never touched.
"""

from __future__ import annotations

import atexit
import compileall
import contextlib
import importlib
import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from skilltransfer.util import trees

MARKER = ".owner"
PREFIX = "skilltransfer-"
_lock = threading.Lock()
_root: Path | None = None
_runtime: Path | None = None
_runtime_packages: set[str] = set()


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def _start_time(pid: int) -> str | None:
    """The kernel start time of ``pid`` (field 22 of /proc/<pid>/stat), None if no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()[19]


def _owner_alive(marker: dict[str, object]) -> bool:
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if marker.get("boot") != _boot_id():
        return False
    return _start_time(pid) == marker.get("start")


def _read_marker(folder: Path) -> dict[str, object] | None:
    """The folder's owner marker, read without following links; None when absent or not a marker."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = json.loads(os.read(fd, 4096))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) and data.get("tool") == "skilltransfer" else None


def remove_tree(path: Path) -> None:
    """Remove a folder tree without following links, at any depth, restoring permissions the agent may have taken
    away (`skilltransfer.util.trees.remove_tree`)."""
    trees.remove_tree(path)


def sweep_leftovers(tmp: Path | None = None) -> list[Path]:
    """Remove the per-process roots of toolkit processes that died without cleaning up; returns what was removed."""
    base = Path(tmp or tempfile.gettempdir())
    removed = []
    if os.geteuid() == 0:  # mounts and control groups of runs killed before they could remove them
        from skilltransfer.sandbox.cgroups import sweep_stale_groups
        from skilltransfer.sandbox.diskcap import sweep_stale_mounts

        sweep_stale_mounts()
        sweep_stale_groups()
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            marker = _read_marker(Path(entry.path))
            if marker is None or _owner_alive(marker):
                continue
            remove_tree(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def _remove_root(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child exiting must not remove its parent's folders
        remove_tree(path)


def process_root() -> Path:
    """This process's private temporary root (created on first use, after sweeping dead processes' roots)."""
    global _root
    with _lock:
        if _root is not None and _root.is_dir():
            return _root
        sweep_leftovers()
        pid = os.getpid()
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-"))
        os.chmod(root, 0o711)  # sandbox workers with a private uid traverse it to their workspace
        marker = {"tool": "skilltransfer", "pid": pid, "start": _start_time(pid), "boot": _boot_id()}
        (root / MARKER).write_text(json.dumps(marker))
        atexit.register(_remove_root, root, pid)
        _root = root
        return root


def scratch_dir(prefix: str) -> Path:
    """A fresh folder under the process root (removed with it)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=process_root()))


def runtime_dir(packages: dict[str, str] | None = None) -> Path:
    """The sandbox workers' import folder: a read-only copy of the worker runtime and of agent-side packages.

    Args:
        packages: top-level name in the worker -> dotted name of a self-contained package of this toolkit (only
            relative imports, no evaluation state) to copy there, e.g. ``{"office_tools":
            "skilltransfer.envs.office.office_tools"}``.

    Returns:
        The folder to put on the worker's ``PYTHONPATH``; it holds ``sandbox_runtime`` and the given packages.
    """
    global _runtime
    wanted = {"sandbox_runtime": "skilltransfer.sandbox.runtime", **(packages or {})}
    root = process_root()
    with _lock:
        if _runtime is None or not _runtime.is_dir() or _runtime.parent != root:
            _runtime = root / "runtime"
            _runtime.mkdir(mode=0o755, exist_ok=True)
            _runtime_packages.clear()
        for alias, dotted in wanted.items():
            if alias in _runtime_packages:
                continue
            if not alias.isidentifier():
                raise ValueError(f"agent package name {alias!r} is not an identifier")
            source = Path(importlib.import_module(dotted).__file__ or "").parent
            target = _runtime / alias
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                            dirs_exist_ok=True)
            compileall.compile_dir(str(target), quiet=2)
            for folder, _, files in os.walk(target):
                os.chmod(folder, 0o755)
                for name in files:
                    os.chmod(os.path.join(folder, name), 0o444)
            _runtime_packages.add(alias)
        return _runtime
