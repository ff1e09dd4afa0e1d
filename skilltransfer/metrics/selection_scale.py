"""The library-size study's estimands (issue 55, docs/selection.md), from labelled tasks run at several library sizes.

Let a task at library size N have pick class right (its first pick is a right skill) or not, and outcome Y. Per size:
``a_N`` = pick accuracy, ``s_NR`` / ``s_NW`` = mean outcome of the tasks whose pick was right / not right, ``P_N`` =
pass rate = a_N s_NR + (1 - a_N) s_NW. Against the smallest size B (the base):

- **drop** = P_B - P_N;
- **shadowing** (the agent picks a right skill less often) = (a_B - a_N) x the success a right pick is worth, the mean
  of (s_BR - s_BW) and (s_NR - s_NW) (the two orders of the exact two-factor split, averaged; only the one whose
  cells are non-empty when the other has an empty cell, e.g. no wrong pick at the base);
- **context overhead** (a bigger library hurts with the same pick) = drop - shadowing: with the averaged split, the
  mean over the two orders of a (s_BR - s_NR) + (1 - a)(s_BW - s_NW);
- each with a 95 % CI and a one-sided 95 % **upper bound** from a bootstrap that resamples task ids jointly across
  sizes (a task run at every size keeps its pairs). The split is identified when a task's outcome given its pick
  class does not depend on which tasks fall in that class (true where picks are random given the size, as in
  `benchmarks/selection_scale.py`); where easier tasks also pick right more often, shadowing is overstated.
- **per doubling**: the least-squares slope of a size's pick accuracy (also Hit@1 and pass rate) on log2(mean library
  size), its R², and a CI from the same bootstrap; **break**: the size after which a hinge fit (flat, then linear in
  log2 size) leaves the least squared error, a phase transition where that is not the smallest size.
- **confusability**: over every (task, size), Spearman's rho between the right skill's nearest-neighbour cosine in its
  library and a mis-pick, and the AUROC of that cosine for a mis-pick, with task-bootstrap CIs (as
  `skilltransfer.metrics.surrogate` tests a diagnostic), and the pick accuracy per cosine quartile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skilltransfer.metrics.selection import TaskSelection, task_scores
from skilltransfer.metrics.surrogate import auroc, spearman

LEVEL = 0.95
RESAMPLES = 1000


@dataclass(frozen=True)
class Estimate:
    """A point estimate, its 95 % CI and one-sided 95 % upper bound (None where not computable)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    upper: float | None = None

    @classmethod
    def of(cls, value: float | None, draws: np.ndarray) -> Estimate:
        finite = draws[np.isfinite(draws)]
        if value is None or not np.isfinite(value) or len(finite) < 0.5 * len(draws) or not len(finite):
            return cls(None if value is None or not np.isfinite(value) else float(value))
        low, high, upper = np.quantile(finite, [(1 - LEVEL) / 2, (1 + LEVEL) / 2, LEVEL])
        return cls(float(value), float(low), float(high), float(upper))

    def covers(self, truth: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= truth <= self.high


@dataclass(frozen=True)
class SizeRow:
    """One library size: its tasks' figures and the decomposition of the drop from the base size."""

    size: float
    """The library size asked for (the group's key)."""
    mean_size: float
    tasks: int
    pass_rate: Estimate
    pick_accuracy: Estimate
    hit1: Estimate
    hit5: Estimate
    trigger_rate: Estimate
    nn_cosine: float | None
    drop: Estimate
    shadowing: Estimate
    context_overhead: Estimate


@dataclass(frozen=True)
class Slope:
    """A figure against log2(library size): slope per doubling with its CI, intercept, R²."""

    metric: str
    slope: Estimate
    intercept: float | None
    r2: float | None


@dataclass(frozen=True)
class Break:
    """The hinge fit of pick accuracy on log2 size: flat up to ``size``, then ``slope`` per doubling."""

    size: float | None
    slope: float | None
    sse: float | None
    linear_sse: float | None


@dataclass(frozen=True)
class Confusability:
    """Crowding against mis-picks over every labelled (task, size) with a nearest-neighbour cosine."""

    observations: int
    rho: Estimate
    """Spearman's rho of the cosine and a mis-pick (positive: crowding goes with mis-picks)."""
    auroc: Estimate
    """AUROC of the cosine for a mis-pick (0.5: no better than chance)."""
    quartiles: list[dict[str, float]] = field(default_factory=list)
    """Per cosine quartile: low, high, observations, pick accuracy."""
    why: str = ""


@dataclass(frozen=True)
class ScaleAnalysis:
    """`scale_analysis`'s result."""

    sizes: list[SizeRow]
    slopes: list[Slope]
    hinge: Break
    confusability: Confusability


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(slope, intercept, R²) of least squares; NaN where undefined."""
    if len(x) < 2 or np.ptp(x) == 0:
        return float("nan"), float("nan"), float("nan")
    if np.ptp(y) < 1e-12:  # flat: no rounding noise for a slope
        return 0.0, float(y[0]), float("nan")
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1 - (residual ** 2).sum() / total if total > 0 else float("nan")
    return float(slope), float(intercept), float(r2)


def _hinge(x: np.ndarray, y: np.ndarray, sizes: Sequence[float]) -> Break:
    """Flat up to one of the sizes, then linear: the knot with the least squared error (the first size: linear)."""
    if len(x) < 3:
        return Break(None, None, None, None)
    best: tuple[float, float, float] | None = None
    linear = None
    for at, knot in enumerate(x[:-1]):
        design = np.column_stack([np.ones_like(x), np.maximum(0.0, x - knot)])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        coef = np.asarray(np.round(coef, 12), dtype=float)
        sse = float(((design @ coef - y) ** 2).sum())
        if linear is None:
            linear = sse
        if best is None or sse < best[0] - 1e-12:
            best = (sse, float(sizes[at]), float(coef[1]))
    assert best is not None
    return Break(best[1], best[2], best[0], linear)


class _Weights:
    """Task-id bootstrap weights shared by every size (module docstring): replicate r gives each task id a count."""

    def __init__(self, ids: Sequence[str], resamples: int, seed: int) -> None:
        self.index = {task_id: i for i, task_id in enumerate(dict.fromkeys(ids))}
        n = len(self.index)
        rng = np.random.default_rng(seed)
        self.counts = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(float) if n else \
            np.zeros((resamples, 0))

    def of(self, ids: Sequence[str]) -> np.ndarray:
        """(replicates, len(ids)) weights of these tasks."""
        return self.counts[:, [self.index[i] for i in ids]]


def _mean(values: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    if weights is None:
        return float(values.mean()) if len(values) else float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ values) / weights.sum(axis=1)


def _cells(right: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> tuple[Any, Any, Any, Any]:
    """(a, s_R, s_W, P) of one size: floats (``w`` None) or one value per bootstrap replicate (NaN: an empty cell)."""
    if w is None:
        nan = float("nan")
        return (float(right.mean()), float(y[right > 0].mean()) if (right > 0).any() else nan,
                float(y[right == 0].mean()) if (right == 0).any() else nan, float(y.mean()))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = w.sum(axis=1)
        return ((w @ right) / total, (w @ (y * right)) / (w @ right), (w @ (y * (1 - right))) / (w @ (1 - right)),
                (w @ y) / total)


def _shadowing(a0: Any, s0r: Any, s0w: Any, an: Any, snr: Any, snw: Any) -> Any:
    """The averaged split's shadowing (one order where the other's cells are empty)."""
    first = s0r - s0w
    second = snr - snw
    worth = np.where(np.isfinite(first) & np.isfinite(second), (first + second) / 2,
                     np.where(np.isfinite(first), first, second))
    return (a0 - an) * worth


def scale_analysis(by_size: Mapping[float, Sequence[TaskSelection]], *, seed: int = 0,
                   resamples: int = RESAMPLES) -> ScaleAnalysis:
    """The size study's estimands over labelled tasks grouped by library size (module docstring).

    Raises:
        ValueError: fewer than one size with tasks.
    """
    sizes = sorted(size for size, tasks in by_size.items() if tasks)
    if not sizes:
        raise ValueError("scale_analysis needs labelled tasks at one library size at least")
    weights = _Weights([t.task_id for size in sizes for t in by_size[size]], resamples, seed)
    per: dict[float, dict[str, Any]] = {}
    for size in sizes:
        tasks = list(by_size[size])
        scores = [task_scores(t) for t in tasks]
        w = weights.of([t.task_id for t in tasks])
        data = {name: np.array([s[name] for s in scores]) for name in ("pick_accuracy", "hit1", "hit5",
                                                                       "trigger_rate")}
        data["success"] = np.array([t.success for t in tasks], dtype=float)
        per[size] = {"tasks": tasks, "w": w, **data,
                     "point": _cells(data["pick_accuracy"], data["success"], None),
                     "draws": _cells(data["pick_accuracy"], data["success"], w)}
    base = per[sizes[0]]
    rows = []
    for size in sizes:
        cur = per[size]
        est = {name: Estimate.of(float(cur[name].mean()), np.asarray(_mean(cur[name], cur["w"])))
               for name in ("pick_accuracy", "hit1", "hit5", "trigger_rate", "success")}
        drop_point = base["point"][3] - cur["point"][3]
        drop_draws = base["draws"][3] - cur["draws"][3]
        shadow_point = float(_shadowing(*base["point"][:3], *cur["point"][:3]))
        shadow_draws = np.asarray(_shadowing(*base["draws"][:3], *cur["draws"][:3]), dtype=float)
        cosines = [t.nn_cosine for t in cur["tasks"] if t.nn_cosine is not None]
        rows.append(SizeRow(size=size, mean_size=float(np.mean([t.size if t.size is not None else size
                                                                for t in cur["tasks"]])),
                            tasks=len(cur["tasks"]), pass_rate=est["success"], pick_accuracy=est["pick_accuracy"],
                            hit1=est["hit1"], hit5=est["hit5"], trigger_rate=est["trigger_rate"],
                            nn_cosine=float(np.mean(cosines)) if cosines else None,
                            drop=Estimate.of(drop_point, drop_draws), shadowing=Estimate.of(shadow_point, shadow_draws),
                            context_overhead=Estimate.of(drop_point - shadow_point, drop_draws - shadow_draws)))
    x = np.log2(np.array([row.mean_size for row in rows]))
    slopes = []
    for metric, key in (("pick_accuracy", "pick_accuracy"), ("hit1", "hit1"), ("pass_rate", "success")):
        y = np.array([float(per[size][key].mean()) for size in sizes])
        slope, intercept, r2 = _fit(x, y)
        draws = np.column_stack([np.asarray(_mean(per[size][key], per[size]["w"])) for size in sizes])
        boot = np.array([_fit(x, row)[0] if np.isfinite(row).all() else np.nan for row in draws])
        slopes.append(Slope(metric, Estimate.of(slope if np.isfinite(slope) else None, boot),
                            intercept if np.isfinite(intercept) else None, r2 if np.isfinite(r2) else None))
    hinge = _hinge(x, np.array([float(per[size]["pick_accuracy"].mean()) for size in sizes]), sizes)
    return ScaleAnalysis(rows, slopes, hinge, confusability([t for size in sizes for t in by_size[size]],
                                                            seed=seed, resamples=resamples))


def confusability(tasks: Sequence[TaskSelection], *, seed: int = 0, resamples: int = RESAMPLES) -> Confusability:
    """Does the right skill's nearest-neighbour cosine predict a mis-pick? (module docstring)"""
    rows = [t for t in tasks if t.nn_cosine is not None]
    if len(rows) < 4:
        return Confusability(len(rows), Estimate(None), Estimate(None), why="fewer than 4 tasks with a neighbour")
    cos = np.array([t.nn_cosine for t in rows], dtype=float)
    miss = np.array([not t.pick_right for t in rows], dtype=float)
    if np.ptp(miss) == 0 or np.ptp(cos) == 0:
        return Confusability(len(rows), Estimate(None), Estimate(None),
                             why="every pick right, or every pick wrong, or one cosine for all")
    ids = list(dict.fromkeys(t.task_id for t in rows))
    position = {task_id: i for i, task_id in enumerate(ids)}
    of_task = np.array([position[t.task_id] for t in rows])
    rng = np.random.default_rng(seed)
    rhos, aucs = [], []
    for _ in range(resamples):
        counts = rng.multinomial(len(ids), np.full(len(ids), 1.0 / len(ids)))
        take = np.repeat(np.arange(len(rows)), counts[of_task])
        if np.ptp(miss[take]) == 0 or np.ptp(cos[take]) == 0:
            continue
        rhos.append(spearman(cos[take], miss[take]))
        aucs.append(auroc(cos[take], miss[take] > 0))
    edges = np.quantile(cos, [0, 0.25, 0.5, 0.75, 1.0])
    quartiles = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (cos >= low) & (cos <= high) if high == edges[-1] else (cos >= low) & (cos < high)
        if inside.any():
            quartiles.append({"low": float(low), "high": float(high), "observations": int(inside.sum()),
                              "pick_accuracy": float(1 - miss[inside].mean())})
    return Confusability(len(rows), Estimate.of(spearman(cos, miss), np.array(rhos, dtype=float)),
                         Estimate.of(auroc(cos, miss > 0), np.array(aucs, dtype=float)), quartiles)

