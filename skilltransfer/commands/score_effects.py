"""``score --effects RUNS``: the library scored and set beside the effects its masked runs measured, one group per
(env, model, condition) of the runs — the rows of ``report``'s ``skill_effects`` and ``utility_effects_skills``
tables, computed by the same join (`skilltransfer.report.utility_effects.join_group`) — or, with ``--pool``, one
group over every run. Each group is scored against its runs' own tasks (``report``'s way) unless ``--tasks`` names
others, with the runs' own embedder unless ``--embedder`` names another."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.text import Text

from skilltransfer.errors import InputError
from skilltransfer.metrics.scoring import GroupedScore, GroupScore
from skilltransfer.metrics.surrogate import attach_effects, has_contrast
from skilltransfer.metrics.task_texts import TaskText
from skilltransfer.report.effects import has_draws, task_draws
from skilltransfer.report.embedding import EmbedderResolver
from skilltransfer.report.runs import RunLog, load_runs
from skilltransfer.report.utility_effects import join_group, masked_groups
from skilltransfer.skill import Skill
from skilltransfer.util.counting import counted
from skilltransfer.util.terminal import Console
from skilltransfer.util.text import terminal_safe

POOLED = ("all envs", "all models", "pooled")
"""The one group of ``--pool``."""


@dataclass
class EffectsScore:
    """`effects_score`'s result: the groups scored, and what the user should be told about the rest."""

    grouped: GroupedScore
    warnings: list[str] = field(default_factory=list)
    """One line each: a group whose runs masked skills the scored library does not hold, another embedder."""
    notes: list[str] = field(default_factory=list)
    """One line each: groups left out (no randomised draws, not scorable)."""


def group_label(env: str, model: str, condition: str) -> str:
    return f"{env} / {model} / {condition}"


def _libraries(members: list[RunLog]) -> str:
    paths = sorted({str(run.log.config.library) for run in members if run.log.config.library is not None})
    return ", ".join(paths) if paths else "their own memory"


def _where(paths: list[Path]) -> str:
    return str(paths[0]) if len(paths) == 1 else f"the {len(paths)} --effects folders"


def masked_runs(paths: list[Path]) -> list[RunLog]:
    """The runs under ``paths`` (read and checked before the library is: a broken run folder is the first error).

    Raises:
        InputError: a run folder that does not read; no run with randomised masking draws.
    """
    runs = load_runs(paths)
    draws = [task_draws(record) for run in runs for record in run.records if record.exposures]
    if not has_contrast(draws):
        raise InputError(f"--effects {_where(paths)}: no randomised masking draws in its {len(runs)} run(s) (run the "
                         "library frozen with -c mask_rate=0.3, as experiments/skill-effects.yaml does)")
    return runs


def effects_score(paths: list[Path], runs: list[RunLog], skills: list[Skill], library: Path, *,
                  tasks: list[TaskText] | None, task_set: str, embedder: str | None, embed_cache: bool, pool: bool,
                  seed: int, **options: Any) -> EffectsScore:
    """Score ``skills`` (the library at ``library``) per group of ``runs`` (`masked_runs` of ``paths``) and join
    each group's effects (module docstring); ``options``: `score_library`'s settings.

    Raises:
        InputError: none of the skills the runs masked is in the library; no group could be scored.
    """
    where = _where(paths)
    groups = ({POOLED: runs} if has_draws(runs) else {}) if pool else masked_groups(runs)
    resolver = EmbedderResolver(embedder, cache=embed_cache)
    out = EffectsScore(GroupedScore([], pooled=pool))
    drawn: set[str] = set()
    found: set[str] = set()
    for key, members in groups.items():
        label = group_label(*key)
        joined = join_group(key, members, skills, resolver(members[0]), tasks=tasks, seed=seed, **options)
        drawn.update(joined.drawn)
        found.update(set(joined.drawn) - set(joined.missing))
        if not joined.contrast:
            out.notes.append(f"{label}: no randomised draws (mask_rate 0): no effects, left out")
            continue
        if joined.report is None or joined.analysis is None:
            out.notes.append(f"{label}: not scored ({'; '.join(joined.why)})")
            continue
        if joined.missing:
            out.warnings.append(
                f"{label}: {len(joined.missing)} of the {counted(len(joined.drawn), 'skill')} its runs masked are "
                f"not in {library} (the runs read {_libraries(members)}): they have no row")
        recorded = sorted({run.log.embedder_id for run in members if run.log.embedder_id})
        if embedder is not None and recorded and recorded != [joined.report.embedder]:
            out.warnings.append(f"{label}: diagnostics with {joined.report.embedder}, the runs retrieved with "
                                f"{', '.join(recorded)} (report scores with the runs' embedder)")
        report = attach_effects(joined.report, joined.analysis, ", ".join(str(run.path) for run in members))
        report = replace(report, library=str(library), task_set=task_set)
        out.grouped.groups.append(GroupScore(*key, [str(run.path) for run in members], report))
    if drawn and not found:
        raise InputError(f"--effects {where}: none of the {counted(len(drawn), 'skill')} its runs masked is in "
                         f"{library} (they read {_libraries(runs)}): score the library the runs read, or give "
                         "--effects runs of this one")
    if not out.grouped.groups:
        raise InputError(f"--effects {where}: no group of runs could be scored ({'; '.join(out.notes)})")
    return out


def print_effects(group: GroupScore, console: Console, against: str) -> None:
    """What ``--effects`` adds below a group's table: which skills have effects, and each diagnostic against them."""
    report = group.report
    effects = report.effects or {}
    n_skills = len(report.skills)
    lines = [f"effects on success from {counted(len(group.runs), 'run')} ({effects['source']}): {effects['masked']} "
             f"of {counted(n_skills, 'skill')} masked in both arms, {effects['enough_draws']} with at least "
             f"{effects['min_arm']} tasks in each arm (enough draws: they enter the correlations); diagnostics scored "
             f"against {against}"]
    for row in effects["associations"]:
        if row["diagnostic"] not in ("utility", "relevance"):
            continue
        rho = ("rho -" if row["rho"] is None else f"rho {row['rho']:+.2f}" + (
            f" [{row['rho_low']:+.2f}, {row['rho_high']:+.2f}]" if row["rho_low"] is not None else ""))
        auroc = ("" if row["auroc_harmful"] is None
                 else f", AUROC harmful {row['auroc_harmful']:.2f} ({row['harmful']} flagged)")
        why = f" ({'; '.join(row['why'])})" if row["why"] else ""
        lines.append(f"{row['diagnostic']} vs effect over {counted(row['skills'], 'skill')}: {rho}{auroc}{why}")
    for line in lines:
        console.print(Text(terminal_safe(line)))
