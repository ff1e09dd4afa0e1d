"""``skilltransfer triggers``: trigger evals in skill-creator's format, run with the library as the agent sees it, and
per skill precision, recall and F1 with CIs, isolated beside competitive (`skilltransfer.runner.triggers`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from skilltransfer.commands.option_groups import SPEC, ModelOptions, SpecLayers, model_group, with_groups
from skilltransfer.commands.options import embedder_option, progress_option
from skilltransfer.errors import check_output_path
from skilltransfer.util.terminal import Console

_ADVANCED = "Advanced"


def _pct(value: tuple[float, float, float] | None) -> str:
    if value is None:
        return "–"
    return f"{100 * value[0]:.0f} [{100 * value[1]:.0f}, {100 * value[2]:.0f}]"


@with_groups
def triggers(
    library: Annotated[str, typer.Argument(help="The skill library: a folder of SKILL.md packages, a .jsonl or a "
                                                "run's memory/ folder.")],
    *,
    evals: Annotated[Path | None, typer.Option(help="The eval set: [{\"query\": ..., \"should_trigger\": true}, ...] "
                                               "for --skill, or {\"skill\": [...], ...}; default: each skill "
                                               "folder's evals/trigger*.json.")] = None,
    skill: Annotated[str | None, typer.Option(help="A skill of the library (its name): the one a list eval set is "
                                                   "for (without --evals: only its evals/trigger*.json).")] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Times each query is asked (a trigger rate per "
                                                            "query).")] = 3,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: triggers.json, triggers.csv, "
                                      "queries.csv and runs/ (rerunning resumes).")] = Path("triggers"),
    model: Annotated[ModelOptions, model_group(max_tokens="Most completion tokens per call.")],
    spec_layers: Annotated[SpecLayers, SPEC],
    setting: Annotated[list[str] | None, typer.Option(
        "--setting", help="isolated (only the skill under test in the library) and/or competitive (the whole "
        "library); default both.", rich_help_panel=_ADVANCED)] = None,
    steps: Annotated[int, typer.Option(min=1, help="Executor steps per ask (a skill loaded within them "
                                                   "triggered).", rich_help_panel=_ADVANCED)] = 3,
    top_k: Annotated[int | None, typer.Option(min=1, help="Skills retrieved per query in the competitive setting: "
                                                         "the cards shown (default: every skill of the library).",
                                              rich_help_panel=_ADVANCED)] = None,
    embedder: Annotated[str | None, embedder_option("Embedder of retrieval (minilm, hash:DIM, ...).",
                                                    panel=_ADVANCED)] = None,
    sandbox: Annotated[bool, typer.Option(help="Run agent code in the sandbox.",
                                          rich_help_panel=_ADVANCED)] = True,
    progress: Annotated[bool, progress_option("Show progress bars.", panel=_ADVANCED)] = True,
) -> Any:
    """Run trigger evals (skill-creator's format) against a library as the agent sees it, and print per skill
    precision, recall and F1 with 95 % CIs, isolated beside competitive.

    \f
    Returns the per-skill results (`skilltransfer.runner.triggers.SkillTriggers`).
    """
    from skilltransfer.runner.launch import run_config, run_spec
    from skilltransfer.runner.triggers import (
        SETTINGS,
        cost_of,
        score_triggers,
        trigger_spec,
        write_outputs,
    )

    check_output_path(out, flag="--out")
    spec = trigger_spec(library, evals, skill, repeats=runs, out=out, steps=steps, top_k=top_k,
                        settings=tuple(setting or SETTINGS), embedder=embedder, sandboxed=sandbox)
    console = Console(stderr=True)
    n_queries = sum(len(items) for items in spec.sets.values())
    console.print(f"triggers: {len(spec.sets)} skills, {n_queries} queries x {runs} asks x "
                  f"{len(spec.settings)} settings = {n_queries * runs * len(spec.settings)} asks", highlight=False)
    for name in spec.settings:
        config = run_spec(spec_layers.config, spec_layers.overrides, {**spec.flags[name], **model.spec_keys()},
                          spec.folder(name), allowed_imports=["skilltransfer", *spec_layers.allow_import])
        run_config(config, progress=progress, console=console)
    results, records = score_triggers(spec)
    cost = cost_of(records)
    written = write_outputs(spec, results, cost)
    table = Table(title=f"Trigger evals: {library} ({runs} asks per query)")  # Console makes it safe
    table.add_column("skill")
    for name in spec.settings:
        for what in ("precision", "recall", "F1"):
            table.add_column(f"{name} {what} %", justify="right")
    for result in results:
        cells = [result.skill]
        for name in spec.settings:
            score = result.scores[name]
            cells += [_pct(score.precision), _pct(score.recall), _pct(score.f1)]
        table.add_row(*cells)
    stdout = Console(width=max(120, Console().width))
    stdout.print(table)
    price = f", ${cost['cost_usd']:.4f}" if cost["cost_usd"] is not None else \
        " (dollars: give the model's price, -c 'model.price={input: 2.5, output: 10}')"
    stdout.print(f"cost: {cost['asks']} asks, {cost['model_calls']} model calls, {cost['prompt_tokens']:,} prompt + "
                 f"{cost['completion_tokens']:,} completion tokens{price}", highlight=False)
    for path in written:
        stdout.print(f"-> {path}", highlight=False, soft_wrap=True)
    return results
