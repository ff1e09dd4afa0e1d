"""Skill bookkeeping per run (written, merged, pruned, retrieved) and transfer density over the stream (Fig. 6)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from skilltransfer.metrics import transfer_density
from skilltransfer.report.events import LIBRARY, WITHIN_RUN, TransferEvent, transfer_events
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import OFFICIAL, condition_order, metric_of, value_of
from skilltransfer.report.table import Table

DEFAULT_BINS = 50
LEVELS = ("subtask", "task")


def run_transfer_events(run: RunLog) -> list[TransferEvent]:
    """The run's transfer events, within-run and library (`skilltransfer.report.events.transfer_events`, the
    definition ``show`` and ``view`` count too)."""
    return transfer_events(run.records, run.log.config.library_event_source())


def transfer_pairs(run: RunLog) -> list[tuple[int, int]]:
    """(induced_at, retrieved_at) stream positions of the run's within-run transfer events (a library event has no
    source position in this stream)."""
    return [(event.source_position, event.target_position) for event in run_transfer_events(run)
            if event.kind == WITHIN_RUN and event.source_position is not None]


def bins_for(n_items: int, bins: int = DEFAULT_BINS) -> int:
    """``bins`` capped at the stream length (``transfer_density`` needs 2 <= bins <= n_items)."""
    return min(bins, n_items)


def skill_counts(runs: list[RunLog], bins: int = DEFAULT_BINS, metric: str = OFFICIAL) -> Table:
    """Per run: tasks, success, skills written/merged/dropped/pruned/unparseable, inductions skipped (no working code)
    and skills not stored as ungrounded, retrievals, memory size, D."""
    table = Table("skills_per_run", "Skills written / merged / pruned / retrieved per run",
                  ["run", "path", "env", "model", "condition", "tasks", "success_pct", "written", "merged",
                   "dropped", "pruned", "unparseable", "skipped", "ungrounded", "retrievals", "distinct_retrieved",
                   "memory_size",
                   "transfer_events", "transfer_density", "library_transfer_events", "library_transfer_tasks"],
                  note="counts of the 'induced' statuses and 'retrieved' items of results.jsonl; memory_size is the "
                       "last task's; transfer_events: retrievals of skills an earlier task of the run induced, "
                       "transfer_density is their D over min(50, stream length) bins of this run alone; "
                       "library_transfer_events: retrievals of skills of the run's frozen library (another run's "
                       "memory or a given library, instead of or beside its own memory; one per task and skill, "
                       "distractors excluded), "
                       "library_transfer_tasks: the tasks with at least one.")
    for run in sorted(runs, key=lambda r: (r.env, r.model, condition_order(r.condition), r.name)):
        statuses = Counter(item.status for record in run.records for item in record.induced)
        retrieved = [item.skill_id for record in run.records for item in record.retrieved]
        events = transfer_pairs(run)
        library = [event for event in run_transfer_events(run) if event.kind == LIBRARY]
        n_bins = bins_for(run.n_stream, bins)
        density = transfer_density(events, run.n_stream, n_bins).density if run.n_stream >= 2 else None
        score = 100 * float(np.mean([value_of(r, metric_of(run, metric)) for r in run.records]))
        table.rows.append({
            "run": run.name, "path": str(run.path), "env": run.env, "model": run.model, "condition": run.condition,
            "tasks": len(run.records), "success_pct": score,
            "written": statuses["added"], "merged": statuses["merged"], "dropped": statuses["dropped"],
            "pruned": statuses["pruned"], "unparseable": statuses["unparseable"], "skipped": statuses["skipped"],
            "ungrounded": statuses["ungrounded"], "retrievals": len(retrieved),
            "distinct_retrieved": len(set(retrieved)), "memory_size": run.records[-1].memory_size,
            "transfer_events": len(events), "transfer_density": density if run.skill_format or events else None,
            "library_transfer_events": len(library) if run.reads_library else None,
            "library_transfer_tasks": len({e.target_position for e in library}) if run.reads_library else None})
    return table


@dataclass
class Heatmap:
    """Transfer heatmap of one env: per level, how many runs have a transfer from bin i to bin j (i <= j)."""

    env: str
    n_items: int
    bins: int
    runs: dict[str, np.ndarray]
    """Level -> bins x bins count of runs with at least one transfer in the cell."""
    density: dict[str, float]
    """Level -> D of the level's pooled events."""
    n_runs: dict[str, int]


def transfer_heatmaps(runs: list[RunLog], bins: int = DEFAULT_BINS) -> tuple[Table, list[Heatmap]]:
    """Transfer density D per env x level, pooled over models and skill formats (Fig. 6).

    The stream of an env is cut into ``min(bins, n)`` bins, ``n`` the longest stream among the env's memory runs;
    D is ``transfer_density`` of all the level's events pooled, and each heatmap cell counts the runs with at least
    one transfer between the two bins.
    """
    table = Table("fig6_transfer_density", "Transfer density D (Fig. 6)",
                  ["env", "level", "n_runs", "n_items", "bins", "n_events", "n_within_bin", "bin_pairs_covered",
                   "density"],
                  note="events = (source, target) positions of the transfer events (a task retrieved a skill an "
                       "earlier task of the same run induced; one per task and skill), pooled over the env's memory "
                       "runs of a level (frozen-library runs excluded); "
                       "D = covered bin pairs i < j / (b(b-1)/2).")
    maps = []
    by_env: dict[str, list[RunLog]] = {}
    for run in runs:
        if run.skill_format is not None and not run.frozen_library:
            by_env.setdefault(run.env, []).append(run)
    for env, members in sorted(by_env.items()):
        n_items = max(run.n_stream for run in members)
        if n_items < 2:
            continue
        n_bins = bins_for(n_items, bins)
        heat = Heatmap(env, n_items, n_bins, {}, {}, {})
        for level in LEVELS:
            level_runs = [run for run in members if run.level == level]
            if not level_runs:
                continue
            per_run = [transfer_density(transfer_pairs(run), n_items, n_bins) for run in level_runs]
            pooled = transfer_density([e for run in level_runs for e in transfer_pairs(run)], n_items, n_bins)
            heat.runs[level] = np.sum([(d.counts > 0).astype(np.int64) for d in per_run], axis=0)
            heat.density[level] = pooled.density
            heat.n_runs[level] = len(level_runs)
            table.rows.append({"env": env, "level": level, "n_runs": len(level_runs), "n_items": n_items,
                               "bins": n_bins, "n_events": pooled.n_events, "n_within_bin": pooled.n_within_bin,
                               "bin_pairs_covered": int(np.count_nonzero(np.triu(pooled.counts, k=1))),
                               "density": pooled.density})
        maps.append(heat)
    return table, maps
