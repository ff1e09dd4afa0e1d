"""``skilltransfer judge``: blinded pairwise judging of two runs' final artifacts (W/T/L, preference with a CI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from skilltransfer.commands.option_groups import MODEL, ModelOptions, with_groups
from skilltransfer.commands.options import MODEL_PANEL, limit_option, max_tokens_option
from skilltransfer.errors import check_output_path
from skilltransfer.judge import JudgeReport, PairwiseJudge, judge_runs, load_judge_prompt, load_run, shared_tasks
from skilltransfer.util.files import atomic_write_text
from skilltransfer.util.terminal import Console, echo


def report_table(report: JudgeReport) -> Table:
    """The W/T/L table of a judge report (A's point of view)."""
    table = Table(title=f"{Path(report.run_a).name} (A) vs {Path(report.run_b).name} (B), judged by "
                        f"{report.judge_model or 'the model'}")
    for column in ("tasks", "repeats", "judgments", "W/T/L", "preference", "95 % task CI", "first shown chosen",
                   "order-consistent", "unparsed"):
        table.add_column(column, justify="right")
    pref, bias = report.preference, report.bias
    share = f"{bias.first_share:.2f} of {bias.decisive}" if bias.first_share is not None else "-"
    consistent = f"{bias.consistency:.2f} of {bias.both_orders}" if bias.consistency is not None else "-"
    if pref is None:
        table.add_row("0", str(report.repeats), str(len(report.judgments)), "-", "-", "-", share, consistent,
                      str(report.unparsed))
    else:
        table.add_row(str(pref.n_tasks), str(report.repeats), str(pref.n_judgments),
                      f"{pref.wins}/{pref.ties}/{pref.losses}",
                      f"{pref.preference:.3f}", f"[{pref.ci_low:.3f}, {pref.ci_high:.3f}]", share, consistent,
                      str(report.unparsed))
    return table


@with_groups
def judge(
    run_a: Annotated[Path, typer.Argument(help="Run folder A (the preference is A's).")],
    run_b: Annotated[Path, typer.Argument(help="Run folder B.")],
    *,
    model: Annotated[ModelOptions, MODEL],
    max_tokens: Annotated[int | None, max_tokens_option(
        "Most completion tokens per call (one judgment); default: none sent (the provider's own, as the study; a "
        "reasoning model thinks before its verdict).", min=16, panel=MODEL_PANEL)] = None,
    seed: Annotated[int, typer.Option(help="Seed of this command's random draws: each task's presentation order "
                                           "and the bootstrap.")] = 0,
    orders: Annotated[Literal["balanced", "both", "one"], typer.Option(
        help="balanced (the study's: --repeats judgments per task, orders alternating, half the tasks starting with "
             "each, so both orders appear equally often), both (--repeats judgments in each order) or one (--repeats "
             "in one seeded order).")] = "balanced",
    repeats: Annotated[int, typer.Option(min=1, help="Judgments per task (balanced; the study: 3), or per task and "
                                                     "order (both, one); a repeat after the first is sent with "
                                                     "seed=<repeat>.")] = 3,
    limit: Annotated[int | None, limit_option("Only the first N shared tasks.")] = None,
    max_chars: Annotated[int, typer.Option(min=200, help="Cut each artifact to this many characters.")] = 6000,
    prompt: Annotated[Path | None, typer.Option(help="Your own judge prompt file ({{instruction}}, {{first}}, "
                                                     "{{second}}).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output JSON file: the report with every "
                                             "judgment, reply and the prompt id (name it *.judge.json under a grid's "
                                             "folder: `report` then tables it).")] = None,
) -> JudgeReport:
    """Judge run A against run B task by task, blinded, and print W/T/L with the preference's 95 % task CI."""
    from skilltransfer.llm import make_model

    if out is not None:
        check_output_path(out, flag="--out", folder=False)
    config = model.config()
    judge_prompt = load_judge_prompt(prompt)
    runs = load_run(run_a), load_run(run_b)
    shared_tasks(*runs)  # before any model starts
    chat = make_model(config)
    console = Console(stderr=True)
    try:
        judge_ = PairwiseJudge(chat, prompt=judge_prompt, max_artifact_chars=max_chars, max_tokens=max_tokens)
        report = judge_runs(judge_, *runs, seed=seed, orders=orders, limit=limit, repeats=repeats,
                            judge_model=model.record(),
                            on_judgment=lambda j: console.print(f"{j.task_id} [{j.order}]: {j.verdict or j.error}",
                                                                highlight=False))
    finally:
        close = getattr(chat, "close", None)
        if close is not None:
            close()
    if out is not None:
        atomic_write_text(out, json.dumps(report.to_dict(), indent=1) + "\n")
    Console(width=max(100, Console().width)).print(report_table(report))
    if report.only_in_a or report.only_in_b:
        echo(f"not judged (finished in one run only): {len(report.only_in_a)} only in A, "
             f"{len(report.only_in_b)} only in B")
    fallback = {k: v["trajectory"] for k, v in report.artifact_sources.items() if v["trajectory"]}
    if fallback:
        echo("artifacts taken from trajectories (no files recorded): "
             + ", ".join(f"{n} tasks of run {k.upper()}" for k, n in fallback.items()))
    if out is not None:
        echo(f"report: {out}")
    if report.judgments and report.unparsed == len(report.judgments):
        echo(f"error: no judgment could be parsed ({report.unparsed} replies without a verdict"
             + (f"; they are in {out}" if out is not None else "; --out FILE keeps them")
             + "): check the judge model (--model) or its prompt (--prompt)", err=True)
        raise SystemExit(1)  # SystemExit, not typer.Exit: click returns (not raises) Exit codes when not standalone
    return report
