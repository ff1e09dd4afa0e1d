"""Skill-utility analyses of runs (seed §6, Fig. 5): every skill of a run's memory is scored with
``skilltransfer.metrics.score_library`` against that run's task instructions, with the run's embedder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skilltransfer.metrics import SkillScore, binned_spearman, bootstrap_ci, score_library
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import OFFICIAL, condition_order, metric_of, value_of
from skilltransfer.report.table import Table

N_BINS = 10
COMPONENTS = ("specificity", "abstractness")


def score_runs(runs: list[RunLog], embedder_of: Callable[[RunLog], Any]) -> dict[str, dict[str, SkillScore]]:
    """Run path -> skill id -> utility row, for every run with a skill memory and at least two task instructions."""
    scores: dict[str, dict[str, SkillScore]] = {}
    for run in runs:
        texts = [run.instructions[r.task_id] for r in run.records if r.task_id in run.instructions]
        if not run.skills or len(texts) < 2:
            continue
        report = score_library(list(run.skills.values()), texts, embedder_of(run))
        scores[str(run.path)] = {row.id: row for row in report.skills}
    return scores


def task_utility(runs: list[RunLog], scores: dict[str, dict[str, SkillScore]], metric: str = OFFICIAL) -> Table:
    """One row per task that retrieved at least one scored skill: the mean components of its distinct skills."""
    table = Table("task_utility", "Mean utility of each task's retrieved skills",
                  ["run", "env", "model", "condition", "level", "position", "task_id", "success", "n_skills",
                   "mean_utility", "mean_specificity", "mean_abstractness"],
                  note="the distinct skills a task retrieved, scored against its run's task instructions "
                       "(score_library, run embedder, tau 0.1, pair specificity, description text).")
    for run in sorted(runs, key=lambda r: (r.env, r.model, condition_order(r.condition), r.name)):
        rows = scores.get(str(run.path))
        if not rows:
            continue
        resolved = metric_of(run, metric)
        for record in run.records:
            ids = sorted({item.skill_id for item in record.retrieved if item.skill_id in rows})
            if not ids:
                continue
            picked = [rows[i] for i in ids]
            table.rows.append({
                "run": run.name, "env": run.env, "model": run.model, "condition": run.condition, "level": run.level,
                "position": record.position, "task_id": record.task_id, "success": value_of(record, resolved),
                "n_skills": len(ids), "mean_utility": float(np.mean([s.utility for s in picked])),
                "mean_specificity": float(np.mean([s.specificity for s in picked])),
                "mean_abstractness": float(np.mean([s.abstractness for s in picked]))})
    return table


def _levels(tasks: Table) -> list[str]:
    return [level for level in ("task", "subtask") if tasks.where(level=level)]


def utility_bins(tasks: Table, n_bins: int = N_BINS, binning: str = "first") -> tuple[Table, Table]:
    """Fig. 5a: per level, tasks ranked by mean retrieved utility in ``n_bins`` equal bins; success per bin and the
    Spearman correlation of the bin means (``binned_spearman``). Levels with fewer than ``n_bins`` tasks are left out.
    """
    convention = "np.array_split: the first bins take the extra tasks" if binning == "first" else \
        "rank i in bin floor(i * bins / n): the extra tasks spread over the range"
    bins = Table("fig5a_utility_bins", "Success by utility bin (Fig. 5a)",
                 ["level", "bin", "n", "mean_utility", "success_pct"],
                 note=f"task_utility rows of a level (in table order) sorted by mean_utility (stable) and split into "
                      f"{n_bins} equal bins ({convention}).")
    corr = Table("fig5a_spearman", "Spearman correlation of utility and success over the bins (Fig. 5a)",
                 ["level", "n_tasks", "n_bins", "rho", "p_value"], note="binned_spearman(mean_utility, success).")
    for level in _levels(tasks):
        rows = tasks.where(level=level)
        if len(rows) < n_bins:
            continue
        result = binned_spearman([r["mean_utility"] for r in rows], [r["success"] for r in rows], n_bins, binning)
        for index, b in enumerate(result.bins, start=1):
            bins.rows.append({"level": level, "bin": index, "n": b.n, "mean_utility": b.x_mean,
                              "success_pct": 100 * b.y_mean})
        corr.rows.append({"level": level, "n_tasks": len(rows), "n_bins": n_bins, "rho": result.rho,
                          "p_value": result.p_value})
    return bins, corr


def component_bins(tasks: Table, n_bins: int = N_BINS, binning: str = "first") -> Table:
    """Fig. 5b: success per bin of mean retrieved specificity and of mean retrieved abstractness, per level."""
    table = Table("fig5b_components", "Success vs specificity and abstractness (Fig. 5b)",
                  ["level", "component", "bin", "n", "mean_value", "success_pct", "rho", "p_value"],
                  note=f"as Fig. 5a with mean_specificity or mean_abstractness in place of mean_utility; rho/p are "
                       f"binned_spearman over the {n_bins} bins.")
    for level in _levels(tasks):
        rows = tasks.where(level=level)
        if len(rows) < n_bins:
            continue
        for component in COMPONENTS:
            result = binned_spearman([r[f"mean_{component}"] for r in rows], [r["success"] for r in rows], n_bins,
                                     binning)
            for index, b in enumerate(result.bins, start=1):
                table.rows.append({"level": level, "component": component, "bin": index, "n": b.n,
                                   "mean_value": b.x_mean, "success_pct": 100 * b.y_mean, "rho": result.rho,
                                   "p_value": result.p_value})
    return table


def utility_by_kind(runs: list[RunLog], scores: dict[str, dict[str, SkillScore]], seed: int = 0) -> Table:
    """Fig. 5c-e: mean utility of the skills written in each env, by skill level and format, with bootstrap CIs.

    Frozen-library runs are left out (their memory is a copy of another run's skills).
    """
    table = Table("fig5cde_utility_by_kind", "Skill utility by level and format (Fig. 5c-e)",
                  ["env", "level", "format", "n_skills", "mean_utility", "ci_low", "ci_high", "mean_specificity",
                   "mean_abstractness"],
                  note="every skill in the final memory of each run (scored against its run's tasks), pooled per "
                       "env; CIs resample skills.")
    pooled: dict[tuple[str, str, str], list[SkillScore]] = {}
    for run in runs:
        if run.frozen_library:
            continue
        for row in scores.get(str(run.path), {}).values():
            pooled.setdefault((run.env, row.level, row.format), []).append(row)
    order = {"task": 0, "subtask": 1, "text": 0, "code": 1}
    for (env, level, fmt), rows in sorted(pooled.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 2),
                                                                          order.get(kv[0][2], 2))):
        mean, low, high = bootstrap_ci([r.utility for r in rows], seed=seed)
        table.rows.append({"env": env, "level": level, "format": fmt, "n_skills": len(rows), "mean_utility": mean,
                           "ci_low": low, "ci_high": high,
                           "mean_specificity": float(np.mean([r.specificity for r in rows])),
                           "mean_abstractness": float(np.mean([r.abstractness for r in rows]))})
    return table
