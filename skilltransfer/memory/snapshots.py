"""Memory snapshots per task position (issue 39 §3, docs/forgetting.md).

A stream with a skill memory commits, with each task's memory, ``snapshots.jsonl`` in the memory folder: one line per
stream position so far, ``{"position", "task_id", "skill_ids"}`` (the library's skill ids after that task). Bodies
are stored once: the saved memory's ``skills.jsonl`` holds the current skills, and ``snapshot_skills.jsonl`` the
last body of every skill that an earlier snapshot listed and the memory no longer holds (a pruned or replaced skill).
Both files are written inside the memory's commit folder, so a resumed run's snapshots match its records.

Snapshot K (`snapshot_library`) is the library after the first K tasks of the stream: K = 0 is the empty library,
K = n the library after the task at position n - 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.memory.library import SKILLS_JSONL, read_jsonl
from skilltransfer.skill import Skill
from skilltransfer.util.files import jsonl_lines, read_text

SNAPSHOTS = "snapshots.jsonl"
"""The memory folder's snapshot list: one line per stream position."""
SNAPSHOT_SKILLS = "snapshot_skills.jsonl"
"""Bodies of skills an earlier snapshot listed and the memory no longer holds."""


@dataclass(frozen=True)
class Snapshot:
    """The library after the task at ``position``: its skill ids, in memory order."""

    position: int
    task_id: str
    skill_ids: tuple[str, ...]


def _raw(folder: Path, name: str) -> str:
    """A file of the saved memory folder ("" when missing; no link followed)."""
    try:
        return untrusted.read_text(name, root=folder, max_bytes=untrusted.MAX_BYTES * 16)
    except untrusted.UntrustedFileError:
        return ""


def _lines_by_id(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, line in jsonl_lines(text):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            out[data["id"]] = line
    return out


def snapshot_texts(saved: Path, position: int, task_id: str, skills: Iterable[Skill]) -> tuple[str, str]:
    """The ``snapshots.jsonl`` and ``snapshot_skills.jsonl`` texts of the memory committed after the task at
    ``position``: the saved memory folder's (``saved``, the previous commit) lines before ``position``, then this
    one; the archive keeps every earlier body the memory no longer holds."""
    kept = [line for _, line in jsonl_lines(_raw(saved, SNAPSHOTS))
            if isinstance(pos := _position(line), int) and pos < position]
    ids = [skill.id for skill in skills]
    kept.append(json.dumps({"position": position, "task_id": task_id, "skill_ids": ids}))
    held = set(ids)
    earlier = {**_lines_by_id(_raw(saved, SNAPSHOT_SKILLS)), **_lines_by_id(_raw(saved, SKILLS_JSONL))}
    archive = [line for skill_id, line in sorted(earlier.items()) if skill_id not in held]
    return "".join(line + "\n" for line in kept), "".join(line + "\n" for line in archive)


def _position(line: str) -> int | None:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    value = data.get("position") if isinstance(data, dict) else None
    return value if isinstance(value, int) else None


def read_snapshots(folder: str | Path) -> list[Snapshot]:
    """The snapshots of a run's memory folder (`skilltransfer.log.memory_folder` finds it in a run folder), in stream
    order.

    Raises:
        InputError: no ``snapshots.jsonl`` (a run without a memory, or from before snapshots), or a bad line.
    """
    folder = Path(folder)
    if not (folder / SNAPSHOTS).is_file():
        raise InputError(f"no {SNAPSHOTS}: not the memory of a run that records snapshots (a stream with a skill "
                         "memory)", path=folder)
    out = []
    for number, line in jsonl_lines(read_text(SNAPSHOTS, what="snapshot list", root=folder)):
        try:
            data = json.loads(line)
            snapshot = Snapshot(int(data["position"]), str(data["task_id"]), tuple(str(i) for i in data["skill_ids"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise InputError(f"line {number}: not a snapshot (position, task_id, skill_ids)",
                             path=folder / SNAPSHOTS) from None
        out.append(snapshot)
    return out


def snapshot_library(folder: str | Path, k: int) -> list[Skill]:
    """The library after the first ``k`` tasks of the run whose memory folder is ``folder`` (0: empty).

    Raises:
        InputError: no snapshots, ``k`` past the run's committed tasks, a skill id without a stored body.
    """
    if k < 0:
        raise InputError(f"snapshot must be >= 0, got {k}")
    folder = Path(folder)
    snapshots = read_snapshots(folder)
    if k == 0:
        return []
    if k > len(snapshots):
        raise InputError(f"snapshot {k}: the run committed {len(snapshots)} tasks (snapshots 0..{len(snapshots)})",
                         path=folder / SNAPSHOTS)
    bodies: dict[str, Skill] = {}
    if (folder / SNAPSHOT_SKILLS).is_file():
        bodies.update({s.id: s for s, _ in read_jsonl(SNAPSHOT_SKILLS, root=folder)})
    bodies.update({s.id: s for s, _ in read_jsonl(SKILLS_JSONL, root=folder)})
    ids = snapshots[k - 1].skill_ids
    missing = [i for i in ids if i not in bodies]
    if missing:
        raise InputError(f"snapshot {k} lists skills with no stored body: {', '.join(missing[:3])}", path=folder)
    return [bodies[i] for i in ids]


def task_positions(folder: str | Path) -> dict[str, int]:
    """Each task id of a run's snapshots (``folder``: its memory folder) -> its stream position."""
    return {s.task_id: s.position for s in read_snapshots(folder)}
