"""``skilltransfer envs list|show``: the registered environments and their tasks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from skilltransfer.commands.options import limit_option, warn_deprecated
from skilltransfer.envs import registry
from skilltransfer.util.terminal import echo

envs_app = typer.Typer(no_args_is_help=True, help="List environments and show their tasks.")


def _env_seed(env_seed: int, seed_old: int | None) -> int:
    if seed_old is None:
        return env_seed
    warn_deprecated("envs --seed", "--env-seed")
    return seed_old


def _counts(counts: Mapping[Any, int]) -> str:
    return ", ".join(f"{key}={value}" for key, value in counts.items()) or "-"


@envs_app.command("list")
def list_envs(env_seed: int = typer.Option(0, help="Env generation seed."),
              seed_old: int | None = typer.Option(None, "--seed", hidden=True, help="Deprecated here: --env-seed."),
              ) -> list[registry.EnvSummary]:
    """Print each env with its task counts by split and difficulty (bundled ones, then installed plug-ins; and the
    real OfficeBench source if found)."""
    seed = _env_seed(env_seed, seed_old)
    summaries = [registry.summarize(name, seed=seed) for name in [*registry.ENVS, *registry.plugin_envs()]]
    root = registry.officebench_root()
    if root is not None:
        summaries.append(registry.summarize(f"{registry.OFFICEBENCH}:{root}"))
    for summary in summaries:
        label = summary.name if registry.env_target(summary.name) else registry.OFFICEBENCH
        if not summary.available:
            echo(f"{label:<12} unavailable: {summary.reason}")
            continue
        echo(f"{label:<12} {summary.total:>4} tasks  split: {_counts(summary.by_split)}  "
             f"difficulty: {_counts(summary.by_difficulty)}  "
             f"({'' if summary.name in registry.ENVS or label == registry.OFFICEBENCH else 'plug-in '}"
             f"{summary.target})")
        if summary.streams:
            echo(f"{'':<12} streams: " + ", ".join(f"{k} ({v} tasks)" for k, v in summary.streams.items()))
    if root is None:
        echo(f"{registry.OFFICEBENCH:<12} not configured: git clone {registry.OFFICEBENCH_REPO} and set "
             f"${registry.OFFICEBENCH_ENV_VAR} to its tasks folder")
    else:
        echo(f"{'':<12} source: {root}")
    return summaries


@envs_app.command("show")
def show_env(env: str = typer.Argument(..., help="apps, office, datasci, scienceworld, an "
                                                  "installed plug-in or officebench[:<path>]."),
             limit: Annotated[int, limit_option("Only the first N tasks (0: all).", min=0)] = 20,
             split: str | None = typer.Option(None, help="Only tasks of this split (dev/test)."),
             stream: str | None = typer.Option(None, help="A curated stream of the env: only its tasks, in its "
                                                          "order."),
             env_seed: int = typer.Option(0, help="Env generation seed."),
             seed_old: int | None = typer.Option(None, "--seed", hidden=True, help="Deprecated here: --env-seed."),
             ) -> list[str]:
    """Print an env's tasks: id, difficulty, template and instruction."""
    seed = _env_seed(env_seed, seed_old)
    kwargs = {} if env.startswith(registry.OFFICEBENCH) else {"seed": seed}
    instance = registry.get_env(env, **kwargs)
    if stream is not None:
        from skilltransfer.envs.opening import named_stream

        tasks = named_stream(instance, stream, split)
    else:
        tasks = list(instance.tasks(split))  # an unknown split is refused by the env
    shown = tasks if limit == 0 else tasks[:limit]
    for task in shown:
        instruction = " ".join(task.instruction.split())
        echo(f"{task.id}\td{task.difficulty}\t{task.template}\t{instruction}")
    if len(shown) < len(tasks):
        echo(f"... {len(tasks) - len(shown)} more (use --limit 0 to show all)")
    return [task.id for task in shown]
