"""``skilltransfer validate``: does a library score predict what libraries (or skills) do? Every diagnostic ``score``
offers, and the executability checks and the LLM rubric, set beside outcomes measured elsewhere: Spearman and Kendall
with bootstrap intervals, paired differences, correlations within groups, a held-out split; table, JSON/CSV, figure.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from skilltransfer.commands.library import Lenient
from skilltransfer.commands.option_groups import MODEL, ModelOptions, with_groups
from skilltransfer.commands.options import MODEL_PANEL, EmbedCache, embedder_option
from skilltransfer.commands.validate_run import (
    ValidationRun,
    assemble,
    external_values,
    group_labels,
    judge_libraries,
    library_notes,
    make_context,
    match,
    measure_libraries,
    model_free_names,
    parts_of,
    read_libraries,
    run_statistics,
    skill_level,
)
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.memory.embedders import DEFAULT_EMBEDDER, default_cache_dir, make_embedder
from skilltransfer.metrics.diagnostics import LibraryDiagnostics, task_items
from skilltransfer.metrics.outcomes import load_key_points, read_outcomes
from skilltransfer.metrics.utility import DEFAULT_TAU
from skilltransfer.metrics.validation import DEFAULT_RESAMPLES, ValidationReport, jsonable
from skilltransfer.util.files import atomic_write_text
from skilltransfer.util.terminal import Console
from skilltransfer.util.text import terminal_safe

_ADVANCED = "Advanced"
_JUDGE = "LLM rubric"
CSV_COLUMNS = ["part", "diagnostic", "kind", "n", "spearman", "spearman_low", "spearman_high", "kendall",
               "kendall_low", "kendall_high", "replicates", "why"]


UNIT_PLURAL = {"library": "libraries", "skill": "skills"}


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    """``0.42 [-0.05, 0.74]``: the value and its 95 % interval (``-``: none)."""
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else "")


def _table(title: str, columns: list[str], rows: list[list[Text | str]], width: int, drop: list[str]) -> Table:
    """A table that fits ``width`` columns: the columns of ``drop`` are left out, in that order, while it does not."""
    shown = list(columns)

    def need(names: list[str]) -> int:
        widths = [max([len(name)] + [len(str(row[columns.index(name)])) for row in rows]) for name in names]
        return sum(widths) + 2 * (len(names) - 1)

    for name in drop:
        if need(shown) <= width:
            break
        shown.remove(name)
    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for name in shown:
        table.add_column(name, justify="left" if name in (columns[0], "kind", "minus", "grouping") else "right",
                         no_wrap=True, overflow="fold")
    for row in rows:
        table.add_row(*(row[columns.index(name)] for name in shown))
    return table


def print_report(run: ValidationRun, console: Console) -> None:
    """Three tables: each diagnostic's rho (and tau) on all units and on each part; the paired differences; the
    within-group correlations; then the lines under them."""
    report = run.report
    parts = list(report.correlations)
    plural = UNIT_PLURAL[run.outcomes.unit]
    columns = ["diagnostic", "kind", f"rho, all {len(report.parts['all'])}", "tau, all",
               *(f"rho, {part} {len(report.parts[part])}" for part in parts[1:])]
    rows: list[list[Text | str]] = []
    for name in report.diagnostics:
        cells: list[Text | str] = [Text(terminal_safe(name)), report.kinds.get(name, "")]
        row = report.correlation("all", name)
        if row is not None and row.spearman is None:
            cells += ["-", "-"]
        else:
            cells += [_interval(row.spearman, row.spearman_low, row.spearman_high) if row else "-",
                      _interval(row.kendall, row.kendall_low, row.kendall_high) if row else "-"]
        for part in parts[1:]:
            other = report.correlation(part, name)
            cells.append(_interval(other.spearman, other.spearman_low, other.spearman_high) if other else "-")
        rows.append(cells)
    width = console.width
    console.print(_table(f"{len(report.units)} {plural} against {terminal_safe(run.outcomes.column)} "
                         f"({terminal_safe(run.outcomes.path.name)})", columns, rows, width, ["tau, all", "kind"]))
    paired: list[list[Text | str]] = [
        [Text(terminal_safe(p.first)), Text(terminal_safe(p.second)), _interval(p.difference, p.low, p.high),
         f"{p.share_first_better:.0%}" if p.share_first_better is not None else "-"]
        for p in report.paired if p.difference is not None]
    if paired:
        console.print(_table("paired: rho(diagnostic) - rho(minus), over the same resamples",
                             ["diagnostic", "minus", "difference", "first higher"], paired, width, ["first higher"]))
    grouped: list[list[Text | str]] = [
        [Text(terminal_safe(g.diagnostic)), Text(terminal_safe(g.grouping)), _interval(g.pooled, g.low, g.high),
         Text(terminal_safe(", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in g.groups.items())))]
        for g in report.groups if g.pooled is not None]
    if grouped:
        console.print(_table("within groups: size-weighted mean of each group's rho (groups of 3+)",
                             ["diagnostic", "grouping", "rho within", "per group"], grouped, width, ["per group"]))
    for line in summary_lines(run):
        console.print(Text(line))


def missing_lines(report: ValidationReport) -> list[str]:
    """Why a diagnostic has no rho on all units, one line each."""
    return [terminal_safe(f"{row.diagnostic}: no rho ({row.why})") for row in report.correlations.get("all", [])
            if row.spearman is None and row.why]


def summary_lines(run: ValidationRun) -> list[str]:
    """What the tables do not show: how the intervals were made, the best diagnostic, notes, the judge's cost."""
    report = run.report
    lines = [f"rho: Spearman, tau: Kendall tau-b; [95 % percentile bootstrap over {UNIT_PLURAL[run.outcomes.unit]}"
             + (f" and the {report.settings['tasks']} tasks behind the outcomes"
                if report.settings.get("task_bootstrap") else "")
             + f", {report.settings['resamples']} resamples, seed {report.settings['seed']}]",
             *missing_lines(report)]
    if report.best is not None:
        chosen = report.correlation(report.chosen_on, report.best)
        held = report.correlation("held_out", report.best)
        text = f"best model-free diagnostic (chosen on {report.chosen_on}): {report.best} rho " + (
            _interval(chosen.spearman, chosen.spearman_low, chosen.spearman_high) if chosen else "-")
        if held is not None:
            text += f"; on held_out (reported once): {_interval(held.spearman, held.spearman_low, held.spearman_high)}"
        lines.append(terminal_safe(text))
    if run.left_out:
        lines.append(terminal_safe(f"left out (no outcome): {', '.join(run.left_out)}"))
    for name, notes in run.libraries.items():
        for item in notes.get("unreadable", [])[:3]:
            lines.append(terminal_safe(f"not read ({name}): {item}"))
        if len(notes.get("unreadable", [])) > 3:
            lines.append(terminal_safe(f"not read ({name}): {len(notes['unreadable']) - 3} more (--out x.json "
                                       "lists them)"))
    if run.rubric is not None:
        usage = run.rubric["usage"]
        cost = run.rubric.get("cost_usd")
        lines.append(f"LLM rubric ({terminal_safe(run.rubric['model'])}): {usage['calls']} calls, {usage['cached']} "
                     f"from the cache, {usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion "
                     f"tokens ({usage['paid_prompt_tokens']:,} + {usage['paid_completion_tokens']:,} paid)"
                     + (f", ${cost:.4f}" if cost is not None else ", no --price given")
                     + f"; {usage['unparsed']} unparsed, {usage['context_exceeded']} over the window, "
                       f"{usage['cut']} skill texts cut")
    return lines


