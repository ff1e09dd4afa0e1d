"""Compute every table of a report from loaded runs (no files written here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.metrics.stats import BINNINGS
from skilltransfer.report.capacity import capacity_table, has_capacity
from skilltransfer.report.coordination import coordination_table
from skilltransfer.report.cost import cost_table
from skilltransfer.report.effects import has_draws, skill_effects_table
from skilltransfer.report.forgetting import forgetting_tables, has_snapshots
from skilltransfer.report.judgments import judgment_table
from skilltransfer.report.model_transfer import model_transfer_table
from skilltransfer.report.retrieval import retrieval_table, uses_retrieval_modes
from skilltransfer.report.reuse import evolution_tables, has_lens, lens_cost_table, reuse_table
from skilltransfer.report.runs import RunLog
from skilltransfer.report.selection import Labels, has_picks, selection_tables
from skilltransfer.report.skill_exec import skill_exec_tables
from skilltransfer.report.skill_use import has_following, skill_use_table
from skilltransfer.report.success import METRICS, budget_curves, by_difficulty, table2
from skilltransfer.report.table import Table
from skilltransfer.report.transfer import DEFAULT_BINS, Heatmap, skill_counts, transfer_heatmaps
from skilltransfer.report.utility import (
    N_BINS,
    component_bins,
    score_runs,
    task_utility,
    utility_bins,
    utility_by_kind,
)
from skilltransfer.report.utility_effects import utility_effects_tables


@dataclass
class Report:
    """All tables of a report, the transfer heatmaps, and the settings they were computed with."""

    runs: list[RunLog]
    tables: dict[str, Table]
    heatmaps: list[Heatmap]
    metric: str
    settings: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> Table:
        return self.tables[name]


def build_report(runs: list[RunLog], *, embedder_of: Callable[[RunLog], Any] | None = None,
                 metric: str = "official", density_bins: int = DEFAULT_BINS, utility_n_bins: int = N_BINS,
                 seed: int = 0, utility_binning: str = "first", evolutions: list[Path] | None = None,
                 judgments: list[Path] | None = None, labels: Labels | None = None) -> Report:
    """Compute the report's tables.

    Args:
        runs: loaded runs (``load_runs``).
        embedder_of: run -> embedder for the utility analyses (``EmbedderResolver``); None skips them.
        metric: "official" (each env's benchmark score, `official_metric`), or for every env "success" (0/1
            per task) or "reward" (the evaluator's score in [0, 1]).
        density_bins: stream bins of the transfer-density analysis (capped at the stream length).
        utility_n_bins: equal-size bins of the utility analyses.
        seed: bootstrap seed.
        utility_binning: which of those bins take the extra tasks ("first" or "spread", see ``equal_size_bins``).
        evolutions: ``evolution.jsonl`` files (``skilltransfer evolve``, a grid's evolution streams): J per round
            and the test split.
        judgments: ``*.judge.json`` reports of ``skilltransfer judge`` (table ``judgments``).
        labels: task id -> its right skills (names or ids), replacing the recorded ones (the selection tables).

    Raises:
        InputError: unknown metric or binning, or bins below 2.
    """
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r}; choose one of: {', '.join(METRICS)}")
    if density_bins < 2 or utility_n_bins < 2:
        raise InputError("bins must be at least 2")
    if utility_binning not in BINNINGS:
        raise InputError(f"unknown utility binning {utility_binning!r}; choose one of: {', '.join(BINNINGS)}")
    tables = [table2(runs, metric, seed), cost_table(runs), budget_curves(runs, metric),
              by_difficulty(runs, metric, seed)]
    coordination = coordination_table(runs, metric, seed)
    if coordination.rows:
        tables.append(coordination)
    tables += skill_exec_tables(runs, metric, seed)
    if has_draws(runs):
        tables.append(skill_effects_table(runs, seed))
    if has_following(runs):
        tables.append(skill_use_table(runs))
    if has_picks(runs):
        tables += selection_tables(runs, metric, seed, labels)
    if uses_retrieval_modes(runs):
        tables.append(retrieval_table(runs, metric, seed, labels))
    across = model_transfer_table(runs, metric, seed)
    if across.rows:
        tables.append(across)
    if has_snapshots(runs):
        tables += list(forgetting_tables(runs, metric, seed))
    if has_capacity(runs):
        tables.append(capacity_table(runs, metric, seed))
    if has_lens(runs):
        tables += [reuse_table(runs, metric, seed), lens_cost_table(runs)]
    if evolutions:
        tables += evolution_tables(evolutions)
    if judgments:
        tables.append(judgment_table(judgments, seed))
    if embedder_of is not None:
        scores = score_runs(runs, embedder_of)
        tasks = task_utility(runs, scores, metric)
        tables += [tasks, *utility_bins(tasks, utility_n_bins, utility_binning),
                   component_bins(tasks, utility_n_bins, utility_binning),
                   utility_by_kind(runs, scores, seed)]
        if has_draws(runs):
            tables += list(utility_effects_tables(runs, embedder_of, seed=seed, n_bins=utility_n_bins,
                                                  binning=utility_binning))
    density, heatmaps = transfer_heatmaps(runs, density_bins)
    tables += [density, skill_counts(runs, density_bins, metric)]
    settings = {"metric": metric, "density_bins": density_bins, "utility_bins": utility_n_bins,
                "utility_binning": utility_binning, "seed": seed,
                "bootstrap_resamples": 10000, "utility": embedder_of is not None}
    return Report(runs, {t.name: t for t in tables}, heatmaps, metric, settings)
