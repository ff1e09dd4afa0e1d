"""The validation statistics (skilltransfer.metrics.validation) on planted outcomes: a diagnostic built to correlate
at a known rho is recovered within its interval, and its absence too."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from skilltransfer.metrics.validation import (
    Units,
    best,
    correlations_of,
    kendall,
    kendall_paired_rows,
    spearman,
    spearman_paired_rows,
    validate,
    within_groups,
)


def planted(n: int, rho: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(diagnostic, outcome) drawn from a bivariate normal whose population Spearman rho is ``rho``
    (Pearson r = 2 sin(pi rho / 6))."""
    r = 2 * math.sin(math.pi * rho / 6)
    x = rng.standard_normal(n)
    y = r * x + math.sqrt(1 - r * r) * rng.standard_normal(n)
    return x, y


def test_rank_statistics_match_scipy_with_ties() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        x, y = rng.integers(0, 5, 15).astype(float), rng.integers(0, 4, 15).astype(float)
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        assert kendall(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    xs, ys = rng.standard_normal((7, 9)), rng.standard_normal((7, 9))
    pairs = list(zip(xs, ys, strict=True))
    assert np.allclose(spearman_paired_rows(xs, ys), [stats.spearmanr(a, b).statistic for a, b in pairs])
    assert np.allclose(kendall_paired_rows(xs, ys), [stats.kendalltau(a, b).statistic for a, b in pairs])
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(kendall([1, 2, 3], [4, 4, 4]))


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
def test_a_planted_rho_is_recovered_within_its_interval(rho: float) -> None:
    d, y = planted(300, rho, np.random.default_rng(11))
    (row,), _ = correlations_of(Units([f"u{i}" for i in range(300)], y), {"d": d}, resamples=1000)
    assert row.spearman_low is not None
    assert row.spearman_high is not None
    assert row.spearman_low <= rho <= row.spearman_high
    assert row.spearman_high - row.spearman_low < 0.3  # n = 300 pins it down
    tau = 2 / math.pi * math.asin(2 * math.sin(math.pi * rho / 6))  # the population tau of the same normal
    assert row.kendall_low is not None
    assert row.kendall_high is not None
    assert row.kendall_low <= tau <= row.kendall_high
    assert (row.spearman_low > 0) == (rho > 0)  # the absence of a relation is not found, its presence is


def test_intervals_cover_the_planted_rho_at_about_their_level() -> None:
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(60):
        d, y = planted(24, 0.5, rng)  # the benchmark's size: 24 libraries
        (row,), _ = correlations_of(Units([str(i) for i in range(24)], y), {"d": d}, resamples=400,
                                    seed=int(rng.integers(1 << 30)))
        hits += row.spearman_low is not None and row.spearman_low <= 0.5 <= (row.spearman_high or -2)
    assert hits >= 48  # 80 % of 60 at least (percentile intervals run a little short at n = 24)


def test_per_task_outcomes_resample_tasks_and_widen_the_interval() -> None:
    rng = np.random.default_rng(2)
    n, m = 40, 30
    skill, d = planted(n, 0.7, rng)
    p = 1 / (1 + np.exp(-skill))
    success = (rng.random((n, m)) < p[:, None]).astype(float)
    names = [f"lib{i}" for i in range(n)]
    per_task = Units(names, success.mean(axis=1), task_outcomes=success, task_ids=[f"t{j}" for j in range(m)])
    library_only = Units(names, success.mean(axis=1))
    (with_tasks,), _ = correlations_of(per_task, {"d": d}, resamples=600)
    (without,), _ = correlations_of(library_only, {"d": d}, resamples=600)
    assert with_tasks.spearman == without.spearman
    width = (with_tasks.spearman_high or 0) - (with_tasks.spearman_low or 0)
    assert width > (without.spearman_high or 0) - (without.spearman_low or 0)
    assert with_tasks.spearman_low is not None
    assert with_tasks.spearman_low > 0


def test_validate_chooses_on_the_tune_part_and_reports_pairs_and_groups() -> None:
    rng = np.random.default_rng(8)
    n = 60
    good, y = planted(n, 0.8, rng)
    noise = rng.standard_normal(n)
    family = ["a" if i % 2 == 0 else "b" for i in range(n)]
    report = validate(Units([str(i) for i in range(n)], y), {"noise": noise, "good": good},
                      {"noise": "model-free", "good": "model-free"},
                      parts={"tune": [i for i in range(n) if family[i] == "a"],
                             "held_out": [i for i in range(n) if family[i] == "b"]},
                      pairs_with=["noise"], groupings={"family": family}, resamples=500)
    assert report.best == "good"
    assert report.chosen_on == "tune"
    held = report.correlation("held_out", "good")
    assert held is not None
    assert held.n == 30
    assert held.spearman_low is not None
    assert held.spearman_low > 0
    (pair,) = report.paired
    assert (pair.first, pair.second) == ("good", "noise")
    assert pair.low is not None
    assert pair.low > 0
    good_group = next(g for g in report.groups if g.diagnostic == "good")
    assert set(good_group.groups) == {"a", "b"}
    assert good_group.low is not None
    assert good_group.low > 0
    assert best(report.correlations["all"], ["noise"]) is not None


def test_a_group_effect_alone_is_not_a_within_group_relation() -> None:
    rng = np.random.default_rng(4)
    labels = [f"g{i // 6}" for i in range(36)]
    level = np.array([int(label[1:]) for label in labels], dtype=float)
    y = level + 0.1 * rng.standard_normal(36)
    d = level + rng.standard_normal(36) * 0.01  # tracks the groups' levels, nothing within a group
    (overall,), _ = correlations_of(Units([str(i) for i in range(36)], y), {"d": d}, resamples=400)
    (within,) = within_groups(Units([str(i) for i in range(36)], y), {"d": d}, labels, "g", resamples=400)
    assert overall.spearman is not None
    assert overall.spearman > 0.9
    assert within.low is not None
    assert within.low < 0 < (within.high or 0)


def test_missing_numbers_say_why() -> None:
    units = Units(["a", "b", "c", "d", "e"], [1.0, 2.0, 3.0, 4.0, 5.0])
    rows, _ = correlations_of(units, {"flat": [1, 1, 1, 1, 1], "gap": [1, 2, float("nan"), 4, 5]}, resamples=200)
    assert rows[0].spearman is None
    assert "same for every unit" in rows[0].why
    assert rows[1].spearman is None
    assert "no value" in rows[1].why
    (few,), _ = correlations_of(Units(["a", "b", "c"], [1.0, 2.0, 3.0]), {"d": [3, 2, 1]}, resamples=200)
    assert few.spearman is None
    assert "needs 4" in few.why
