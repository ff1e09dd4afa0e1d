"""The retrieval table (issue 55 §3): the retrieval settings a report's runs used, side by side.

``retrieval`` appears when some run of the report used a retrieval mode other than dense or indexed description +
body (`skilltransfer.settings.config.StreamConfig.retrieval`, ``retrieval_text``). One row per env x model x
condition (its label without the two retrieval tags) x library read (`StreamConfig.skills_read_label`) x retrieval
mode x indexed text, the dense / description row being the baseline of its group:

- ``success_pct``: each task averaged over the row's runs, with a 95 % task-bootstrap CI (as Table 2);
- ``labelled``: tasks whose right skills are known (the task's metadata, the frozen library's provenance, or
  ``report --labels``), over which Hit@1, Hit@5, MRR, NDCG@10 and pick accuracy are computed with 95 % task-bootstrap
  CIs (`skilltransfer.metrics.selection`: a skill's rank is its best over the task's retrievals);
- ``shown_per_task``: skills shown per task over its retrievals, and ``no_skill_pct``: tasks shown none (a mode may
  return fewer than k: BM25 only skills sharing a term with the query; a retrieval floor drops more);
- ``top_cosine``: the mean cosine of each retrieval's first skill (every mode scores its hits by cosine).
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean
from typing import Any

from skilltransfer.log import ranked
from skilltransfer.memory.ranking import RETRIEVAL_MODES
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.metrics.selection import selection_summary
from skilltransfer.report.runs import RunLog
from skilltransfer.report.selection import Labels, task_selection
from skilltransfer.report.success import condition_order, metric_of, per_task
from skilltransfer.report.table import Table
from skilltransfer.settings.config import StreamConfig

TEXTS = ("description", "description+body")
_PER_TASK = (("hit1_pct", "hit1", 100.0), ("hit5_pct", "hit5", 100.0), ("mrr", "mrr", 1.0), ("ndcg10", "ndcg10", 1.0),
             ("pick_accuracy_pct", "pick_accuracy", 100.0))
NOTE = ("rows differ only in retrieval (dense: FAISS cosine, the paper's; bm25: bm25s over the indexed text; hybrid: "
        "reciprocal rank fusion 1 / (60 + rank) of the two; hierarchical: category -> skill) and indexed text "
        "(description, or description + body); success as in Table 2 (95 % task-bootstrap CI); Hit@k, MRR, NDCG@10 "
        "and pick accuracy over the labelled tasks (right skills known: the task's metadata, the frozen library's "
        "provenance, or report --labels), a skill ranked at its best over the task's retrievals, 95 % "
        "task-bootstrap CIs; shown_per_task: skills shown per task (all retrievals); no_skill_pct: tasks shown no "
        "skill; top_cosine: the mean cosine of each retrieval's first skill (docs/retrieval.md).")
COLUMNS = ["env", "model", "condition", "library", "retrieval", "retrieval_text", "runs", "tasks", "success_pct",
           "success_low", "success_high", "labelled",
           *[f"{name}{suffix}" for name, _, _ in _PER_TASK for suffix in ("", "_low", "_high")],
           "shown_per_task", "no_skill_pct", "top_cosine"]


def uses_retrieval_modes(runs: Iterable[RunLog]) -> bool:
    """Whether some run with a skill memory used a non-default retrieval mode or indexed text."""
    return any(run.log.config.has_memory and (run.log.config.retrieval, run.log.config.retrieval_text)
               != ("dense", "description") for run in runs)


def _group_key(config: StreamConfig) -> tuple[str, str]:
    """The condition label with the retrieval axes set back, and the library read."""
    base = config.model_copy(update={"retrieval": "dense", "retrieval_text": "description"})
    return base.condition_label(), config.skills_read_label()


def _row(members: list[RunLog], metric: str, seed: int, labels: Labels | None) -> dict[str, Any]:
    values = per_task(members, metric)
    mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
    records = [(run, record) for run in members for record in run.records]
    labelled = [selected for selected in (task_selection(record, metric_of(run, metric), labels, run.skills)
                                          for run, record in records) if selected.relevant]
    row: dict[str, Any] = {"runs": len(members), "tasks": len(values), "success_pct": 100 * mean,
                           "success_low": 100 * low, "success_high": 100 * high, "labelled": len(labelled)}
    if labelled:
        scored = selection_summary(labelled, seed=seed)
        for name, key, scale in _PER_TASK:
            row.update({name: scale * scored[key][0], f"{name}_low": scale * scored[key][1],
                        f"{name}_high": scale * scored[key][2]})
    row["shown_per_task"] = fmean([len(record.retrieved) for _, record in records])
    row["no_skill_pct"] = 100 * fmean([float(not record.retrieved) for _, record in records])
    tops = [hit.score for _, record in records for hit, rank in ranked(record.retrieved) if rank == 1]
    row["top_cosine"] = fmean(tops) if tops else None
    return row


def retrieval_table(runs: list[RunLog], metric: str = "success", seed: int = 0,
                    labels: Labels | None = None) -> Table:
    """The ``retrieval`` table (module docstring); no rows unless `uses_retrieval_modes`."""
    table = Table("retrieval", "Retrieval settings: success and retrieval quality side by side", COLUMNS, note=NOTE)
    if not uses_retrieval_modes(runs):
        return table
    cells: dict[tuple[str, str, str, str, str, str], list[RunLog]] = {}
    for run in runs:
        config = run.log.config
        if config.has_memory and run.records:
            condition, library = _group_key(config)
            cells.setdefault((run.env, run.model, condition, library, config.retrieval, config.retrieval_text),
                             []).append(run)
    order = sorted(cells, key=lambda key: (key[0], key[1], condition_order(key[2]), key[3],
                                           RETRIEVAL_MODES.index(key[4]), TEXTS.index(key[5])))
    for key in order:
        env, model, condition, library, mode, text = key
        table.rows.append({"env": env, "model": model, "condition": condition, "library": library,
                           "retrieval": mode, "retrieval_text": text, **_row(cells[key], metric, seed, labels)})
    return table
