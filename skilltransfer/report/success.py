"""Success tables: Table 2 (success with task-bootstrap CIs and the change vs the no-memory baseline), success
within a per-task latency/dependency budget (Fig. 3) and success by difficulty stratum (Fig. 4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from skilltransfer.envs.registry import official_metric
from skilltransfer.log import TaskRecord
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.metrics.stats import stratified_bootstrap_ci
from skilltransfer.report.runs import RunLog
from skilltransfer.report.table import Table, natural_key
from skilltransfer.settings.config import CONDITIONS

AVERAGE = "Average"
"""Model name of the rows that pool all models of an env."""
ALL_ENVS = "(all envs)"
"""Env name of the rows that average the env averages (the paper's Table 2 "Average": each env weighs the same)."""
POOLED = "(all envs, pooled)"
"""Env name of the rows that pool the tasks of every env (weighted by task count; not the paper's Average)."""
OFFICIAL = "official"
"""Metric choice: each env's own benchmark score (`skilltransfer.envs.registry.official_metric`)."""
METRICS = (OFFICIAL, "success", "reward")
BUDGET_POINTS = 60
COSTS = {"latency": "latency_s", "dependency": "dependency"}
"""Budget kind -> the results.jsonl field it limits."""


def condition_order(name: str) -> tuple[int, int, int, str]:
    """Sort key of a condition label: the paper's six in order (tagged variants after their base), then the others
    by their condition, fewer ``+`` parts first (``task+text+library``, its tagged variants, then
    ``task+text+library+memory``)."""
    names = list(CONDITIONS)
    base = name.split("[", 1)[0]
    if base in names:
        return (names.index(base), 0, 0, name)
    condition = max((c for c in names if base.startswith(c + "+")), key=len, default=None)
    return (len(names), names.index(condition) if condition is not None else len(names), base.count("+"), name)


def baseline_of(condition: str) -> str | None:
    """The no-memory condition of the same agent (``subtask+code`` -> ``subtask``); None for a baseline."""
    level, _, fmt = condition.partition("+")
    return level if fmt else None


def metric_of(run: RunLog, metric: str) -> str:
    """The metric a run is scored by: ``metric``, or its env's official score when ``metric`` is ``official``."""
    return official_metric(run.log.config.env.name) if metric == OFFICIAL else metric


def value_of(record: TaskRecord, metric: str) -> float:
    """A record's ``success`` (0/1) or ``reward`` (in [0, 1]); ``metric`` is already resolved (`metric_of`)."""
    return float(record.success) if metric == "success" else float(record.reward)


def per_task(runs: Iterable[RunLog], metric: str) -> dict[str, float]:
    """Task id -> the metric (resolved per run, `metric_of`) averaged over the runs that finished the task (order
    seeds, repeats)."""
    values: dict[str, list[float]] = {}
    for run in runs:
        resolved = metric_of(run, metric)
        for record in run.records:
            values.setdefault(record.task_id, []).append(value_of(record, resolved))
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


def _add_averages(values: dict[Key, dict[str, float]], n_runs: dict[Key, int],
                  strata: dict[Key, dict[str, dict[str, float]]]) -> None:
    """Add the averaged rows: per env over its models (when it has several), then over all envs (when several):
    the macro Average (`ALL_ENVS`, its per-env values in ``strata``) and the task-pooled mean (`POOLED`)."""
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
        by_env: dict[str, dict[str, float]] = {}
        total = 0
        for env in envs:
            models = sorted({k[1] for k in values if k[0] == env and k[1] != AVERAGE})
            key = (env, AVERAGE if len(models) > 1 else models[0], condition)
            if key in values:
                by_env[env] = values[key]
                total += n_runs[key]
        pooled = {f"{env}\x00{task}": value for env, env_values in by_env.items() for task, value in env_values.items()}
        for name in (ALL_ENVS, POOLED):
            values[(name, AVERAGE, condition)] = pooled
            n_runs[(name, AVERAGE, condition)] = total
        strata[(ALL_ENVS, AVERAGE, condition)] = by_env


def _delta(values: dict[str, float], base: dict[str, float], seed: int) -> dict[str, Any]:
    """The change vs the baseline in points: paired over the condition's tasks when the baseline has them all."""
    out: dict[str, Any] = {"delta_pts": 100 * (float(np.mean(list(values.values())))
                                               - float(np.mean(list(base.values()))))}
    if set(values) <= set(base):
        diffs = [values[t] - base[t] for t in sorted(values)]
        d_mean, d_low, d_high = bootstrap_ci(diffs, seed=seed)
        out.update(delta_pts=100 * d_mean, delta_ci_low=100 * d_low, delta_ci_high=100 * d_high,
                   delta_tasks=len(diffs))
    return out


def _macro_delta(by_env: dict[str, dict[str, float]], base: dict[str, dict[str, float]], seed: int) -> dict[str, Any]:
    """The macro Average's change vs the baseline: the mean over envs of each env's change, paired (stratified
    task bootstrap) when every env's tasks are among its baseline's."""
    shared = [env for env in by_env if env in base]
    if not shared:
        return {}
    deltas = [_delta(by_env[env], base[env], seed) for env in shared]
    out: dict[str, Any] = {"delta_pts": float(np.mean([d["delta_pts"] for d in deltas]))}
    if all("delta_tasks" in d for d in deltas):
        diffs = [[by_env[env][t] - base[env][t] for t in sorted(by_env[env])] for env in shared]
        d_mean, d_low, d_high = stratified_bootstrap_ci(diffs, seed=seed)
        out.update(delta_pts=100 * d_mean, delta_ci_low=100 * d_low, delta_ci_high=100 * d_high,
                   delta_tasks=sum(len(d) for d in diffs))
    return out


def _metric_labels(runs: list[RunLog], metric: str) -> dict[str, str]:
    """Env -> the metric its rows report (`metric_of` of its runs); the all-envs rows name every env's."""
    by_env: dict[str, set[str]] = {}
    for run in runs:
        by_env.setdefault(run.env, set()).add(metric_of(run, metric))
    labels = {env: "/".join(sorted(names)) for env, names in by_env.items()}
    mixed = "/".join(sorted({name for names in by_env.values() for name in names}))
    return labels | {ALL_ENVS: mixed, POOLED: mixed}


def _metric_note(metric: str) -> str:
    if metric == OFFICIAL:
        return ("the metric column names each row's score: each env's official benchmark score (success; datasci: "
                "KramaBench's mean partial score, the reward)")
    return f"{metric} for every env (--metric {metric})"


def table2(runs: list[RunLog], metric: str = OFFICIAL, seed: int = 0) -> Table:
    """Score (%) per env x model x condition with 95 % task-bootstrap CIs, and the change vs the baseline.

    Each env reports ``metric`` (by default its benchmark's official score: success, or KramaBench's mean partial
    score for datasci), named in the ``metric`` column. Each task's value is averaged over the group's runs first;
    the CI resamples tasks. ``delta_pts`` is the difference of the two means in points; its CI is a paired task
    bootstrap of the per-task differences, given when the condition's tasks are all among its baseline's (then both
    means are over the condition's tasks, e.g. an evolution stream's test split; ``delta_tasks`` counts them).
    With several envs, the `ALL_ENVS` row is the paper's Average, the plain mean of the env averages, with a
    stratified task-bootstrap CI (tasks resampled within each env); the `POOLED` row pools all tasks.
    """
    values: dict[tuple[str, str, str], dict[str, float]] = {k: per_task(v, metric) for k, v in groups(runs).items()}
    n_runs = {k: len(v) for k, v in groups(runs).items()}
    strata: dict[Key, dict[str, dict[str, float]]] = {}
    _add_averages(values, n_runs, strata)
    labels = _metric_labels(runs, metric)
    title = "score" if metric == OFFICIAL else metric
    table = Table("table2_success", f"Table 2: task {title} (%) with 95 % task-bootstrap CIs",
                  ["env", "model", "condition", "metric", "n_runs", "n_tasks", "success_pct", "ci_low", "ci_high",
                   "baseline", "delta_pts", "delta_ci_low", "delta_ci_high", "delta_tasks"],
                  note=f"{_metric_note(metric)} per task, averaged over a group's runs; CIs resample tasks "
                       f"(10,000 resamples, seed {seed}). delta = condition minus its no-memory baseline (task+text "
                       "vs task, ...), in points; when the condition's tasks are all among the baseline's "
                       "(delta_tasks of them) it is paired over those tasks, with a paired task-bootstrap CI. "
                       f"'{AVERAGE}' rows average each task over the env's models; '{ALL_ENVS}' rows are the paper's "
                       "Average, the mean of the env averages (each env weighs the same; CI: stratified task "
                       f"bootstrap, tasks resampled within each env); '{POOLED}' rows pool the tasks of all envs "
                       "(weighted by task count).")
    ordered = sorted(values, key=lambda k: (k[0] in (ALL_ENVS, POOLED), k[0] == POOLED, natural_key(k[0]),
                                            k[1] == AVERAGE, natural_key(k[1]), condition_order(k[2])))
    for key in ordered:
        env, model, condition = key
        if key in strata:
            per_env = [list(env_values.values()) for env_values in strata[key].values()]
            mean, low, high = (100 * v for v in stratified_bootstrap_ci(per_env, seed=seed))
        else:
            mean, low, high = _ci_row(values[key], seed)
        row: dict[str, Any] = {"env": env, "model": model, "condition": condition, "metric": labels.get(env, metric),
                               "n_runs": n_runs[key], "n_tasks": len(values[key]), "success_pct": mean,
                               "ci_low": low, "ci_high": high, "baseline": None, "delta_pts": None,
                               "delta_ci_low": None, "delta_ci_high": None, "delta_tasks": None}
        base_name = baseline_of(condition)
        base_key = (env, model, base_name) if base_name else None
        if base_key is not None and base_key in strata and key in strata:
            row.update(_macro_delta(strata[key], strata[base_key], seed))
            row["baseline"] = base_name if row["delta_pts"] is not None else None
        elif base_key is not None and values.get(base_key):
            row.update(baseline=base_name, **_delta(values[key], values[base_key], seed))
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


def budget_curves(runs: list[RunLog], metric: str = OFFICIAL) -> Table:
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
                records = [(r, metric_of(run, metric)) for run in env_runs
                           if (run.model, run.condition) == (model, condition) for r in run.records]
                cost = np.array([float(getattr(r, field_name)) for r, _ in records])
                value = np.array([value_of(r, resolved) for r, resolved in records])
                for budget in grid:
                    share = float(np.sum(value * (cost <= budget)) / len(records))
                    table.rows.append({"env": env, "kind": kind, "model": model, "condition": condition,
                                       "budget": float(budget), "n_tasks": len(records),
                                       "success_within_pct": 100 * share})
    return table


def by_difficulty(runs: list[RunLog], metric: str = OFFICIAL, seed: int = 0) -> Table:
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
