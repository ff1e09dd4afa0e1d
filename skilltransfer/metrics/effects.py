"""Per-skill causal effects from randomised masking (issue 39 §1; the design: `skilltransfer.memory.masking`).

Each task ``t`` that had skill ``s`` as a retrieval candidate carries one draw: ``Z`` (shown) with the logged
propensity ``pi = P(Z = 1)``. Draws with ``pi`` 0 or 1 (no masking) carry no contrast and are left out. For an
outcome ``Y`` (success, reward, steps, tokens) the effect of ``s`` is the inverse-propensity-weighted (Hajek,
i.e. self-normalised Horvitz-Thompson) difference

    sum(Z Y / pi) / sum(Z / pi)  -  sum((1 - Z) Y / (1 - pi)) / sum((1 - Z) / (1 - pi))

over the tasks that retrieved ``s``: the mean outcome when shown minus when withheld, unbiased for the average
effect of showing ``s`` to a task that retrieves it because the coin is independent of everything before it.

Uncertainty: a percentile bootstrap over tasks (one resample of the tasks per replicate, shared by every skill, so a
task's joint outcome is kept; instances of one task in replicate runs are resampled together).

The harmful flag: a one-sided Fisher randomisation test of "showing ``s`` does not change success" (the coins are
re-drawn with their logged propensities, the other skills' coins held as observed), then Benjamini-Hochberg over the
skills tested at false-discovery rate ``alpha``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

OUTCOMES = ("success", "reward", "steps", "tokens")
"""The outcomes estimated, in table order."""


@dataclass(frozen=True)
class Draw:
    """One task's masking draw for one skill."""

    skill_id: str
    propensity: float
    """P(shown)."""
    shown: bool


@dataclass(frozen=True)
class TaskDraws:
    """One task: its outcomes and its draws."""

    key: str
    """The bootstrap's unit: task instances with the same key (a task run by several replicate runs) are resampled
    together."""
    outcomes: dict[str, float]
    draws: tuple[Draw, ...]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval (None ends when no replicate had both arms)."""

    estimate: float
    low: float | None
    high: float | None


@dataclass
class SkillEffect:
    """One skill's estimated effects."""

    skill_id: str
    candidates: int
    """Tasks with a randomised draw for the skill."""
    shown: int
    withheld: int
    effects: dict[str, Interval] = field(default_factory=dict)
    """Per outcome; empty when one arm is empty."""
    p_harm: float | None = None
    """One-sided randomisation-test p-value that showing the skill lowers success (None: not testable)."""
    harmful: bool = False
    """Flagged by Benjamini-Hochberg over the tested skills."""


