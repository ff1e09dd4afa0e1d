"""Statistics for the analyses of seed §5-6: task-bootstrap CIs, binned Spearman correlation, transfer density."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats


def bootstrap_ci(values: Sequence[float] | np.ndarray, level: float = 0.95, n_resamples: int = 10000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Percentile bootstrap CI of a mean over tasks (resample tasks with replacement).

    Args:
        values: one value per task (e.g. success in [0, 1]).
        level: confidence level in (0, 1).
        n_resamples: bootstrap resamples.
        seed: RNG seed; the same inputs and seed give the same interval.

    Returns:
        (mean, low, high) with low <= mean <= high for any non-degenerate sample.
    """
    data = np.asarray(values, dtype=np.float64).ravel()
    if data.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    rng = np.random.default_rng(seed)
    n = data.size
    means = np.empty(n_resamples)
    chunk = max(1, (1 << 22) // n)  # bound memory to ~32 MiB of indices
    for start in range(0, n_resamples, chunk):
        end = min(n_resamples, start + chunk)
        idx = rng.integers(0, n, size=(end - start, n))
        means[start:end] = data[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(data.mean()), float(low), float(high)



def ratio_bootstrap_ci(numerators: Sequence[float], denominators: Sequence[float], level: float = 0.95,
                       n_resamples: int = 10000, seed: int = 0) -> tuple[float, float, float]:
    """Percentile bootstrap CI of a ratio of sums over tasks, ``sum(num) / sum(den)`` (e.g. used retrievals over
    retrievals): tasks are resampled whole, so a task's retrievals stay together.

    Returns:
        (ratio, low, high).

    Raises:
        ValueError: no task, lengths differ, or a denominator that is not positive.
    """
    num = np.asarray(numerators, dtype=np.float64).ravel()
    den = np.asarray(denominators, dtype=np.float64).ravel()
    if num.size == 0 or num.size != den.size or np.any(den <= 0):
        raise ValueError("ratio_bootstrap_ci needs one positive denominator per numerator, at least one")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    idx = np.random.default_rng(seed).integers(0, num.size, size=(n_resamples, num.size))
    ratios = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    low, high = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(num.sum() / den.sum()), float(low), float(high)


PAIRED_TESTS = ("sign-flip", "bootstrap")
"""One-sided tests of a paired mean gain (`paired_gain`)."""


def stratified_bootstrap_ci(strata: Sequence[Sequence[float]], level: float = 0.95, n_resamples: int = 10000,
                            seed: int = 0) -> tuple[float, float, float]:
    """Percentile CI of the mean of stratum means (Table 2's Average over envs): each resample draws every stratum's
    tasks with replacement within that stratum, so each stratum keeps its size and weighs the same.

    Returns:
        (mean of the stratum means, low, high).

    Raises:
        ValueError: no strata, an empty stratum, a level outside (0, 1).
    """
    if not strata or any(len(s) == 0 for s in strata):
        raise ValueError("stratified_bootstrap_ci needs at least one stratum and no empty one")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    means = np.zeros(n_resamples)
    for values in strata:
        data = np.asarray(values, dtype=np.float64).ravel()
        idx = rng.integers(0, data.size, size=(n_resamples, data.size))
        means += data[idx].mean(axis=1)
    means /= len(strata)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.mean([np.mean(s) for s in strata])), float(low), float(high)


@dataclass(frozen=True)
class PairedGain:
    """A one-sided test that the mean of paired differences is above 0 (`paired_gain`).

    Attributes:
        n: pairs (tasks).
        estimate: mean difference.
        lower: the one-sided lower confidence bound at ``level`` (percentile bootstrap of the mean).
        p_value: the test's one-sided p-value (sign-flip: randomisation p; bootstrap: share of resampled means <= 0).
        alpha: the level the test was run at.
        test: "sign-flip" or "bootstrap".
        passed: ``p_value < alpha`` (sign-flip) or ``lower > 0`` (bootstrap).
    """

    n: int
    estimate: float
    lower: float
    p_value: float
    alpha: float
    test: str
    passed: bool

    def to_dict(self) -> dict[str, object]:
        return {"n": self.n, "estimate": self.estimate, "lower": self.lower, "p_value": self.p_value,
                "alpha": self.alpha, "test": self.test, "passed": self.passed}


def paired_gain(diffs: Sequence[float] | np.ndarray, *, alpha: float = 0.05, test: str = "sign-flip",
                n_resamples: int = 10000, seed: int = 0) -> PairedGain:
    """Test H0 "mean paired difference <= 0" against "> 0" at one-sided level ``alpha``.

    ``sign-flip`` (default) is the paired randomisation test: under H0 of no effect each pair's two outcomes are
    exchangeable, so each difference is as likely to carry either sign; p = (1 + #{flipped means >= observed}) /
    (1 + resamples), exact in expectation whatever the pairs' distribution (all-zero differences: p = 1).
    ``bootstrap`` passes when the percentile-bootstrap lower bound of the mean (pairs resampled) is above 0; it is
    the simpler rule but runs above its nominal level with few pairs. Both report that lower bound.

    Raises:
        ValueError: no pairs, a level outside (0, 1), an unknown test.
    """
    data = np.asarray(diffs, dtype=np.float64).ravel()
    if data.size == 0:
        raise ValueError("paired_gain needs at least one pair")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}; choose one of: {', '.join(PAIRED_TESTS)}")
    rng = np.random.default_rng(seed)
    n, observed = data.size, float(data.mean())
    boot = data[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    lower = float(np.quantile(boot, alpha))
    if test == "bootstrap":
        p_value = float(np.mean(boot <= 0))
        passed = lower > 0
    elif not np.any(data):
        p_value, passed = 1.0, False
    else:
        signs = rng.integers(0, 2, size=(n_resamples, n)) * 2 - 1
        flipped = (signs * data).mean(axis=1)
        p_value = float((1 + np.sum(flipped >= observed - 1e-12)) / (1 + n_resamples))
        passed = p_value < alpha
    return PairedGain(n=n, estimate=observed, lower=lower, p_value=p_value, alpha=alpha, test=test, passed=passed)


@dataclass(frozen=True)
class Bin:
    """One bin of :func:`binned_spearman`: how many points, their mean x and mean y."""

    n: int
    x_mean: float
    y_mean: float


@dataclass(frozen=True)
class BinnedSpearman:
    """Spearman correlation between per-bin means (seed §6.2, Fig. 5a)."""

    rho: float
    p_value: float
    bins: list[Bin] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"rho": self.rho, "p_value": self.p_value,
                "bins": [{"n": b.n, "x_mean": b.x_mean, "y_mean": b.y_mean} for b in self.bins]}