def write_out(run: ValidationRun, out: Path) -> None:
    """The JSON (everything) or the CSV (one row per part and diagnostic), atomically."""
    if out.suffix == ".json":
        atomic_write_text(out, json.dumps(jsonable(run.to_dict()), indent=1, default=str) + "\n")
        return
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for part, rows in run.report.correlations.items():
        for row in rows:
            data = row.to_dict()
            writer.writerow({"part": part, "kind": run.report.kinds.get(row.diagnostic, ""),
                             **{k: data[k] for k in CSV_COLUMNS if k in data}})
    atomic_write_text(out, buffer.getvalue())


@with_groups
def validate(
    libraries: Annotated[list[Path], typer.Argument(help="Skill libraries (folders of SKILL.md packages, .jsonl "
                                                         "files or memory folders); with skill outcomes, one.")],
    outcomes: Annotated[Path, typer.Option("--outcomes", help="What the libraries did: a .csv/.tsv/.json with a "
                                           "library column and an outcome (one row per library), library and task "
                                           "columns (one row per run), or a skill column (one library's skills).")],
    tasks: Annotated[str, typer.Option("--tasks", help="Task instructions the diagnostics are measured against: an "
                                       "env's name, a .jsonl, .txt, .json file, a folder of JSON task files or of "
                                       "instruction.md files, or a saved HF dataset.")],
    *,
    model: Annotated[ModelOptions, MODEL],
    outcome: Annotated[str | None, typer.Option("--outcome", help="The outcome column (default: the one numeric "
                                                "column, or pass_rate, success, effect, outcome).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="A column of the outcomes file to correlate "
                                                    "within (e.g. model, method); repeatable.")] = None,
    external: Annotated[list[str] | None, typer.Option("--external", help="A column of the outcomes file that is a "
                                                       "diagnostic measured elsewhere (e.g. a benchmark's LLM-judged "
                                                       "coverage): validated beside the others; repeatable.")] = None,
    tune_on: Annotated[str | None, typer.Option("--tune-on", metavar="COLUMN=VALUE", help="Choose the best "
                                                "model-free diagnostic on these units only and report the others "
                                                "once, held out (e.g. family=claude).")] = None,
    versus: Annotated[list[str] | None, typer.Option("--versus", help="Paired differences: every diagnostic's rho "
                                                     "minus this one's, over the same resamples (default: "
                                                     "mean_utility, the paper's); repeatable.")] = None,
    diagnostics: Annotated[str | None, typer.Option("--diagnostics", help="Only these model-free diagnostics, "
                                                    "comma-separated (default: all).")] = None,
    key_points: Annotated[Path | None, typer.Option("--key-points", help="Key points per task (a JSON object task "
                                                    "id -> list, or SkillLearnBench's eval_keypoints folder): adds "
                                                    "keypoint_coverage, and the rubric's coverage uses them.")]
    = None,
    lenient: Lenient = False,
    run_scripts: Annotated[bool, typer.Option("--run-scripts/--no-run-scripts", help="Start the .py scripts the "
                                              "packages ship in the sandbox (python script --help, 10 s); off: "
                                              "parse them only.")] = True,
    rubric: Annotated[str, typer.Option("--rubric", help="With --model: which LLM rubric parts to run, "
                                        "comma-separated: coverage, executability, safety.",
                                        rich_help_panel=_JUDGE)] = "coverage,executability,safety",
    max_chars: Annotated[int, typer.Option("--max-chars", min=500, help="Cut each skill text shown to the judge to "
                                           "this many characters.", rich_help_panel=_JUDGE)] = 20_000,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Re-asks after an unusable reply from the judge.",
                                         rich_help_panel=_JUDGE)] = 1,
    price: Annotated[str | None, typer.Option("--price", metavar="INPUT,OUTPUT", help="The model's price (the "
                                              "judge's), INPUT,OUTPUT dollars per million tokens: the rubric's "
                                              "cost.", rich_help_panel=MODEL_PANEL)] = None,
    embedder: Annotated[str, embedder_option("Embedder: minilm, hash:DIM (test double) or a sentence-transformers "
                                             "folder.")] = DEFAULT_EMBEDDER,
    field: Annotated[str | None, typer.Option(help="Task text field (default: instruction, task, query or text).",
                                              rich_help_panel=_ADVANCED)] = None,
    resamples: Annotated[int, typer.Option(min=200, help="Bootstrap resamples.", rich_help_panel=_ADVANCED)]
    = DEFAULT_RESAMPLES,
    seed: Annotated[int, typer.Option(help="Seed of this command's random draws: the bootstrap and score's sampled "
                                           "task pairs.", rich_help_panel=_ADVANCED)] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file: .json (everything: values, "
                                             "correlations, pairs, groups, notes) or .csv (one row per part and "
                                             "diagnostic).")] = None,
    figure: Annotated[Path | None, typer.Option("--figure", help="Draw the correlations and the best diagnostic "
                                                "against the outcome (.png, .svg or .pdf).")] = None,
    embed_cache: EmbedCache = True,
) -> ValidationRun:
    """Validate diagnostics against outcomes measured elsewhere: Spearman and Kendall with bootstrap intervals,
    paired differences, within-group correlations, a held-out split."""
    from skilltransfer.commands.induce import _price
    from skilltransfer.commands.score import _tasks as task_texts

    parts = _check_files_and_rubric(out, figure, rubric)
    prices = _price(price)
    price_pair = (prices["input"], prices["output"]) if prices is not None else None
    judge = model.spec is not None or model.base_url is not None or model.script is not None
    progress = Console(stderr=True)

    def say(line: str) -> None:
        progress.print(Text(terminal_safe(line)))

    read = read_outcomes(outcomes, outcome=outcome)
    task_list = task_texts(tasks, field, None)
    items = task_items([t.id for t in task_list], [t.text for t in task_list])
    points = load_key_points(key_points) if key_points is not None else None
    libs = read_libraries(libraries, say, lenient=lenient)
    matched = match(libs, read, items)
    split = parts_of(matched.units, read, tune_on)  # every check of the outcomes file before anything is measured
    groupings = group_labels(matched.units, read, group or [])
    extra = external_values(matched.units, read, external or [])
    chosen = [name.strip() for name in diagnostics.split(",")] if diagnostics else None

    def rubric_of(libraries: list[Any], measured: list[LibraryDiagnostics]) -> Any:
        return _judge(model, libraries, items, measured, points, parts, max_chars, retries, price_pair, say)

    measured = _measure(matched, read, task_list, items, points, chosen, extra, rubric_of if judge else None, parts,
                        embedder=embedder, embed_cache=embed_cache, run_scripts=run_scripts, seed=seed, say=say)
    report = run_statistics(matched, measured.values, measured.kinds, parts=split, groupings=groupings,
                            pairs_with=versus or ["mean_utility"], resamples=resamples, seed=seed)
    run = ValidationRun(report, read, measured.notes, matched.left_out, measured.rubric_info,
                        tasks={"n": len(items), "groups": len({t.group for t in items}),
                               "over_window": measured.long_texts, "source": tasks},
                        settings={"embedder": embedder, "tau": DEFAULT_TAU, "specificity": "pairs",
                                  "skill_text": "description", "run_scripts": run_scripts, "tune_on": tune_on,
                                  "lenient": lenient,
                                  "key_points": str(key_points) if key_points else None})
    print_report(run, Console())
    _write_files(run, out, figure, say)
    return run


