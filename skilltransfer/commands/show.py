"""``skilltransfer show``: a run's summary, or one task's trajectory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder
from skilltransfer.report.summary import (
    RunSummary,
    format_trajectory,
    load_prompts,
    load_task,
    summarize_run,
    summary_rows,
)
from skilltransfer.util.terminal import Console, echo
from skilltransfer.util.text import terminal_safe


def show(
    run: Annotated[Path, typer.Argument(help="A run folder (written by skilltransfer run).")],
    task: Annotated[str | None, typer.Option(help="A task: its number in the stream (1-based) or its id (prints "
                                                  "its trajectory).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON: the summary.")] = False,
    max_chars: Annotated[int, typer.Option(min=1, help="Cut long observations to this many characters (--task).")]
    = 2000,
    prompts: Annotated[bool, typer.Option("--prompts", help="With --task: each step's model calls, their prompts "
                                          "and raw replies (a message printed before is one line).")] = False,
) -> RunSummary | str:
    """Print a run's summary (success with bootstrap CI, latency, tokens, skills), or a task's trajectory."""
    if prompts and task is None:
        raise InputError("--prompts needs --task")
    if task is not None:
        record, trajectory = load_task(run, task)
        where = run / (record.trajectory if record is not None else RunFolder(run).trajectory_file(trajectory.task_id))
        try:  # a trajectory is the agent's or a stranger's file: a crafted field is one line, never a traceback
            text = format_trajectory(record, trajectory, max_chars=max_chars,
                                     prompts=load_prompts(run, trajectory) if prompts else None, path=where)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            raise InputError(f"a field of this trajectory has an unexpected type or value ({type(exc).__name__}: "
                             f"{str(exc)[:120]}); it was not written by skilltransfer as is", path=where) from None
        echo(terminal_safe(text), nl=False)  # the agent's text: no control sequence reaches the terminal
        return text
    summary = summarize_run(run)
    if as_json:
        echo(json.dumps(summary.to_dict(), indent=2))  # JSON escapes control characters
        return summary
    Console(width=max(100, Console().width)).print(summary_table(summary))
    return summary


def summary_table(summary: RunSummary) -> Table:
    """A run's summary as a two-column table (what ``show`` prints, and ``run`` at its end)."""
    table = Table(title=f"Run {summary.run}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    for label, value in summary_rows(summary):
        table.add_row(label, Text(terminal_safe(value)))  # plain text: "[success]" is data, not rich markup
    return table