BINNINGS = ("first", "spread")
"""Equal-size binning conventions of :func:`binned_spearman` when n is not a multiple of the bin count."""


def equal_size_bins(n: int, n_bins: int, binning: str = "first") -> list[np.ndarray]:
    """Split ranks 0..n-1 into ``n_bins`` contiguous bins whose sizes differ by at most one.

    "first" (default, ``np.array_split``): the first ``n mod n_bins`` bins get one rank more (n = 23, 10 bins:
    3,3,3,2,2,2,2,2,2,2). "spread": rank i goes to bin ``floor(i * n_bins / n)``, so the larger bins are spread
    over the range (3,2,2,3,2,2,3,2,2,2), the convention of :func:`transfer_density` (``pandas.qcut`` on ranks
    spreads them similarly). With few points per bin the choice moves rho noticeably.
    """
    if binning == "first":
        return np.array_split(np.arange(n), n_bins)
    if binning == "spread":
        labels = np.arange(n) * n_bins // n
        return [np.flatnonzero(labels == b) for b in range(n_bins)]
    raise ValueError(f"unknown binning {binning!r}; choose one of {', '.join(BINNINGS)}")


def binned_spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                    n_bins: int = 10, binning: str = "first") -> BinnedSpearman:
    """Sort points by x, split them into ``n_bins`` equal-size bins, and correlate per-bin mean x with mean y.

    When the count is not a multiple of ``n_bins``, ``binning`` decides which bins get one point more
    (:func:`equal_size_bins`: "first", the default, as ``np.array_split``; or "spread"). Ties in x keep input order
    (stable sort). rho/p are NaN when a bin mean is constant across bins.
    """
    xs = np.asarray(x, dtype=np.float64).ravel()
    ys = np.asarray(y, dtype=np.float64).ravel()
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length ({xs.size} vs {ys.size})")
    if n_bins < 2:
        raise ValueError("n_bins must be >= 2")
    if xs.size < n_bins:
        raise ValueError(f"need at least n_bins={n_bins} points, got {xs.size}")
    order = np.argsort(xs, kind="stable")
    bins = [Bin(n=len(ranks), x_mean=float(xs[order[ranks]].mean()), y_mean=float(ys[order[ranks]].mean()))
            for ranks in equal_size_bins(xs.size, n_bins, binning)]
    x_means = [b.x_mean for b in bins]
    y_means = [b.y_mean for b in bins]
    if np.ptp(x_means) == 0 or np.ptp(y_means) == 0:
        return BinnedSpearman(rho=float("nan"), p_value=float("nan"), bins=bins)
    result = stats.spearmanr(x_means, y_means)
    return BinnedSpearman(rho=float(result.statistic), p_value=float(result.pvalue), bins=bins)