def _check_files_and_rubric(out: Path | None, figure: Path | None, rubric: str) -> list[str]:
    """The rubric parts ``--rubric`` names, after ``--out`` and ``--figure`` are checked.

    Raises:
        InputError: an unknown output or figure type, an output that cannot be written, an unknown rubric part.
    """
    if out is not None:
        if out.suffix not in (".json", ".csv"):
            raise InputError(f"unknown output type {out.suffix!r}: use .json or .csv", path=out)
        check_output_path(out, flag="--out", folder=False)
    if figure is not None:
        if figure.suffix not in (".png", ".svg", ".pdf"):
            raise InputError(f"unknown figure type {figure.suffix!r}: use .png, .svg or .pdf", path=figure)
        check_output_path(figure, flag="--figure", folder=False)
    parts = [p.strip() for p in rubric.split(",") if p.strip()]
    if any(p not in ("coverage", "executability", "safety") for p in parts):
        raise InputError(f"--rubric takes coverage, executability, safety (comma-separated), got {rubric!r}")
    return parts


@dataclass
class _Measured:
    """Each unit's diagnostic values and their kinds, notes per library, the rubric's record and the tasks over the
    embedder's window."""

    values: Any
    kinds: Any
    notes: dict[str, Any]
    rubric_info: dict[str, Any] | None
    long_texts: Any


