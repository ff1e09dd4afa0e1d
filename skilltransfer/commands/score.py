"""``skilltransfer score``: rank a skill library by relevance (the knn utility, skills inside the embedder's null
last) or by utility (specificity x abstractness under ``--specificity``) against a task set."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from skilltransfer.commands.options import EmbedCache, NoCacheOld, warn_deprecated
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.memory.embedders import DEFAULT_EMBEDDER, make_embedder
from skilltransfer.memory.library import read_library
from skilltransfer.metrics.scoring import SKILL_TEXTS, ScoreReport, SkillScore, score_library, write_report
from skilltransfer.metrics.task_texts import load_task_texts
from skilltransfer.metrics.utility import DEFAULT_TAU, SPECIFICITY_MODES
from skilltransfer.util.text import terminal_safe

_ADVANCED = "Advanced"


def _domain(row: SkillScore) -> str:
    return " ".join(flag for flag, on in (("NULL", row.null_off_domain), ("OFF", row.off_domain)) if on)


def _print_report(report: ScoreReport, top: int | None, console: Console, rank: str = "relevance") -> None:
    ranked = report.by_relevance() if rank == "relevance" else report.ranked()
    shown = ranked[:top] if top else ranked
    title = "by relevance: inside the null last, then knn utility" if rank == "relevance" else "by utility"
    table = Table(title=f"Skill utility ({len(shown)} of {len(ranked)} skills, {title})")
    table.add_column("rank", justify="right")
    table.add_column("name", overflow="fold")
    for column in ("relevance", "specificity", "abstractness", "utility", "best-match cos"):
        table.add_column(column, justify="right")
    table.add_column("domain")
    for number, row in enumerate(shown, start=1):
        table.add_row(str(number), row.name, f"{row.relevance:.3f}", f"{row.specificity:.3f}",
                      f"{row.abstractness:.3f}", f"{row.utility:.3f}", f"{row.best_match:.3f}", _domain(row))
    console.print(table)
    summary = report.summary
    sample = f", {report.n_reference:,} sampled pairs" if report.sampled else ""
    console.print(f"{summary['n_skills']} skills x {report.n_tasks} tasks | embedder {report.embedder} | "
                  f"tau {report.tau:g} | specificity {report.specificity_mode}{sample} | "
                  f"skill text {report.skill_text}")
    console.print(f"utility mean {summary['mean_utility']:.3f}, median {summary['median_utility']:.3f} | "
                  f"specificity mean {summary['mean_specificity']:.3f} | "
                  f"abstractness mean {summary['mean_abstractness']:.3f}")
    for key in ("by_level", "by_format"):
        groups = ", ".join(f"{name} {vals['mean_utility']:.3f} (n={vals['n']})" for name, vals in summary[key].items())
        console.print(f"mean utility {key.replace('_', ' ')}: {groups}")
    console.print(f"off-domain (OFF): {summary['n_off_domain']} of {summary['n_skills']} skills have a best match "
                  f"below {report.off_domain_threshold:.3f}, the 5th percentile of each task's cosine to its k-th "
                  f"nearest task (k = {report.knn_k})")
    console.print(f"inside the null (NULL): {summary['n_null_off_domain']} of {summary['n_skills']} skills have a "
                  f"best match at or below {report.null_threshold:.3f}, the 0.95 quantile of off-topic texts' best "
                  "matches over these tasks with this embedder")


def _task_texts(tasks: str, field: str | None, split: str | None) -> list[str]:
    """The instructions of ``--tasks``: an env's tasks when it names a registered env (and is no file here), else
    the file or folder's."""
    from skilltransfer.envs import registry

    name = tasks.split(":", 1)[0]
    if Path(tasks).exists() or not (name in registry.ENVS or name == registry.OFFICEBENCH):
        if not Path(tasks).exists() and not Path(tasks).suffix and "/" not in tasks:  # not a file name either
            raise InputError(f"--tasks {tasks!r}: no such file or folder, and not an env (envs: "
                             f"{', '.join([*registry.ENVS, registry.OFFICEBENCH])})")
        if split is not None:
            raise InputError("--split selects an env's tasks: give --tasks an env name (apps, office, ...)")
        return load_task_texts(tasks, field=field)
    if field is not None:
        raise InputError("--field reads a task file: with --tasks an env name, the tasks' instructions are used")
    env = registry.get_env(tasks)
    return [task.instruction for task in env.tasks(split)]


