"""Does a cheap score predict what a skill does? (issue 49; docs/utility-effects.md). Per env x model x condition
label with masking draws, each skill's diagnostics (`score_library` against the group's task instructions with the
run's embedder: what ``score`` prints) beside its randomised effect on success (`skilltransfer.metrics.surrogate`),
and beside them the paper's correlational answer from the same runs (Fig. 5a: tasks binned by the mean diagnostic of
the skills they retrieved, Spearman over the bins).

Tables ``utility_effects`` (one row per group and diagnostic) and ``utility_effects_skills`` (one row per skill with
draws); the figure ``utility_effects`` draws the second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skilltransfer.metrics import binned_spearman, score_library
from skilltransfer.metrics.effects import TaskDraws
from skilltransfer.metrics.scoring import ScoreReport
from skilltransfer.metrics.stats import BINNINGS
from skilltransfer.metrics.surrogate import (
    DIAGNOSTICS,
    MIN_ARM,
    Association,
    SurrogateAnalysis,
    diagnostic_values,
    has_contrast,
    surrogate_analysis,
)
from skilltransfer.metrics.task_texts import TaskText
from skilltransfer.report.effects import has_draws, task_draws
from skilltransfer.report.run_library import group_library
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import Key, groups
from skilltransfer.report.table import Table
from skilltransfer.skill import Skill

BINNED = ("utility", "specificity", "abstractness", "relevance", "best_match")
"""The diagnostics the binned task-level analysis is run for (a task's mean of a 0/1 flag makes no bins)."""
SUMMARY_COLUMNS = ["env", "model", "condition", "diagnostic", "masked", "skills", "rho", "rho_corrected", "rho_low",
                   "rho_high", "reliability", "replicates", "harmful", "auroc_harmful", "auroc_harmful_low",
                   "auroc_harmful_high", "helpful", "auroc_helpful", "auroc_helpful_low", "auroc_helpful_high",
                   "binned_tasks", "binned_bins", "binned_rho", "binned_p", "why"]
SKILL_COLUMNS = ["env", "model", "condition", "skill_id", "skill", "utility", "specificity", "abstractness",
                 "relevance", "best_match", "off_domain", "null_off_domain", "candidates", "shown", "withheld",
                 "success_effect", "success_low", "success_high", "p_harm", "harmful", "enough_draws"]
NOTE = ("Causal: rho = Spearman's rank correlation, over the skills with at least {min_arm} tasks in each masking "
        "arm, of the diagnostic with the skill's estimated effect on success (docs/skill-effects.md); their noise "
        "pulls it towards 0. rho_corrected, rho_low, rho_high: the estimate and 95 % interval for rho at the true "
        "effects, from the task bootstrap of the skill_effects table (each replicate resamples the tasks and "
        "recomputes every effect, so the effects' noise widens it; deattenuated by the effects' reliability = the "
        "share of their variance across skills that is not noise, no interval below 0.4; replicates = those with both "
        "arms for every skill). auroc_harmful: P(diagnostic of a skill flagged harmful < that of another) + ties/2; "
        "auroc_helpful: the same, read high, for the skills whose effect CI lies above 0; 95 % stratified "
        "bootstrap over the skills, flags as given. Diagnostics as `score` computes them against the group's "
        "task instructions (one per task id) with the run's embedder (tau 0.1, pair specificity, description text); "
        "in_domain = 1 - off_domain, outside_null = 1 - null_off_domain (higher = expected to help). Correlational "
        "(the paper's Fig. 5a, same runs): tasks ranked by the mean diagnostic of the distinct skills shown to them, "
        "{bins} equal bins, binned_rho = Spearman of bin-mean diagnostic and bin success. masked = skills with both "
        "arms; why = what a missing number lacks. See docs/utility-effects.md.")
SKILL_NOTE = ("One row per skill that was a retrieval candidate in the group's runs: its diagnostics (`score`) and "
              "its effect on success when shown (inverse-propensity weighted, 95 % task-bootstrap CI, the "
              "skill_effects table's numbers); enough_draws: at least {min_arm} tasks in each arm (in the "
              "correlation).")


def group_tasks(members: list[RunLog]) -> list[TaskText]:
    """The group's tasks (id, instruction), one per task id (a task run by several repeats counts once)."""
    texts: dict[str, str] = {}
    for run in members:
        for record in run.records:
            if record.task_id in run.instructions:
                texts.setdefault(record.task_id, run.instructions[record.task_id])
    return [TaskText(task_id, text) for task_id, text in texts.items()]


def masked_groups(runs: list[RunLog]) -> dict[Key, list[RunLog]]:
    """The report's groups (env, model, condition; `skilltransfer.report.success.groups`) whose runs logged masking
    draws."""
    return {key: members for key, members in groups(runs).items() if has_draws(members)}


@dataclass
class GroupEffects:
    """One group's skills scored (`score_library`) and joined with the effects its masking draws give
    (`surrogate_analysis`): one row per (env, model, condition, skill), what ``report``'s ``utility_effects_skills``
    lists and what ``score --effects`` prints."""

    key: Key
    members: list[RunLog]
    draws: list[TaskDraws]
    report: ScoreReport | None = None
    """None: the group could not be scored (`why`)."""
    analysis: SurrogateAnalysis | None = None
    why: list[str] = field(default_factory=list)
    """Why the group has no rows (no library, too few tasks), in words."""
    drawn: list[str] = field(default_factory=list)
    """The skill ids the runs masked (a randomised coin: 0 < propensity < 1; an own skill beside the library is
    always shown), sorted."""
    missing: list[str] = field(default_factory=list)
    """Of `drawn`, those not in the scored library (no diagnostics, no row)."""

    @property
    def contrast(self) -> bool:
        return has_contrast(self.draws)


def join_group(key: Key, members: list[RunLog], library: Sequence[Skill], embedder: Any, *,
               tasks: Sequence[TaskText] | None = None, report: ScoreReport | None = None, seed: int = 0,
               **options: Any) -> GroupEffects:
    """Score ``library`` against the group's tasks (its runs' own, one per task id; or ``tasks``) with
    ``embedder`` (``options``: `score_library`'s settings) — or take the ``report`` already scored — and join it
    with the group's masking draws (the bootstrap and the harmful flags seeded by ``seed``)."""
    draws = [task_draws(r) for run in members for r in run.records if r.exposures]
    drawn = sorted({d.skill_id for t in draws for d in t.draws if 0 < d.propensity < 1})  # masked: a coin drawn
    ids = {skill.id for skill in library} if report is None else {row.id for row in report.skills}
    out = GroupEffects(key, members, draws, drawn=drawn, missing=[i for i in drawn if i not in ids])
    task_set = list(tasks) if tasks is not None else group_tasks(members)
    if report is None:
        if not library:
            out.why.append("no skill library to score")
        if len(task_set) < 2:
            out.why.append("fewer than 2 task instructions to score against")
        if out.why:
            return out
        report = score_library(list(library), [t.text for t in task_set], embedder,
                               task_ids=[t.id for t in task_set], **options)
    out.report = report
    out.analysis = surrogate_analysis(report, draws, seed=seed)
    return out


def _binned(members: list[RunLog], report: ScoreReport, n_bins: int, binning: str) -> dict[str, dict[str, Any]]:
    """Per binned diagnostic: the paper's task-level analysis over the group's records (tasks shown no scored skill
    are left out)."""
    rows = {row.id: diagnostic_values(row) for row in report.skills}
    means: dict[str, list[float]] = {name: [] for name in BINNED}
    success: list[float] = []
    for run in members:
        for record in run.records:
            ids = sorted({hit.skill_id for hit in record.retrieved if hit.skill_id in rows})
            if not ids:
                continue
            success.append(float(record.success))
            for name in BINNED:
                means[name].append(float(np.mean([rows[i][name] for i in ids])))
    out: dict[str, dict[str, Any]] = {}
    for name in BINNED:
        cell: dict[str, Any] = {"binned_tasks": len(success), "binned_bins": n_bins}
        if len(success) < n_bins:
            cell["why"] = f"binned: {len(success)} tasks shown a scored skill, fewer than {n_bins} bins"
        else:
            result = binned_spearman(means[name], success, n_bins, binning)
            if np.isnan(result.rho):
                constant = "success" if len({b.y_mean for b in result.bins}) == 1 else name
                cell["why"] = f"binned: the bins' mean {constant} is the same in every bin"
            else:
                cell["binned_rho"], cell["binned_p"] = result.rho, result.p_value
        out[name] = cell
    return out


def _summary_row(key: tuple[str, str, str], row: Association | None, masked: int, diagnostic: str,
                 binned: dict[str, Any] | None, why: list[str]) -> dict[str, Any]:
    env, model, condition = key
    out: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS)
    out.update({"env": env, "model": model, "condition": condition, "diagnostic": diagnostic, "masked": masked})
    reasons = list(why)
    if row is not None:
        out.update({name: getattr(row, name) for name in SUMMARY_COLUMNS if hasattr(row, name) and name != "why"})
        reasons += row.why
    if binned is not None:
        out.update({k: v for k, v in binned.items() if k != "why"})
        if "why" in binned:
            reasons.append(binned["why"])
    elif diagnostic not in BINNED:
        reasons.append("binned: not for a 0/1 flag")
    out["why"] = "; ".join(reasons)
    return out


