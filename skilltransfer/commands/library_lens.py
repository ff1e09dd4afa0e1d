"""``skilltransfer library decompose|route``: build a hierarchical skill graph from a library, and route one query."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from skilltransfer.errors import InputError, check_output_path

if TYPE_CHECKING:  # the lens package is imported when a command runs (every CLI start imports all command modules)
    from skilltransfer.lens.decompose import DecomposeRecord
    from skilltransfer.protocols import ChatModel

_MODEL = "Model"
_ADVANCED = "Advanced"



Model = Annotated[str | None, typer.Option(help="local (embedded), openai (any OpenAI-compatible endpoint) or "
                                                "scripted (test double). Default: openai when an endpoint is "
                                                "configured, else local.", rich_help_panel=_MODEL)]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (env: OPENAI_BASE_URL).",
                                             rich_help_panel=_MODEL)]
ApiKey = Annotated[str | None, typer.Option(help="API key (env: OPENAI_API_KEY).", rich_help_panel=_MODEL)]
ModelName = Annotated[str | None, typer.Option(help="Model id at the endpoint (env: SKILLTRANSFER_MODEL); a GGUF "
                                                    "path for local.", rich_help_panel=_MODEL)]
Temperature = Annotated[float | None, typer.Option(help="Sampling temperature.", rich_help_panel=_MODEL)]
ContextWindow = Annotated[int | None, typer.Option(help="The model's context window in tokens.",
                                                   rich_help_panel=_MODEL)]
Cache = Annotated[Path | None, typer.Option(help="SQLite response cache (a rerun pays nothing twice).",
                                            rich_help_panel=_MODEL)]
CacheMode = Annotated[str | None, typer.Option(help="rw (default), ro (replay) or off.", rich_help_panel=_MODEL)]
Script = Annotated[Path | None, typer.Option(help="Replies of the scripted test double (JSONL); needs --model "
                                                  "scripted.", rich_help_panel=_MODEL)]
RetryBudget = Annotated[float | None, typer.Option(help="Seconds a call keeps retrying transient errors (300).",
                                                   rich_help_panel=_MODEL)]
Embedder = Annotated[str, typer.Option(help="Unit embedder: minilm, hash:DIM (test double) or a "
                                            "sentence-transformers folder.")]


def _model(name: str | None, base_url: str | None, api_key: str | None, model_name: str | None,
           temperature: float | None, context_window: int | None, cache: Path | None, cache_mode: str | None,
           script: Path | None, retry_budget: float | None) -> tuple[ChatModel, str]:
    """The chat model of ``run``'s model flags, and its record for the manifest."""
    from skilltransfer.commands.model_options import ModelOptions
    from skilltransfer.llm import make_model

    options = ModelOptions(name=name, base_url=base_url, api_key=api_key, model=model_name, temperature=temperature,
                           context_window=context_window, cache=str(cache) if cache else None,
                           cache_mode=cache_mode, script=str(script) if script else None,
                           retry_budget_s=retry_budget)
    return make_model(options.config()), options.record()


