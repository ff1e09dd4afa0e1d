"""The ``model_transfer`` table (issue 39 §4, spec ``model-transfer``): a library built by model A, used frozen by
model B, against B without memory on the same tasks, for every (A, B) the runs hold.

A run reads another model's library when its ``library`` is the memory of a run folder whose ``config.json`` names
another model label. Each row pairs the runs of one (env, user model B, library model A, condition) with B's
no-memory runs of the same env and level: per task (averaged over replicate runs first) the metric with the library
minus without, over the tasks both ran; the mean and its 95 % task-bootstrap CI. The table appears when some run
reads a library built by another model; same-model rows (A = B, the library used frozen by its own builder) are the
diagonal.
"""

from __future__ import annotations

from pathlib import Path

from skilltransfer.errors import InputError
from skilltransfer.log import MEMORY, RunFolder
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import per_task
from skilltransfer.report.table import Table
from skilltransfer.settings.recorded import read_run_settings

NOTE = ("delta = metric with the library built by library_model minus the same model's no-memory runs (same env, "
        "level), per task (replicate runs averaged first) over the tasks both ran; mean and 95 % task-bootstrap CI "
        "of the per-task differences (docs/model-transfer.md).")


def library_model(run: RunLog) -> str | None:
    """The model label of the run whose memory ``run`` read as its library; None without one (or unreadable)."""
    library = run.log.config.library
    if library is None:
        return None
    folder = Path(library)
    folder = folder.parent if folder.name == MEMORY else folder
    if not RunFolder(folder).exists():
        return None
    try:
        return read_run_settings(RunFolder(folder)).config.model.report_label  # as `RunLog.model` names it
    except InputError:
        return None


def model_transfer_table(runs: list[RunLog], metric: str, seed: int) -> Table:
    """The table (rows only when some run reads another model's library)."""
    table = Table("model_transfer", "Libraries across models: paired deltas against no memory",
                  ["env", "model", "library_model", "condition", "runs", "tasks", "with_library_pct",
                   "without_pct", "delta_pct", "ci_low", "ci_high"], note=NOTE)
    sources = {run.path: library_model(run) for run in runs}
    if not any(src is not None and src != run.model for run in runs for src in [sources[run.path]]):
        return table
    groups: dict[tuple[str, str, str, str], list[RunLog]] = {}
    for run in runs:
        source = sources[run.path]
        if source is not None:
            groups.setdefault((run.env, run.model, source, run.condition), []).append(run)
    for (env, model, source, condition), members in sorted(groups.items()):
        level = members[0].log.level
        baseline = [r for r in runs if r.env == env and r.model == model and not r.log.config.has_memory
                    and r.log.level == level]
        if not baseline:
            continue
        with_lib, without = per_task(members, metric), per_task(baseline, metric)
        common = sorted(set(with_lib) & set(without))
        if not common:
            continue
        deltas = [with_lib[t] - without[t] for t in common]
        mean, low, high = bootstrap_ci(deltas, seed=seed)
        table.rows.append({"env": env, "model": model, "library_model": source, "condition": condition,
                           "runs": len(members), "tasks": len(common),
                           "with_library_pct": 100 * sum(with_lib[t] for t in common) / len(common),
                           "without_pct": 100 * sum(without[t] for t in common) / len(common),
                           "delta_pct": 100 * mean, "ci_low": 100 * low, "ci_high": 100 * high})
    return table
