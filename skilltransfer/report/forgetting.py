"""The ``forgetting`` and ``forgetting_matrix`` tables (issue 39 §3, docs/forgetting.md): probe tasks run against
snapshots of a source run's library (``library_snapshot``) give the matrix R[k][j], and from it backward transfer,
forward transfer, forgetting and held-out transfer with task-bootstrap CIs (`skilltransfer.metrics.forgetting`).

Runs are grouped by env, model, condition (without its snapshot tag) and source library; within a group R[k][j] is
the metric averaged over the runs of snapshot k that ran task j. A task is seen at the position the source run's
``snapshots.jsonl`` lists it.
"""

from __future__ import annotations

import re

from skilltransfer.errors import InputError
from skilltransfer.log import memory_folder
from skilltransfer.memory.snapshots import task_positions
from skilltransfer.metrics.forgetting import forgetting_measures
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import per_task
from skilltransfer.report.table import Table

NOTE = ("R[k][j] = the metric of probe task j with the frozen library of snapshot k (the source run's library after "
        "its first k tasks; 0: empty). Per seen task (source position p): bwt = R[F][j] - R[a][j] (a: first "
        "snapshot >= p+1, F: last), forgetting = max R[a..F-1][j] - R[F][j], fwt = R[b][j] - R[0][j] (b: last "
        "snapshot <= p, > 0); held-out tasks: R[F][j] - R[0][j]. Mean and 95 % task-bootstrap CI "
        "(docs/forgetting.md).")

_TAG = re.compile(r"\[snapshot=\d+\]")


def has_snapshots(runs: list[RunLog]) -> bool:
    """Whether some run probes a library snapshot."""
    return any(run.log.config.library_snapshot is not None for run in runs)


def _groups(runs: list[RunLog]) -> dict[tuple[str, str, str, str], list[RunLog]]:
    groups: dict[tuple[str, str, str, str], list[RunLog]] = {}
    for run in runs:
        config = run.log.config
        if config.library_snapshot is None or config.library is None:
            continue
        source = str(memory_folder(config.library))
        groups.setdefault((run.env, run.model, _TAG.sub("", run.condition), source), []).append(run)
    return groups


def forgetting_tables(runs: list[RunLog], metric: str, seed: int) -> tuple[Table, Table]:
    """(the measures table, the matrix table)."""
    measures = Table("forgetting", "Backward transfer and forgetting of the library (snapshot probes)",
                     ["env", "model", "condition", "source", "snapshots", "measure", "tasks", "value_pct", "ci_low",
                      "ci_high"], note=NOTE)
    matrix_table = Table("forgetting_matrix", "R[k][j]: probe success per library snapshot",
                         ["env", "model", "condition", "source", "snapshot", "task_id", "seen_at", "value_pct",
                          "runs"], note="seen_at: the task's position in the source stream (empty: held out).")
    for (env, model, condition, source), members in sorted(_groups(runs).items()):
        try:
            seen_at = task_positions(source)
        except InputError:
            seen_at = {}
        by_snapshot: dict[int, list[RunLog]] = {}
        for run in members:
            snapshot = run.log.config.library_snapshot
            assert snapshot is not None
            by_snapshot.setdefault(snapshot, []).append(run)
        matrix = {k: per_task(group, metric) for k, group in by_snapshot.items()}
        shown = ", ".join(str(k) for k in sorted(matrix))
        for k in sorted(matrix):
            for task, value in sorted(matrix[k].items()):
                matrix_table.rows.append({"env": env, "model": model, "condition": condition, "source": source,
                                          "snapshot": k, "task_id": task, "seen_at": seen_at.get(task),
                                          "value_pct": 100 * value, "runs": len(by_snapshot[k])})
        for measure in forgetting_measures(matrix, seen_at, seed=seed):
            scaled = [None if v is None else 100 * v for v in (measure.mean, measure.low, measure.high)]
            measures.rows.append({"env": env, "model": model, "condition": condition, "source": source,
                                  "snapshots": shown, "measure": measure.name, "tasks": len(measure.values),
                                  "value_pct": scaled[0], "ci_low": scaled[1], "ci_high": scaled[2]})
    return measures, matrix_table
