"""Success tables: Table 2 (success with task-bootstrap CIs and the change vs the no-memory baseline), success
within a per-task latency/dependency budget (Fig. 3) and success by difficulty stratum (Fig. 4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from skilltransfer.experiments.config import CONDITIONS
from skilltransfer.experiments.report.runs import RunLog
from skilltransfer.experiments.report.table import Table, natural_key
from skilltransfer.experiments.runlog import TaskRecord
from skilltransfer.metrics import bootstrap_ci

AVERAGE = "Average"
"""Model name of the rows that pool all models of an env."""
ALL_ENVS = "(all envs)"
"""Env name of the rows that pool the tasks of every env (each task averaged over its env's models first)."""
METRICS = ("success", "reward")
BUDGET_POINTS = 60
COSTS = {"latency": "latency_s", "dependency": "dependency"}
"""Budget kind -> the results.jsonl field it limits."""


def condition_order(name: str) -> tuple[int, str]:
    """Sort key of a condition label: the paper's six in order (tagged variants after their base), then others."""
    names = list(CONDITIONS)
    base = name.split("[", 1)[0]
    return (names.index(base) if base in names else len(names), name)


def baseline_of(condition: str) -> str | None:
    """The no-memory condition of the same agent (``subtask+code`` -> ``subtask``); None for a baseline."""
    level, _, fmt = condition.partition("+")
    return level if fmt else None


def value_of(record: TaskRecord, metric: str) -> float:
    return float(record.success) if metric == "success" else float(record.reward)


def per_task(runs: Iterable[RunLog], metric: str) -> dict[str, float]:
    """Task id -> the metric averaged over the runs that finished the task (order seeds, repeats)."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for record in run.records:
            values.setdefault(record.task_id, []).append(value_of(record, metric))
    return {task: float(np.mean(v)) for task, v in values.items()}


def average_over_models(by_model: list[dict[str, float]]) -> dict[str, float]:
    """Task id -> the mean over models of each model's per-task value (tasks any model finished)."""
    pooled: dict[str, list[float]] = {}
    for values in by_model:
        for task, value in values.items():
            pooled.setdefault(task, []).append(value)
    return {task: float(np.mean(v)) for task, v in pooled.items()}


def groups(runs: list[RunLog]) -> dict[tuple[str, str, str], list[RunLog]]:
    """(env, model, condition) -> runs, sorted by env, model, condition order."""
    out: dict[tuple[str, str, str], list[RunLog]] = {}
    for run in runs:
        out.setdefault((run.env, run.model, run.condition), []).append(run)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], condition_order(kv[0][2]))))


def _ci_row(values: dict[str, float], seed: int) -> tuple[float, float, float]:
    mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
    return 100 * mean, 100 * low, 100 * high


Key = tuple[str, str, str]
"""(env, model, condition)."""


def _add_averages(values: dict[Key, dict[str, float]], n_runs: dict[Key, int]) -> None:
    """Add the pooled rows: per env over its models (when it has several), then over all envs (when several)."""
    envs = sorted({k[0] for k in values})
    for env in envs:
        models = sorted({k[1] for k in values if k[0] == env})
        if len(models) < 2:
            continue
        for condition in sorted({k[2] for k in values if k[0] == env}, key=condition_order):
            members = [values[(env, m, condition)] for m in models if (env, m, condition) in values]
            values[(env, AVERAGE, condition)] = average_over_models(members)
            n_runs[(env, AVERAGE, condition)] = sum(n_runs.get((env, m, condition), 0) for m in models)
    if len(envs) < 2:
        return
    for condition in sorted({k[2] for k in values}, key=condition_order):
        pooled: dict[str, float] = {}
        total = 0
        for env in envs:
            models = sorted({k[1] for k in values if k[0] == env and k[1] != AVERAGE})
            key = (env, AVERAGE if len(models) > 1 else models[0], condition)
            if key in values:
                pooled.update({f"{env}\x00{task}": value for task, value in values[key].items()})
                total += n_runs[key]
        values[(ALL_ENVS, AVERAGE, condition)] = pooled
        n_runs[(ALL_ENVS, AVERAGE, condition)] = total


