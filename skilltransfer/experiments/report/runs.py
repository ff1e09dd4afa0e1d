"""Find and load the run folders a report is built from (``config.json`` + ``results.jsonl``, read through
``skilltransfer.experiments.runlog``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.experiments.runlog import CONFIG, RESULTS, RunConfigLog, RunFolder, TaskRecord
from skilltransfer.memory.library import SKILLS_JSONL, read_jsonl
from skilltransfer.skill import Skill


@dataclass
class RunLog:
    """One loaded run folder.

    Attributes:
        path: the run folder.
        log: its parsed ``config.json``.
        records: its ``results.jsonl`` lines, in stream order.
        skills: the final skill memory (``memory/skills.jsonl``), by id; empty for no-memory runs.
        instructions: task id -> instruction, read from the trajectories of the finished tasks.
    """

    path: Path
    log: RunConfigLog
    records: list[TaskRecord]
    skills: dict[str, Skill] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.log.config.run

    @property
    def env(self) -> str:
        """The env label: the grid's ``label`` (its env record is JSON), else the recorded spec's name (``apps``,
        ``officebench:<path>`` -> ``officebench``, ``module:Class`` -> ``Class``), else the task ids' prefix."""
        spec = self.log.config.env.strip()
        record = _json_object(spec)
        if record is not None:
            return str(record.get("label") or record.get("env") or "env")
        if spec:
            name = spec.split(maxsplit=1)[0]
            module, _, attr = name.partition(":")
            return attr if attr and "." in module else module
        first = self.records[0].task_id if self.records else (self.log.task_ids or ["env"])[0]
        return first.split("/", 1)[0] if "/" in first else "env"

    @property
    def model(self) -> str:
        """The model label: the grid's ``label`` (its model record is JSON), else the recorded model spec."""
        spec = self.log.config.model.strip()
        record = _json_object(spec)
        if record is not None:
            return str(record.get("label") or record.get("model") or record.get("name") or "model")
        return spec or "unknown-model"

    @property
    def condition(self) -> str:
        """The condition, tagged when it differs from the plain one: ``[no_demo]`` for another induction prompt,
        ``+library`` / ``+library(top)`` for a frozen (filtered) library (``task+library`` compares with ``task``)."""
        label = self.log.config.condition.strip().lower()
        if self.log.config.library is not None:
            label += f"+library({self.log.config.library_filter})" if self.log.config.library_filter else "+library"
        if self.log.induction is not None and self.log.config.induction_variant != "full":
            label += f"[{self.log.config.induction_variant}]"
        return label

    @property
    def level(self) -> str:
        return self.log.level

    @property
    def skill_format(self) -> str | None:
        return self.log.skill_format

    @property
    def frozen_library(self) -> bool:
        """True when the run retrieved from a frozen library rather than its own growing memory."""
        return self.log.config.library is not None

    @property
    def n_stream(self) -> int:
        """Length of the run's task stream (finished or not)."""
        return max(len(self.log.task_ids), len(self.records))


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def find_runs(paths: list[Path]) -> list[Path]:
    """Run folders among ``paths``: each path is a run folder or is searched recursively for them.

    Raises:
        InputError: a path does not exist, or a path holds no run folder.
    """
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise InputError("no such run folder", path=path)
        if RunFolder.is_run(path):
            here = [path]
        else:
            here = sorted(c.parent for c in path.rglob(CONFIG) if RunFolder.is_run(c.parent))
        if not here:
            raise InputError(f"no runs found (folders with {CONFIG} and {RESULTS})", path=path)
        found.extend(here)
    unique: dict[Path, None] = {}
    for run in found:
        unique.setdefault(run.resolve(), None)
    return list(unique)


def load_run(run_dir: Path) -> RunLog:
    """Load one run folder (config, results, final memory skills, task instructions).

    Raises:
        InputError: a broken config, results line, trajectory or skills file (naming the file and line).
    """
    folder = RunFolder(run_dir)
    log = folder.read_config()
    records = sorted(folder.read_records(), key=lambda r: r.position)
    skills_file = folder.memory_dir / SKILLS_JSONL
    skills = {skill.id: skill for skill, _ in read_jsonl(skills_file)} if skills_file.is_file() else {}
    return RunLog(run_dir, log, records, skills, folder.instructions(records))


def load_runs(paths: list[Path]) -> list[RunLog]:
    """Find and load every run under ``paths``; runs with no finished task are left out.

    Raises:
        InputError: no runs, or none with a finished task.
    """
    runs = [load_run(path) for path in find_runs(paths)]
    kept = [run for run in runs if run.records]
    if not kept:
        raise InputError(f"none of the {len(runs)} runs found has a finished task",
                         path=paths[0] if len(paths) == 1 else None)
    return kept
