"""Pairwise preference from blinded A/B judgments (MetaSkill, seed 003, Tables 1-3), with a task-bootstrap CI and
the judge's position bias.

A judgment is the outcome for run A on one task in one presentation order: "win", "tie" or "loss" (B's outcome is the
mirror). W/T/L count judgments. Each task's score is the mean of its judgments (win 1, tie 0.5, loss 0);
**preference** is the mean task score, which equals (W + T/2)/n when every task has the same number of judgments
(the usual case: one per order), and its 95 % CI resamples tasks (`bootstrap_ci`), so both orders of a task stay
together. **Position bias**: of the decisive judgments (not ties), the share that chose the response shown first
(0.5 = none); **order consistency**: of the tasks judged in both orders, the share whose two unblinded outcomes
agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from skilltransfer.metrics.stats import bootstrap_ci

OUTCOME_SCORE: dict[str, float] = {"win": 1.0, "tie": 0.5, "loss": 0.0}


@dataclass(frozen=True)
class PairwisePreference:
    """W/T/L over judgments and the preference for A with its task-bootstrap CI."""

    wins: int
    ties: int
    losses: int
    n_judgments: int
    n_tasks: int
    preference: float
    ci_low: float
    ci_high: float
    level: float = 0.95

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pairwise_preference(outcomes: Mapping[str, Sequence[str]], *, level: float = 0.95, n_resamples: int = 10000,
                        seed: int = 0) -> PairwisePreference:
    """Aggregate per-task outcomes for A (see the module docstring).

    Args:
        outcomes: task id -> A's outcomes on it ("win", "tie", "loss"); tasks without outcomes are left out.
        level, n_resamples, seed: of the task bootstrap.

    Raises:
        ValueError: an unknown outcome, or no task with an outcome.
    """
    scores, counts = [], {"win": 0, "tie": 0, "loss": 0}
    for task_id, task_outcomes in outcomes.items():
        if not task_outcomes:
            continue
        for outcome in task_outcomes:
            if outcome not in OUTCOME_SCORE:
                raise ValueError(f"task {task_id}: unknown outcome {outcome!r} (win, tie or loss)")
            counts[outcome] += 1
        scores.append(sum(OUTCOME_SCORE[o] for o in task_outcomes) / len(task_outcomes))
    if not scores:
        raise ValueError("no judged task: nothing to aggregate")
    mean, low, high = bootstrap_ci(scores, level=level, n_resamples=n_resamples, seed=seed)
    return PairwisePreference(counts["win"], counts["tie"], counts["loss"], sum(counts.values()), len(scores),
                              mean, low, high, level)


@dataclass(frozen=True)
class PositionBias:
    """How the judge's choices depend on the presentation order."""

    decisive: int
    """Judgments that were not ties."""
    first_chosen: int
    """Of those, how many chose the response shown first."""
    both_orders: int
    """Tasks with a judgment in each order."""
    consistent: int
    """Of those, how many got the same unblinded outcome in both orders."""

    @property
    def first_share(self) -> float | None:
        return self.first_chosen / self.decisive if self.decisive else None

    @property
    def consistency(self) -> float | None:
        return self.consistent / self.both_orders if self.both_orders else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "first_share": self.first_share, "consistency": self.consistency}


def position_bias(judgments: Mapping[str, Sequence[tuple[str, str]]]) -> PositionBias:
    """Position bias and order consistency.

    Args:
        judgments: task id -> (order, A's outcome) per judgment; order "AB" showed A first, "BA" showed B first.
    """
    decisive = first = both = consistent = 0
    for task_judgments in judgments.values():
        for order, outcome in task_judgments:
            if outcome == "tie":
                continue
            decisive += 1
            first += (outcome == "win") == (order == "AB")
        by_order = {order: outcome for order, outcome in task_judgments}
        if {"AB", "BA"} <= set(by_order):
            both += 1
            consistent += by_order["AB"] == by_order["BA"]
    return PositionBias(decisive, first, both, consistent)