def score(
    library: Annotated[Path, typer.Argument(help="Folder of SKILL.md packages, a skills .jsonl, or a memory folder.")],
    tasks: Annotated[str, typer.Option("--tasks", help="Task instructions: an env's name (apps, office, datasci, "
                                       "scienceworld, officebench[:<folder>]: its tasks' instructions), or a .jsonl, "
                                       ".txt, .json file, a folder of JSON task files (OfficeBench) or a saved HF "
                                       "dataset.")],
    split: Annotated[str | None, typer.Option(help="Only tasks of this split (dev/test), when --tasks is an env.")]
    = None,
    embedder: Annotated[str, typer.Option(help="Embedder: minilm, hash:DIM (test double) or a sentence-transformers "
                                               "folder.")] = DEFAULT_EMBEDDER,
    tau: Annotated[float, typer.Option(help="Abstractness softmax temperature.")] = DEFAULT_TAU,
    specificity: Annotated[Literal["pairs", "nearest", "knn"], typer.Option(
        "--specificity", help="pairs (paper), nearest or knn.")] = "pairs",
    skill_text: Annotated[Literal["description", "description+body"], typer.Option(
        "--skill-text", help="Embed the description or description+body.")] = "description",
    field: Annotated[str | None, typer.Option(help="Task text field (default: instruction, task, query or text).",
                                              rich_help_panel=_ADVANCED)] = None,
    top: Annotated[int | None, typer.Option(help="Show only the first N skills of the ranking (outputs keep all).")]
    = None,
    rank: Annotated[Literal["relevance", "utility"], typer.Option(
        "--rank", help="The table's order: relevance (default: skills inside the embedder's null last, then the knn "
        "utility, which ranks planted off-domain skills last) or utility (under --specificity; the paper's).")]
    = "relevance",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (.json or .csv): the full report.")]
    = None,
    seed: Annotated[int, typer.Option(help="Seed of this command's random draws: the sampled task pairs (above 10^7 "
                                           "pairs).", rich_help_panel=_ADVANCED)] = 0,
    embed_cache: EmbedCache = True,
    no_cache_old: NoCacheOld = False,
) -> ScoreReport:
    """Rank skills by utility = specificity x abstractness against a set of task instructions (seed §6.1)."""
    if specificity not in SPECIFICITY_MODES:
        raise InputError(f"--specificity must be one of {', '.join(SPECIFICITY_MODES)}, got {specificity!r}")
    if skill_text not in SKILL_TEXTS:
        raise InputError(f"--skill-text must be one of {', '.join(SKILL_TEXTS)}, got {skill_text!r}")
    if not (math.isfinite(tau) and tau > 0):
        raise InputError(f"--tau must be a number > 0, got {tau}")
    if rank not in ("relevance", "utility"):
        raise InputError(f"--rank must be relevance or utility, got {rank!r}")
    if top is not None and top < 1:
        raise InputError(f"--top must be >= 1, got {top}")
    if out is not None and out.suffix not in (".json", ".csv"):
        raise InputError(f"unknown output type {out.suffix!r}: use .json or .csv", path=out)
    if out is not None:
        check_output_path(out, flag="--out", folder=False)
    read = read_library(library).all_read()  # a library with a skill that cannot be read is refused
    skills = read.skills
    task_texts = _task_texts(str(tasks), field, split)
    if no_cache_old:
        warn_deprecated("--no-cache", "--no-embed-cache")
        embed_cache = False
    model = make_embedder(embedder, cache=embed_cache)
    try:
        report = score_library(skills, task_texts, model, tau=tau, specificity_mode=specificity, text=skill_text,
                               seed=seed)
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    _print_report(report, top, Console(), rank)
    for line in read.left_out():  # per skill, what of its package the agent would not be shown
        Console(stderr=True).print(f"left out: {terminal_safe(line)}", highlight=False, markup=False, soft_wrap=True)
    if out is not None:
        write_report(report, out)
        Console(stderr=True).print(f"wrote {out}")
    return report
