"""The ``capacity`` table (issue 39 §5, docs/capacity.md): growing-memory streams capped at ``memory.capacity`` under
each eviction policy, against the unbounded stream of the same env, model and condition, per stream-position bin:
the success rate and the actual-use precision (shown retrievals used over those whose use is measured,
``RetrievedSkill.used`` as in the ``skill_use`` table: a text skill followed with a share of at least 0.5, a code
skill whose function ran), with the bin's mean library size.

Runs are grouped by env, model and condition label without the memory settings' tags (``[memory.capacity=5]``,
``[memory.eviction=lru]``, which `label_differences` adds); a group is reported when one of its runs is capped. The
stream is cut into `CAPACITY_BINS` equal position bins (fewer for a short stream), the same for every policy of a
group, so the policies are compared at the same point of the stream; the unbounded run's library size in a bin is
the size a capped memory would have grown to. Success: the metric of the bin's (run, task) records, with a 95 %
bootstrap CI over them; use precision: a ratio of sums over the bin's tasks, with a task-bootstrap CI
(`ratio_bootstrap_ci`: a task's retrievals are resampled together).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from skilltransfer.metrics.stats import bootstrap_ci, equal_size_bins, ratio_bootstrap_ci
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import condition_order, metric_of, value_of
from skilltransfer.report.table import Table

CAPACITY_BINS = 5
"""Stream-position bins of the table (at most one per task)."""
UNBOUNDED = "unbounded"
POLICIES = ("fifo", "lru", "utility", "effect")
_MEMORY_TAGS = re.compile(r"\[memory\.(?:capacity|eviction)=[^\]]*\]")
NOTE = ("growing-memory streams capped at `capacity` skills, evicting by `policy` after each task, and the unbounded "
        "stream of the same env, model and condition; per stream-position bin (the same bins for every policy): "
        "library_size = mean skills in memory after the task; success with a 95 % bootstrap CI over the bin's "
        "tasks; use precision = shown retrievals used over those whose use is measured (text: following share >= 0.5; "
        "code: the function ran; docs/skill-use.md), with a task-bootstrap CI (docs/capacity.md).")


def has_capacity(runs: list[RunLog]) -> bool:
    """Whether some run's memory is capped (``memory.capacity``)."""
    return any(run.log.config.memory.capacity is not None for run in runs)


def setting_of(run: RunLog) -> tuple[str, int | None]:
    """(policy, capacity) of a run: ``unbounded`` and None when its memory is not capped."""
    memory = run.log.config.memory
    return (memory.eviction, memory.capacity) if memory.capacity is not None else (UNBOUNDED, None)


def _setting_order(setting: tuple[str, int | None]) -> tuple[int, int, int, str]:
    policy, capacity = setting
    rank = POLICIES.index(policy) if policy in POLICIES else len(POLICIES)
    return (capacity is None, capacity or 0, rank, policy)


def _groups(runs: list[RunLog]) -> dict[tuple[str, str, str], list[RunLog]]:
    """(env, model, condition without the memory tags) -> its growing-memory runs, for groups with a capped run."""
    out: dict[tuple[str, str, str], list[RunLog]] = {}
    for run in runs:
        if run.log.config.induction_config() is not None:  # a memory that grows (a frozen library is never capped)
            out.setdefault((run.env, run.model, _MEMORY_TAGS.sub("", run.condition)), []).append(run)
    kept = {key: members for key, members in out.items() if has_capacity(members)}
    return dict(sorted(kept.items(), key=lambda kv: (kv[0][0], kv[0][1], condition_order(kv[0][2]))))


def _use_counts(record: Any) -> tuple[int, int]:
    """(used, measured) of a record's retrievals (`RetrievedSkill.used`, as the ``skill_use`` table counts them)."""
    measured = [hit.used for hit in record.retrieved if hit.used is not None]
    return sum(measured), len(measured)


def capacity_table(runs: list[RunLog], metric: str, seed: int) -> Table:
    """One row per env x model x condition x (policy, capacity) x stream-position bin (module docstring)."""
    table = Table("capacity", "Growth under a budget: success and use precision by eviction policy and capacity",
                  ["env", "model", "condition", "policy", "capacity", "bin", "positions", "runs", "tasks",
                   "library_size", "success_pct", "ci_low", "ci_high", "retrieved", "use_precision_pct",
                   "use_ci_low", "use_ci_high"], note=NOTE)
    for (env, model, condition), members in _groups(runs).items():
        length = max(record.position for run in members for record in run.records) + 1
        bins = equal_size_bins(length, min(CAPACITY_BINS, length))
        by_setting: dict[tuple[str, int | None], list[RunLog]] = {}
        for run in members:
            by_setting.setdefault(setting_of(run), []).append(run)
        for setting in sorted(by_setting, key=_setting_order):
            group = by_setting[setting]
            for number, positions in enumerate(bins, start=1):
                inside = set(positions.tolist())
                records = [(record, metric_of(run, metric)) for run in group for record in run.records
                           if record.position in inside]
                if not records:
                    continue
                success = bootstrap_ci([value_of(record, resolved) for record, resolved in records], seed=seed)
                counts = [c for c in (_use_counts(record) for record, _ in records) if c[1] > 0]
                use = ratio_bootstrap_ci([c[0] for c in counts], [c[1] for c in counts], seed=seed) if counts \
                    else (None, None, None)
                table.rows.append({
                    "env": env, "model": model, "condition": condition, "policy": setting[0],
                    "capacity": setting[1], "bin": number, "positions": f"{positions[0] + 1}-{positions[-1] + 1}",
                    "runs": len(group), "tasks": len(records),
                    "library_size": float(np.mean([record.memory_size for record, _ in records])),
                    "success_pct": 100 * success[0], "ci_low": 100 * success[1], "ci_high": 100 * success[2],
                    "retrieved": sum(c[1] for c in counts),
                    **{key: None if value is None else 100 * value
                       for key, value in zip(("use_precision_pct", "use_ci_low", "use_ci_high"), use, strict=True)}})
    return table
