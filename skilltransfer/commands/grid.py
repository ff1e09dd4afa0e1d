"""``skilltransfer grid SPEC``: run an experiment grid (envs x models x conditions x seeds) concurrently, resumably."""

from __future__ import annotations

import shlex
import sys
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from skilltransfer.commands.grid_plan import print_dry_run, say_before_running, tokens_text
from skilltransfer.commands.option_groups import SPENDING, Spending, urls_in, with_groups
from skilltransfer.commands.options import (
    AllowImport,
    AllowKeyTo,
    ConfigFiles,
    Overrides,
    QuietOld,
    embedder_option,
    limit_option,
    progress_option,
    warn_deprecated,
)
from skilltransfer.util.terminal import Console

if TYPE_CHECKING:  # the runner is imported when the command runs: every CLI start imports all command modules
    from skilltransfer.runner.grid import GridState, GridSummary

_ADVANCED = "Advanced"


def _duration(seconds: float | None) -> str:
    return "?" if seconds is None else str(timedelta(seconds=int(seconds)))


class GridView:
    """The live progress view: a task bar plus streams done, tasks done, failures, tokens, calls and ETA.

    On a terminal it redraws in place; otherwise (logs, CI) it prints the status line every ``log_every_s`` seconds.
    """

    def __init__(self, state: GridState, title: str, console: Console, *, log_every_s: float = 30.0) -> None:
        self.state = state
        self.title = title
        self.console = console
        self.log_every_s = log_every_s
        self._last_log = time.monotonic()
        self._live = Live(get_renderable=self.render, console=console, refresh_per_second=2, transient=False,
                          redirect_stdout=False, redirect_stderr=False) if console.is_terminal else None

    def line(self) -> Text:
        s = self.state.snapshot()
        return Text.assemble(
            (f"{self.title}  ", "bold"),
            f"streams {s['finished']}/{s['streams']} done, {s['running']} running, ",
            (f"{s['failed']} failed", "red" if s["failed"] else ""),
            f"  tasks {s['tasks_done']}/{s['tasks']}  tokens {tokens_text(s['tokens'])}"
            + (f"  cost ${s['cost_usd']:,.2f}" if s["cost_usd"] else "") + f"  calls {s['model_calls']}"
            f"  elapsed {_duration(s['elapsed_s'])}  ETA {_duration(s['eta_s'])}")

    def render(self) -> Group:
        s = self.state.snapshot()
        return Group(ProgressBar(total=max(1, s["tasks"]), completed=s["tasks_done"], width=40), self.line())

    def refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()
        elif time.monotonic() - self._last_log >= self.log_every_s:
            self._last_log = time.monotonic()
            self.console.print(self.line(), soft_wrap=True)

    def __enter__(self) -> GridView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
        else:
            self.console.print(self.line(), soft_wrap=True)


def _print_summary(summary: GridSummary, console: Console) -> None:
    counts = summary.counts
    console.print(f"grid {summary.out}: {counts['done']} streams run, {counts['skipped']} already finished, "
                  f"{counts['failed']} failed; {summary.tasks_ran} tasks run now, {summary.model_calls} model calls, "
                  f"{tokens_text(summary.tokens)} tokens"
                  + (f", ${summary.cost_usd:,.4f}" if summary.cost_usd is not None else "")
                  + f" in {_duration(summary.seconds)} ({summary.backend})", soft_wrap=True)
    if summary.stopped:
        console.print(f"stopped: {summary.stopped}; {summary.counts.get('stopped', 0)} streams not finished, their "
                      f"committed tasks kept; resume: {summary.resume_command or 'rerun the same command'}",
                      soft_wrap=True, highlight=False, markup=False)
    reading = [o for o in summary.outcomes if o.library is not None]
    empty = [o for o in reading if o.library is not None and o.library.startswith("0 skills")]
    if reading:
        console.print(f"{len(reading)} streams read a frozen library, {len(empty)} of them with no skills",
                      soft_wrap=True)
    if empty:
        console.print("Streams that ran with an empty library (their source stream induced nothing: a result):",
                      soft_wrap=True)
        for outcome in empty:
            console.print(f"  {outcome.run}  library: {outcome.library}", soft_wrap=True, highlight=False,
                          markup=False)
    errors = {o.run: o.task_errors for o in summary.outcomes if o.task_errors}
    if errors:
        n = sum(errors.values())
        listed = ", ".join(f"{run}: {count}" for run, count in list(errors.items())[:5])
        console.print(f"{n} task{'' if n == 1 else 's'} ended in an error or timeout ({listed}"
                      f"{', ...' if len(errors) > 5 else ''}); exit_status and the trajectory's error say why",
                      soft_wrap=True, highlight=False, markup=False)
    if summary.failed:
        table = Table(title="Failed streams (rerun the same command to retry them)")
        table.add_column("stream", overflow="fold")
        table.add_column("tasks", justify="right")
        table.add_column("error", overflow="fold")
        for outcome in summary.failed:
            table.add_row(outcome.run, f"{outcome.tasks_done}/{outcome.tasks_total}", outcome.error or "")
        console.print(table)
        console.print(f"tracebacks: {summary.out / 'status.json'}", soft_wrap=True)
        if summary.resume_command:
            console.print(f"resume: {summary.resume_command}", soft_wrap=True, highlight=False, markup=False)


