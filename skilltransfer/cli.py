"""The ``skilltransfer`` command line: a thin Typer app over library functions (the commands are in
``skilltransfer.commands``; adding one is a module there and a line below)."""

from __future__ import annotations

import sys

import typer

from skilltransfer.commands import (
    envs,
    evolve,
    grid,
    judge,
    library,
    library_lens,
    report,
    run,
    score,
    serve,
    show,
    view,
)
from skilltransfer.errors import InputError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Study cross-task skill transfer in LLM agents.")
app.add_typer(envs.envs_app, name="envs")
app.add_typer(library.library_app, name="library")
library.library_app.command("decompose")(library_lens.decompose)
library.library_app.command("route")(library_lens.route_query)
for _command in (evolve.evolve, grid.grid, judge.judge, report.report, run.run, score.score, serve.serve, show.show,
                 view.view):
    app.command()(_command)


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2."""
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code instead of raising it in this mode
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
            print(f"error: {' '.join(exc.format_message().split())}{hint}", file=sys.stderr)
            raise SystemExit(exc.exit_code) from None
        if type(exc).__name__ == "Abort":
            raise SystemExit(130) from None
        raise
    if isinstance(code, int) and code:
        raise SystemExit(code)
