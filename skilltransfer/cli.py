"""The ``skilltransfer`` command line: a thin Typer app over library functions.

The commands are in ``skilltransfer.commands``; adding one is a module there and a line in `COMMANDS`. A command's
module is imported only when that command runs (or its own ``--help`` is asked for), so ``skilltransfer --help``
and ``--version`` start without numpy, torch, pandas or the model clients.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup

from skilltransfer import __version__
from skilltransfer.errors import InputError
from skilltransfer.util.terminal import echo, install_log_handler

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("skilltransfer.commands.run:run", "Run one condition over an env's task stream, with a skill memory "
            "that persists across tasks."),
    "grid": ("skilltransfer.commands.grid:grid", "Run every stream of a grid spec; rerunning resumes."),
    "show": ("skilltransfer.commands.show:show", "Print a run's summary, or one task's trajectory."),
    "report": ("skilltransfer.commands.report:report", "Write tables with 95 % CIs and the paper's figures from "
               "runs; --compare A B: the per-task flip table."),
    "judge": ("skilltransfer.commands.judge:judge", "Judge run A against run B task by task, blinded (W/T/L and "
              "preference with a CI)."),
    "score": ("skilltransfer.commands.score:score", "Rank a library's skills by utility = specificity x "
              "abstractness against a set of tasks."),
    "triggers": ("skilltransfer.commands.triggers:triggers", "Run trigger evals (skill-creator's format) against a "
                 "library as the agent sees it: per skill precision, recall and F1, isolated and competitive."),
    "validate": ("skilltransfer.commands.validate:validate", "Set a library score's diagnostics beside outcomes "
                 "measured elsewhere: rank correlations with CIs, paired, within groups, held out."),
    "evolve": ("skilltransfer.commands.evolve:evolve", "Evolve a library's skill graph and routing notes, keeping "
               "an edit only when it raises J on validation tasks."),
    "envs": ("skilltransfer.commands.envs:envs_app", "List environments and show their tasks."),
    "library": ("skilltransfer.commands.library:library_app", "Inspect, organise and decompose skill libraries."),
    "serve": ("skilltransfer.commands.serve:serve", "Start the embedded local model server (OpenAI-compatible) in "
              "the foreground."),
    "export": ("skilltransfer.commands.export:export", "Write every finished task of runs as one table (csv, "
               "parquet, jsonl): settings that differ, outcome, tokens, cost, skills."),
    "induce": ("skilltransfer.commands.induce:induce", "Induce skills from any agent's trajectories (ATIF, Harbor "
               "jobs) into an Agent Skills library."),
    "view": ("skilltransfer.commands.view:view", "Browse runs, tasks, trajectories, skills, transfer and comparisons "
             "in a local web viewer (or export a static site)."),
}
"""Command name -> (``module:attribute`` of its function or Typer group, the one-line help ``--help`` lists)."""


def load_command(name: str) -> Any:
    """Build the click command of ``name`` (importing its module)."""
    module, _, attribute = COMMANDS[name][0].partition(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name)(target)
    command = typer.main.get_command(single)
    command.name = name
    return command


class _LazyCommands(MutableMapping[str, Any]):
    """The group's commands: every name known up front, each command built on first use."""

    def __init__(self, eager: MutableMapping[str, Any]) -> None:
        self._built: dict[str, Any] = dict(eager)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = load_command(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._built]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._built))


class LazyGroup(TyperGroup):
    """A Typer group whose commands are imported when used; its own help lists them from `COMMANDS`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands(self.commands)
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name in COMMANDS:  # the help's command table: name and one line, nothing imported
            return typer.core.TyperCommand(name=cmd_name, short_help=COMMANDS[cmd_name][1], help=COMMANDS[cmd_name][1])
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(cls=LazyGroup, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Study cross-task skill transfer in LLM agents.")


def _version(value: bool) -> None:
    if value:
        echo(f"skilltransfer {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Study cross-task skill transfer in LLM agents."""


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2."""
    install_log_handler()  # the package's warnings on stderr, made safe as every printed line is
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code instead of raising it in this mode
    except InputError as exc:
        echo(f"error: {exc}", err=True)  # may quote text from outside: `shown` makes it safe
        raise SystemExit(exc.exit_code) from None
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except Exception as exc:
        # Usage errors from Typer's (possibly vendored) click: one `error:` line naming the option, exit 2.
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command group: its help
            exc.show()  # type: ignore[attr-defined]
            raise SystemExit(exc.exit_code) from None  # type: ignore[attr-defined]
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
            echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
            raise SystemExit(exc.exit_code) from None
        if type(exc).__name__ == "Abort":
            raise SystemExit(130) from None
        raise
    if isinstance(code, int) and code:
        raise SystemExit(code)
