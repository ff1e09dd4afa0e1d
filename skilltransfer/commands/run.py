"""``skilltransfer run``: run (or resume) one stream (an env's tasks under one condition), logging to a run folder.

The stream is a one-point grid spec: ``--config FILE`` (the keys of a grid spec, one value per axis), then each
``-c key.path=value``, then the flags below, which are shortcuts for spec keys (`FLAG_KEYS`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from skilltransfer.agents.config import LibraryOrganization, SkillExec
from skilltransfer.agents.harness import HarnessName
from skilltransfer.commands.model_options import ModelOptions
from skilltransfer.commands.options import (
    MODEL_PANEL,
    AllowImport,
    ApiKey,
    BaseUrl,
    CacheMode,
    ConfigFile,
    ContextWindow,
    CostLimit,
    MaxConnections,
    ModelNameOld,
    ModelString,
    Overrides,
    Progress,
    ResponseCache,
    RetryBudget,
    ScriptOld,
    Temperature,
    TokenLimit,
    warn_deprecated,
)
from skilltransfer.commands.show import summary_table
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import PromptVariant
from skilltransfer.log import MEMORY, RESULTS, TRAJECTORIES
from skilltransfer.report.summary import summarize_run
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import imported_module, parse_positions
from skilltransfer.runner.launch import LaunchResult, run_config, run_spec
from skilltransfer.settings.config import Condition, Coordination, LibraryFilter, Reuse

_AGENT = "Agent and memory"
_ENV = "Environment"
FLAG_KEYS: dict[str, str] = {
    "env": "env.env", "condition": "condition", "limit": "limits.task_limit", "order_seed": "order_seed",
    "stream": "env.stream", "embedder": "embedder", "library": "library", "library_filter": "library_filter",
    "induction_prompt": "induction_variant", "max_steps": "limits.step_limit", "max_subtasks": "limits.subtask_limit",
    "top_k": "agent.top_k", "env_seed": "env.seed", "split": "env.split", "sandbox": "env.sandboxed",
    "coordination": "coordination", "skill_exec": "skill_exec", "library_organization": "library_organization",
    "reuse": "reuse", "harness": "agent.harness", "only_tasks": "task_positions", "at_snapshot": "library_snapshot",
}
"""Flag (parameter name of `run`) -> the spec key it sets (the model flags: `ModelOptions.spec_keys`); `run` reads
the values of exactly these parameters."""


def allowed_imports(allow_import: list[str] | None, env: str | None) -> list[str]:
    """The modules a ``module:Class`` env of the spec file or a ``-c`` may import: the ``--allow-import`` items, and
    the module of a ``--env module:Class`` typed on the command line (the user's own argument)."""
    module = imported_module(env) if env else None
    return [*(allow_import or []), *([module] if module else [])]


def env_args(items: list[str]) -> dict[str, Any]:
    """``--env-arg key=value`` items as ``env.args`` spec keys (values parsed as JSON when they parse, else kept as
    strings).

    Raises:
        InputError: an item that is not ``key=value`` with an identifier key.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InputError(f"--env-arg must be key=value with a Python identifier key, got {item!r}")
        try:
            out[f"env.args.{key.strip()}"] = json.loads(raw)
        except json.JSONDecodeError:
            out[f"env.args.{key.strip()}"] = raw
    return out


def run(
    env: Annotated[str | None, typer.Option(help="Env: apps, office, datasci, scienceworld, officebench[:<tasks "
                                                 "folder>], or module:Class (your own env class).")] = None,
    condition: Annotated[Condition | None, typer.Option(help="Condition: level x skill format (required here or in "
                                                             "the config).", case_sensitive=False)] = None,
    config: ConfigFile = None,
    overrides: Overrides = None,
    allow_import: AllowImport = None,
    model: ModelString = None,
    base_url: BaseUrl = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Only the first N tasks of the stream.")]
    = None,
    only_tasks: Annotated[str | None, typer.Option(help="Only these tasks of the stream: their numbers N[,M|A-B] "
                                                       "(1-based, as --task elsewhere; e.g. 1,4,6-8) in the stream "
                                                       "as ordered and limited.")] = None,
    at_snapshot: Annotated[int | None, typer.Option(min=0, help="Use --library (another run's folder or memory "
                                                              "folder) as it was after that run's first K tasks "
                                                              "(0: empty; its memory/snapshots.jsonl).",
                                                    rich_help_panel=_AGENT)] = None,
    order_seed: Annotated[int | None, typer.Option(help="Stream order seed (0, the default: the canonical order).")]
    = None,
    stream: Annotated[str | None, typer.Option(help="A curated stream of the env, in its own order (e.g. apps "
                                                    "'starter'; `skilltransfer envs list` shows them).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output run folder (default "
                                             "runs/<env>-<condition>-<model>). Rerunning with the same folder "
                                             "resumes.")] = None,
    api_key: ApiKey = None,
    model_name: ModelNameOld = None,
    temperature: Temperature = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Most completion tokens per call, for every role "
                                                   "(default: per role, executor 1024, planner 96, summarizer 256, "
                                                   "induction 768).", rich_help_panel=MODEL_PANEL)] = None,
    context_window: ContextWindow = None,
    cache: ResponseCache = None,
    cache_mode: CacheMode = None,
    script: ScriptOld = None,
    retry_budget: RetryBudget = None,
    embedder: Annotated[str | None, typer.Option(help="Embedder for retrieval: minilm (default), hash:DIM (test "
                                                      "double) or a sentence-transformers folder.",
                                                 rich_help_panel=_AGENT)] = None,
    library: Annotated[Path | None, typer.Option(help="Frozen skill library to retrieve from (a run's memory "
                                                      "folder, a SKILL.md folder or .jsonl) instead of a growing "
                                                      "memory.", rich_help_panel=_AGENT)] = None,
    library_filter: Annotated[LibraryFilter | None, typer.Option(help="Keep the top or bottom half of --library by "
                                                                      "utility.", rich_help_panel=_AGENT)] = None,
    coordination: Annotated[Coordination | None, typer.Option(
        help="none (the agent, default) or a coordination interface over each task's frozen plan: nl-sop, "
             "prompt-graph, metaskill (plans in <out>/plans, or the folder of the 'plans' key).",
        case_sensitive=False, rich_help_panel=_AGENT)] = None,
    skill_exec: Annotated[SkillExec | None, typer.Option(
        help="How retrieved skills run: inline (default), agent-skill (load_skill), subagent (run_skill) or hybrid.",
        case_sensitive=False, rich_help_panel=_AGENT)] = None,
    library_organization: Annotated[LibraryOrganization | None, typer.Option(
        help="How retrieved skills are shown: flat (default), task-tree, tree or graph (tree/graph: the frozen "
             "organisation of -c organization=DIR, else grouped by source task).", case_sensitive=False,
        rich_help_panel=_AGENT)] = None,
    reuse: Annotated[Reuse | None, typer.Option(
        help="Skill reuse: flat (the top-k skills whole, default) or routed over a skill graph: lens (verifier "
             "ACCEPT / DECOMPOSE / REWRITE / SKIP), rewrite-all, no-walk. With --library, -c skill_graph=DIR uses a "
             "prebuilt graph.", case_sensitive=False, rich_help_panel=_AGENT)] = None,
    induction_prompt: Annotated[PromptVariant | None, typer.Option(help="Induction prompt variant (default full).",
                                                                   rich_help_panel=_AGENT)] = None,
    harness: Annotated[HarnessName | None, typer.Option(
        help="Harness features: paper (none: the paper's agent), small-model (all), custom (-c 'agent.guards=[...]'). "
             "Default: small-model for the embedded local model, paper for any other.", case_sensitive=False,
        rich_help_panel=_AGENT)] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Executor step budget per task (default 50).",
                                                  rich_help_panel=_AGENT)] = None,
    max_subtasks: Annotated[int | None, typer.Option(min=1, help="Most subtasks per task (default 15).",
                                                     rich_help_panel=_AGENT)] = None,
    top_k: Annotated[int | None, typer.Option(min=0, help="Skills retrieved per query (default 5).",
                                              rich_help_panel=_AGENT)] = None,
    env_seed: Annotated[int | None, typer.Option(help="Env generation seed (default: the env's, 0 for the bundled "
                                                      "ones).", rich_help_panel=_ENV)] = None,
    seed_old: Annotated[int | None, typer.Option("--seed", hidden=True, help="Deprecated here: --env-seed.")]
    = None,
    split: Annotated[str | None, typer.Option(help="Only tasks of this split (dev/test).", rich_help_panel=_ENV)]
    = None,
    sandbox: Annotated[bool | None, typer.Option("--sandbox/--no-sandbox", help="Run agent code in the sandbox "
                                                 "(the default; --no-sandbox: in-process, for trusted test doubles "
                                                 "only).", rich_help_panel=_ENV, show_default=False)] = None,
    workdir: Annotated[Path | None, typer.Option(help="Where episode workspaces are created (default: a temp "
                                                      "folder).", rich_help_panel=_ENV)] = None,
    env_arg: Annotated[list[str] | None, typer.Option(help="key=value passed to the env's constructor (JSON "
                                                           "values); repeatable.", rich_help_panel=_ENV)] = None,
    progress: Progress = True,
    heartbeat: Annotated[float, typer.Option(help="Without a terminal: a progress line at most every this many "
                                                  "seconds while a task runs (0: none).", min=0)] = 30.0,
    token_limit: TokenLimit = None,
    cost_limit: CostLimit = None,
    max_connections: MaxConnections = None,
) -> LaunchResult:
    """Run one condition over an env's task stream (seed order), with a skill memory that persists across tasks."""
    if seed_old is not None:
        warn_deprecated("run --seed", "--env-seed")
        env_seed = seed_old if env_seed is None else env_seed
    given = {name: str(value) if isinstance(value, Path) else value  # the shortcut flags, named once: FLAG_KEYS
             for name, value in locals().items() if name in FLAG_KEYS}
    if only_tasks is not None:
        given["only_tasks"] = parse_positions(only_tasks)
    options = ModelOptions(spec=model, base_url=base_url, api_key=api_key, model=model_name,
                           temperature=temperature, max_tokens=max_tokens, context_window=context_window,
                           cache=str(cache) if cache else None, cache_mode=cache_mode,
                           script=str(script) if script else None, retry_budget_s=retry_budget)
    flags = ({FLAG_KEYS[name]: value for name, value in given.items()} | options.spec_keys()
             | env_args(env_arg or []) | {"model.max_concurrency": max_connections})
    stream_config = run_spec(config, overrides or [], flags, out, allowed_imports=allowed_imports(allow_import, env))
    console = Console(stderr=True)
    budget = Budget(token_limit=token_limit, cost_limit=cost_limit)
    result = run_config(stream_config, workdir=workdir, progress=progress, console=console, heartbeat_s=heartbeat,
                        budget=budget)
    records = result.summary.records
    if result.summary.stopped:
        console.print(f"stopped: {result.summary.stopped}; {len(records)}/{len(result.tasks)} tasks finished and kept; "
                      "rerun the same command to resume", highlight=False, soft_wrap=True)
    console.print(f"done: {len(result.summary.ran)} tasks run now, {len(records)}/{len(result.tasks)} finished, "
                  f"success {sum(r.success for r in records)}/{len(records)} in {result.wall_s:.1f} s", highlight=False)
    folder = result.summary.path
    stdout = Console(width=max(100, Console().width))
    stdout.print(summary_table(summarize_run(folder)))
    paths = [("results", folder / RESULTS), (TRAJECTORIES, folder / TRAJECTORIES), (MEMORY, folder / MEMORY)]
    for label, path in paths:
        if path.exists():
            stdout.print(f"{label}: {path}", highlight=False, soft_wrap=True)
    stdout.print(f"more: skilltransfer show {folder} [--task ID]", highlight=False, soft_wrap=True)
    return result