def _measure(matched: Any, read: Any, task_list: list[Any], items: list[Any], points: dict[str, list[str]] | None,
             chosen: list[str] | None, extra: Any, rubric_of: Any, parts: list[str], *, embedder: str,
             embed_cache: bool, run_scripts: bool, seed: int, say: Any) -> _Measured:
    """Every diagnostic of every unit (library or skill), with the LLM rubric when ``rubric_of`` is given; the
    embedder and the script starter closed after."""
    starter = None
    if run_scripts:
        from skilltransfer.sandbox.script_check import ScriptStarter

        starter = ScriptStarter()
    embed = make_embedder(embedder, cache=embed_cache)
    rubric_info: dict[str, Any] | None = None
    try:
        context, whole = make_context(task_list, embed, key_points=points, run_script=starter, tau=DEFAULT_TAU,
                                      seed=seed, progress=say)
        if read.kind == "skill":
            values, kinds = skill_level(matched, items, embed, whole, starter, tau=DEFAULT_TAU, seed=seed)
            notes = {lib.name: {"skills": len(lib.skills), "unreadable": lib.unreadable} for lib in matched.libraries}
        else:
            names = model_free_names(chosen, points is not None)
            measured = measure_libraries(context, matched.libraries, say)
            if rubric_of is not None:
                measured, rubric_info = rubric_of(matched.libraries, measured)
                names += [f"llm_{p}" for p in ("coverage", "executability", "safety") if p in parts]
            values, kinds = assemble(matched, measured, names, extra)
            notes = {lib.name: library_notes(m, lib) for lib, m in zip(matched.libraries, measured, strict=True)}
        return _Measured(values, kinds, notes, rubric_info, whole.long_texts)
    finally:
        if starter is not None:
            starter.close()
        close = getattr(embed, "close", None)
        if close is not None:
            close()


