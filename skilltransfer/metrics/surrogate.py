"""Cheap diagnostics as surrogates of randomised skill effects (issue 49): does a score that needs no run (utility,
relevance, the off-domain flags of `skilltransfer.metrics.scoring`) rank a library's skills by what they do?

For a library's skills s with a masking contrast (`skilltransfer.metrics.effects`), each diagnostic d_s is set beside
the skill's effect on success tau_s:

- **rho**: Spearman's rank correlation of d and the estimated effects over the skills with enough draws (at least
  ``min_arm`` tasks in each arm). Its interval carries the effects' own noise: each replicate of the task bootstrap
  that the effects share (`effect_replicates`: one resample of the tasks, every skill's effect recomputed from it)
  gives one rho. Noisy effects pull rho towards 0 (attenuation), and a replicate adds that noise once more, so a
  plain percentile interval sits below the truth and a basic one (``2 rho - q``) is too narrow near 0
  (benchmarks/utility_effects.py measures all three). The **deattenuated** interval (`rank_correlation`) shrinks the
  estimates to their spread without noise (the effects' reliability R), adds each replicate's deviation to that,
  removes the attenuation those replicates show (``rho_corrected = 2 rho - mean rho*``) and stretches their spread
  by 1 / sqrt(R). The estimand is the rank correlation of d with the true effects over *this* library's skills: the
  diagnostics are held fixed (as ``score`` computes them once) and the skills are not resampled.
- **AUROC**: how well d, read low = harmful, tells the skills flagged harmful (Benjamini-Hochberg, `skill_effects`)
  from the rest, ``P(d_harmful < d_other) + P(tie) / 2``; and, read high = helpful, the skills whose effect CI lies
  above zero from the rest. 0.5: no better than chance. The flags are taken as given; the interval is a stratified
  percentile bootstrap over the skills of each class (how well d would separate skills like these).

Every diagnostic is oriented so that higher means "expected to help": the off-domain flags enter as ``in_domain``
(1 - off_domain) and ``outside_null`` (1 - null_off_domain). Where a statistic cannot be computed (too few skills,
a constant diagnostic, an empty class, too few usable replicates) it is None and ``why`` says so.

`surrogate_analysis` joins a `ScoreReport` and a run's masking draws; it is what ``report`` (table
``utility_effects``) and ``score --effects`` call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from skilltransfer.metrics.effects import EffectReplicates, SkillEffect, TaskDraws, effect_replicates, skill_effects
from skilltransfer.metrics.scoring import ScoreReport, SkillScore
from skilltransfer.metrics.validation import auroc, auroc_interval, spearman, spearman_rows

DIAGNOSTICS = ("utility", "specificity", "abstractness", "relevance", "best_match", "in_domain", "outside_null")
"""The diagnostics set beside the effects, in table order (higher = expected to help)."""
MIN_ARM = 10
"""Tasks a skill needs in each arm (shown, withheld) to enter the correlation: with fewer, a replicate of the task
bootstrap often empties an arm (with 10, about 1 in 20,000 per skill) and its effect is mostly noise."""
MIN_SKILLS = 5
"""Skills a rank correlation needs (with 4, rho takes only 9 values and every interval spans most of [-1, 1])."""
MIN_REPLICATES = 100
"""Usable bootstrap replicates an interval needs."""
INTERVALS = ("deattenuated", "basic", "percentile")
MIN_RELIABILITY = 0.4
"""Below this reliability of the estimated effects no interval for rho is given: the correction for their noise is
then so large that the interval undercovers (benchmarks/utility_effects.py --power: 69-87 % of nominal 95 % intervals
contain the planted rho at reliability 0.25-0.35, 89-99 % from 0.4 on)."""


def diagnostic_values(row: SkillScore) -> dict[str, float]:
    """A skill's diagnostics, oriented higher = expected to help (module docstring)."""
    return {"utility": row.utility, "specificity": row.specificity, "abstractness": row.abstractness,
            "relevance": row.relevance, "best_match": row.best_match, "in_domain": float(not row.off_domain),
            "outside_null": float(not row.null_off_domain)}


# --------------------------------------------------------------------------------------------- statistics
# Spearman's rho and the AUROC are the shared ones of `skilltransfer.metrics.validation` (also ``validate``'s).


