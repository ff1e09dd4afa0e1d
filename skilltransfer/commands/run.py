"""``skilltransfer run``: run (or resume) one stream (an env's tasks under one condition), logging to a run folder.

The stream is a one-point grid spec: ``--config FILE`` (the keys of a grid spec, one value per axis), then each
``-c key.path=value``, then the flags below, which are shortcuts for spec keys (`FLAG_KEYS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from skilltransfer.agents.config import LibraryOrganization, SkillExec
from skilltransfer.agents.harness import HarnessName
from skilltransfer.commands.option_groups import (
    SPEC,
    SPENDING,
    ModelOptions,
    OptionGroup,
    SpecLayers,
    Spending,
    model_group,
    with_groups,
)
from skilltransfer.commands.options import Progress, embedder_option, limit_option, warn_deprecated
from skilltransfer.commands.show import summary_table
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import PromptVariant
from skilltransfer.log import MEMORY, RESULTS, TRAJECTORIES
from skilltransfer.report.summary import summarize_run
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import imported_module, parse_positions
from skilltransfer.runner.launch import LaunchResult, run_config, run_spec
from skilltransfer.settings.config import Condition, Coordination, LibraryFilter, Reuse
from skilltransfer.util.terminal import Console

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
"""Flag (parameter name of `run`, in its option groups) -> the spec key it sets (the model flags:
`ModelOptions.spec_keys`)."""


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


def _spec_keys(**given: Any) -> dict[str, Any]:
    """Shortcut flags (parameter name -> value, None: not given) as the spec keys `FLAG_KEYS` names."""
    return {FLAG_KEYS[name]: str(value) if isinstance(value, Path) else value for name, value in given.items()}


def _task_selection(
    limit: Annotated[int | None, limit_option("Only the first N tasks of the stream.")] = None,
    only_tasks: Annotated[str | None, typer.Option(help="Only these tasks of the stream: their numbers N[,M|A-B] "
                                                       "(1-based, as --task elsewhere; e.g. 1,4,6-8) in the stream "
                                                       "as ordered and limited.")] = None,
    order_seed: Annotated[int | None, typer.Option(help="Stream order seed (0, the default: the canonical order).")]
    = None,
    stream: Annotated[str | None, typer.Option(help="A curated stream of the env, in its own order (e.g. apps "
                                                    "'starter'; `skilltransfer envs list` shows them).")] = None,
) -> dict[str, Any]:
    positions = parse_positions(only_tasks) if only_tasks is not None else None
    return _spec_keys(limit=limit, only_tasks=positions, order_seed=order_seed, stream=stream)


TASK_SELECTION = OptionGroup(_task_selection)
"""Which tasks of the env, in which order: ``--limit``, ``--only-tasks``, ``--order-seed``, ``--stream`` (spec
keys)."""


def _agent_and_memory(
    at_snapshot: Annotated[int | None, typer.Option(min=0, help="Use --library (another run's folder or memory "
                                                              "folder) as it was after that run's first K tasks "
                                                              "(0: empty; its memory/snapshots.jsonl).",
                                                    rich_help_panel=_AGENT)] = None,
    embedder: Annotated[str | None, embedder_option("Embedder for retrieval: minilm (default), hash:DIM (test double) "
                                                    "or a sentence-transformers folder.", panel=_AGENT)] = None,
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
) -> dict[str, Any]:
    return _spec_keys(**locals())


AGENT_AND_MEMORY = OptionGroup(_agent_and_memory)
"""The agent, its skill library and how skills are retrieved, shown and reused (spec keys)."""


@dataclass(frozen=True)
class EnvironmentSettings:
    """How the env is built (spec keys) and where its episode workspaces are created (None: a temp folder)."""

    spec_keys: dict[str, Any]
    workdir: Path | None


def _environment(
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
) -> EnvironmentSettings:
    if seed_old is not None:
        warn_deprecated("run --seed", "--env-seed")
        env_seed = seed_old if env_seed is None else env_seed
    return EnvironmentSettings(_spec_keys(env_seed=env_seed, split=split, sandbox=sandbox) | env_args(env_arg or []),
                               workdir)


ENVIRONMENT = OptionGroup(_environment)
"""``--env-seed``, ``--split``, ``--sandbox``, ``--workdir``, ``--env-arg`` (and the deprecated ``--seed``)."""


@dataclass(frozen=True)
class ProgressSettings:
    """How a stream's progress is shown: the live bar or lines, and the heartbeat without a terminal."""

    show: bool
    heartbeat_s: float


def _progress(
    progress: Progress = True,
    heartbeat: Annotated[float, typer.Option(help="Without a terminal: a progress line at most every this many "
                                                  "seconds while a task runs (0: none).", min=0)] = 30.0,
) -> ProgressSettings:
    return ProgressSettings(progress, heartbeat)


PROGRESS = OptionGroup(_progress)
"""``--progress/--no-progress`` and ``--heartbeat``."""


@with_groups
def run(
    env: Annotated[str | None, typer.Option(help="Env: apps, office, datasci, scienceworld, officebench[:<tasks "
                                                 "folder>], or module:Class (your own env class).")] = None,
    condition: Annotated[Condition | None, typer.Option(help="Condition: level x skill format (required here or in "
                                                             "the config).", case_sensitive=False)] = None,
    *,
    spec: Annotated[SpecLayers, SPEC],
    model: Annotated[ModelOptions, model_group(max_tokens="Most completion tokens per call, for every role "
                                               "(default: per role, executor 1024, planner 96, summarizer 256, "
                                               "induction 768).")],
    tasks: Annotated[dict[str, Any], TASK_SELECTION],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output run folder (default "
                                             "runs/<env>-<condition>-<model>). Rerunning with the same folder "
                                             "resumes.")] = None,
    agent: Annotated[dict[str, Any], AGENT_AND_MEMORY],
    environment: Annotated[EnvironmentSettings, ENVIRONMENT],
    progress: Annotated[ProgressSettings, PROGRESS],
    spending: Annotated[Spending, SPENDING],
) -> LaunchResult:
    """Run one condition over an env's task stream (seed order), with a skill memory that persists across tasks."""
    flags = (_spec_keys(env=env, condition=condition) | tasks | agent | environment.spec_keys | model.spec_keys()
             | {"model.max_concurrency": spending.max_connections})
    stream_config = run_spec(spec.config, spec.overrides, flags, out,
                             allowed_imports=allowed_imports(spec.allow_import, env))
    spec.check_key_destinations(_models(stream_config), model)  # before any request
    console = Console(stderr=True)
    budget = Budget(token_limit=spending.token_limit, cost_limit=spending.cost_limit)
    result = run_config(stream_config, workdir=environment.workdir, progress=progress.show, console=console,
                        heartbeat_s=progress.heartbeat_s, budget=budget)
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


def _models(config: Any) -> list[tuple[str, Any]]:
    """A stream's models with the spec field that names their endpoint."""
    models = [("model.base_url", config.model)]
    if getattr(config, "verifier_model", None) is not None:
        models.append(("verifier_model.base_url", config.verifier_model))
    return models
