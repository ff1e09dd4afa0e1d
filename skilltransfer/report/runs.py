"""Find and load the run folders a report is built from (``config.json`` + ``results.jsonl``, read through
``skilltransfer.log``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import CONFIG, RESULTS, RunFolder, TaskRecord
from skilltransfer.memory.library import SKILLS_JSONL, read_jsonl
from skilltransfer.settings.recorded import RunSettings, read_run_settings
from skilltransfer.skill import Skill
from skilltransfer.util import trees


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
    log: RunSettings
    records: list[TaskRecord]
    skills: dict[str, Skill] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    harness_differs: bool | None = None
    """Whether the runs of its table (same env and model) differ in their harness (`load_runs` sets it): the
    condition is then tagged with it; None: tagged when it is not the model's default."""
    model_tags: str = ""
    """Model settings that set this run apart from others of the same labels (`label_differences`)."""
    condition_tags: str = ""
    """Other settings that set this run apart from others of the same labels (`label_differences`)."""

    @property
    def name(self) -> str:
        return self.log.config.run

    @property
    def env(self) -> str:
        """The env label (`EnvSpec.display_label`: a grid's key, else derived from the spec), else the task ids'
        prefix."""
        spec = self.log.config.env
        if spec.label or spec.env:
            return spec.display_label
        first = self.records[0].task_id if self.records else (self.log.task_ids or ["env"])[0]
        return first.split("/", 1)[0] if "/" in first else "env"

    @property
    def model(self) -> str:
        """The model label (`ModelSpec.report_label`: a grid's key, unless the generic ``default``, else the model id,
        else the registry name)."""
        spec = self.log.config.model
        return (spec.report_label if spec.label or spec.model or spec.name else "unknown-model") + self.model_tags

    @property
    def condition(self) -> str:
        """The condition as the report groups it (`StreamConfig.condition_label`): ``task+text[no_demo]``,
        ``task+library(top)``; a tagged condition is compared with its agent's baseline (``task``), and tagged with
        every other setting in which it differs from runs of the same labels (``[reuse=lens]``)."""
        return self.log.config.condition_label(harness=self.harness_differs) + self.condition_tags

    def settings(self) -> dict[str, Any]:
        """Every recorded setting as ``key.path -> value`` (JSON values), the run's name, folder and order seed
        included (`label_differences` leaves those out: they make repeats, not other settings)."""
        data = {"config": self.log.config.model_dump(mode="json"),
                **self.log.model_dump(mode="json", include={"agent", "induction", "prompt_ids", "embedder_id"})}
        return _flatten(data, "")

    @property
    def level(self) -> str:
        return self.log.level

    @property
    def skill_format(self) -> str | None:
        return self.log.skill_format

    @property
    def frozen_library(self) -> bool:
        """True when the run retrieved from a frozen library instead of its own growing memory."""
        return self.log.config.library is not None and self.log.config.library_use != "beside"

    @property
    def reads_library(self) -> bool:
        """True when the run retrieved from a frozen library (instead of or beside its own growing memory)."""
        return self.log.config.library is not None

    @property
    def n_stream(self) -> int:
        """Length of the run's task stream (finished or not)."""
        return max(len(self.log.task_ids), len(self.records))