def _hajek(y: np.ndarray, z: np.ndarray, pi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted difference along the last axis; NaN where an arm is empty. ``w``: task weights (bootstrap
    counts), broadcast against ``z`` (draws)."""
    a = w * z / pi
    b = w * (1 - z) / (1 - pi)
    sa, sb = a.sum(-1), b.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((sa > 0) & (sb > 0), (a * y).sum(-1) / sa - (b * y).sum(-1) / sb, np.nan)


def benjamini_hochberg(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses Benjamini-Hochberg rejects at false-discovery rate ``alpha``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cut = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= alpha * rank / m:
            cut = rank
    rejected = [False] * m
    for i in order[:cut]:
        rejected[i] = True
    return rejected


def _randomised(tasks: Sequence[TaskDraws]) -> tuple[list[TaskDraws], dict[str, list[tuple[int, float, bool]]]]:
    """The tasks with a randomised draw, and per skill its draws as (task index, propensity, shown)."""
    kept = [t for t in tasks if any(0 < d.propensity < 1 for d in t.draws)]
    by_skill: dict[str, list[tuple[int, float, bool]]] = {}
    for i, task in enumerate(kept):
        for d in task.draws:
            if 0 < d.propensity < 1:
                by_skill.setdefault(d.skill_id, []).append((i, d.propensity, d.shown))
    return kept, by_skill


def _resample_counts(tasks: Sequence[TaskDraws], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap weights (resamples x tasks): one multinomial resample of the task keys per replicate, a key's
    instances all taking its count."""
    index = {key: j for j, key in enumerate(sorted({t.key for t in tasks}))}
    cluster = np.array([index[t.key] for t in tasks], dtype=int)
    c = len(index)
    return (rng.multinomial(c, np.full(c, 1.0 / c), size=resamples).astype(float)[:, cluster] if c
            else np.zeros((resamples, 0)))


@dataclass(frozen=True)
class EffectReplicates:
    """Each skill's effect on one outcome and its value in every task-bootstrap replicate (`effect_replicates`)."""

    skill_ids: tuple[str, ...]
    """The skills with both arms, by id."""
    estimates: np.ndarray
    """Point estimates, one per skill."""
    replicates: np.ndarray
    """resamples x skills; NaN where a replicate left an arm of the skill empty."""
    shown: np.ndarray
    """Tasks per skill in the shown arm."""
    withheld: np.ndarray
    """Tasks per skill in the withheld arm."""


def effect_replicates(tasks: Sequence[TaskDraws], *, outcome: str = "success", resamples: int = 1000,
                      seed: int = 0) -> EffectReplicates:
    """Every skill's effect on ``outcome`` in each replicate of the task bootstrap: the very resamples that
    `skill_effects` draws with the same ``seed`` and ``resamples`` (its intervals are percentiles of these columns),
    so a statistic over skills recomputed per replicate carries the effects' joint uncertainty."""
    kept, by_skill = _randomised(tasks)
    counts = _resample_counts(kept, resamples, np.random.default_rng(seed))
    ids, points, columns, shown, withheld = [], [], [], [], []
    for skill_id in sorted(by_skill):
        draws = by_skill[skill_id]
        idx = np.array([i for i, _, _ in draws])
        pi = np.array([p for _, p, _ in draws])
        z = np.array([float(s) for _, _, s in draws])
        if z.all() or not z.any():
            continue
        y = np.array([kept[i].outcomes[outcome] for i in idx], dtype=float)
        ids.append(skill_id)
        points.append(float(_hajek(y, z, pi, np.ones_like(z))))
        columns.append(_hajek(y, z, pi, counts[:, idx]))
        shown.append(int(z.sum()))
        withheld.append(int(len(z) - z.sum()))
    matrix = np.column_stack(columns) if columns else np.zeros((resamples, 0))
    return EffectReplicates(tuple(ids), np.array(points, dtype=float), matrix, np.array(shown, dtype=int),
                            np.array(withheld, dtype=int))


def skill_effects(tasks: Sequence[TaskDraws], *, outcomes: Sequence[str] = OUTCOMES, resamples: int = 1000,
                  randomizations: int = 1000, level: float = 0.95, alpha: float = 0.05,
                  seed: int = 0) -> list[SkillEffect]:
    """Each skill's effects (module docstring), skills sorted by their success effect (most harmful first, untested
    last, then by id).

    Args:
        tasks: the tasks of one group of runs (tasks without draws are ignored).
        outcomes: which outcome keys to estimate (each task's ``outcomes`` must hold them).
        resamples: bootstrap replicates over tasks.
        randomizations: re-draws of the randomisation test.
        level: the interval's coverage.
        alpha: Benjamini-Hochberg's false-discovery rate for the harmful flag.
        seed: the bootstrap's and the test's seed.
    """
    rng = np.random.default_rng(seed)
    tasks, by_skill = _randomised(tasks)
    counts = _resample_counts(tasks, resamples, rng)
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    rows: list[SkillEffect] = []
    for skill_id in sorted(by_skill):
        draws = by_skill[skill_id]
        idx = np.array([i for i, _, _ in draws])
        pi = np.array([p for _, p, _ in draws])
        z = np.array([float(s) for _, _, s in draws])
        row = SkillEffect(skill_id, len(draws), int(z.sum()), int(len(z) - z.sum()))
        rows.append(row)
        if not row.shown or not row.withheld:
            continue
        for name in outcomes:
            y = np.array([tasks[i].outcomes[name] for i in idx], dtype=float)
            point = float(_hajek(y, z, pi, np.ones_like(z)))
            boot = _hajek(y, z, pi, counts[:, idx])
            boot = boot[~np.isnan(boot)]
            low, high = (float(np.percentile(boot, lo_q)), float(np.percentile(boot, hi_q))) if len(boot) else (
                None, None)
            row.effects[name] = Interval(point, low, high)
        if "success" in row.effects:
            y = np.array([tasks[i].outcomes["success"] for i in idx], dtype=float)
            redrawn = (rng.random((randomizations, len(z))) < pi).astype(float)
            null = _hajek(y, redrawn, pi, np.ones_like(redrawn))
            null = null[~np.isnan(null)]
            observed = row.effects["success"].estimate
            row.p_harm = float((1 + np.sum(null <= observed + 1e-12)) / (1 + len(null)))
    tested = [row for row in rows if row.p_harm is not None]
    for row, flag in zip(tested, benjamini_hochberg([r.p_harm or 1.0 for r in tested], alpha), strict=True):
        row.harmful = flag
    rows.sort(key=lambda r: (r.effects["success"].estimate if "success" in r.effects else np.inf, r.skill_id))
    return rows
