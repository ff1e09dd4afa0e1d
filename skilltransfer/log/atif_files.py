"""Finding and reading ATIF trajectories on disk: files, folders of them, and Harbor job folders (each trial as
``<trial>/agent/trajectory.json`` beside ``<trial>/result.json``, whose ``verifier_result.rewards.reward`` is the
trajectory's reward).

`read_atif` reads every trajectory under the paths it is given, in time order, through `skilltransfer.untrusted`:
each file at most `MAX_ATIF_BYTES`, JSON at most `MAX_JSON_DEPTH` deep, no link below a given folder followed
(a subagent or continuation file is read only when it is a plain name beside the trajectory). A file that cannot
be used is named in one line (``unusable``) and the others are read; a JSON file in a folder that is not ATIF (no
``schema_version``, not named ``trajectory.json``) is passed over silently.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.log.atif_import import (
    MAX_STEPS,
    ImportedTrajectory,
    Outcome,
    UnusableTrajectory,
    count_steps,
    import_atif,
)
from skilltransfer.util import trees

MAX_ATIF_BYTES = 64 << 20
"""The largest trajectory file read (64 MiB)."""
MAX_JSON_DEPTH = 64
"""How deeply a trajectory's JSON may nest."""
MAX_ENTRIES = 200_000
"""The most folder entries looked at under one given folder."""
SNIFF_BYTES = 64 << 10
"""How much of a ``*.json`` file is looked at for ``"schema_version"`` before it is read as a trajectory."""
TRAJECTORY = "trajectory.json"
RESULT = "result.json"
_SPLIT_FILE = re.compile(r"^trajectory\..+\.json$")
"""Harbor's continuation and summarisation files (``trajectory.cont-1.json``, ...): read through their references."""
_NOT_TRAJECTORIES = {RESULT, "config.json", "lock.json"}


@dataclass
class AtifRead:
    """The trajectories read under some paths, in time order, and a line for each file that could not be used."""

    trajectories: list[ImportedTrajectory] = field(default_factory=list)
    unusable: list[str] = field(default_factory=list)
    """``path: reason`` for each trajectory file left out."""

    def notes(self) -> list[str]:
        """One line per trajectory read with deviations (its first note, and how many more)."""
        out = []
        for item in self.trajectories:
            if item.notes:
                more = f" (+{len(item.notes) - 1} more)" if len(item.notes) > 1 else ""
                out.append(f"{item.source}: {item.notes[0]}{more}")
        return out