@dataclass(frozen=True)
class RankCorrelation:
    """`rank_correlation`'s result."""

    rho: float
    """Spearman's rho of the diagnostic and the estimated effects (pulled towards 0 by their noise)."""
    corrected: float | None
    """rho with the attenuation the bootstrap shows removed (``2 rho - mean rho*``); None without an interval."""
    low: float | None
    high: float | None
    replicates: int
    """Bootstrap replicates used (those with every skill's effect defined and not all tied)."""
    reliability: float | None
    """Share of the estimated effects' variance across skills that is not bootstrap noise (None: not computable)."""


def rank_correlation(d: np.ndarray, estimates: np.ndarray, replicates: np.ndarray, *, level: float = 0.95,
                     interval: str = "deattenuated") -> RankCorrelation:
    """Spearman's rho of ``d`` and the effect ``estimates`` with an interval for its value at the true effects.

    ``replicates`` (resamples x skills) are the task bootstrap's effects. "deattenuated" (default): the effects'
    reliability R = 1 - (mean bootstrap variance) / (variance of the estimates across skills) gives their spread
    without noise; the bootstrap world takes the estimates shrunk to that spread (same ranks) as its truth and adds
    each replicate's deviation, so its rho* show the attenuation at the data's own signal-to-noise. The estimate is
    ``2 rho - mean(rho*)`` and the interval's half-widths are rho*'s percentile distances from their mean divided by
    sqrt(R) (the factor by which the correction stretches rho's noise); none below `MIN_RELIABILITY`. "basic" and
    "percentile" are the plain bootstrap intervals (``2 rho - q``, ``q``) of the replicates' rho, for comparison.
    """
    if interval not in INTERVALS:
        raise ValueError(f"unknown interval {interval!r}; choose one of {', '.join(INTERVALS)}")
    rho = spearman(d, estimates)
    complete = replicates[~np.isnan(replicates).any(axis=1)] if replicates.size else replicates
    if np.isnan(rho) or len(complete) < 2:
        return RankCorrelation(rho, None, None, None, 0, None)
    noise = float(np.var(complete, axis=0, ddof=1).mean())
    spread = float(np.var(estimates, ddof=1))
    reliability = max(0.0, 1 - noise / spread) if spread > 0 else 0.0
    lo_q, hi_q = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    if interval == "deattenuated":
        if reliability < MIN_RELIABILITY:
            return RankCorrelation(rho, None, None, None, len(complete), reliability)
        shrink = np.sqrt(reliability)
        truth = estimates.mean() + shrink * (estimates - estimates.mean())
        rhos = spearman_rows(d, truth + (complete - estimates))
    else:
        rhos = spearman_rows(d, complete)
    rhos = rhos[~np.isnan(rhos)]
    if len(rhos) < MIN_REPLICATES:
        return RankCorrelation(rho, None, None, None, len(rhos), reliability)
    low_q, high_q = np.percentile(rhos, [lo_q, hi_q])
    mean = float(rhos.mean())
    if interval == "percentile":
        low, high, corrected = float(low_q), float(high_q), mean
    elif interval == "basic":
        low, high, corrected = 2 * rho - high_q, 2 * rho - low_q, 2 * rho - mean
    else:
        corrected = 2 * rho - mean
        low, high = corrected - (high_q - mean) / shrink, corrected + (mean - low_q) / shrink

    def clip(x: float) -> float:
        return float(np.clip(x, -1.0, 1.0))

    return RankCorrelation(rho, clip(corrected), clip(low), clip(high), len(rhos), reliability)


# --------------------------------------------------------------------------------------------- the analysis
@dataclass
class Association:
    """One diagnostic against the effects on success, over the skills with enough draws."""

    diagnostic: str
    skills: int
    """Skills in the correlation."""
    rho: float | None = None
    """Spearman's rho of the diagnostic and the estimated effects."""
    rho_corrected: float | None = None
    """rho with the attenuation by the effects' noise removed (the interval's centre)."""
    rho_low: float | None = None
    rho_high: float | None = None
    replicates: int = 0
    """Bootstrap replicates in which every skill kept both arms and the effects were not all tied."""
    reliability: float | None = None
    """Share of the estimated effects' variance across the skills that is not noise (`rank_correlation`)."""
    harmful: int = 0
    """Of ``skills``, those flagged harmful."""
    auroc_harmful: float | None = None
    auroc_harmful_low: float | None = None
    auroc_harmful_high: float | None = None
    helpful: int = 0
    """Of ``skills``, those whose effect CI lies above zero."""
    auroc_helpful: float | None = None
    auroc_helpful_low: float | None = None
    auroc_helpful_high: float | None = None
    why: list[str] = field(default_factory=list)
    """Why a statistic is missing (empty when all are given)."""