def table2(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """Success (%) per env x model x condition with 95 % task-bootstrap CIs, and the change vs the baseline.

    Each task's value is averaged over the group's runs first; the CI resamples tasks. ``delta_pts`` is the
    difference of the two means in points; its CI is a paired task bootstrap of the per-task differences, given
    when the condition's tasks are all among its baseline's (then both means are over the condition's tasks, e.g.
    an evolution stream's test split; ``delta_tasks`` counts them).
    """
    values: dict[tuple[str, str, str], dict[str, float]] = {k: per_task(v, metric) for k, v in groups(runs).items()}
    n_runs = {k: len(v) for k, v in groups(runs).items()}
    _add_averages(values, n_runs)
    table = Table("table2_success", f"Table 2: task {metric} (%) with 95 % task-bootstrap CIs",
                  ["env", "model", "condition", "n_runs", "n_tasks", "success_pct", "ci_low", "ci_high",
                   "baseline", "delta_pts", "delta_ci_low", "delta_ci_high", "delta_tasks"],
                  note=f"{metric} per task averaged over a group's runs; CIs resample tasks (10,000 resamples, "
                       f"seed {seed}). delta = condition minus its no-memory baseline (task+text vs task, ...), "
                       "in points; when the condition's tasks are all among the baseline's (delta_tasks of them) "
                       f"it is paired over those tasks, with a paired task-bootstrap CI. '{AVERAGE}' rows average "
                       f"each task over the env's models; '{ALL_ENVS}' rows pool the tasks of all envs.")
    ordered = sorted(values, key=lambda k: (k[0] == ALL_ENVS, natural_key(k[0]), k[1] == AVERAGE, natural_key(k[1]),
                                            condition_order(k[2])))
    for key in ordered:
        env, model, condition = key
        mean, low, high = _ci_row(values[key], seed)
        row: dict[str, Any] = {"env": env, "model": model, "condition": condition, "n_runs": n_runs[key],
                               "n_tasks": len(values[key]), "success_pct": mean, "ci_low": low, "ci_high": high,
                               "baseline": None, "delta_pts": None, "delta_ci_low": None, "delta_ci_high": None,
                               "delta_tasks": None}
        base_name = baseline_of(condition)
        base = values.get((env, model, base_name)) if base_name else None
        if base_name and base:
            row["baseline"] = base_name
            row["delta_pts"] = mean - 100 * float(np.mean(list(base.values())))
            if set(values[key]) <= set(base):
                diffs = [values[key][t] - base[t] for t in sorted(values[key])]
                d_mean, d_low, d_high = bootstrap_ci(diffs, seed=seed)
                row["delta_pts"], row["delta_ci_low"], row["delta_ci_high"] = 100 * d_mean, 100 * d_low, 100 * d_high
                row["delta_tasks"] = len(diffs)
        table.rows.append(row)
    return table


def budget_grid(costs: np.ndarray, points: int = BUDGET_POINTS) -> np.ndarray:
    """Budgets from the smallest positive cost to the largest, log-spaced (linear when the costs span < 10x)."""
    positive = costs[costs > 0]
    if positive.size == 0:
        return np.array([0.0])
    low, high = float(positive.min()), float(positive.max())
    if high <= low:
        return np.array([low])
    return np.geomspace(low, high, points) if high / low >= 10 else np.linspace(low, high, points)


def budget_curves(runs: list[RunLog], metric: str = "success") -> Table:
    """Share of tasks that succeeded within each per-task budget of latency and of dependency (Fig. 3 curves).

    One curve per env x model x condition (runs of other settings never pool: see `label_differences`), pooling
    every (run, task) of its runs (repeats of one setting); the budgets are the same for all curves of an env
    (``budget_grid`` over all its tasks' costs).
    """
    table = Table("fig3_budget_curves", "Success within a per-task budget (Fig. 3)",
                  ["env", "kind", "model", "condition", "budget", "n_tasks", "success_within_pct"],
                  note=f"share (%) of the (run, task) pairs of a model x condition with {metric} = 1 and cost <= "
                       "budget (latency_s or dependency from results.jsonl); reward counts as its value; only "
                       "repeats of identical settings (order seeds) pool.")
    by_env: dict[str, list[RunLog]] = {}
    for run in runs:
        by_env.setdefault(run.env, []).append(run)
    for env, env_runs in sorted(by_env.items()):
        for kind, field_name in COSTS.items():
            all_costs = np.array([float(getattr(r, field_name)) for run in env_runs for r in run.records])
            grid = budget_grid(all_costs)
            series = sorted({(run.model, run.condition) for run in env_runs},
                            key=lambda mc: (natural_key(mc[0]), condition_order(mc[1])))
            for model, condition in series:
                records = [r for run in env_runs if (run.model, run.condition) == (model, condition)
                           for r in run.records]
                cost = np.array([float(getattr(r, field_name)) for r in records])
                value = np.array([value_of(r, metric) for r in records])
                for budget in grid:
                    share = float(np.sum(value * (cost <= budget)) / len(records))
                    table.rows.append({"env": env, "kind": kind, "model": model, "condition": condition,
                                       "budget": float(budget), "n_tasks": len(records),
                                       "success_within_pct": 100 * share})
    return table


def by_difficulty(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """Success (%) per env x model x condition x difficulty stratum (the tasks' own labels) with task-bootstrap
    CIs; runs of other settings never pool (see `label_differences`)."""
    table = Table("fig4_difficulty", "Success by difficulty stratum (Fig. 4)",
                  ["env", "model", "condition", "difficulty", "n_tasks", "success_pct", "ci_low", "ci_high"],
                  note=f"{metric} per task averaged over the runs of a model x condition (repeats of identical "
                       "settings), grouped by the task's difficulty label; CIs resample tasks.")
    for (env, model, condition), members in groups(runs).items():
        values = per_task(members, metric)
        difficulty = {r.task_id: r.difficulty for run in members for r in run.records}
        for level in sorted(set(difficulty.values())):
            stratum = {t: v for t, v in values.items() if difficulty[t] == level}
            mean, low, high = _ci_row(stratum, seed)
            table.rows.append({"env": env, "model": model, "condition": condition, "difficulty": level,
                               "n_tasks": len(stratum), "success_pct": mean, "ci_low": low, "ci_high": high})
    return table
