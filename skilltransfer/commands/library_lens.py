"""``skilltransfer library decompose|route``: build a hierarchical skill graph from a library, and route one query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from skilltransfer.commands.option_groups import MODEL, ModelOptions, with_groups
from skilltransfer.commands.options import (
    embedder_option,
    limit_option,
    max_tokens_option,
    progress_option,
    warn_deprecated,
)
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.util.terminal import Console, echo
from skilltransfer.util.text import terminal_safe

if TYPE_CHECKING:  # the lens package is imported when a command runs (every CLI start imports all command modules)
    from skilltransfer.lens.decompose import DecomposeRecord
    from skilltransfer.protocols import ChatModel

_ADVANCED = "Advanced"



Embedder = Annotated[str, embedder_option("Embedder of the units: minilm, hash:DIM (test double) or a "
                                          "sentence-transformers folder.")]


def _model(options: ModelOptions) -> tuple[ChatModel, str]:
    """The chat model of the model flags, and its record for the manifest."""
    from skilltransfer.llm import make_model

    return make_model(options.config()), options.record()


@with_groups
def decompose(
    library: Annotated[Path, typer.Argument(help="Folder of SKILL.md packages, a skills .jsonl, or a memory folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder: the skill graph.")],
    embedder: Embedder = "minilm",
    limit: Annotated[int | None, limit_option("Only the first N skills.")] = None,
    merge_threshold: Annotated[float, typer.Option(help="Cosine at or above which same-layer units are merged "
                                                        "(> 1: no merging).", rich_help_panel=_ADVANCED)] = 0.90,
    retries: Annotated[int, typer.Option(min=0, help="Re-asks after an unusable reply, before the fallback.",
                                         rich_help_panel=_ADVANCED)] = 2,
    max_tokens: Annotated[int, max_tokens_option("Most completion tokens per call (one skill's decomposition).",
                                                 min=16, panel=_ADVANCED)] = 512,
    *,
    model: Annotated[ModelOptions, MODEL],
    progress: Annotated[bool, progress_option("Show progress: one line per skill.")] = True,
) -> dict[str, object]:
    """Decompose each skill into policy / strategy / procedure / primitive units with a model, merge near-duplicate
    units across skills, and save the skill graph."""
    from skilltransfer.lens.decompose import DecomposeConfig, decompose_library
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.memory.library import check_replaceable, read_library

    check_replaceable(check_output_path(out, flag="--out"), what="skill graph")
    if not 0 < merge_threshold:
        raise InputError(f"--merge-threshold must be > 0, got {merge_threshold}")
    read = read_library(library)
    skills = read.skills[:limit]
    config = DecomposeConfig(merge_threshold=merge_threshold, retries=retries, max_tokens=max_tokens)
    chat, record = _model(model)
    unit_embedder = make_embedder(embedder, cache=True)
    console = Console(stderr=True)
    for line in read.unreadable:  # named; the rest is decomposed
        console.print(f"warning: {terminal_safe(line)}", highlight=False, markup=False, soft_wrap=True)

    def report(index: int, total: int, rec: DecomposeRecord) -> None:
        if progress:
            why = f" ({rec.reason})" if rec.reason else ""
            console.print(f"[{index + 1}/{total}] {rec.name}: {rec.status}, {rec.units} units, {rec.attempts} "
                          f"call(s){why}", highlight=False, soft_wrap=True)

    graph, records = decompose_library(skills, chat, unit_embedder, config, on_skill=report,
                                       info={"model": record, "library": str(library)})
    graph.info["records"] = [r.to_dict() for r in records]
    graph.save(out)
    counts = graph.counts()
    layers = ", ".join(f"{layer} {n}" for layer, n in counts["by_layer"].items())
    console.print(f"{counts['units']} units ({layers}), {counts['edges']} edges, {counts['shared_units']} shared, "
                  f"{len(graph.info['merges'])} merges; {graph.info['by_model']} of {len(skills)} skills by the model, "
                  f"{graph.info['fallback']} by the fallback -> {out}", highlight=False, soft_wrap=True)
    return counts


@with_groups
def route_query(
    graph_dir: Annotated[Path, typer.Argument(help="A skill graph folder (from `library decompose`).")],
    query: Annotated[str, typer.Option(help="The task instruction or subtask text.")],
    embedder: Embedder = "minilm",
    mode: Annotated[Literal["lens", "rewrite-all", "no-walk"], typer.Option(
        "--reuse", help="Skill reuse over the graph: lens, rewrite-all or no-walk.")] = "lens",
    seeds: Annotated[int, typer.Option("--seed-units", min=1, help="Units retrieved by embedding to start the walk.")]
    = 5,
    mode_old: Annotated[str | None, typer.Option("--mode", hidden=True, help="Deprecated: --reuse.")] = None,
    seeds_old: Annotated[int | None, typer.Option("--seeds", hidden=True, help="Deprecated: --seed-units.")] = None,
    budget: Annotated[int, typer.Option(min=1, help="Most tokens of the context section.")] = 1200,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON: the routing log.")] = False,
    *,
    model: Annotated[ModelOptions, MODEL],
) -> dict[str, object]:
    """Route one query over a skill graph and print the context section and what the verifier decided."""
    from skilltransfer.lens.graph import SkillGraph
    from skilltransfer.lens.route import ROUTE_MODES, RouteConfig, route
    from skilltransfer.memory.embedders import make_embedder

    if mode_old is not None:
        warn_deprecated("--mode", "--reuse")
        mode = mode_old  # type: ignore[assignment]
    if seeds_old is not None:
        warn_deprecated("--seeds", "--seed-units")
        seeds = seeds_old
    if mode not in ROUTE_MODES:
        raise InputError(f"--reuse must be one of {', '.join(ROUTE_MODES)}, got {mode!r}")
    graph = SkillGraph.load(graph_dir, make_embedder(embedder, cache=True))
    chat, _ = _model(model)
    routed = route(graph, query, chat, RouteConfig.model_validate({"mode": mode, "seeds_k": seeds,
                                                                   "token_budget": budget}))
    log = routed.log.to_dict()
    if as_json:
        echo(json.dumps(log, indent=2, ensure_ascii=False))
        return log
    echo(routed.text or "(no unit accepted)")
    for visit in routed.log.visits:
        text = " ".join(graph.units[visit.unit].text.split())[:90]
        echo(f"{'  ' * visit.depth}{visit.decision:<9} {visit.layer:<9} {visit.unit} [{visit.how}] {text}")
    echo(f"visited {routed.log.visited}, rewritten {len(routed.log.rewrites)}, verifier calls "
         f"{routed.log.verifier_calls} ({routed.log.verifier_prompt_tokens} + "
         f"{routed.log.verifier_completion_tokens} tokens), context {routed.log.context_tokens} tokens, "
         f"cut {len(routed.log.cut_units)}, unrouted {len(routed.log.unrouted)}")
    return log
