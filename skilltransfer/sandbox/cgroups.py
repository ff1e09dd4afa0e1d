"""Per-sandbox process groups: every process a sandbox worker starts, counted together for memory, CPU and processes.

`SandboxGroup.create` makes a control group for one sandbox below the harness's own (cgroup v2, or the v1 ``memory``,
``pids`` and ``cpuacct`` hierarchies; it needs write access there, i.e. root or a delegated subtree). The kernel then
enforces memory (``memory.max`` / ``memory.limit_in_bytes``, swap included: the group's processes together, page cache
and tmpfs pages they write too; past it the kernel's OOM killer stops one of them) and processes (``pids.max``, per
sandbox, whatever the uid), and counts the CPU time of every process that ever ran in it (children that exited
included), which the harness's watcher compares with the per-action CPU budget.

Without a control group (no root, no delegation) `ProcessTree` gives the same accounting from ``/proc``: the worker's
descendants and every process of its session (the worker leads one: orphans keep it, unless they start their own
session), their CPU time (live processes and what their reaped children used) and their proportional memory (PSS),
polled by the same watcher: caps hold to within one check interval, not exactly.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from pathlib import Path

_counter = itertools.count()
_TICKS = os.sysconf("SC_CLK_TCK")
V1_CONTROLLERS = ("memory", "pids", "cpuacct")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read(path: Path) -> str:
    with open(path) as handle:
        return handle.read()


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup file system."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], set(fields[dash + 3].split(","))
            if fstype in ("cgroup", "cgroup2"):
                found.append((fields[4], fstype, options))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


class SandboxGroup:
    """A control group holding one sandbox's processes (see the module docstring)."""

    def __init__(self, version: int, folders: dict[str, Path]) -> None:
        self.version = version
        self.folders = folders
        """Controller -> the group's folder (v2: one folder under the key "")."""

    @classmethod
    def create(cls, memory_bytes: int, max_processes: int) -> SandboxGroup | None:
        """A fresh group with these limits below this process's own groups; None when none can be made here."""
        name = f"skilltransfer-{os.getpid()}-{next(_counter)}"
        own = _own_paths()
        mounts = _mounts()
        v2 = next((point for point, fstype, _ in mounts if fstype == "cgroup2"), None)
        if v2 is not None and "" in own and len(own) == 1:  # a pure v2 system
            group = cls._create_v2(Path(v2), own[""], name, memory_bytes, max_processes)
            if group is not None:
                return group
        folders: dict[str, Path] = {}
        try:
            for controller in V1_CONTROLLERS:
                point = next((p for p, fstype, options in mounts if fstype == "cgroup" and controller in options),
                             None)
                if point is None or controller not in own:
                    raise OSError(f"no cgroup v1 {controller} hierarchy")
                folder = Path(point) / own[controller].lstrip("/") / name
                folder.mkdir()
                folders[controller] = folder
            _write(folders["memory"] / "memory.limit_in_bytes", str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: then there is no swap to escape to either
                _write(folders["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))
            _write(folders["pids"] / "pids.max", str(max_processes))
        except OSError:
            for folder in folders.values():
                with contextlib.suppress(OSError):
                    folder.rmdir()
            return None
        return cls(1, folders)

    @classmethod
    def _create_v2(cls, root: Path, own: str, name: str, memory_bytes: int,
                   max_processes: int) -> SandboxGroup | None:
        parent = root / own.lstrip("/")
        try:
            enabled = set(_read(parent / "cgroup.subtree_control").split())
            if not {"memory", "pids"} <= enabled:
                _write(parent / "cgroup.subtree_control", "+memory +pids")  # fails where processes live (not a leaf)
            folder = parent / name
            folder.mkdir()
        except OSError:
            return None
        try:
            _write(folder / "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):
                _write(folder / "memory.swap.max", "0")
            _write(folder / "pids.max", str(max_processes))
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
            return None
        return cls(2, {"": folder})

    def add(self, pid: int) -> None:
        """Move a process (before it starts anything) into the group; its children are born in it."""
        for folder in self.folders.values():
            _write(folder / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        folder = self.folders.get("pids", self.folders.get(""))
        if folder is None:
            return []
        with contextlib.suppress(OSError):
            return [int(line) for line in _read(folder / "cgroup.procs").split()]
        return []

    def cpu_seconds(self) -> float:
        """CPU time used by every process that ever ran in the group."""
        try:
            if self.version == 1:
                return int(_read(self.folders["cpuacct"] / "cpuacct.usage")) / 1e9
            stat = dict(line.split() for line in _read(self.folders[""] / "cpu.stat").splitlines())
            return int(stat["usage_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return 0.0

    def memory_bytes(self) -> int:
        try:
            name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
            return int(_read(self.folders["memory" if self.version == 1 else ""] / name))
        except (OSError, ValueError):
            return 0

    def peak_memory_bytes(self) -> int:
        """The most memory the group held at once so far (0 where the kernel does not say)."""
        try:
            name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
            return int(_read(self.folders["memory" if self.version == 1 else ""] / name))
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        """How many processes of the group the kernel killed for its memory limit so far."""
        try:
            if self.version == 1:
                text = _read(self.folders["memory"] / "memory.oom_control")
            else:
                text = _read(self.folders[""] / "memory.events")
            fields = dict(line.split() for line in text.splitlines() if line.strip())
            return int(fields.get("oom_kill", 0))
        except (OSError, ValueError):
            return 0

    def kill(self) -> None:
        """SIGKILL every process in the group until none is left."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self.folders[""] / "cgroup.kill", "1")
        for _ in range(200):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill()
        for folder in self.folders.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still exiting
                    time.sleep(0.01)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = _read(Path(f"/proc/{pid}/stat"))
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()


class ProcessTree:
    """A worker and its descendants, from ``/proc`` (the accounting used without a control group)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.page = os.sysconf("SC_PAGE_SIZE")

    def pids(self) -> list[int]:
        """The worker, its descendants, and every process of its session (orphans of the tree keep it)."""
        children: dict[int, list[int]] = {}
        session: list[int] = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                fields = _stat_fields(int(entry))
                if fields is not None and len(fields) > 3:
                    children.setdefault(int(fields[1]), []).append(int(entry))
                    if int(fields[3]) == self.root:
                        session.append(int(entry))
        found, stack = set(), [self.root, *session]
        while stack:
            pid = stack.pop()
            if pid not in found:
                found.add(pid)
                stack.extend(children.get(pid, []))
        return sorted(found)

    def cpu_seconds(self) -> float:
        """CPU time of the live processes and of the children they reaped."""
        total = 0
        for pid in self.pids():
            fields = _stat_fields(pid)
            if fields is not None and len(fields) > 15:
                total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        return total / _TICKS

    def memory_bytes(self) -> int:
        """Proportional set size of the tree (shared pages counted once), else resident size."""
        total = 0
        for pid in self.pids():
            try:
                text = _read(Path(f"/proc/{pid}/smaps_rollup"))
                total += next(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")) * 1024
            except (OSError, StopIteration, ValueError):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += int(_read(Path(f"/proc/{pid}/statm")).split()[1]) * self.page
        return total


def sweep_stale_groups() -> list[Path]:
    """Remove the groups of toolkit processes that no longer run (killed before they could remove them), after
    killing what their sandboxes left running; returns the removed folders."""
    own = _own_paths()
    stale: list[tuple[int, str, Path]] = []
    for point, fstype, options in _mounts():
        controllers = [""] if fstype == "cgroup2" else [c for c in V1_CONTROLLERS if c in options]
        for controller in controllers:
            if controller not in own:
                continue
            with contextlib.suppress(OSError):
                for folder in (Path(point) / own[controller].lstrip("/")).iterdir():
                    owner = folder.name.split("-")[1] if folder.name.startswith("skilltransfer-") else ""
                    if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                        stale.append((2 if fstype == "cgroup2" else 1, controller, folder))
    groups = [SandboxGroup(version, {controller: folder}) for version, controller, folder in stale]
    for group in groups:
        if "pids" in group.folders or "" in group.folders:
            group.kill()
    for group in groups:
        group.remove()
    return [folder for _, _, folder in stale if not folder.exists()]