def find_runs(paths: list[Path]) -> list[Path]:
    """Run folders among ``paths``: each path is a run folder or is searched recursively for them. A run folder
    inside another run folder belongs to it (an evolution stream's evaluation streams) and is not listed.

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
            here = sorted(c.parent for c in trees.find(path, lambda name: name == CONFIG) if RunFolder.is_run(c.parent)
                          and not _inside_run(c.parent, path))
        if not here:
            raise InputError(f"no runs found (folders with {CONFIG} and {RESULTS})", path=path)
        found.extend(here)
    unique: dict[Path, None] = {}
    for run in found:
        unique.setdefault(run.resolve(), None)
    return list(unique)


def _inside_run(folder: Path, top: Path) -> bool:
    """Whether a folder between ``top`` (excluded) and ``folder`` (excluded) is a run folder."""
    return any(RunFolder.is_run(parent) for parent in folder.parents if parent != top and top in parent.parents)


def load_run(run_dir: Path) -> RunLog:
    """Load one run folder (config, results, final memory skills, task instructions).

    Raises:
        InputError: a broken config, results line, trajectory or skills file (naming the file and line).
    """
    folder = RunFolder(run_dir)
    log = read_run_settings(folder)
    records = sorted(folder.read_records(), key=lambda r: r.position)
    skills_file = folder.memory_dir / SKILLS_JSONL
    skills = {skill.id: skill for skill, _ in read_jsonl(skills_file)} if skills_file.is_file() else {}
    return RunLog(run_dir, log, records, skills, folder.instructions(records))


REPEAT_SETTINGS = ("config.run", "config.runs_dir", "config.order_seed", "config.limits.task_limit",
                   "config.env.task_limit", "config.model.label", "config.env.label")
"""Settings in which runs may differ and still pool as repeats of one setting: the run's name and folder, the
stream order seed (the seed repeats), how many tasks it was cut to, and the labels (already in the grouping)."""


def _flatten(value: Any, key: str) -> dict[str, Any]:
    """``key.path -> value`` of the leaves (an empty mapping has none: ``params: {}`` is no param set)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for name, item in value.items():
            out.update(_flatten(item, f"{key}.{name}" if key else str(name)))
        return out
    return {key: value}


def _tag_value(value: Any) -> str:
    if value is None:
        return "default"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 40 else text[:37] + "..."


def label_differences(runs: list[RunLog]) -> list[RunLog]:
    """Tag runs that share env, model and condition labels but differ in any other setting (sampling params,
    preset, library, reuse, prompts, agent settings, ...) with those settings, so no table pools them; runs that
    differ only in `REPEAT_SETTINGS` (order seeds) stay one group. Returns ``runs``, tagged in place."""
    groups: dict[tuple[str, str, str], list[RunLog]] = {}
    for run in runs:
        run.model_tags = run.condition_tags = ""
        groups.setdefault((run.env, run.model, run.condition), []).append(run)
    for members in groups.values():
        if len(members) < 2:
            continue
        flats = [run.settings() for run in members]
        keys = sorted({k for flat in flats for k in flat if k not in REPEAT_SETTINGS
                       and len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1})
        for run, flat in zip(members, flats, strict=True):
            model = [f"{k.removeprefix('config.model.').removeprefix('params.')}={_tag_value(flat.get(k))}"
                     for k in keys if k.startswith("config.model.")]
            other = [f"[{k.removeprefix('config.')}={_tag_value(flat.get(k))}]" for k in keys
                     if not k.startswith("config.model.")]
            run.model_tags = f" ({', '.join(model)})" if model else ""
            run.condition_tags = "".join(other)
    return runs


def load_runs(paths: list[Path]) -> list[RunLog]:
    """Find and load every run under ``paths``; runs with no finished task are left out. Runs of one env and model
    that differ in their harness have it in their condition label (``task+text[harness=paper]``); runs of the same
    labels that differ in another setting are tagged with it (`label_differences`): only repeats of one setting
    pool.

    Raises:
        InputError: no runs, or none with a finished task.
    """
    runs = [load_run(path) for path in find_runs(paths)]
    kept = [run for run in runs if run.records]
    if not kept:
        raise InputError(f"none of the {len(runs)} runs found has a finished task",
                         path=paths[0] if len(paths) == 1 else None)
    return label_runs(kept)


def label_runs(runs: list[RunLog]) -> list[RunLog]:
    """Label ``runs`` as one report groups them (the report's runs: those with a finished task): the harness in the
    condition of runs of one env and model that differ in it, and the tags of `label_differences`. The one
    definition of the report's labels (``view`` labels its runs with it). Returns ``runs``, labelled in place."""
    harnesses: dict[tuple[str, str], set[str]] = {}
    for run in runs:
        run.model_tags = run.condition_tags = ""  # labelled afresh (a run labelled before among other runs)
    for run in runs:
        harnesses.setdefault((run.env, run.model), set()).add(run.log.config.harness_label())
    for run in runs:
        run.harness_differs = len(harnesses[(run.env, run.model)]) > 1
    return label_differences(runs)
