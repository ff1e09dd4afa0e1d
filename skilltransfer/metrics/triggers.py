"""Trigger evals (skill-creator's format; docs/selection.md): per skill, how often the agent loads it for requests that
should trigger it and for near misses that should not.

Each query of a skill's eval set is asked several times (repeats); an observation is one ask: whether the agent
triggered the skill (loaded it or read one of its files). Over a skill's observations, **precision** = triggered asks
of should-trigger queries / triggered asks; **recall** = triggered asks of should-trigger queries / asks of
should-trigger queries; **F1** their harmonic mean. Each query's **trigger rate** is its share of triggered asks, and a
query **passes** when its rate is at least 0.5 and it should trigger, or below 0.5 and it should not
(skill-creator's reading); **accuracy** = passing queries / queries. CIs: 95 % percentile bootstrap over the queries
(a query's asks stay together), 2,000 resamples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000


@dataclass(frozen=True)
class Ask:
    """One ask of one query."""

    query: int
    """The query's index in its skill's eval set."""
    should_trigger: bool
    triggered: bool


@dataclass(frozen=True)
class QueryRate:
    """One query's asks."""

    query: int
    should_trigger: bool
    asks: int
    triggered: int

    @property
    def rate(self) -> float:
        return self.triggered / self.asks if self.asks else float("nan")

    @property
    def passed(self) -> bool:
        return (self.rate >= 0.5) == self.should_trigger


@dataclass(frozen=True)
class TriggerScore:
    """A skill's trigger figures in one setting: (value, low, high) each, None where undefined."""

    asks: int
    queries: list[QueryRate]
    precision: tuple[float, float, float] | None
    recall: tuple[float, float, float] | None
    f1: tuple[float, float, float] | None
    accuracy: tuple[float, float, float] | None


def _figures(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tp / (tp + fp)
        recall = tp / (tp + fn)
        f1 = 2 * tp / (2 * tp + fp + fn)
    return precision, recall, f1


def _interval(value: float, draws: np.ndarray) -> tuple[float, float, float] | None:
    if not np.isfinite(value):
        return None
    finite = draws[np.isfinite(draws)]
    if not len(finite):
        return (float(value), float(value), float(value))
    low, high = np.quantile(finite, [0.025, 0.975])
    return float(value), float(low), float(high)


def trigger_score(asks: Sequence[Ask], *, seed: int = 0, resamples: int = RESAMPLES) -> TriggerScore:
    """A skill's figures from its asks (module docstring)."""
    by_query: dict[int, list[Ask]] = {}
    for ask in asks:
        by_query.setdefault(ask.query, []).append(ask)
    queries = [QueryRate(q, items[0].should_trigger, len(items), sum(a.triggered for a in items))
               for q, items in sorted(by_query.items())]
    if not queries:
        return TriggerScore(0, [], None, None, None, None)
    should = np.array([q.should_trigger for q in queries], dtype=float)
    hits = np.array([q.triggered for q in queries], dtype=float)
    total = np.array([q.asks for q in queries], dtype=float)
    passed = np.array([q.passed for q in queries], dtype=float)
    per_query = np.stack([should * hits, (1 - should) * hits, should * (total - hits)])  # tp, fp, fn per query
    point = _figures(*per_query.sum(axis=1))
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(queries), np.full(len(queries), 1.0 / len(queries)), size=resamples)
    sums = counts @ per_query.T  # (resamples, 3)
    draws = _figures(sums[:, 0], sums[:, 1], sums[:, 2])
    accuracy_draws = counts @ passed / len(queries)
    precision, recall, f1 = (_interval(float(p), d) for p, d in zip(point, draws, strict=True))
    return TriggerScore(int(total.sum()), queries, precision, recall, f1,
                        _interval(float(passed.mean()), accuracy_draws))