def resume_command(spec: str, out: str | None, config: list[str] | None, overrides: list[str] | None,
                   limit: int | None, embedder: str | None, stream_retries: int,
                   limits: dict[str, float | None] | None = None, allow_import: list[str] | None = None,
                   allow_key_to: list[str] | None = None) -> str:
    """The command that resumes this grid: the spec and every option that shapes it, as given."""
    parts = ["skilltransfer", "grid", spec]
    if out is not None:
        parts += ["--out", out]
    for item in config or []:
        parts += ["--config", item]
    for item in allow_import or []:
        parts += ["--allow-import", item]
    for item in allow_key_to or []:
        parts += ["--allow-key-to", item]
    if limit is not None:
        parts += ["--limit", str(limit)]
    if embedder is not None:
        parts += ["--embedder", embedder]
    if stream_retries != 1:
        parts += ["--stream-retries", str(stream_retries)]
    for flag, value in (limits or {}).items():
        if value is not None:
            parts += [flag, f"{value:g}"]
    for item in overrides or []:
        parts += ["-c", item]
    return shlex.join(parts)


@with_groups
def grid(
    spec: Annotated[str, typer.Argument(help="A grid spec YAML file, or a ready-made spec name "
                                             "(paper-table2, cross-level, utility-split, order-reshuffle, "
                                             "prompt-ablation, subagent-vs-skill, ...).")],
    out: Annotated[str | None, typer.Option("--out", "-o", help="Output folder (default runs/grid-<name>).")] = None,
    max_concurrency: Annotated[int | None, typer.Option("--max-concurrency", "-j", min=1,
                                                        help="Streams running at once.")] = None,
    config: ConfigFiles = None,
    overrides: Overrides = None,
    allow_import: AllowImport = None,
    allow_key_to: AllowKeyTo = None,
    limit: Annotated[int | None, limit_option("Only the first N tasks of each stream.")] = None,
    embedder: Annotated[str | None, embedder_option("Embedder: minilm, hash[:DIM] or a model folder.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the streams and exit.")] = False,
    progress: Annotated[bool, progress_option("Show progress: the live view.")] = True,
    task_limit: Annotated[int | None, typer.Option("--task-limit", hidden=True, help="Deprecated: --limit.")] = None,
    quiet: QuietOld = False,
    backend: Annotated[Literal["thread", "ray"], typer.Option(help="thread (this process) or ray (Ray tasks; pip "
                                                              "install ray).", rich_help_panel=_ADVANCED)]
    = "thread",
    address: Annotated[str | None, typer.Option(help="Ray cluster address (default: start a local Ray).",
                                                rich_help_panel=_ADVANCED)] = None,
    ray_cpus: Annotated[float, typer.Option(min=0.01, help="CPUs Ray reserves per stream.",
                                            rich_help_panel=_ADVANCED)] = 1.0,
    *,
    spending: Annotated[Spending, SPENDING],
    stream_retries: Annotated[int, typer.Option(min=0, help="Times a failed stream (an error outside its tasks, e.g. "
                                                "an endpoint down past its retry budget) is started again, resuming, "
                                                "before the streams that read its library are marked failed.")] = 1,
) -> Any:
    """Run every stream of a grid spec; rerunning resumes (finished streams are skipped, failed ones retried).

    \f
    Returns the `GridSummary` (None for --dry-run).
    """
    from skilltransfer.runner.budget import Budget
    from skilltransfer.runner.grid import run_grid

    if task_limit is not None:
        warn_deprecated("--task-limit", "--limit")
        limit = task_limit if limit is None else limit
    if quiet:
        warn_deprecated("-q/--quiet", "--no-progress")
        progress = False
    flags: dict[str, Any] = {"out": out, "max_concurrency": max_concurrency, "limits.task_limit": limit,
                             "embedder": embedder}
    grid_spec = _load_grid_spec(spec, config or [], overrides or [], allow_import or [], allow_key_to or [], flags,
                                spending.max_connections)
    console = Console(file=sys.stderr)
    if dry_run:
        print_dry_run(grid_spec)
        return None

    def view(state: GridState) -> GridView:
        return GridView(state, f"grid {grid_spec.name}", console)

    say_before_running(grid_spec, console)
    resume = resume_command(spec, out, config, overrides, limit, embedder, stream_retries,
                            {"--token-limit": spending.token_limit, "--cost-limit": spending.cost_limit,
                             "--max-connections": spending.max_connections}, allow_import, allow_key_to)
    budget = Budget(token_limit=spending.token_limit, cost_limit=spending.cost_limit)
    try:
        summary = run_grid(grid_spec, backend=backend, address=address,
                           progress=view if progress else None, ray_cpus_per_stream=ray_cpus,
                           stream_retries=stream_retries, resume_command=resume, budget=budget)
    except KeyboardInterrupt:
        console.print(f"interrupted: committed tasks are kept in {grid_spec.out_dir}; rerun the same command to "
                      "resume", soft_wrap=True)
        raise SystemExit(130) from None
    _print_summary(summary, Console(file=sys.stdout, width=max(120, Console().width)))
    if summary.failed:  # SystemExit, not typer.Exit: click returns (not raises) Exit codes when not standalone
        raise SystemExit(1)
    return summary


