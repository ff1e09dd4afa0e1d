"""``skilltransfer run``: run (or resume) one condition over an env's task stream, logging to a run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from skilltransfer.cli import app
from skilltransfer.commands.show import summary_table
from skilltransfer.experiments.launch import EnvOptions, LaunchResult, ModelOptions, RunRequest, run_request
from skilltransfer.experiments.summary import summarize_run

_MODEL = "Model"
_AGENT = "Agent and memory"
_ENV = "Environment"


@app.command()
def run(
    env: Annotated[str, typer.Option(help="apps, office, datasci, scienceworld, officebench[:<tasks folder>], or "
                                          "module:Class (your own env class).")],
    condition: Annotated[str, typer.Option(help="task, task+text, task+code, subtask, subtask+text or "
                                                "subtask+code.")],
    model: Annotated[str | None, typer.Option(help="local (embedded model), openai (any OpenAI-compatible "
                                                   "endpoint) or scripted (test double). Default: openai when an "
                                                   "endpoint is configured, else local.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (env: OPENAI_BASE_URL).")] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks of the stream.")] = None,
    order_seed: Annotated[int, typer.Option(help="Stream order seed (0: the canonical order).")] = 0,
    stream: Annotated[str | None, typer.Option(help="A curated stream of the env, in its own order (e.g. apps "
                                                    "'starter'; `skilltransfer envs list` shows them).")] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder (default runs/<env>-<condition>-<model>). Rerunning "
                                                  "with the same folder resumes.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (env: OPENAI_API_KEY).", rich_help_panel=_MODEL)]
    = None,
    model_name: Annotated[str | None, typer.Option(help="Model id at the endpoint (env: SKILLTRANSFER_MODEL); a GGUF "
                                                        "path for local.", rich_help_panel=_MODEL)] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.", rich_help_panel=_MODEL)] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Most completion tokens per call, for every role (default: "
                                                        "per role, executor 1024, planner 96, summarizer 256, "
                                                        "induction 768).", rich_help_panel=_MODEL)] = None,
    context_window: Annotated[int | None, typer.Option(help="The model's context window in tokens (env: "
                                                            "SKILLTRANSFER_CONTEXT_WINDOW). Default: asked from the "
                                                            "endpoint's /v1/models; for local, the server's context "
                                                            "size (8192).", rich_help_panel=_MODEL)] = None,
    cache: Annotated[Path | None, typer.Option(help="SQLite response cache (resume without paying twice).",
                                               rich_help_panel=_MODEL)] = None,
    cache_mode: Annotated[str | None, typer.Option(help="rw (default), ro (replay: a miss is an error) or off.",
                                                   rich_help_panel=_MODEL)] = None,
    script: Annotated[Path | None, typer.Option(help="Replies of the scripted test double (JSONL); needs --model "
                                                     "scripted.", rich_help_panel=_MODEL)] = None,
    retry_budget: Annotated[float | None, typer.Option(help="Seconds a model call keeps retrying rate limits, 5xx "
                                                            "and connection errors (default 300).",
                                                       rich_help_panel=_MODEL)] = None,
    embedder: Annotated[str, typer.Option(help="Retrieval embedder: minilm, hash:DIM (test double) or a "
                                               "sentence-transformers folder.", rich_help_panel=_AGENT)] = "minilm",
    library: Annotated[Path | None, typer.Option(help="Retrieve from this frozen library (a run's memory folder, a "
                                                      "SKILL.md folder or .jsonl) instead of a growing memory.",
                                                 rich_help_panel=_AGENT)] = None,
    library_filter: Annotated[str | None, typer.Option(help="Keep the top or bottom half of --library by utility.",
                                                       rich_help_panel=_AGENT)] = None,
    induction_prompt: Annotated[str, typer.Option(help="Induction prompt variant: full, no_demo or no_rules.",
                                                  rich_help_panel=_AGENT)] = "full",
    max_steps: Annotated[int | None, typer.Option(help="Executor step budget per task (default 50).",
                                                  rich_help_panel=_AGENT)] = None,
    max_subtasks: Annotated[int | None, typer.Option(help="Most subtasks per task (default 15).",
                                                     rich_help_panel=_AGENT)] = None,
    top_k: Annotated[int | None, typer.Option(help="Skills retrieved per query (default 5).",
                                              rich_help_panel=_AGENT)] = None,
    seed: Annotated[int, typer.Option(help="Env generation seed.", rich_help_panel=_ENV)] = 0,
    split: Annotated[str | None, typer.Option(help="Only tasks of this split (dev/test).", rich_help_panel=_ENV)]
    = None,
    sandbox: Annotated[bool, typer.Option(help="Run agent code in the sandbox (--no-sandbox: in-process, for "
                                               "trusted test doubles only).", rich_help_panel=_ENV)] = True,
    workdir: Annotated[Path | None, typer.Option(help="Where episode workspaces are created (default: a temp "
                                                      "folder).", rich_help_panel=_ENV)] = None,
    env_arg: Annotated[list[str] | None, typer.Option(help="key=value passed to the env's constructor (JSON "
                                                           "values); repeatable.", rich_help_panel=_ENV)] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar (one line per task without a terminal).")]
    = True,
    heartbeat: Annotated[float, typer.Option(help="Without a terminal: a progress line at most every this many "
                                                  "seconds while a task runs (0: none).", min=0)] = 30.0,
) -> LaunchResult:
    """Run one condition over an env's task stream (seed order), with a skill memory that persists across tasks."""
    request = RunRequest(
        env=EnvOptions(env, seed=seed, sandboxed=sandbox, workdir=str(workdir) if workdir else None,
                       args=list(env_arg or [])),
        model=ModelOptions(name=model, base_url=base_url, api_key=api_key, model=model_name,
                           temperature=temperature, max_tokens=max_tokens, context_window=context_window,
                           cache=str(cache) if cache else None,
                           cache_mode=cache_mode, script=str(script) if script else None,
                           retry_budget_s=retry_budget),
        condition=condition, out=out, embedder=embedder, limit=limit, order_seed=order_seed, split=split,
        stream=stream,
        library=str(library) if library else None, library_filter=library_filter,
        induction_prompt=induction_prompt, max_steps=max_steps, max_subtasks=max_subtasks, top_k=top_k)
    console = Console(stderr=True)
    result = run_request(request, progress=progress, console=console, heartbeat_s=heartbeat)
    records = result.summary.records
    console.print(f"done: {len(result.summary.ran)} tasks run now, {len(records)}/{len(result.tasks)} finished, "
                  f"success {sum(r.success for r in records)}/{len(records)} in {result.wall_s:.1f} s", highlight=False)
    folder = result.summary.path
    out = Console(width=max(100, Console().width))
    out.print(summary_table(summarize_run(folder)))
    paths = [("results", folder / "results.jsonl"), ("trajectories", folder / "trajectories"),
             ("memory", folder / "memory")]
    for label, path in paths:
        if path.exists():
            out.print(f"{label}: {path}", highlight=False, soft_wrap=True)
    out.print(f"more: skilltransfer show {folder} [--task ID]", highlight=False, soft_wrap=True)
    return result