@dataclass(frozen=True)
class TransferDensity:
    """Transfer density D (seed §6.3) and the bin-to-bin transfer counts behind it.

    Attributes:
        density: share of bin pairs (i < j) with at least one transfer from bin i to bin j.
        counts: bins x bins int matrix; ``counts[i, j]`` = transfers induced in bin i and retrieved in bin j.
            Only the strict upper triangle enters D; the diagonal holds within-bin transfers.
        n_events: all events given.
        n_within_bin: events whose induction and retrieval fall in the same bin (diagonal; excluded from D).
        bins: number of bins b; D's denominator is b(b-1)/2.
    """

    density: float
    counts: np.ndarray
    n_events: int
    n_within_bin: int
    bins: int


def transfer_density(events: Iterable[tuple[int, int]], n_items: int, bins: int = 50) -> TransferDensity:
    """Cut a stream of ``n_items`` tasks into ``bins`` equal bins in order and measure how densely skills transfer.

    An event is ``(induced_at, retrieved_at)``: stream indices (0-based) of the task a skill was induced from and of
    a later task that retrieved it. Item s falls in bin ``floor(s * bins / n_items)`` (bin sizes differ by at most one).
    Events within one bin are counted on the diagonal of ``counts`` but are not bin pairs i < j, so they never add
    to D.

    Raises:
        ValueError: bad ``n_items``/``bins``, an index outside the stream, or a retrieval before the induction.
    """
    if n_items < 2:
        raise ValueError("n_items must be >= 2")
    if not 2 <= bins <= n_items:
        raise ValueError(f"bins must be in [2, n_items={n_items}], got {bins}")
    pairs = np.asarray(list(events), dtype=np.int64).reshape(-1, 2)
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n_items):
        raise ValueError(f"event stream index outside [0, {n_items})")
    if np.any(pairs[:, 1] < pairs[:, 0]):
        bad = pairs[pairs[:, 1] < pairs[:, 0]][0]
        raise ValueError(f"event {tuple(int(v) for v in bad)} retrieves a skill before it was induced")
    bin_of = pairs * bins // n_items
    counts = np.zeros((bins, bins), dtype=np.int64)
    np.add.at(counts, (bin_of[:, 0], bin_of[:, 1]), 1)
    covered = int(np.count_nonzero(np.triu(counts, k=1)))
    return TransferDensity(density=covered / (bins * (bins - 1) / 2), counts=counts, n_events=len(pairs),
                           n_within_bin=int(np.trace(counts)), bins=bins)