@dataclass
class SkillJoin:
    """One scored skill and, when the runs masked it, its effect."""

    score: SkillScore
    effect: SkillEffect | None
    enough_draws: bool
    """In the correlation: at least ``min_arm`` tasks in each arm."""


@dataclass
class SurrogateAnalysis:
    """`surrogate_analysis`'s result: the per-skill join and one `Association` per diagnostic."""

    skills: list[SkillJoin]
    associations: list[Association]
    min_arm: int
    resamples: int
    level: float
    interval: str

    @property
    def masked(self) -> list[SkillJoin]:
        """The skills with a masking contrast (both arms)."""
        return [j for j in self.skills if j.effect is not None and "success" in j.effect.effects]

    @property
    def enough(self) -> list[SkillJoin]:
        return [j for j in self.skills if j.enough_draws]


def has_contrast(tasks: Sequence[TaskDraws]) -> bool:
    """Whether any draw was randomised (a propensity strictly between 0 and 1): runs with ``mask_rate`` > 0."""
    return any(0 < d.propensity < 1 for t in tasks for d in t.draws)


def associate(diagnostics: Mapping[str, Mapping[str, float]], effects: Mapping[str, SkillEffect],
              replicates: EffectReplicates, *, min_arm: int = MIN_ARM, resamples: int = 1000, level: float = 0.95,
              interval: str = "deattenuated", seed: int = 0) -> list[Association]:
    """One `Association` per diagnostic of ``diagnostics`` (skill id -> name -> value, every skill the same names).

    Args:
        diagnostics: the scored skills' diagnostics (`diagnostic_values`).
        effects: skill id -> its `SkillEffect` (`skill_effects`: the harmful flag and the success CI).
        replicates: `effect_replicates` of the same tasks (its bootstrap is the one whose replicates give rho's).
        min_arm: tasks each arm needs for a skill to enter.
        resamples: the AUROC bootstrap's replicates.
        level: the intervals' coverage.
        interval: rho's interval: "deattenuated" (default), "basic" or "percentile" (`rank_correlation`).
        seed: the AUROC bootstrap's seed.
    """
    column = {skill_id: j for j, skill_id in enumerate(replicates.skill_ids)}
    ids = [s for s in sorted(diagnostics) if s in column and s in effects
           and min(replicates.shown[column[s]], replicates.withheld[column[s]]) >= min_arm]
    names = list(next(iter(diagnostics.values()))) if diagnostics else list(DIAGNOSTICS)
    cols = [column[s] for s in ids]
    tau = replicates.estimates[cols]
    boot = replicates.replicates[:, cols]
    harmful = np.array([effects[s].harmful for s in ids], dtype=bool)
    helpful = np.array([(effects[s].effects["success"].low or 0.0) > 0 for s in ids], dtype=bool)
    out = []
    for name in names:
        d = np.array([diagnostics[s][name] for s in ids], dtype=float)
        row = Association(name, len(ids), harmful=int(harmful.sum()), helpful=int(helpful.sum()))
        out.append(row)
        if len(ids) < MIN_SKILLS:
            row.why.append(f"{len(ids)} skills with at least {min_arm} tasks in each arm; rho needs {MIN_SKILLS}")
        elif np.ptp(d) == 0:
            row.why.append(f"{name} is the same for every skill")
        elif np.ptp(tau) == 0:
            row.why.append("the estimated effects are all equal")
        else:
            result = rank_correlation(d, tau, boot, level=level, interval=interval)
            row.rho, row.rho_corrected, row.rho_low, row.rho_high = (result.rho, result.corrected, result.low,
                                                                      result.high)
            row.replicates, row.reliability = result.replicates, result.reliability
            if result.low is None:
                row.why.append(f"effects' reliability {result.reliability:.2f} < {MIN_RELIABILITY}: too noisy for "
                               "an interval of rho (more tasks per skill)" if result.reliability is not None
                               and result.reliability < MIN_RELIABILITY
                               else f"{result.replicates} usable bootstrap replicates; an interval needs "
                                    f"{MIN_REPLICATES}")
        rng = np.random.default_rng(seed)
        for target, flags, sign in (("harmful", harmful, -1.0), ("helpful", helpful, 1.0)):
            label = "flagged harmful" if target == "harmful" else "with an effect CI above zero"
            if not len(ids):
                continue
            if not flags.any() or flags.all():
                row.why.append(f"{'no' if not flags.any() else 'every'} skill {label}: no AUROC ({target})")
                continue
            low, high = auroc_interval(sign * d, flags, resamples=resamples, level=level, rng=rng)
            if low is None:
                row.why.append(f"AUROC ({target}): an interval needs 2 skills on each side")
            setattr(row, f"auroc_{target}", auroc(sign * d, flags))
            setattr(row, f"auroc_{target}_low", low)
            setattr(row, f"auroc_{target}_high", high)
    return out