def _write_files(run: ValidationRun, out: Path | None, figure: Path | None, say: Any) -> None:
    """``--out`` and ``--figure``, each said when written."""
    if out is not None:
        write_out(run, out)
        say(f"wrote {out}")
    if figure is not None:
        from skilltransfer.report.validation_figure import save_validation_figure

        save_validation_figure(run.report, run.outcomes.column, figure)
        say(f"wrote {figure}")


def _judge(model: ModelOptions, libraries: list[Any], items: list[Any], measured: list[LibraryDiagnostics],
           points: dict[str, list[str]] | None, parts: list[str], max_chars: int, retries: int,
           price: tuple[float, float] | None, say: Any) -> tuple[list[LibraryDiagnostics], dict[str, Any]]:
    """The LLM rubric of every library (`judge_libraries`), through the judge the model flags name, its responses
    cached, and the judge's usage and cost."""
    from skilltransfer.llm import make_model

    if model.cache is None and model.cache_mode != "off":
        model.cache = str(default_cache_dir() / "rubric-responses.sqlite")
    chat = make_model(model.config())
    try:
        rubric = judge_libraries(chat, libraries, items, measured, points, rubrics=parts, max_chars=max_chars,
                                 retries=retries, progress=say)
    finally:
        close = getattr(chat, "close", None)
        if close is not None:
            close()
    info = {"model": model.record(), "prompts": rubric.prompts.ids(), "usage": rubric.usage.to_dict(),
            "cost_usd": rubric.usage.cost(price), "price": price, "cache": model.cache,
            "key_points": "given" if points is not None else "listed by the judge"}
    return measured, info
