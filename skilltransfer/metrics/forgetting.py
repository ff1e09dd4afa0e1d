"""Backward transfer, forward transfer and forgetting of a skill library (issue 39 §3, docs/forgetting.md).

The matrix ``R[k][j]``: the outcome of probe task ``j`` run against the frozen library of snapshot ``k`` (the
library after the first ``k`` tasks of the source stream; 0: empty; no induction while probing). A probe task is
*seen* when the source stream ran it (at position ``p``: skills induced from it exist from snapshot ``p + 1``),
else *held out*. With ``S`` the evaluated snapshots and ``F = max(S)``, adapted from Lopez-Paz & Ranzato (2017) and
Chaudhry et al. (2018), per seen task ``j``:

- learned snapshot ``a = min{k in S : k >= p + 1}``; before snapshot ``b = max{k in S : k <= p}``;
- backward transfer ``R[F][j] - R[a][j]`` (when ``a < F``);
- forgetting ``max{R[k][j] : k in S, a <= k < F} - R[F][j]`` (when ``a < F``);
- forward transfer ``R[b][j] - R[0][j]`` (when ``0 in S`` and ``b > 0``: the library before the task helps it);

and per held-out task, held-out transfer ``R[F][j] - R[0][j]`` (when ``0 in S``). Each measure is the mean over its
tasks with a 95 % percentile bootstrap CI over tasks (`bootstrap_ci`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from skilltransfer.metrics.stats import bootstrap_ci

MEASURES = ("bwt", "fwt", "forgetting", "held_out_transfer")


@dataclass(frozen=True)
class Measure:
    """One measure: its per-task values, mean and task-bootstrap CI (None without tasks)."""

    name: str
    values: dict[str, float]
    mean: float | None
    low: float | None
    high: float | None


def per_task_measures(matrix: Mapping[int, Mapping[str, float]],
                      seen_at: Mapping[str, int]) -> dict[str, dict[str, float]]:
    """Measure -> task id -> its value (see the module docstring).

    Args:
        matrix: snapshot -> task id -> outcome in [0, 1].
        seen_at: task id -> its position in the source stream (absent: held out).
    """
    snapshots = sorted(matrix)
    out: dict[str, dict[str, float]] = {name: {} for name in MEASURES}
    if not snapshots:
        return out
    final = snapshots[-1]
    tasks = sorted({task for row in matrix.values() for task in row})
    for task in tasks:
        have = [k for k in snapshots if task in matrix[k]]
        if final not in have:
            continue
        r = {k: matrix[k][task] for k in have}
        position = seen_at.get(task)
        if position is None:
            if 0 in r:
                out["held_out_transfer"][task] = r[final] - r[0]
            continue
        learned = [k for k in have if k >= position + 1]
        if learned and learned[0] < final:
            a = learned[0]
            out["bwt"][task] = r[final] - r[a]
            out["forgetting"][task] = max(r[k] for k in have if a <= k < final) - r[final]
        before = [k for k in have if k <= position]
        if 0 in r and before and before[-1] > 0:
            out["fwt"][task] = r[before[-1]] - r[0]
    return out


def forgetting_measures(matrix: Mapping[int, Mapping[str, float]], seen_at: Mapping[str, int], *,
                        seed: int = 0, n_resamples: int = 10000) -> list[Measure]:
    """Each measure of `MEASURES` with its task-bootstrap CI."""
    out = []
    for name, values in per_task_measures(matrix, seen_at).items():
        if values:
            mean, low, high = bootstrap_ci(list(values.values()), seed=seed, n_resamples=n_resamples)
            out.append(Measure(name, values, mean, low, high))
        else:
            out.append(Measure(name, values, None, None, None))
    return out
