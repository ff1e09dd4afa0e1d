"""``skilltransfer induce TRAJECTORIES --out LIBRARY``: skills induced from any agent's trajectories (ATIF files,
Harbor job folders) with the paper's induction prompt, into an Agent Skills library (`skilltransfer.runner.induce`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from skilltransfer.commands.option_groups import ModelOptions, model_group, with_groups
from skilltransfer.commands.options import embedder_option, limit_option
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.util.terminal import echo
from skilltransfer.util.text import terminal_safe


def _price(text: str | None) -> dict[str, float] | None:
    if text is None:
        return None
    try:
        given, taken = (float(part) for part in text.split(","))
    except ValueError:
        raise InputError(f"--price {text!r}: give INPUT,OUTPUT dollars per million tokens, e.g. 2.5,10") from None
    if given < 0 or taken < 0:
        raise InputError(f"--price {text!r}: prices are >= 0")
    return {"input": given, "output": taken}


@with_groups
def induce(
    trajectories: Annotated[list[Path], typer.Argument(help="ATIF trajectory files, folders of them, Harbor job "
                                                        "folders (<trial>/agent/trajectory.json beside result.json).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: the library (new, empty, or an earlier "
                                      "induce output, which is resumed).")],
    skill_format: Annotated[Literal["text", "code"], typer.Option(
        "--format", help="Format: text (workflow notes) or code (one Python function) skills.")] = "text",
    level: Annotated[Literal["task", "subtask"], typer.Option(
        help="task: one skill per trajectory; subtask: one per subtask (the trajectory's own subtasks, else the "
             "model splits it).")] = "task",
    source: Annotated[Literal["success", "all", "lessons"], typer.Option(
        help="success: only trajectories whose reward reached --min-reward; all: every one; lessons: every one, "
             "failures with the lessons prompt (text).")] = "success",
    min_reward: Annotated[float, typer.Option(help="The reward at or above which a trajectory succeeded (a Harbor "
                                                   "trial's verifier reward).")] = 1.0,
    variant: Annotated[Literal["full", "no_demo", "no_rules", "contract"], typer.Option(
        help="Induction prompt variant: full (the paper's), no_demo, no_rules, contract.")] = "full",
    embedder: Annotated[str, embedder_option("Embedder of the skill memory (near-duplicates are merged): minilm "
                                             "(default), hash:DIM (test double) or a sentence-transformers folder.")]
    = "minilm",
    limit: Annotated[int | None, limit_option("Only the first N trajectories (in time order).")] = None,
    price: Annotated[str | None, typer.Option(help="The model's price, INPUT,OUTPUT dollars per million tokens (shows "
                                                   "the cost).")] = None,
    *,
    model: Annotated[ModelOptions, model_group(max_tokens="Most completion tokens per call (default: the role's).")],
) -> None:
    """Induce skills from any agent's trajectories (ATIF, Harbor jobs) into an Agent Skills library."""
    from skilltransfer.llm import make_model
    from skilltransfer.log.atif_files import read_atif
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.runner.induce import InduceOptions, check_out_folder, induce_library
    from skilltransfer.settings.config import ModelSpec

    check_output_path(out, flag="--out")
    check_out_folder(out)
    if source == "lessons" and (skill_format != "text" or variant == "contract"):
        raise InputError("--source lessons writes text lessons: use --format text and another --variant than "
                         "contract")
    config = model.config()  # checks the model flags before any work
    spec = ModelSpec.model_validate({**config.model_dump(), "price": _price(price)})
    read = read_atif(trajectories)
    for line in read.unusable:
        echo(f"not read: {terminal_safe(line)}", err=True)
    for line in read.notes():
        echo(f"note: {terminal_safe(line)}", err=True)
    if not read.trajectories:
        raise InputError("no ATIF trajectory could be read" + (" (see the lines above)" if read.unusable else
                                                               " (no ATIF file or Harbor trial found)"),
                         path=trajectories[0])
    options = InduceOptions(format=skill_format, level=level, source=source, variant=variant, min_reward=min_reward,
                            embedder=embedder)
    echo(f"{len(read.trajectories)} trajectories read" + (f", the first {limit}" if limit else "")
               + f"; inducing {level}-level {skill_format} skills ({source}) into {out}", err=True)
    chat = make_model(config)
    try:
        summary = induce_library(read.trajectories, out, chat, spec, options, embedder=make_embedder(embedder),
                                 limit=limit, progress=lambda line: echo(terminal_safe(line), err=True))
    finally:
        close = getattr(chat, "close", None)
        if close is not None:
            close()
    skipped = "; ".join(f"{n} {why}" for why, n in summary.skipped.most_common())
    statuses = ", ".join(f"{n} {status}" for status, n in summary.statuses.most_common())
    cost = f", ${summary.cost_usd:.4f}" if summary.cost_usd is not None else " (no --price: no cost)"
    resumed = f" ({summary.resumed} done before, resumed)" if summary.resumed else ""
    echo(f"induced from {summary.induced_from} of {summary.trajectories} trajectories{resumed}"
               + (f" (skipped: {skipped})" if skipped else "") + (f"; skills {statuses}" if statuses else "")
               + f"; {summary.calls} calls, {summary.prompt_tokens:,}+{summary.completion_tokens:,} tokens{cost}; "
               f"{summary.seconds:.0f} s")
    echo(f"wrote {out}: {summary.skills} skills as Agent Skills folders; what was induced from what: "
               f"skilltransfer view {out}/.induce")


__all__ = ["induce"]
