"""Skill-utility metrics and analysis statistics against hand-computed values on tiny cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skilltransfer.metrics import (
    abstractness,
    best_match,
    binned_spearman,
    bootstrap_ci,
    equal_size_bins,
    specificity,
    task_reference,
    transfer_density,
    utility,
    utility_scores,
)
from skilltransfer.metrics.utility import OFF_DOMAIN_QUANTILE, _sample_pairs, _sampled_pair_cosines, _unit_rows, knn_k

R2 = 1 / math.sqrt(2)
# Three tasks: t1 and t2 orthogonal, t3 halfway between. Pair cosines: (1,2)=0, (1,3)=(2,3)=1/sqrt(2).
TASKS3 = np.array([[1, 0, 0], [0, 1, 0], [R2, R2, 0]])


def perplexity_over_n(cosines: list[float], tau: float) -> float:
    """Direct (non-streaming, float64) exp(H(softmax(c / tau))) / N, for checking the implementation."""
    weights = [math.exp(c / tau) for c in cosines]
    total = sum(weights)
    probs = [w / total for w in weights]
    entropy = -sum(p * math.log(p) for p in probs if p > 0)
    return math.exp(entropy) / len(cosines)


def test_two_tasks_hand_values() -> None:
    tasks = np.array([[1.0, 0.0], [0.0, 1.0]])  # one pair, cosine 0
    skills = np.array([[1.0, 0.0], [-1.0, 0.0], [-R2, -R2]])
    scores = utility_scores(skills, tasks)
    # skill 0 = task 0: best match 1 >= 0; skill 1: best match 0 ties the pair cosine (ties count); skill 2: -0.707 < 0
    np.testing.assert_allclose(scores.best_match, [1.0, 0.0, -R2], atol=1e-6)
    np.testing.assert_array_equal(scores.specificity, [1.0, 1.0, 0.0])
    # c = (1, 0), tau = 0.1: p = (1, e^-10) / (1 + e^-10); exp(H) / 2 = 0.5002497...
    assert scores.abstractness[0] == pytest.approx(0.50024975, abs=1e-7)
    assert scores.abstractness[0] == pytest.approx(perplexity_over_n([1.0, 0.0], 0.1), rel=1e-6)
    assert scores.abstractness[2] == pytest.approx(1.0, abs=1e-9)  # equal similarity to both tasks
    np.testing.assert_allclose(scores.utility, scores.specificity * scores.abstractness)
    assert scores.n_reference == 1
    assert not scores.sampled
    assert scores.tau == 0.1


def test_all_equal_similarities_give_abstractness_one() -> None:
    tasks = np.eye(6)[:5]  # five orthogonal tasks; the skill e6 is orthogonal to all of them
    skill = np.eye(6)[5:]
    for tau in (0.01, 0.1, 1.0):
        assert abstractness(skill, tasks, tau=tau)[0] == pytest.approx(1.0, abs=1e-9)


def test_skill_identical_to_a_task() -> None:
    scores = utility_scores(TASKS3[2:], TASKS3)
    assert scores.best_match[0] == pytest.approx(1.0, abs=1e-6)
    assert scores.specificity[0] == 1.0
    expected = perplexity_over_n([R2, R2, 1.0], 0.1)
    assert scores.abstractness[0] == pytest.approx(expected, rel=1e-6)
    assert scores.utility[0] == pytest.approx(expected, rel=1e-6)
    assert utility_scores(TASKS3[2:], TASKS3, specificity_mode="nearest").specificity[0] == 1.0


def test_off_domain_skill_under_both_modes() -> None:
    off_domain = np.array([[0.0, 0.0, 1.0]])  # cosine 0 with every task
    pairs = utility_scores(off_domain, TASKS3)
    # pairs: 1 of the 3 pair cosines (0, .707, .707) is <= 0; relevance is flat, so abstractness is 1
    assert pairs.specificity[0] == pytest.approx(1 / 3)
    assert pairs.abstractness[0] == pytest.approx(1.0, abs=1e-9)
    assert pairs.utility[0] == pytest.approx(1 / 3)
    # nearest: every task's nearest other task is at .707 > 0, so the irrelevant skill beats none of them
    nearest = utility_scores(off_domain, TASKS3, specificity_mode="nearest")
    assert nearest.specificity[0] == 0.0
    assert nearest.utility[0] == 0.0


def test_nearest_mode_hand_values() -> None:
    # nearest-other cosines are .707 for all three tasks; a skill at .8 of t1 beats all, at .5 beats none
    skills = np.array([[0.8, 0.0, 0.6], [0.5, 0.0, math.sqrt(0.75)]])
    spec = specificity(skills, TASKS3, specificity_mode="nearest")
    np.testing.assert_array_equal(spec, [1.0, 0.0])
    # pairs: .8 covers all three pair cosines; .5 covers only the 0 one
    np.testing.assert_allclose(specificity(skills, TASKS3), [1.0, 1 / 3])


def test_knn_k() -> None:
    assert [knn_k(n) for n in (2, 3, 4, 10, 300, 10_000)] == [1, 2, 2, 4, 18, 100]


def test_knn_mode_hand_values() -> None:
    # four tasks: e1, e2, e3 and t4 = (e1 + e2)/sqrt 2; N = 4 -> k = 2. Other-task cosines, best first:
    # t1 (.707, 0, 0), t2 (.707, 0, 0), t3 (0, 0, 0), t4 (.707, .707, 0): 2nd nearest = 0, 0, 0, .707
    tasks = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [R2, R2, 0, 0]])
    reference = task_reference(tasks, mode="knn")
    assert reference.k == 2
    np.testing.assert_allclose(reference.values, [0, 0, 0, R2], atol=1e-6)
    skills = np.array([[0.6, 0, 0, 0.8], [0.8, 0, 0, 0.6], [0, 0, 0, 1], [-1, 0, 0, 0]])  # best .6, .8, 0, 0
    scores = utility_scores(skills, tasks, specificity_mode="knn")
    np.testing.assert_allclose(scores.specificity, [0.75, 1.0, 0.75, 0.75])
    assert scores.knn_k == 2
    # nearest (k = 1) reference .707, .707, 0, .707: only the .8 skill beats the three near tasks
    np.testing.assert_allclose(specificity(skills, tasks, specificity_mode="nearest"), [0.25, 1.0, 0.25, 0.25])


def test_knn_reference_matches_brute_force() -> None:
    rng = np.random.default_rng(6)
    tasks = _unit_rows(rng.normal(size=(37, 5)), "tasks")
    gram = tasks.astype(np.float64) @ tasks.T.astype(np.float64)
    np.fill_diagonal(gram, -np.inf)
    kth = -np.sort(-gram, axis=1)[:, knn_k(37) - 1]
    for block_elems in (37, 100, 1 << 20):
        np.testing.assert_allclose(task_reference(tasks, mode="knn", block_elems=block_elems).values, np.sort(kth),
                                   atol=1e-6)


def _clustered(rng: np.random.Generator, n_clusters: int, per: int, dim: int, noise: float) -> np.ndarray:
    centres = np.eye(dim)[:n_clusters]
    return np.repeat(centres, per, axis=0) + noise * rng.normal(size=(n_clusters * per, dim))


def test_off_domain_skill_near_zero_and_flagged_in_every_mode() -> None:
    rng = np.random.default_rng(7)
    tasks = _clustered(rng, 4, 25, 16, 0.15)  # four topics of 25 near-duplicate tasks
    in_domain = _clustered(rng, 4, 3, 16, 0.15)  # three skills about each topic
    off_domain = np.eye(16)[10:13] + 0.05 * rng.normal(size=(3, 16))  # directions no task uses
    skills = np.vstack([in_domain, off_domain])
    for mode in ("pairs", "nearest", "knn"):
        scores = utility_scores(skills, tasks, specificity_mode=mode)
        np.testing.assert_array_equal(scores.off_domain, [False] * 12 + [True] * 3)
    pairs = utility_scores(skills, tasks)
    assert pairs.utility[12:].max() > pairs.utility[:12].max()  # pairs is fooled: the topics are mutually dissimilar
    knn = utility_scores(skills, tasks, specificity_mode="knn")
    assert knn.utility[12:].max() < 0.05
    assert knn.utility[:12].min() > 0.05
    assert len(set(knn.utility[:12].tolist())) == 12  # no ties among the in-domain skills


def test_off_domain_flag_is_knn_specificity_below_the_quantile() -> None:
    rng = np.random.default_rng(8)
    tasks = _clustered(rng, 5, 20, 12, 0.2)
    skills = rng.normal(size=(400, 12))
    knn = utility_scores(skills, tasks, specificity_mode="knn")
    np.testing.assert_array_equal(knn.off_domain, knn.specificity < OFF_DOMAIN_QUANTILE)
    assert 0 < knn.off_domain.sum() < 400
    reference = task_reference(tasks, mode="knn")
    assert knn.off_domain_threshold == reference.quantile_floor(OFF_DOMAIN_QUANTILE) == reference.values[4]
    pairs = utility_scores(skills, tasks, domain_reference=reference)
    np.testing.assert_array_equal(pairs.off_domain, knn.off_domain)
    with pytest.raises(ValueError, match="domain_reference"):
        utility_scores(skills, tasks, domain_reference=task_reference(tasks))


def test_small_tau_is_stable() -> None:
    rng = np.random.default_rng(3)
    tasks = rng.normal(size=(40, 8))
    skills = rng.normal(size=(5, 8))
    values = abstractness(skills, tasks, tau=1e-4)
    assert np.all(np.isfinite(values))
    # with a unique maximum the softmax is one-hot: perplexity 1, so abstractness 1/N
    np.testing.assert_allclose(values, 1 / 40, rtol=1e-6)
    two_maxima = abstractness(np.array([[R2, R2, 0.0]]), np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]), tau=1e-4)
    assert two_maxima[0] == pytest.approx(2 / 3, rel=1e-5)


def test_blockwise_equals_unblocked() -> None:
    rng = np.random.default_rng(0)
    tasks = rng.normal(size=(57, 12))
    skills = rng.normal(size=(23, 12))
    whole = utility_scores(skills, tasks)
    for skill_block, task_block in ((1, 1), (4, 7), (23, 57), (5, 100)):
        tiled = utility_scores(skills, tasks, skill_block=skill_block, task_block=task_block)
        np.testing.assert_allclose(tiled.abstractness, whole.abstractness, rtol=1e-6)
        np.testing.assert_allclose(tiled.best_match, whole.best_match, atol=1e-6)  # BLAS tiling rounds differently
        np.testing.assert_array_equal(tiled.specificity, whole.specificity)
    small = task_reference(tasks, block_elems=60)  # one task row per Gram block
    np.testing.assert_allclose(small.values, task_reference(tasks).values, atol=1e-6)


def test_reference_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    tasks = _unit_rows(rng.normal(size=(30, 6)), "tasks")
    gram = tasks.astype(np.float64) @ tasks.T.astype(np.float64)
    i, k = np.triu_indices(30, k=1)
    np.testing.assert_allclose(task_reference(tasks, block_elems=100).values, np.sort(gram[i, k]), atol=1e-6)
    np.fill_diagonal(gram, -np.inf)
    np.testing.assert_allclose(task_reference(tasks, mode="nearest", block_elems=100).values,
                               np.sort(gram.max(axis=1)), atol=1e-6)


def test_sampled_specificity_close_to_exact() -> None:
    rng = np.random.default_rng(2)
    tasks = rng.normal(size=(300, 16))  # 44,850 pairs
    skills = rng.normal(size=(40, 16))
    exact = utility_scores(skills, tasks)
    sampled = utility_scores(skills, tasks, max_pairs=20_000, seed=7)
    assert sampled.sampled
    assert not exact.sampled
    assert sampled.n_reference == 20_000
    assert np.abs(sampled.specificity - exact.specificity).max() < 0.02
    again = utility_scores(skills, tasks, max_pairs=20_000, seed=7)
    np.testing.assert_array_equal(again.specificity, sampled.specificity)


def test_pair_sampling_is_uniform_and_methods_agree() -> None:
    lo, hi = _sample_pairs(5, 100_000, seed=0)
    assert np.all(lo < hi)
    counts = np.bincount(lo * 5 + hi, minlength=25)[[a * 5 + b for a in range(5) for b in range(a + 1, 5)]]
    assert counts.sum() == 100_000
    assert np.abs(counts / 100_000 - 0.1).max() < 0.01  # 10 unordered pairs, each ~10%
    tasks = _unit_rows(np.random.default_rng(4).normal(size=(50, 8)), "tasks")
    lo, hi = _sample_pairs(50, 3000, seed=1)
    gram = _sampled_pair_cosines(tasks, lo, hi, block=7, method="gram")
    gather = _sampled_pair_cosines(tasks, lo, hi, block=7, method="gather")
    np.testing.assert_allclose(gram, gather, atol=1e-6)
    np.testing.assert_allclose(gram, np.einsum("ij,ij->i", tasks[lo], tasks[hi]), atol=1e-6)


def test_public_helpers_agree() -> None:
    rng = np.random.default_rng(5)
    tasks, skills = rng.normal(size=(20, 4)), rng.normal(size=(6, 4))
    scores = utility_scores(skills, tasks, tau=0.2, specificity_mode="nearest")
    np.testing.assert_array_equal(utility(skills, tasks, tau=0.2, specificity_mode="nearest"), scores.utility)
    np.testing.assert_array_equal(best_match(skills, tasks), scores.best_match)
    assert scores.tau == 0.2
    assert scores.specificity_mode == "nearest"


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="at least 2 tasks"):
        utility_scores(np.ones((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="tau"):
        utility_scores(np.ones((1, 2)), np.eye(2), tau=0)
    with pytest.raises(ValueError, match="dim"):
        utility_scores(np.ones((1, 3)), np.eye(2))
    with pytest.raises(ValueError, match="all-zero"):
        utility_scores(np.zeros((1, 2)), np.eye(2))
    with pytest.raises(ValueError, match="mode"):
        utility_scores(np.ones((1, 2)), np.eye(2), specificity_mode="median")


def test_bootstrap_ci() -> None:
    values = np.random.default_rng(0).integers(0, 2, size=300)
    mean, low, high = bootstrap_ci(values, n_resamples=2000, seed=3)
    assert mean == pytest.approx(values.mean())
    assert low < mean < high
    assert (high - low) == pytest.approx(2 * 1.96 * math.sqrt(mean * (1 - mean) / 300), rel=0.15)
    assert bootstrap_ci(values, n_resamples=2000, seed=3) == (mean, low, high)
    assert bootstrap_ci(values, n_resamples=2000, seed=4) != (mean, low, high)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    narrow = bootstrap_ci(values, level=0.5, n_resamples=2000, seed=3)
    assert low < narrow[1] <= narrow[2] < high
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(values, level=1.5)


def test_binned_spearman() -> None:
    x = np.arange(100, dtype=float)[::-1]
    result = binned_spearman(x, x**2, n_bins=10)
    assert result.rho == pytest.approx(1.0)
    assert result.p_value < 1e-6
    assert [b.n for b in result.bins] == [10] * 10
    assert result.bins[0].x_mean == pytest.approx(4.5)  # bins run from the smallest x up
    assert result.bins[0].y_mean == pytest.approx(np.mean(np.arange(10) ** 2))
    assert binned_spearman(x, -x, n_bins=5).rho == pytest.approx(-1.0)
    uneven = binned_spearman(np.arange(25), np.arange(25), n_bins=10)
    assert [b.n for b in uneven.bins] == [3] * 5 + [2] * 5
    assert math.isnan(binned_spearman(x, np.ones(100)).rho)
    with pytest.raises(ValueError, match="at least"):
        binned_spearman([1, 2], [1, 2], n_bins=10)


def test_equal_size_binning_conventions() -> None:
    assert [len(b) for b in equal_size_bins(23, 10)] == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert [len(b) for b in equal_size_bins(23, 10, "spread")] == [3, 2, 2, 3, 2, 2, 3, 2, 2, 2]
    for binning in ("first", "spread"):
        parts = equal_size_bins(23, 10, binning)
        np.testing.assert_array_equal(np.concatenate(parts), np.arange(23))  # contiguous, in rank order
        assert [len(b) for b in equal_size_bins(30, 10, binning)] == [3] * 10  # a multiple: both agree
    # n = 23 points, 10 bins: y is 1 only at ranks 5, 6 and 10, which the two conventions bin differently
    x = np.arange(23.0)
    y = np.isin(x, [5, 6, 10]).astype(float)
    first, spread = binned_spearman(x, y, 10), binned_spearman(x, y, 10, "spread")
    assert [b.y_mean for b in first.bins][:5] == pytest.approx([0, 1 / 3, 1 / 3, 1 / 2, 0])
    assert [b.y_mean for b in spread.bins][:5] == pytest.approx([0, 0, 1, 0, 1 / 2])
    assert first.rho - spread.rho == pytest.approx(-0.2626, abs=1e-3)
    with pytest.raises(ValueError, match="binning"):
        equal_size_bins(23, 10, "last")


def test_transfer_density_hand_cases() -> None:
    # 10 items in 5 bins of 2: items 0-1 -> bin 0, 2-3 -> bin 1, ... ; 10 bin pairs i < j
    single = transfer_density([(0, 3)], n_items=10, bins=5)
    assert single.density == pytest.approx(1 / 10)
    assert single.counts[0, 1] == 1
    assert single.counts.sum() == 1
    repeated = transfer_density([(0, 3), (1, 2), (0, 9), (4, 5)], n_items=10, bins=5)
    assert repeated.counts[0, 1] == 2  # two transfers, one bin pair
    assert repeated.counts[2, 2] == 1  # (4, 5) is within bin 2: diagonal, not a pair
    assert repeated.n_within_bin == 1
    assert repeated.density == pytest.approx(2 / 10)  # pairs (0,1) and (0,4)
    within = transfer_density([(0, 1), (6, 7)], n_items=10, bins=5)
    assert within.density == 0.0
    assert within.n_within_bin == 2
    full = transfer_density([(a, b) for a in range(10) for b in range(a, 10)], n_items=10, bins=5)
    assert full.density == 1.0
    uneven = transfer_density([(2, 3), (4, 5)], n_items=7, bins=3)  # bins: {0,1,2}, {3,4}, {5,6}
    assert uneven.counts[0, 1] == 1
    assert uneven.counts[1, 2] == 1
    assert uneven.density == pytest.approx(2 / 3)
    assert transfer_density([], n_items=10, bins=5).density == 0.0


def test_transfer_density_rejects_bad_events() -> None:
    with pytest.raises(ValueError, match="before it was induced"):
        transfer_density([(5, 2)], n_items=10, bins=5)
    with pytest.raises(ValueError, match="outside"):
        transfer_density([(0, 10)], n_items=10, bins=5)
    with pytest.raises(ValueError, match="bins"):
        transfer_density([(0, 1)], n_items=10, bins=11)