def decompose(
    library: Annotated[Path, typer.Argument(help="Folder of SKILL.md packages, a skills .jsonl, or a memory folder.")],
    out: Annotated[Path, typer.Option(help="The skill graph folder to write.")],
    embedder: Embedder = "minilm",
    limit: Annotated[int | None, typer.Option(min=1, help="Decompose only the first N skills.")] = None,
    merge_threshold: Annotated[float, typer.Option(help="Cosine at or above which same-layer units are merged "
                                                        "(> 1: no merging).", rich_help_panel=_ADVANCED)] = 0.90,
    retries: Annotated[int, typer.Option(min=0, help="Re-asks after an unusable reply, before the fallback.",
                                         rich_help_panel=_ADVANCED)] = 2,
    max_tokens: Annotated[int, typer.Option(min=16, help="Completion budget of one decomposer call.",
                                            rich_help_panel=_ADVANCED)] = 512,
    model: Model = None, base_url: BaseUrl = None, api_key: ApiKey = None, model_name: ModelName = None,
    temperature: Temperature = None, context_window: ContextWindow = None, cache: Cache = None,
    cache_mode: CacheMode = None, script: Script = None, retry_budget: RetryBudget = None,
    progress: Annotated[bool, typer.Option(help="Print one line per skill.")] = True,
) -> dict[str, object]:
    """Decompose each skill into policy / strategy / procedure / primitive units with a model, merge near-duplicate
    units across skills, and save the skill graph."""
    from skilltransfer.lens.decompose import DecomposeConfig, decompose_library
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.memory.library import check_replaceable, load_library

    check_replaceable(check_output_path(out, flag="--out"), what="skill graph")
    if not 0 < merge_threshold:
        raise InputError(f"--merge-threshold must be > 0, got {merge_threshold}")
    skills = load_library(library)[:limit]
    config = DecomposeConfig(merge_threshold=merge_threshold, retries=retries, max_tokens=max_tokens)
    chat, record = _model(model, base_url, api_key, model_name, temperature, context_window, cache, cache_mode,
                          script, retry_budget)
    unit_embedder = make_embedder(embedder, cache=True)
    console = Console(stderr=True)

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


def route_query(
    graph_dir: Annotated[Path, typer.Argument(help="A skill graph folder (from `library decompose`).")],
    query: Annotated[str, typer.Option(help="The task instruction or subtask text.")],
    embedder: Embedder = "minilm",
    mode: Annotated[str, typer.Option(help="lens, rewrite-all or no-walk.")] = "lens",
    seeds: Annotated[int, typer.Option(min=1, help="Seed units retrieved by embedding.")] = 5,
    budget: Annotated[int, typer.Option(min=1, help="Most tokens of the context section.")] = 1200,
    as_json: Annotated[bool, typer.Option("--json", help="Print the routing log as JSON.")] = False,
    model: Model = None, base_url: BaseUrl = None, api_key: ApiKey = None, model_name: ModelName = None,
    temperature: Temperature = None, context_window: ContextWindow = None, cache: Cache = None,
    cache_mode: CacheMode = None, script: Script = None, retry_budget: RetryBudget = None,
) -> dict[str, object]:
    """Route one query over a skill graph and print the context section and what the verifier decided."""
    from skilltransfer.lens.graph import SkillGraph
    from skilltransfer.lens.route import ROUTE_MODES, RouteConfig, route
    from skilltransfer.memory.embedders import make_embedder

    if mode not in ROUTE_MODES:
        raise InputError(f"--mode must be one of {', '.join(ROUTE_MODES)}, got {mode!r}")
    graph = SkillGraph.load(graph_dir, make_embedder(embedder, cache=True))
    chat, _ = _model(model, base_url, api_key, model_name, temperature, context_window, cache, cache_mode, script,
                     retry_budget)
    routed = route(graph, query, chat, RouteConfig.model_validate({"mode": mode, "seeds_k": seeds,
                                                                   "token_budget": budget}))
    log = routed.log.to_dict()
    if as_json:
        typer.echo(json.dumps(log, indent=2, ensure_ascii=False))
        return log
    typer.echo(routed.text or "(no unit accepted)")
    for visit in routed.log.visits:
        text = " ".join(graph.units[visit.unit].text.split())[:90]
        typer.echo(f"{'  ' * visit.depth}{visit.decision:<9} {visit.layer:<9} {visit.unit} [{visit.how}] {text}")
    typer.echo(f"visited {routed.log.visited}, rewritten {len(routed.log.rewrites)}, verifier calls "
               f"{routed.log.verifier_calls} ({routed.log.verifier_prompt_tokens} + "
               f"{routed.log.verifier_completion_tokens} tokens), context {routed.log.context_tokens} tokens, "
               f"cut {len(routed.log.cut_units)}, unrouted {len(routed.log.unrouted)}")
    return log