def _skill_rows(key: tuple[str, str, str], analysis: SurrogateAnalysis, names: dict[str, str]) -> list[dict[str, Any]]:
    env, model, condition = key
    rows: list[dict[str, Any]] = []
    for join in analysis.skills:
        effect = join.effect
        if effect is None:
            continue
        success = effect.effects.get("success")
        score = join.score
        rows.append({"env": env, "model": model, "condition": condition, "skill_id": score.id,
                     "skill": names.get(score.id, score.name), "utility": score.utility,
                     "specificity": score.specificity, "abstractness": score.abstractness,
                     "relevance": score.relevance, "best_match": score.best_match, "off_domain": score.off_domain,
                     "null_off_domain": score.null_off_domain, "candidates": effect.candidates,
                     "shown": effect.shown, "withheld": effect.withheld,
                     "success_effect": success.estimate if success is not None else None,
                     "success_low": success.low if success is not None else None,
                     "success_high": success.high if success is not None else None,
                     "p_harm": effect.p_harm, "harmful": effect.harmful, "enough_draws": join.enough_draws})
    rows.sort(key=lambda r: (-float(r["utility"]), str(r["skill"])))
    return rows


def utility_effects_tables(runs: list[RunLog], embedder_of: Callable[[RunLog], Any], *, seed: int = 0,
                           n_bins: int = 10, binning: str = "first") -> tuple[Table, Table]:
    """The two tables (module docstring), over the groups whose runs logged masking draws."""
    if binning not in BINNINGS:
        raise ValueError(f"unknown binning {binning!r}")
    summary = Table("utility_effects", "Diagnostics against randomised effects, and the binned correlation (Fig. 5a)",
                    SUMMARY_COLUMNS, note=NOTE.format(min_arm=MIN_ARM, bins=n_bins))
    skills = Table("utility_effects_skills", "Each masked skill: diagnostics and effect on success", SKILL_COLUMNS,
                   note=SKILL_NOTE.format(min_arm=MIN_ARM))
    for key, members in masked_groups(runs).items():
        library = group_library(members)
        joined = join_group(key, members, list(library.skills.values()), embedder_of(members[0]), seed=seed)
        if joined.report is None or joined.analysis is None:
            summary.rows += [_summary_row(key, None, 0, name, None, [*joined.why, *library.why])
                             for name in DIAGNOSTICS]
            continue
        analysis, contrast = joined.analysis, joined.contrast
        binned = _binned(members, joined.report, n_bins, binning)
        masked = len(analysis.masked)
        by_name = {a.diagnostic: a for a in analysis.associations}
        why = [] if contrast else ["no randomised draws (mask_rate 0): no causal answer"]
        if joined.missing:
            why.append(f"{len(joined.missing)} candidate skills not in the runs' libraries or final memory "
                       "(unscored)")
        why += library.why
        for name in DIAGNOSTICS:
            summary.rows.append(_summary_row(key, by_name.get(name) if contrast else None, masked, name,
                                             binned.get(name), why))
        if contrast:
            names = {skill_id: skill.name for skill_id, skill in library.skills.items()}
            skills.rows += _skill_rows(key, analysis, names)
    return summary, skills
