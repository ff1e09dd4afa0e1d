"""The ``skill_effects`` table: per env x model x condition label, each skill's causal effect on success, reward,
steps and tokens, from the masking draws of runs with ``mask_rate`` > 0 (`skilltransfer.metrics.effects`; the
design: `skilltransfer.memory.masking`). It appears only when some run of the report has draws.
"""

from __future__ import annotations

from typing import Any

from skilltransfer.log import TaskRecord
from skilltransfer.metrics.effects import OUTCOMES, Draw, SkillEffect, TaskDraws, skill_effects
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import groups
from skilltransfer.report.table import Table

NOTE = ("effect = mean outcome of the tasks that retrieved the skill when it was shown minus when it was withheld, "
        "inverse-propensity weighted (Hajek) with the logged propensities; 95 % percentile task-bootstrap CI "
        "(instances of one task id resampled together); p_harm: one-sided randomisation test of no effect on success "
        "(the masking coins re-drawn); harmful: flagged by Benjamini-Hochberg at FDR 0.05 over the group's skills. "
        "tokens = prompt + completion tokens of the task. See docs/skill-effects.md.")


def task_draws(record: TaskRecord) -> TaskDraws:
    """A record's outcomes and masking draws; the bootstrap unit is the task id."""
    outcomes = {"success": float(record.success), "reward": float(record.reward), "steps": float(record.steps),
                "tokens": float(record.prompt_tokens + record.completion_tokens)}
    return TaskDraws(record.task_id, outcomes,
                     tuple(Draw(e.skill_id, e.propensity, e.shown) for e in record.exposures))


def run_effects(runs: list[RunLog], *, seed: int = 0) -> list[SkillEffect]:
    """The skill effects of a group of runs (their records pooled)."""
    return skill_effects([task_draws(r) for run in runs for r in run.records if r.exposures], seed=seed)


def has_draws(runs: list[RunLog]) -> bool:
    return any(r.exposures for run in runs for r in run.records)


def _names(runs: list[RunLog]) -> dict[str, str]:
    names = {e.skill_id: e.name for run in runs for record in run.records for e in record.exposures if e.name}
    names.update({r.skill_id: r.name for run in runs for record in run.records for r in record.retrieved})
    names.update({skill_id: skill.name for run in runs for skill_id, skill in run.skills.items()})
    return names


def effect_columns() -> list[str]:
    return [f"{name}_{part}" for name in OUTCOMES for part in ("effect", "low", "high")]


def effect_cells(row: SkillEffect) -> dict[str, Any]:
    """The estimate and interval columns of one skill (None where an arm is empty)."""
    cells: dict[str, Any] = {}
    for name in OUTCOMES:
        interval = row.effects.get(name)
        cells[f"{name}_effect"] = interval.estimate if interval is not None else None
        cells[f"{name}_low"] = interval.low if interval is not None else None
        cells[f"{name}_high"] = interval.high if interval is not None else None
    return cells


def skill_effects_table(runs: list[RunLog], seed: int) -> Table:
    """The table (one row per skill with draws in a group)."""
    table = Table("skill_effects", "Per-skill causal effects (randomised masking)",
                  ["env", "model", "condition", "skill_id", "skill", "runs", "candidates", "shown", "withheld",
                   *effect_columns(), "p_harm", "harmful"], note=NOTE)
    for (env, model, condition), members in groups(runs).items():
        if not has_draws(members):
            continue
        names = _names(members)
        for row in run_effects(members, seed=seed):
            table.rows.append({"env": env, "model": model, "condition": condition, "skill_id": row.skill_id,
                               "skill": names.get(row.skill_id, row.skill_id), "runs": len(members),
                               "candidates": row.candidates, "shown": row.shown, "withheld": row.withheld,
                               **effect_cells(row), "p_harm": row.p_harm, "harmful": row.harmful})
    return table