def _load_grid_spec(spec: str, config: list[str], overrides: list[str], allow_import: list[str],
                    allow_key_to: list[str], flags: dict[str, Any], max_connections: int | None) -> Any:
    """The grid spec: ``spec`` under each ``--config`` file, each ``-c`` and the flags; its endpoints checked before
    any request; ``--max-connections`` set on every model entry of every phase."""
    from skilltransfer.llm.openai_client import check_key_destinations
    from skilltransfer.runner.spec import load_spec

    for item in config:
        if "=" in item:  # the old meaning of --config (now -c/--set)
            warn_deprecated(f"--config {item}", f"-c {item} (--config takes a YAML file)")
    grid_spec = load_spec(spec, [*config, *overrides], allowed_imports=tuple(allow_import), **flags)
    check_key_destinations(_models(grid_spec), named=urls_in(overrides), allowed=allow_key_to)
    if max_connections is not None:
        for phase in grid_spec.phases:
            phase.models = {label: entry.model_copy(update={"max_concurrency": max_connections})
                            for label, entry in phase.models.items()}
    return grid_spec


def _models(grid_spec: Any) -> list[tuple[str, Any]]:
    """Every model of a grid spec with the field that names its endpoint."""
    models = []
    for index, phase in enumerate(grid_spec.phases):
        where = f"phases[{index}]." if len(grid_spec.phases) > 1 else ""
        models += [(f"{where}models.{label}.base_url", entry) for label, entry in phase.models.items()]
        if getattr(phase, "verifier_model", None) is not None:
            models.append((f"{where}verifier_model.base_url", phase.verifier_model))
    return models


__all__ = ["GridView", "grid"]
