"""``skilltransfer score``: rank a skill library against a task set, in one order on screen, in JSON and in CSV: by
relevance (the knn utility, skills inside the embedder's null last; default) or by utility (specificity x
abstractness under ``--specificity``), with both measures, what retrieval would do with each skill (nearest skill of
how many tasks, in how many tasks' top-k) and its best-matching task. The screen shows the first `SCREEN_TOP` skills
(``--all``: every one; the files always hold all); ``--effects`` is `skilltransfer.commands.score_effects`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.text import Text

from skilltransfer.commands.options import EmbedCache, NoCacheOld, embedder_option, warn_deprecated
from skilltransfer.commands.score_table import print_ranking
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.memory.embedders import DEFAULT_EMBEDDER, make_embedder
from skilltransfer.memory.library import read_library
from skilltransfer.metrics.crowding import DEFAULT_BAND, Band
from skilltransfer.metrics.retrieval import DEFAULT_TOP_K
from skilltransfer.metrics.scoring import (
    RANK_MEASURES,
    SKILL_TEXTS,
    GroupedScore,
    ScoreReport,
    score_library,
    write_report,
)
from skilltransfer.metrics.task_texts import TaskText, load_tasks
from skilltransfer.metrics.utility import DEFAULT_TAU, SPECIFICITY_MODES
from skilltransfer.util.counting import counted
from skilltransfer.util.terminal import Console
from skilltransfer.util.text import terminal_safe

_ADVANCED = "Advanced"
SCREEN_TOP = 50
"""Skills the screen shows by default (a line says how many more and how to see them)."""


def _groups(groups: dict[str, dict[str, float]], first: str, second: str) -> str:
    return ", ".join(f"{name} {vals['mean_' + first]:.3f} / {vals['mean_' + second]:.3f} (n={vals['n']:g})"
                     for name, vals in groups.items())


def _print_report(report: ScoreReport, top: int | None, console: Console, out: Path | None = None) -> None:
    """The ranking's first ``top`` skills (None: all) as a table, a line saying how to see the rest, and the
    summary lines."""
    total = len(report.skills)
    shown = report.rows(limit=top)
    console.print(Text(f"Skill ranking ({len(shown):,} of {counted(total, 'skill')}) by {report.rank_by}: "
                       f"{report.ranking_rule()}"))
    print_ranking(report, shown, console)
    if len(shown) < total:
        files = f"{out} holds all of them" if out is not None else "--out FILE.csv (or .json) writes all of them"
        console.print(Text(terminal_safe(f"... {counted(total - len(shown), 'more skill')} not shown: --all prints "
                                         f"every one, --top N the first N; {files}")))
    summary = report.summary
    sample = f", {report.n_reference:,} sampled pairs" if report.sampled else ""
    ranked, other = (("relevance", "utility") if report.rank_by == "relevance" else ("utility", "relevance"))
    names = {"relevance": "relevance", "utility": report.utility_header}
    lines = [
        f"{counted(summary['n_skills'], 'skill')} x {counted(report.n_tasks, 'task')} | embedder {report.embedder} | "
        f"tau {report.tau:g} | "
        f"specificity {report.specificity_mode}{sample} | skill text {report.skill_text}",
        f"relevance = knn utility (knn specificity x abstractness); {report.utility_header} = "
        f"{report.specificity_mode} specificity x abstractness",
        " | ".join(f"{names[m]} mean {summary['mean_' + m]:.3f}, median {summary['median_' + m]:.3f}"
                   for m in (ranked, other))
        + f" | specificity mean {summary['mean_specificity']:.3f} | abstractness mean "
          f"{summary['mean_abstractness']:.3f}",
        *(f"mean {names[ranked]} / {names[other]} by {key[3:]}: {_groups(summary[key], ranked, other)}"
          for key in ("by_level", "by_format")),
    ]
    retrieval = summary["retrieval"]
    of_all = f"of {counted(summary['n_skills'], 'skill')}"
    floor = f", cosine >= {report.min_score:g}" if report.min_score is not None else ""
    empty = (f"; {retrieval['n_tasks_without_hit']} of {report.n_tasks} tasks retrieve none"
             if report.min_score is not None else "")
    lines.append(f"retrieval (each task's text as the query, top {report.top_k} by cosine with the skill's "
                 f"{report.skill_text}{floor}): {retrieval['n_nearest_for_some_task']} {of_all} "
                 f"are the nearest skill of some task (column nearest), {retrieval['n_in_no_top_k']} are in no task's "
                 f"top {report.top_k} (column top-{report.top_k}){empty}")
    lines.append(f"off-domain (OFF): {summary['n_off_domain']} {of_all} have a best match "
                 f"below {report.off_domain_threshold:.3f}, the 5th percentile of each task's cosine to its k-th "
                 f"nearest task (k = {report.knn_k})")
    lines.append(f"inside the null (NULL): {summary['n_null_off_domain']} {of_all} have a "
                 f"best match at or below {report.null_threshold:.3f}, the 0.95 quantile of off-topic texts' best "
                 "matches over these tasks with this embedder")
    lines.extend(_crowding_lines(report))
    for line in lines:
        console.print(Text(terminal_safe(line)))


def _crowding_lines(report: ScoreReport, clusters_shown: int = 3, names_shown: int = 4) -> list[str]:
    """The crowding summary: how many skills are crowded / near-duplicates, and the largest crowded clusters."""
    crowded = report.crowding
    if crowded is None:
        return []
    counts, band, n = crowded.counts(), crowded.band, len(report.skills)
    lines = [f"crowding (column nn cos: each skill's nearest other skill by description cosine): {counts['crowded']} "
             f"of {counted(n, 'skill')} crowded (nn cos {band.low:g}-{band.high:g}, the band where routing errors "
             "concentrate), "
             f"{counts['near_duplicate']} near-duplicates (above {band.high:g}); {counts['clusters']} crowded "
             f"cluster{'s' if counts['clusters'] != 1 else ''} (skills linked at cosine >= {band.low:g}) holding "
             f"{counted(counts['in_clusters'], 'skill')}"]
    names = {row.id: row.name for row in report.skills}
    for number, members in enumerate(crowded.clusters[:clusters_shown], start=1):
        shown = ", ".join(terminal_safe(names[m]) for m in members[:names_shown])
        more = f" and {len(members) - names_shown} more" if len(members) > names_shown else ""
        stats = crowded.cluster_stats[number - 1]
        lines.append(f"  cluster {number} ({counted(len(members), 'skill')}, max cosine {stats.max_cosine:.3f}): "
                     f"{shown}{more}")
    return lines



def _tasks(tasks: str, field: str | None, split: str | None) -> list[TaskText]:
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
        from skilltransfer.log.atif_files import looks_like_atif, task_instructions

        if field is None and Path(tasks).exists() and looks_like_atif(tasks):  # trajectories: their first user message
            found, left = task_instructions([tasks])
            for line in left:
                Console(stderr=True).print(Text(f"not read: {terminal_safe(line)}"))
            if len(found) < 2:
                raise InputError(f"need at least 2 tasks, found {len(found)} in these ATIF trajectories", path=tasks)
            return [TaskText(task_id, text) for task_id, text in found]
        return load_tasks(tasks, field=field)
    if field is not None:
        raise InputError("--field reads a task file: with --tasks an env name, the tasks' instructions are used")
    env = registry.get_env(tasks)
    return [TaskText(task.id, task.instruction) for task in env.tasks(split)]


def score(
    library: Annotated[Path, typer.Argument(help="Folder of SKILL.md packages, a skills .jsonl, or a memory folder.")],
    tasks: Annotated[str | None, typer.Option("--tasks", help="Task instructions: an env's name (apps, office, "
                                              "datasci, scienceworld, officebench[:<folder>]: its tasks' "
                                              "instructions), or a .jsonl, .txt, .json file, a folder of JSON task "
                                              "files (OfficeBench), a saved HF dataset, or ATIF trajectories (a file, "
                                              "a folder, a Harbor job folder: each task's first user message). With "
                                              "--effects, default: each group's own tasks.")] = None,
    split: Annotated[str | None, typer.Option(help="Only tasks of this split (dev/test), when --tasks is an env.")]
    = None,
    embedder: Annotated[str | None, embedder_option("Embedder: minilm (default), hash:DIM (test double) or a "
                                                    "sentence-transformers folder. With --effects, default: the runs' "
                                                    "own.")] = None,
    tau: Annotated[float, typer.Option(help="Abstractness softmax temperature.")] = DEFAULT_TAU,
    specificity: Annotated[Literal["pairs", "nearest", "knn"], typer.Option(
        "--specificity", help="pairs (paper), nearest or knn.")] = "pairs",
    skill_text: Annotated[Literal["description", "description+body"], typer.Option(
        "--skill-text", help="Embed the description or description+body.")] = "description",
    field: Annotated[str | None, typer.Option(help="Task text field (default: instruction, task, query or text).",
                                              rich_help_panel=_ADVANCED)] = None,
    top: Annotated[int | None, typer.Option(help=f"Show the first N skills of the ranking (default {SCREEN_TOP}; "
                                                 "outputs keep all).")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every skill of the ranking on screen.")] = False,
    rank: Annotated[Literal["relevance", "utility"], typer.Option(
        "--rank", help="The one order of the table, the JSON and the CSV: relevance (default: skills inside the "
        "embedder's null last, then the knn utility, which ranks planted off-domain skills last) or utility (under "
        "--specificity; the paper's).")] = "relevance",
    top_k: Annotated[int, typer.Option("--top-k", help="Skills retrieved per query, in the retrieval counts (each "
                                                       "task's text is the query; the run's agent.top_k).")]
    = DEFAULT_TOP_K,
    min_score: Annotated[float | None, typer.Option(
        "--min-score", help="Retrieval floor of the counts: hits below this cosine are dropped (the run's "
        "agent.retrieval_min_score; default none, the paper's plain top-k).", rich_help_panel=_ADVANCED)] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (.json or .csv): the full report.")]
    = None,
    seed: Annotated[int, typer.Option(help="Seed of this command's random draws: the sampled task pairs (above 10^7 "
                                           "pairs), the effects' bootstrap.", rich_help_panel=_ADVANCED)] = 0,
    effects: Annotated[list[Path] | None, typer.Option(
        "--effects", help="Run folders (or grid folders) that masked this library's skills (mask_rate > 0): each "
        "skill's effect on success with its CI and harmful flag beside its diagnostics, one group per env, model "
        "and condition as report's skill_effects, and how well each diagnostic predicts the effects "
        "(docs/utility-effects.md); repeatable.")] = None,
    pool: Annotated[bool, typer.Option("--pool", help="With --effects: one group over every run (each skill's "
                                                      "draws pooled over envs and arms; report keeps them apart).",
                                       rich_help_panel=_ADVANCED)] = False,
    crowding_band: Annotated[tuple[float, float], typer.Option(
        "--crowding-band", metavar="LOW HIGH", help="The description cosines counted as crowded (a skill's nearest "
        "other skill in this band; default the band where a 989-skill routing study found routing errors "
        "concentrate).", rich_help_panel=_ADVANCED)] = (DEFAULT_BAND.low, DEFAULT_BAND.high),
    embed_cache: EmbedCache = True,
    no_cache_old: NoCacheOld = False,
    lenient: Annotated[bool, typer.Option(
        "--lenient", help="Also read model-written SKILL.md files the format refuses (no --- fences, ...), each "
        "recorded as read leniently (library show --lenient).", rich_help_panel=_ADVANCED)] = False,
) -> ScoreReport | GroupedScore:
    """Rank a skill library against a set of task instructions: relevance, utility = specificity x abstractness
    (seed §6.1), retrieval counts and best-matching task per skill, in one order on screen and in the files."""
    _check_flags(specificity, skill_text, tau, rank, top_k, min_score, top, show_all, pool, effects, out,
                 crowding_band, tasks)
    runs = None
    if effects:
        from skilltransfer.commands.score_effects import masked_runs  # the report's reading of runs

        runs = masked_runs(effects)
    read = read_library(library, lenient=lenient)  # each skill that cannot be read is named, the rest scored
    for line in [*(f"warning: {line}" for line in read.unreadable), *read.layout_lines()]:
        Console(stderr=True).print(terminal_safe(line), highlight=False, markup=False, soft_wrap=True)
    if no_cache_old:
        warn_deprecated("--no-cache", "--no-embed-cache")
        embed_cache = False
    task_set = _tasks(str(tasks), field, split) if tasks is not None else None
    shown = None if show_all else (top or SCREEN_TOP)
    options: dict[str, Any] = {"tau": tau, "specificity_mode": specificity, "text": skill_text, "rank_by": rank,
                               "top_k": top_k, "min_score": min_score,
                               "band": Band(*crowding_band)}
    result: ScoreReport | GroupedScore
    if effects:
        assert runs is not None
        result = _score_with_effects(effects, runs, read.skills, library, tasks, task_set, shown, out,
                                     embedder=embedder, embed_cache=embed_cache, pool=pool, seed=seed, **options)
    else:
        assert task_set is not None
        result = _score_alone(read.skills, library, tasks, task_set, shown, out, embedder=embedder,
                              embed_cache=embed_cache, seed=seed, **options)
    for line in read.left_out():  # per skill, what of its package the agent would not be shown
        Console(stderr=True).print(f"left out: {terminal_safe(line)}", highlight=False, markup=False, soft_wrap=True)
    if out is not None:
        write_report(result, out)
        Console(stderr=True).print(f"wrote {out}")
    return result


def _check_flags(specificity: str, skill_text: str, tau: float, rank: str, top_k: int, min_score: float | None,
                 top: int | None, show_all: bool, pool: bool, effects: list[Path] | None, out: Path | None,
                 crowding_band: tuple[float, float], tasks: str | None) -> None:
    """Refuse a bad flag or combination of flags, naming it, before anything is read.

    Raises:
        InputError: the first bad flag.
    """
    if specificity not in SPECIFICITY_MODES:
        raise InputError(f"--specificity must be one of {', '.join(SPECIFICITY_MODES)}, got {specificity!r}")
    if skill_text not in SKILL_TEXTS:
        raise InputError(f"--skill-text must be one of {', '.join(SKILL_TEXTS)}, got {skill_text!r}")
    if not (math.isfinite(tau) and tau > 0):
        raise InputError(f"--tau must be a number > 0, got {tau}")
    if rank not in RANK_MEASURES:
        raise InputError(f"--rank must be relevance or utility, got {rank!r}")
    if top_k < 1:
        raise InputError(f"--top-k must be >= 1, got {top_k}")
    if min_score is not None and not (math.isfinite(min_score) and -1 <= min_score <= 1):
        raise InputError(f"--min-score must be a cosine in [-1, 1], got {min_score}")
    if top is not None and top < 1:
        raise InputError(f"--top must be >= 1, got {top}")
    if top is not None and show_all:
        raise InputError("--top and --all: give one (--all shows every skill, --top N the first N)")
    if pool and not effects:
        raise InputError("--pool pools the --effects runs: give --effects RUNS")
    if out is not None and out.suffix not in (".json", ".csv"):
        raise InputError(f"unknown output type {out.suffix!r}: use .json or .csv", path=out)
    if not all(math.isfinite(x) for x in crowding_band) or not -1 <= crowding_band[0] <= crowding_band[1] <= 1:
        raise InputError(f"--crowding-band needs two cosines LOW HIGH with -1 <= LOW <= HIGH <= 1, got "
                         f"{crowding_band[0]} {crowding_band[1]}")
    if out is not None:
        check_output_path(out, flag="--out", folder=False)
    if not effects and tasks is None:
        raise InputError("give --tasks (the task instructions to score against), or --effects RUNS (their tasks)")


def _score_with_effects(effects: list[Path], runs: Any, skills: list[Any], library: Path, tasks: str | None,
                        task_set: list[TaskText] | None, shown: int | None, out: Path | None, *,
                        embedder: str | None, embed_cache: bool, pool: bool, seed: int,
                        **options: Any) -> GroupedScore:
    """``--effects``: score the library per group of the masked runs, each group's ranking printed with its skill
    effects, then the notes and warnings."""
    from skilltransfer.commands.score_effects import effects_score, group_label, print_effects

    console = Console()
    scored = effects_score(effects, runs, skills, library, tasks=task_set, task_set=tasks or "the runs' own tasks",
                           embedder=embedder, embed_cache=embed_cache, pool=pool, seed=seed, **options)
    against = "the runs' own tasks (report's utility_effects too)" if tasks is None else f"--tasks {tasks}"
    for number, group in enumerate(scored.grouped.groups, start=1):
        label = group_label(group.env, group.model, group.condition)
        console.print(Text(terminal_safe(f"== group {number} of {len(scored.grouped.groups)}: {label}"
                                         + (" (every run pooled: --pool)" if pool else "") + " ==")),
                      soft_wrap=True)
        _print_report(group.report, shown, console, out)
        print_effects(group, console, against)
    for line in scored.notes:
        Console(stderr=True).print(f"note: {terminal_safe(line)}", highlight=False, markup=False, soft_wrap=True)
    for line in scored.warnings:
        Console(stderr=True).print(f"warning: {terminal_safe(line)}", highlight=False, markup=False,
                                   soft_wrap=True)
    return scored.grouped


def _score_alone(skills: list[Any], library: Path, tasks: str | None, task_set: list[TaskText], shown: int | None,
                 out: Path | None, *, embedder: str | None, embed_cache: bool, seed: int,
                 **options: Any) -> ScoreReport:
    """Score the library against ``task_set`` with the embedder (closed after) and print its ranking."""
    model = make_embedder(embedder or DEFAULT_EMBEDDER, cache=embed_cache)
    try:
        report = score_library(skills, [task.text for task in task_set], model, seed=seed,
                               task_ids=[task.id for task in task_set], **options)
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    report.library, report.task_set = str(library), str(tasks)
    _print_report(report, shown, Console(), out)
    return report