def _parse(data: bytes, shown: object) -> Any:
    """JSON as `skilltransfer.untrusted.parse_json` parses it, a document of too many steps refused before its depth
    is walked (a 100,000-step file costs its parse, not a walk of every container)."""
    text = untrusted.decode_utf8(data, shown)
    if untrusted.nesting_exceeds(text, MAX_JSON_DEPTH):  # measured before the parser recurses
        raise untrusted.UntrustedFileError(shown, f"not accepted: nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, MemoryError):
        return untrusted.parse_json(text, shown, max_depth=MAX_JSON_DEPTH)  # raises, naming the problem
    count = count_steps(value)
    if count > MAX_STEPS:
        raise UnusableTrajectory(f"{count:,} steps with its subagents, over the {MAX_STEPS:,}-step limit")
    problem = untrusted.depth_problem(value, MAX_JSON_DEPTH)
    if problem is not None:
        raise untrusted.UntrustedFileError(shown, f"not accepted: {problem}")
    return value


def _read(path: str | PurePosixPath, root: Path | None, shown: object) -> Any:
    """A JSON file under the rules of the module docstring (a given file: ``root`` None)."""
    return _parse(untrusted.read_bytes(path, root=root, max_bytes=MAX_ATIF_BYTES, shown=shown), shown)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    """A finite reward of sensible size (at most 1e12 in magnitude), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or isinstance(value, int) and abs(value) > 10**12:
        return None
    number = float(value)
    return number if math.isfinite(number) and abs(number) <= 1e12 else None


def read_outcome(data: Any) -> Outcome:
    """What a Harbor trial's ``result.json`` says: reward, task and trial names, exception, agent, model, times."""
    if not isinstance(data, dict):
        return Outcome()
    verifier = _dict(data.get("verifier_result"))
    rewards = _dict(verifier.get("rewards"))
    reward = _number(rewards.get("reward"))
    if reward is None:
        numbers = [n for n in map(_number, rewards.values()) if n is not None]
        reward = numbers[0] if len(numbers) == 1 else _number(verifier.get("reward"))
    exception = _dict(data.get("exception_info"))
    config = _dict(data.get("config"))
    agent_config = _dict(config.get("agent"))
    info = _dict(data.get("agent_info"))
    model_info = _dict(info.get("model_info"))

    def text(*values: Any) -> str | None:
        return next((str(v) for v in values if isinstance(v, str) and v), None)

    return Outcome(reward=reward, task_name=text(data.get("task_name")), trial_name=text(data.get("trial_name")),
                   exception=text(exception.get("exception_type")), agent=text(info.get("name"),
                                                                                agent_config.get("name")),
                   model=text(model_info.get("name"), agent_config.get("model_name")),
                   started=text(data.get("started_at")), finished=text(data.get("finished_at")))


def _sniff(relative: str, root: Path) -> bool:
    """Whether a ``*.json`` file below ``root`` may be ATIF (``"schema_version"`` near its start)."""
    try:
        fd, _ = untrusted.open_regular(relative, root=root, max_bytes=1 << 62)
    except untrusted.UntrustedFileError:
        return True  # read it, so the reason it cannot be is named
    try:
        head = os.read(fd, SNIFF_BYTES)
    except OSError:
        return True
    finally:
        os.close(fd)
    return b'"schema_version"' in head


def _candidates(folder: Path) -> list[str]:
    """The trajectory files below ``folder`` (relative POSIX paths, sorted)."""
    found = trees.find(folder, lambda name: name.endswith(".json"), max_entries=MAX_ENTRIES)
    out = []
    for path in found:
        name = path.name
        if _SPLIT_FILE.match(name) or name in _NOT_TRAJECTORIES:
            continue
        relative = path.relative_to(folder).as_posix()
        if name == TRAJECTORY or _sniff(relative, folder):
            out.append(relative)
    return out


def _one(root: Path, relative: str, shown: str, position: int, run: str) -> ImportedTrajectory:
    """One trajectory file, ``relative`` to the folder ``root`` it is read within, with its trial's outcome."""
    document = _read(relative, root, shown)
    folder = PurePosixPath(relative).parent
    outcome = None
    if folder.name == "agent":
        trial: tuple[Path, str] | None = (root, (folder.parent / RESULT).as_posix())
    elif folder == PurePosixPath(".") and root.name == "agent":
        trial = (root.parent, RESULT)
    else:
        trial = None
    if trial is not None and (trial[0] / trial[1]).is_file():
        try:
            outcome = read_outcome(_read(trial[1], trial[0], trial[0] / trial[1]))
        except untrusted.UntrustedFileError:
            outcome = None

    def read_file(name: str) -> dict[str, Any]:
        if "/" in name or "\\" in name or name in ("", ".", "..") or name.startswith("."):
            raise ValueError("not a file name beside the trajectory")
        try:
            data = _read((folder / name).as_posix(), root, root / folder / name)
        except untrusted.UntrustedFileError as exc:
            raise ValueError(exc.reason) from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data

    return import_atif(document, source=shown, position=position, run=run, outcome=outcome, read_file=read_file,
                       file_name=PurePosixPath(relative).name)


def _time_key(item: ImportedTrajectory) -> tuple[bool, str, str]:
    return item.started is None, item.started or "", item.source


def read_atif(paths: Sequence[str | Path], *, run: str | None = None) -> AtifRead:
    """Every ATIF trajectory under ``paths`` (files, folders, Harbor job folders), in time order (the first step's
    timestamp, else the trial's start; without either, by file), each task id unique (a repeated one gets
    ``#2``, ...).

    Args:
        paths: the files and folders given.
        run: the name the records carry (default: the first path's name).

    Raises:
        InputError: a path does not exist.
    """
    out = AtifRead()
    label = run or (Path(paths[0]).stem if paths else "atif")
    for given in map(Path, paths):
        if not given.exists() and not given.is_symlink():
            raise InputError("no such file or folder", path=given)
        if given.is_dir():
            jobs = [(given, relative, str(given / relative)) for relative in _candidates(given)]
        else:  # a file given: read within its folder (the file itself may be a link the user gave)
            real = given.resolve()
            jobs = [(real.parent, real.name, str(given))]
        for root, relative, shown in jobs:
            try:
                out.trajectories.append(_one(root, relative, shown, len(out.trajectories), label))
            except (untrusted.UntrustedFileError, UnusableTrajectory, InputError) as exc:
                reason = exc.reason if isinstance(exc, untrusted.UntrustedFileError) else str(exc)
                out.unusable.append(f"{shown}: {reason}")
            except RecursionError:
                out.unusable.append(f"{shown}: nests too deeply (not read)")
            except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:  # a field no reader expects
                out.unusable.append(f"{shown}: a field has an unexpected type or value ({type(exc).__name__}: "
                                    f"{str(exc)[:120]}; not read)")
    out.trajectories.sort(key=_time_key)
    seen: dict[str, int] = {}
    for position, item in enumerate(out.trajectories):
        task_id = item.trajectory.task_id
        seen[task_id] = seen.get(task_id, 0) + 1
        if seen[task_id] > 1:
            task_id = f"{task_id}#{seen[task_id]}"
        item.trajectory = item.trajectory.model_copy(update={"task_id": task_id, "position": position})
        item.record = item.record.model_copy(update={"task_id": task_id, "position": position})
    return out


def task_instructions(paths: Sequence[str | Path]) -> tuple[list[tuple[str, str]], list[str]]:
    """(task id, instruction) of each ATIF trajectory under ``paths`` (its first user message; a task run several
    times, such as a Harbor job's trials, once: the first trajectory with that instruction), and one line for each
    file or trajectory left out (unusable, or without a user message)."""
    read = read_atif(paths)
    out: dict[str, str] = {}
    left = list(read.unusable)
    for item in read.trajectories:
        text = item.trajectory.instruction.strip()
        if not text:
            left.append(f"{item.source}: no user message (no task instruction)")
        elif text not in out:
            out[text] = item.record.template or item.trajectory.task_id
    return [(task_id, text) for text, task_id in out.items()], left


def looks_like_atif(path: str | Path) -> bool:
    """Whether ``path`` is an ATIF file or a folder holding ATIF trajectories or Harbor trials (and no run folder):
    what ``show`` and ``view`` read through `read_atif` instead of as runs."""
    path = Path(path)
    if path.is_file():
        if path.suffix != ".json":
            return False
        return _sniff(path.name, path.parent) or path.name == TRAJECTORY
    if not path.is_dir() or ((path / "config.json").is_file() and (path / "results.jsonl").is_file()):
        return False
    names = trees.find(path, lambda name: name in ("results.jsonl", TRAJECTORY) or name.endswith(".json"),
                       max_entries=MAX_ENTRIES)
    if any(p.name == "results.jsonl" and (p.parent / "config.json").is_file() for p in names):
        return False
    return bool(_candidates(path))


__all__ = ["MAX_ATIF_BYTES", "MAX_ENTRIES", "MAX_JSON_DEPTH", "AtifRead", "looks_like_atif", "read_atif",
           "read_outcome", "task_instructions"]
