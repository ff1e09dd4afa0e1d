"""Does a cheap score predict what a skill does? (issue 49; docs/utility-effects.md). Per env x model x condition
label with masking draws, each skill's diagnostics (`score_library` against the group's task instructions with the
run's embedder: what ``score`` prints) beside its randomised effect on success (`skilltransfer.metrics.surrogate`),
and beside them the paper's correlational answer from the same runs (Fig. 5a: tasks binned by the mean diagnostic of
the skills they retrieved, Spearman over the bins).

Tables ``utility_effects`` (one row per group and diagnostic) and ``utility_effects_skills`` (one row per skill with
draws); the figure ``utility_effects`` draws the second.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from skilltransfer.experiments.report.effects import has_draws, task_draws
from skilltransfer.experiments.report.runs import RunLog
from skilltransfer.experiments.report.success import groups
from skilltransfer.experiments.report.table import Table
from skilltransfer.metrics import binned_spearman, score_library
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


def _group_texts(members: list[RunLog]) -> list[str]:
    """The group's task instructions, one per task id (a task run by several repeats counts once)."""
    texts: dict[str, str] = {}
    for run in members:
        for record in run.records:
            if record.task_id in run.instructions:
                texts.setdefault(record.task_id, run.instructions[record.task_id])
    return list(texts.values())


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
    for key, members in groups(runs).items():
        if not has_draws(members):
            continue
        library = {skill_id: skill for run in members for skill_id, skill in run.skills.items()}
        texts = _group_texts(members)
        if not library or len(texts) < 2:
            lacking = "no skill library to score" if not library else "fewer than 2 task instructions to score against"
            summary.rows += [_summary_row(key, None, 0, name, None, [lacking]) for name in DIAGNOSTICS]
            continue
        report = score_library(list(library.values()), texts, embedder_of(members[0]))
        draws = [task_draws(r) for run in members for r in run.records if r.exposures]
        analysis = surrogate_analysis(report, draws, seed=seed)
        binned = _binned(members, report, n_bins, binning)
        contrast = has_contrast(draws)
        masked = len(analysis.masked)
        by_name = {a.diagnostic: a for a in analysis.associations}
        missing = sorted({d.skill_id for t in draws for d in t.draws} - set(library))
        why = [] if contrast else ["no randomised draws (mask_rate 0): no causal answer"]
        if missing:
            why.append(f"{len(missing)} candidate skills not in the runs' final memory (unscored)")
        for name in DIAGNOSTICS:
            summary.rows.append(_summary_row(key, by_name.get(name) if contrast else None, masked, name,
                                             binned.get(name), why))
        if contrast:
            names = {skill_id: skill.name for skill_id, skill in library.items()}
            skills.rows += _skill_rows(key, analysis, names)
    return summary, skills
