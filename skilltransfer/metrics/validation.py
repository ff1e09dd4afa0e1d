"""Validating a diagnostic against outcomes: rank correlations with bootstrap intervals, paired differences between
diagnostics and correlations within groups (issue 59; docs/commands/validate.md).

The units are what the diagnostics and the outcome describe: libraries (library -> pass rate, or task x library ->
success) or skills (skill -> effect). Each replicate of the bootstrap resamples the units with replacement and, when
the outcome is given per task (`Units.task_outcomes`), the tasks too: a unit's outcome is then recomputed as the mean
over the resampled tasks, and a diagnostic given per task (`Units.task_diagnostics`) is recomputed over the same
tasks, so the noise of a finite task set widens every interval. Spearman's rho (average ranks) and Kendall's tau-b
(ties counted as tau-b does) are computed per replicate; intervals are percentile intervals of the replicates; a
replicate in which a side is constant gives no value and is dropped (``replicates`` counts those kept).

The same primitives serve the masked-effects validation (`skilltransfer.metrics.surrogate`: ``report``'s
``utility_effects`` table and ``score --effects``): `spearman`, `spearman_rows`, `auroc`, `auroc_interval`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import rankdata

MIN_UNITS = 4
"""Units a correlation needs (with 3, Spearman's rho takes 4 values)."""
MIN_REPLICATES = 100
"""Bootstrap replicates with a defined correlation an interval needs."""
MIN_GROUP = 3
"""Units a group needs to enter a within-group correlation."""
DEFAULT_RESAMPLES = 2000


# --------------------------------------------------------------------------------------------- rank statistics
def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rho (Pearson correlation of average ranks, so ties share a rank); NaN when fewer than two points or
    either side is constant."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"x and y must be 1-D of one length, got {xs.shape} and {ys.shape}")
    return float(spearman_rows(xs, ys[None, :])[0])


def spearman_rows(x: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` with each row of ``ys`` (rows holding a NaN, or constant, give NaN)."""
    ys = np.atleast_2d(np.asarray(ys, dtype=float))
    out = np.full(len(ys), np.nan)
    if len(x) < 2 or np.ptp(x) == 0:
        return out
    rx = rankdata(x)
    rx = (rx - rx.mean()) / np.sqrt(((rx - rx.mean()) ** 2).sum())
    ok = ~np.isnan(ys).any(axis=1)
    if not ok.any():
        return out
    ry = rankdata(ys[ok], axis=1)
    ry = ry - ry.mean(axis=1, keepdims=True)
    norm = np.sqrt((ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out[ok] = np.where(norm > 0, (ry @ rx) / norm, np.nan)
    return np.clip(out, -1.0, 1.0)


def spearman_paired_rows(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row of ``xs`` with the same row of ``ys`` (NaN where a row is constant or has a NaN)."""
    xs, ys = np.atleast_2d(np.asarray(xs, dtype=float)), np.atleast_2d(np.asarray(ys, dtype=float))
    out = np.full(len(xs), np.nan)
    ok = ~(np.isnan(xs).any(axis=1) | np.isnan(ys).any(axis=1))
    if not ok.any() or xs.shape[1] < 2:
        return out
    rx, ry = rankdata(xs[ok], axis=1), rankdata(ys[ok], axis=1)
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    norm = np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out[ok] = np.where(norm > 0, (rx * ry).sum(axis=1) / norm, np.nan)
    return np.clip(out, -1.0, 1.0)


def kendall_paired_rows(xs: np.ndarray, ys: np.ndarray, *, chunk_cells: int = 4_000_000) -> np.ndarray:
    """Kendall's tau-b of each row of ``xs`` with the same row of ``ys``: (concordant - discordant) pairs over
    sqrt((pairs - ties in x) (pairs - ties in y)); NaN where a side is constant or holds a NaN."""
    xs, ys = np.atleast_2d(np.asarray(xs, dtype=float)), np.atleast_2d(np.asarray(ys, dtype=float))
    rows, n = xs.shape
    out = np.full(rows, np.nan)
    if n < 2:
        return out
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    step = max(1, chunk_cells // (n * n))
    for start in range(0, rows, step):
        x, y = xs[start:start + step], ys[start:start + step]
        sx = np.sign(x[:, :, None] - x[:, None, :])[:, upper]
        sy = np.sign(y[:, :, None] - y[:, None, :])[:, upper]
        s = (sx * sy).sum(axis=1)
        nx, ny = (sx != 0).sum(axis=1), (sy != 0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = np.where((nx > 0) & (ny > 0), s / np.sqrt(nx.astype(float) * ny), np.nan)
        bad = np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1)
        tau[bad] = np.nan
        out[start:start + step] = tau
    return np.clip(out, -1.0, 1.0)


def kendall(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Kendall's tau-b of ``x`` and ``y`` (NaN when a side is constant)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"x and y must be 1-D of one length, got {xs.shape} and {ys.shape}")
    return float(kendall_paired_rows(xs[None, :], ys[None, :])[0])


def auroc(scores: Sequence[float] | np.ndarray, positive: Sequence[bool] | np.ndarray) -> float | None:
    """``P(score of a positive > score of a negative) + P(tie) / 2`` (the Mann-Whitney AUROC); None when a class is
    empty."""
    s = np.asarray(scores, dtype=float)
    pos = np.asarray(positive, dtype=bool)
    a, b = s[pos], s[~pos]
    if not len(a) or not len(b):
        return None
    greater = (a[:, None] > b[None, :]).sum()
    ties = (a[:, None] == b[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(a) * len(b)))


def auroc_interval(scores: Sequence[float] | np.ndarray, positive: Sequence[bool] | np.ndarray, *,
                   resamples: int = 1000, level: float = 0.95,
                   rng: np.random.Generator | None = None) -> tuple[float | None, float | None]:
    """Stratified percentile bootstrap of `auroc`: each replicate resamples the positives and the negatives apart
    (so both classes keep their size); (None, None) when a class has fewer than two members."""
    s = np.asarray(scores, dtype=float)
    pos = np.asarray(positive, dtype=bool)
    a, b = s[pos], s[~pos]
    if len(a) < 2 or len(b) < 2:
        return None, None
    rng = rng if rng is not None else np.random.default_rng(0)
    ra = a[rng.integers(0, len(a), size=(resamples, len(a)))]
    rb = b[rng.integers(0, len(b), size=(resamples, len(b)))]
    greater = (ra[:, :, None] > rb[:, None, :]).sum(axis=(1, 2))
    ties = (ra[:, :, None] == rb[:, None, :]).sum(axis=(1, 2))
    values = (greater + 0.5 * ties) / (len(a) * len(b))
    return (float(np.percentile(values, 100 * (1 - level) / 2)),
            float(np.percentile(values, 100 * (1 + level) / 2)))


# --------------------------------------------------------------------------------------------- units and draws
@dataclass
class Units:
    """What is validated: one outcome per unit (a library, a skill) and, optionally, the per-task data behind it.

    ``task_outcomes`` (units x tasks, NaN where a unit was not run on a task) makes the outcome the mean over tasks
    and the tasks a second level of the bootstrap; ``task_diagnostics`` (name -> units x tasks) gives a diagnostic
    per task, recomputed over each replicate's tasks as its mean (a diagnostic absent there is a fixed value per
    unit)."""

    names: list[str]
    outcome: np.ndarray
    task_outcomes: np.ndarray | None = None
    task_ids: list[str] = field(default_factory=list)
    task_diagnostics: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.outcome = np.asarray(self.outcome, dtype=float)
        if self.outcome.shape != (len(self.names),):
            raise ValueError(f"one outcome per unit: {len(self.names)} units, outcome shape {self.outcome.shape}")
        if self.task_outcomes is not None and self.task_outcomes.shape[0] != len(self.names):
            raise ValueError("task_outcomes needs one row per unit")

    def subset(self, keep: Sequence[int]) -> Units:
        """These units restricted to the rows ``keep`` (in that order)."""
        rows = list(keep)
        return Units([self.names[i] for i in rows], self.outcome[rows],
                     None if self.task_outcomes is None else self.task_outcomes[rows], list(self.task_ids),
                     {name: values[rows] for name, values in self.task_diagnostics.items()})


def _task_mean(matrix: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Mean over ``cols`` of ``matrix[rows]`` for each replicate (rows, cols: replicates x k), NaN cells skipped."""
    out = np.empty(rows.shape, dtype=float)
    for r in range(rows.shape[0]):
        block = matrix[rows[r]][:, cols[r]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a unit run on none of the drawn tasks: NaN
            out[r] = np.nanmean(block, axis=1)
    return out


def draw(units: Units, diagnostics: Mapping[str, np.ndarray], *, resamples: int, rng: np.random.Generator,
         strata: Sequence[str] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One bootstrap: (name -> replicates x units diagnostic values, replicates x units outcomes).

    Units are resampled with replacement (within each stratum when ``strata`` labels them, so every stratum keeps
    its size); with per-task outcomes, the tasks are resampled too and the outcomes (and per-task diagnostics)
    recomputed over them."""
    n = len(units.names)
    if strata is None:
        rows = rng.integers(0, n, size=(resamples, n))
    else:
        labels = np.asarray(list(strata))
        rows = np.empty((resamples, n), dtype=int)
        for label in dict.fromkeys(labels.tolist()):
            members = np.flatnonzero(labels == label)
            rows[:, members] = members[rng.integers(0, len(members), size=(resamples, len(members)))]
    if units.task_outcomes is None:
        outcomes = units.outcome[rows]
        return {name: np.asarray(values, dtype=float)[rows] for name, values in diagnostics.items()}, outcomes
    m = units.task_outcomes.shape[1]
    cols = rng.integers(0, m, size=(resamples, m))
    outcomes = _task_mean(units.task_outcomes, rows, cols)
    values = {}
    for name, fixed in diagnostics.items():
        per_task = units.task_diagnostics.get(name)
        values[name] = (_task_mean(per_task, rows, cols) if per_task is not None
                        else np.asarray(fixed, dtype=float)[rows])
    return values, outcomes


# --------------------------------------------------------------------------------------------- results
@dataclass
class Correlation:
    """One diagnostic against the outcome over a set of units."""

    diagnostic: str
    n: int
    spearman: float | None = None
    spearman_low: float | None = None
    spearman_high: float | None = None
    kendall: float | None = None
    kendall_low: float | None = None
    kendall_high: float | None = None
    replicates: int = 0
    """Bootstrap replicates in which both correlations were defined."""
    why: str = ""
    """Why a number is missing ("" when all are given)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PairedDifference:
    """rho(first) - rho(second) over the same units and the same bootstrap replicates."""

    first: str
    second: str
    n: int
    difference: float | None = None
    low: float | None = None
    high: float | None = None
    share_first_better: float | None = None
    """Share of replicates in which rho(first) > rho(second)."""
    replicates: int = 0
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GroupCorrelation:
    """A diagnostic's rho within the groups of one grouping (e.g. model): each group's rho and their size-weighted
    mean, with an interval from resampling the units within each group."""

    diagnostic: str
    grouping: str
    groups: dict[str, float | None]
    """Group -> its rho (None: fewer than `MIN_GROUP` units, or a constant side)."""
    pooled: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    """Units in the groups that entered the pooled rho."""
    replicates: int = 0
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _interval(values: np.ndarray, level: float) -> tuple[float, float] | None:
    kept = values[~np.isnan(values)]
    if len(kept) < MIN_REPLICATES:
        return None
    low, high = np.percentile(kept, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(low), float(high)


def _point(values: np.ndarray, outcome: np.ndarray) -> tuple[float, float]:
    return float(spearman_paired_rows(values[None, :], outcome[None, :])[0]), kendall(values, outcome)


def correlations_of(units: Units, diagnostics: Mapping[str, Sequence[float] | np.ndarray], *,
                 resamples: int = DEFAULT_RESAMPLES, level: float = 0.95,
                 seed: int = 0) -> tuple[list[Correlation], dict[str, np.ndarray]]:
    """Each diagnostic's Spearman and Kendall with the outcome and their bootstrap intervals.

    Returns:
        (one `Correlation` per diagnostic, in the given order; the replicates' Spearman per diagnostic with one, for
        `paired_differences`: every diagnostic shares the same resamples).
    """
    values = {name: np.asarray(v, dtype=float) for name, v in diagnostics.items()}
    n = len(units.names)
    rng = np.random.default_rng(seed)
    drawn, outcomes = draw(units, values, resamples=resamples, rng=rng) if n >= MIN_UNITS else ({}, np.empty(0))
    out: list[Correlation] = []
    rhos: dict[str, np.ndarray] = {}
    for name, d in values.items():
        row = Correlation(name, n)
        out.append(row)
        if d.shape != (n,):
            raise ValueError(f"diagnostic {name!r} needs one value per unit ({n}), got shape {d.shape}")
        missing = np.isnan(d)
        if n < MIN_UNITS:
            row.why = f"{n} units; a correlation needs {MIN_UNITS}"
            continue
        if missing.any():
            row.why = f"{int(missing.sum())} of {n} units have no value"
            continue
        if np.ptp(d) == 0:
            row.why = f"{name} is the same for every unit"
            continue
        if np.ptp(units.outcome) == 0:
            row.why = "the outcome is the same for every unit"
            continue
        row.spearman, row.kendall = _point(d, units.outcome)
        rho = spearman_paired_rows(drawn[name], outcomes)
        tau = kendall_paired_rows(drawn[name], outcomes)
        both = ~(np.isnan(rho) | np.isnan(tau))
        row.replicates = int(both.sum())
        rhos[name] = np.where(both, rho, np.nan)
        rho_ci, tau_ci = _interval(rhos[name], level), _interval(np.where(both, tau, np.nan), level)
        if rho_ci is None or tau_ci is None:
            row.why = f"{row.replicates} bootstrap replicates with a defined correlation; an interval needs " \
                      f"{MIN_REPLICATES}"
            continue
        (row.spearman_low, row.spearman_high), (row.kendall_low, row.kendall_high) = rho_ci, tau_ci
    return out, rhos


def paired_differences(rows: Sequence[Correlation], rhos: Mapping[str, np.ndarray], pairs: Sequence[tuple[str, str]],
                       *, level: float = 0.95) -> list[PairedDifference]:
    """rho(a) - rho(b) for each pair, from the replicates of one `correlations_of` call (the same resamples)."""
    by_name = {row.diagnostic: row for row in rows}
    out = []
    for first, second in pairs:
        a, b = by_name.get(first), by_name.get(second)
        n = a.n if a is not None else 0
        item = PairedDifference(first, second, n)
        out.append(item)
        if a is None or b is None:
            item.why = f"no diagnostic {first if a is None else second!r}"
            continue
        if a.spearman is None or b.spearman is None or first not in rhos or second not in rhos:
            item.why = f"no rho for {first if a.spearman is None else second}"
            continue
        item.difference = a.spearman - b.spearman
        diff = rhos[first] - rhos[second]
        kept = diff[~np.isnan(diff)]
        item.replicates = len(kept)
        interval = _interval(diff, level)
        if interval is None:
            item.why = f"{len(kept)} replicates with both rho; an interval needs {MIN_REPLICATES}"
            continue
        item.low, item.high = interval
        item.share_first_better = float(np.mean(kept > 0))
    return out


def within_groups(units: Units, diagnostics: Mapping[str, Sequence[float] | np.ndarray], labels: Sequence[str],
                  grouping: str, *, resamples: int = DEFAULT_RESAMPLES, level: float = 0.95,
                  seed: int = 0) -> list[GroupCorrelation]:
    """Each diagnostic's rho within each group of ``labels`` (one label per unit) and their size-weighted mean; the
    interval resamples the units within their groups (and the tasks, with per-task outcomes)."""
    labels = list(labels)
    if len(labels) != len(units.names):
        raise ValueError("one group label per unit")
    values = {name: np.asarray(v, dtype=float) for name, v in diagnostics.items()}
    names = list(dict.fromkeys(labels))
    members = {g: np.flatnonzero(np.asarray(labels) == g) for g in names}
    rng = np.random.default_rng(seed)
    drawn, outcomes = draw(units, values, resamples=resamples, rng=rng, strata=labels)
    out = []
    for name, d in values.items():
        per_group: dict[str, float | None] = {}
        weights: dict[str, int] = {}
        for g in names:
            idx = members[g]
            rho = spearman(d[idx], units.outcome[idx]) if len(idx) >= MIN_GROUP else float("nan")
            per_group[g] = None if np.isnan(rho) else rho
            if per_group[g] is not None:
                weights[g] = len(idx)
        row = GroupCorrelation(name, grouping, per_group, n=sum(weights.values()))
        out.append(row)
        if not weights:
            row.why = f"no group of {MIN_GROUP}+ units with a defined rho"
            continue
        total = sum(weights.values())
        row.pooled = sum(weights[g] * float(per_group[g] or 0.0) for g in weights) / total
        pooled = np.zeros(resamples)
        for g, w in weights.items():
            idx = members[g]
            pooled += w * spearman_paired_rows(drawn[name][:, idx], outcomes[:, idx])
        pooled /= total
        row.replicates = int((~np.isnan(pooled)).sum())
        interval = _interval(pooled, level)
        if interval is None:
            row.why = f"{row.replicates} replicates with every group's rho defined; an interval needs {MIN_REPLICATES}"
            continue
        row.low, row.high = interval
    return out


def best(rows: Sequence[Correlation], names: Sequence[str]) -> Correlation | None:
    """Of ``names`` (in that order), the correlation with the highest Spearman rho (ties: the earlier); None when no
    one has a rho."""
    by_name = {row.diagnostic: row for row in rows}
    chosen: Correlation | None = None
    for name in names:
        row = by_name.get(name)
        if row is None or row.spearman is None:
            continue
        if chosen is None or chosen.spearman is None or row.spearman > chosen.spearman:
            chosen = row
    return chosen


# --------------------------------------------------------------------------------------------- the whole analysis
ALL = "all"


def jsonable(value: Any) -> Any:
    """``value`` with every non-finite float (a diagnostic with no value) as None and numpy scalars as Python ones,
    so that ``json.dumps`` writes JSON (it would write ``NaN``)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


@dataclass
class ValidationReport:
    """Every diagnostic against the outcome: over all units and, with a split, over the part diagnostics are chosen
    on (``tune``) and the part reported once (``held_out``); paired differences; correlations within groups; the best
    diagnostic of ``candidates`` chosen on the tune part (or on all units without a split)."""

    units: list[str]
    outcome: list[float]
    diagnostics: dict[str, list[float]]
    kinds: dict[str, str]
    parts: dict[str, list[str]]
    """Part name ("all", "tune", "held_out", ...) -> its units."""
    correlations: dict[str, list[Correlation]]
    paired: list[PairedDifference]
    groups: list[GroupCorrelation]
    best: str | None
    """The chosen diagnostic (`best` over ``candidates`` on the tune part, else on all units)."""
    chosen_on: str
    settings: dict[str, Any] = field(default_factory=dict)

    def correlation(self, part: str, diagnostic: str) -> Correlation | None:
        return next((row for row in self.correlations.get(part, []) if row.diagnostic == diagnostic), None)

    def to_dict(self) -> dict[str, Any]:
        return {"units": self.units, "outcome": self.outcome, "diagnostics": self.diagnostics, "kinds": self.kinds,
                "parts": self.parts,
                "correlations": {part: [row.to_dict() for row in rows] for part, rows in self.correlations.items()},
                "paired": [row.to_dict() for row in self.paired], "groups": [row.to_dict() for row in self.groups],
                "best": self.best, "chosen_on": self.chosen_on, "settings": self.settings}


def validate(units: Units, diagnostics: Mapping[str, Sequence[float] | np.ndarray], kinds: Mapping[str, str], *,
             parts: Mapping[str, Sequence[int]] | None = None, candidates: Sequence[str] = (),
             pairs_with: Sequence[str] = (), groupings: Mapping[str, Sequence[str]] | None = None,
             resamples: int = DEFAULT_RESAMPLES, level: float = 0.95, seed: int = 0) -> ValidationReport:
    """The whole analysis (`ValidationReport`).

    Args:
        units: the units and their outcome.
        diagnostics: name -> one value per unit, in the report's order.
        kinds: name -> its kind (model-free, reference, llm, external).
        parts: extra parts by unit rows, e.g. {"tune": [...], "held_out": [...]} (``tune`` is where the best is
            chosen); the part "all" is always there.
        candidates: the diagnostics the best is chosen from (default: every one).
        pairs_with: each diagnostic's rho minus each of these diagnostics' rho, on all units.
        groupings: grouping name -> one group label per unit (within-group correlations, on all units).
        resamples, level, seed: the bootstrap's.
    """
    values = {name: np.asarray(v, dtype=float) for name, v in diagnostics.items()}
    all_rows = list(range(len(units.names)))
    chosen_parts: dict[str, Sequence[int]] = {ALL: all_rows, **(parts or {})}
    correlations: dict[str, list[Correlation]] = {}
    rhos_all: dict[str, np.ndarray] = {}
    for part, rows in chosen_parts.items():
        subset = units.subset(rows)
        result, rhos = correlations_of(subset, {name: v[list(rows)] for name, v in values.items()}, resamples=resamples,
                                       level=level, seed=seed)
        correlations[part] = result
        if part == ALL:
            rhos_all = rhos
    paired = paired_differences(correlations[ALL], rhos_all,
                                [(name, other) for other in pairs_with for name in values if name != other],
                                level=level)
    groups = [row for grouping, labels in (groupings or {}).items()
              for row in within_groups(units, values, labels, grouping, resamples=resamples, level=level, seed=seed)]
    chosen_on = "tune" if "tune" in chosen_parts else ALL
    pick = best(correlations[chosen_on], list(candidates) or list(values))
    return ValidationReport(list(units.names), [float(v) for v in units.outcome],
                            {name: [float(x) for x in v] for name, v in values.items()}, dict(kinds),
                            {part: [units.names[i] for i in rows] for part, rows in chosen_parts.items()},
                            correlations, paired, groups, pick.diagnostic if pick is not None else None, chosen_on,
                            {"resamples": resamples, "level": level, "seed": seed,
                             "task_bootstrap": units.task_outcomes is not None,
                             "tasks": len(units.task_ids) if units.task_outcomes is not None else 0})
