"""``skilltransfer judge``: blinded pairwise judging of two runs' final artifacts (W/T/L, preference with a CI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from skilltransfer.commands.model_options import ModelOptions
from skilltransfer.errors import check_output_path
from skilltransfer.judge import JudgeReport, PairwiseJudge, judge_runs, load_judge_prompt, load_run, shared_tasks
from skilltransfer.util.files import atomic_write_text

_MODEL = "Model"


def report_table(report: JudgeReport) -> Table:
    """The W/T/L table of a judge report (A's point of view)."""
    table = Table(title=f"{Path(report.run_a).name} (A) vs {Path(report.run_b).name} (B), judged by "
                        f"{report.judge_model or 'the model'}")
    for column in ("tasks", "judgments", "W/T/L", "preference", "95 % task CI", "first shown chosen",
                   "order-consistent", "unparsed"):
        table.add_column(column, justify="right")
    pref, bias = report.preference, report.bias
    share = f"{bias.first_share:.2f} of {bias.decisive}" if bias.first_share is not None else "-"
    consistent = f"{bias.consistency:.2f} of {bias.both_orders}" if bias.consistency is not None else "-"
    if pref is None:
        table.add_row("0", str(len(report.judgments)), "-", "-", "-", share, consistent, str(report.unparsed))
    else:
        table.add_row(str(pref.n_tasks), str(pref.n_judgments), f"{pref.wins}/{pref.ties}/{pref.losses}",
                      f"{pref.preference:.3f}", f"[{pref.ci_low:.3f}, {pref.ci_high:.3f}]", share, consistent,
                      str(report.unparsed))
    return table


def judge(
    run_a: Annotated[Path, typer.Argument(help="Run folder A (the preference is A's).")],
    run_b: Annotated[Path, typer.Argument(help="Run folder B.")],
    model: Annotated[str | None, typer.Option(help="local, openai or scripted (test double), as for run.",
                                              rich_help_panel=_MODEL)] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (env: OPENAI_BASE_URL).",
                                                 rich_help_panel=_MODEL)] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (env: OPENAI_API_KEY).", rich_help_panel=_MODEL)]
    = None,
    model_name: Annotated[str | None, typer.Option(help="Model id (env: SKILLTRANSFER_MODEL); a GGUF path for "
                                                        "local.", rich_help_panel=_MODEL)] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.", rich_help_panel=_MODEL)] = None,
    max_tokens: Annotated[int, typer.Option(min=16, help="Completion budget of one judge call.",
                                            rich_help_panel=_MODEL)] = 256,
    context_window: Annotated[int | None, typer.Option(help="The model's context window in tokens.",
                                                       rich_help_panel=_MODEL)] = None,
    cache: Annotated[Path | None, typer.Option(help="SQLite response cache.", rich_help_panel=_MODEL)] = None,
    cache_mode: Annotated[str | None, typer.Option(help="rw (default), ro or off.", rich_help_panel=_MODEL)] = None,
    script: Annotated[Path | None, typer.Option(help="Replies of the scripted test double (JSONL); needs --model "
                                                     "scripted.", rich_help_panel=_MODEL)] = None,
    retry_budget: Annotated[float | None, typer.Option(help="Seconds a call keeps retrying transient errors.",
                                                       rich_help_panel=_MODEL)] = None,
    seed: Annotated[int, typer.Option(help="Seeds each task's presentation order and the bootstrap.")] = 0,
    orders: Annotated[str, typer.Option(help="both (judge each task in both orders: position bias) or one (one "
                                             "seeded order).")] = "both",
    limit: Annotated[int | None, typer.Option(min=1, help="Judge only the first N shared tasks.")] = None,
    max_chars: Annotated[int, typer.Option(min=200, help="Cut each artifact to this many characters.")] = 6000,
    prompt: Annotated[Path | None, typer.Option(help="Your own judge prompt file ({{instruction}}, {{first}}, "
                                                     "{{second}}).")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the report as JSON (every judgment, reply and the "
                                                  "prompt id).")] = None,
) -> JudgeReport:
    """Judge run A against run B task by task, blinded, and print W/T/L with the preference's 95 % task CI."""
    from skilltransfer.llm import make_model

    if orders not in ("both", "one"):
        raise typer.BadParameter(f"must be both or one, got {orders!r}", param_hint="--orders")
    if out is not None:
        check_output_path(out, flag="--out", folder=False)
    options = ModelOptions(name=model, base_url=base_url, api_key=api_key, model=model_name, temperature=temperature,
                           context_window=context_window, cache=str(cache) if cache else None, cache_mode=cache_mode,
                           script=str(script) if script else None, retry_budget_s=retry_budget)
    config = options.config()
    judge_prompt = load_judge_prompt(prompt)
    runs = load_run(run_a), load_run(run_b)
    shared_tasks(*runs)  # before any model starts
    chat = make_model(config)
    console = Console(stderr=True)
    try:
        judge_ = PairwiseJudge(chat, prompt=judge_prompt, max_artifact_chars=max_chars, max_tokens=max_tokens)
        report = judge_runs(judge_, *runs, seed=seed, orders=orders, limit=limit,  # type: ignore[arg-type]
                            judge_model=options.record(),
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
        typer.echo(f"not judged (finished in one run only): {len(report.only_in_a)} only in A, "
                   f"{len(report.only_in_b)} only in B")
    fallback = {k: v["trajectory"] for k, v in report.artifact_sources.items() if v["trajectory"]}
    if fallback:
        typer.echo("artifacts taken from trajectories (no files recorded): "
                   + ", ".join(f"{n} tasks of run {k.upper()}" for k, n in fallback.items()))
    if out is not None:
        typer.echo(f"report: {out}")
    return report