def surrogate_analysis(report: ScoreReport, tasks: Sequence[TaskDraws], *, min_arm: int = MIN_ARM,
                       resamples: int = 1000, level: float = 0.95, interval: str = "deattenuated",
                       seed: int = 0) -> SurrogateAnalysis:
    """Join a library's diagnostics (``report``, from `score_library`) with the effects its masked runs measured.

    Args:
        report: the library scored against the runs' task instructions.
        tasks: the runs' tasks with their masking draws (`skilltransfer.report.effects.task_draws`).
        min_arm: tasks each arm needs for a skill to enter the correlation.
        resamples: task-bootstrap replicates (shared by the effects' CIs and rho's) and AUROC replicates.
        level: the intervals' coverage.
        interval: rho's interval ("deattenuated", "basic" or "percentile").
        seed: the bootstrap seed (the effects' CIs equal the ``skill_effects`` table's with the same seed).
    """
    effects = {row.skill_id: row for row in skill_effects(tasks, outcomes=("success",), resamples=resamples,
                                                          level=level, seed=seed)}
    replicates = effect_replicates(tasks, outcome="success", resamples=resamples, seed=seed)
    diagnostics = {row.id: diagnostic_values(row) for row in report.skills}
    associations = associate(diagnostics, effects, replicates, min_arm=min_arm, resamples=resamples, level=level,
                             interval=interval, seed=seed)
    column = {skill_id: j for j, skill_id in enumerate(replicates.skill_ids)}
    joins = []
    for row in report.skills:
        j = column.get(row.id)
        enough = j is not None and min(replicates.shown[j], replicates.withheld[j]) >= min_arm
        joins.append(SkillJoin(row, effects.get(row.id), bool(enough)))
    return SurrogateAnalysis(joins, associations, min_arm, resamples, level, interval)


def attach_effects(report: ScoreReport, analysis: SurrogateAnalysis, source: str) -> ScoreReport:
    """``report`` with each skill's effect on success, its interval, harmful flag and draws (`SkillScore.effect`...)
    from ``analysis`` (`surrogate_analysis` of the same report), and the associations in ``report.effects``: what
    ``score --effects`` prints and writes. ``source`` names the runs the effects came from."""
    joins = {join.score.id: join for join in analysis.skills}
    skills = []
    for row in report.skills:
        join = joins.get(row.id)
        effect = join.effect if join is not None else None
        success = effect.effects.get("success") if effect is not None else None
        skills.append(replace(
            row, effect=success.estimate if success is not None else None,
            effect_low=success.low if success is not None else None,
            effect_high=success.high if success is not None else None,
            harmful=effect.harmful if success is not None and effect is not None else None,
            shown=effect.shown if effect is not None else None,
            withheld=effect.withheld if effect is not None else None,
            enough_draws=join.enough_draws if effect is not None and join is not None else None))
    effects = {"source": source, "outcome": "success", "masked": len(analysis.masked),
               "enough_draws": len(analysis.enough), "min_arm": analysis.min_arm, "level": analysis.level,
               "interval": analysis.interval, "resamples": analysis.resamples,
               "associations": [asdict(row) for row in analysis.associations]}
    return replace(report, skills=skills, effects=effects)
