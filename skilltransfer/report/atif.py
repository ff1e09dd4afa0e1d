"""Run folders as ATIF (`skilltransfer.log.atif`): one document per task, for ``export --format atif`` and the
viewer's static export.

Every task with a trajectory file is written: the finished ones with their record, a task still running or aborted
without one. The document names the run's model, level and settings (``agent.extra``), and each step's reasoning
is taken from the call that made it (`skilltransfer.report.trajectory.step_calls`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError, check_output_path
from skilltransfer.log import RunFolder, TaskRecord, TrajectoryLog, read_steps, safe_task_id
from skilltransfer.log.atif import to_atif
from skilltransfer.report.runs import find_runs
from skilltransfer.report.trajectory import step_calls
from skilltransfer.settings.recorded import RunSettings, read_run_settings


@dataclass
class AtifExport:
    """What ``export --format atif`` wrote: the folder, runs, files, and one line per task not written."""

    path: Path
    runs: int = 0
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


def _call_ids(trajectories: Sequence[TrajectoryLog]) -> set[str]:
    return {i for t in trajectories for c in t.calls for i in [*(c.get("messages") or []), c.get("reply"),
                                                                c.get("reasoning")] if isinstance(i, str)}


def _agent_extra(settings: RunSettings) -> dict[str, Any]:
    config = settings.config
    return {"run": config.run, "condition": config.condition, "level": settings.level,
            "skill_format": settings.skill_format, "env": config.env.describe(), "model": config.model.describe(),
            "settings": config.axis_values()}


def run_documents(run_dir: str | Path, problems: list[str] | None = None, *,
                  position: int | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, ATIF document) for each task of a run with a trajectory file (only the task at ``position`` in the
    stream, when given), in stream order; a task whose trajectory cannot be read or written is named in
    ``problems`` (when given; else it raises).

    Raises:
        InputError: not a run folder, or (without ``problems``) a trajectory that cannot be read.
    """
    folder = RunFolder(run_dir)
    settings = read_run_settings(folder)
    records = {r.task_id: r for r in folder.read_records()}
    tasks: list[tuple[TaskRecord | None, str]] = []
    for at, task_id in enumerate(dict.fromkeys([*settings.task_ids, *records])):
        record = records.get(task_id)
        if position is not None and (record.position if record is not None else at) != position:
            continue
        relative = record.trajectory if record is not None else folder.trajectory_file(task_id)
        if record is not None or (folder.root / relative).is_file():
            tasks.append((record, relative))
    version = str(settings.provenance.get("toolkit_version") or "")
    model = settings.config.model.resolved_model() or settings.config.model.display_label
    extra = _agent_extra(settings)
    loaded: list[tuple[TaskRecord | None, str, TrajectoryLog]] = []
    for record, relative in tasks:
        try:
            loaded.append((record, relative, folder.read_trajectory(relative)))
        except InputError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    prompts = folder.prompts.read(_call_ids([t for _, _, t in loaded])) if loaded else {}
    for record, relative, trajectory in loaded:
        try:
            steps = read_steps(trajectory.steps, path=folder.root / relative)
            document = to_atif(trajectory, record, run=settings.config.run, version=version, model=model,
                               level=settings.level, prompts=prompts, step_calls=step_calls(steps, trajectory.calls),
                               agent_extra=extra)
        except InputError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        yield f"{safe_task_id(trajectory.task_id)}.json", document


def task_document(run_dir: str | Path, position: int) -> dict[str, Any]:
    """The ATIF document of the task at ``position`` in a run's stream.

    Raises:
        InputError: no task with a trajectory there, or one that cannot be read.
    """
    for _, document in run_documents(run_dir, position=position):
        return document
    raise InputError(f"no task with a trajectory at position {position} in this run", path=run_dir)


def document_text(document: dict[str, Any]) -> str:
    """An ATIF document as a file's text (ASCII JSON: control characters escaped)."""
    return json.dumps(document, indent=1, ensure_ascii=True) + "\n"


def export_atif(paths: Sequence[str | Path], out: str | Path) -> AtifExport:
    """Write every task of the runs under ``paths`` as ATIF into the new folder ``out``: ``<run>/<task>.json``,
    ``<run>`` the run folder's path below the folder given (or its name); written into a temporary sibling and
    renamed into place, so nothing is left half-written.

    Raises:
        InputError: ``out`` exists and is not an empty folder, or a path holds no run.
    """
    out = check_output_path(out, flag="--out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("--out exists and is not an empty folder; give a new folder", path=out)
    runs: list[tuple[Path, str]] = []
    for given in map(Path, paths):
        for run in find_runs([given]):
            base = given.resolve() if given.resolve() != run else run.parent
            runs.append((run, run.relative_to(base).as_posix()))
    summary = AtifExport(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        labels: set[str] = set()
        for run, label in runs:
            while label in labels:
                label += "_"
            labels.add(label)
            summary.runs += 1
            for name, document in run_documents(run, summary.problems):
                text = document_text(document)
                target = tmp / label / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                summary.files += 1
                summary.bytes += len(text)
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


__all__ = ["AtifExport", "document_text", "export_atif", "run_documents", "task_document"]
