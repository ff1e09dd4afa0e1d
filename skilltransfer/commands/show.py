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
from skilltransfer.report.summary import RunSummary, summarize_run, summary_rows
from skilltransfer.report.trajectory import format_trajectory, load_prompts, load_task
from skilltransfer.util.terminal import Console, echo
from skilltransfer.util.text import terminal_safe


def show(
    run: Annotated[Path, typer.Argument(help="A run folder (written by skilltransfer run), an ATIF trajectory file or "
                                             "a folder of them (a Harbor job folder).")],
    task: Annotated[str | None, typer.Option(help="A task: its number in the stream (1-based) or its id (prints "
                                                  "its trajectory).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON: the summary.")] = False,
    max_chars: Annotated[int, typer.Option(min=1, help="Cut long observations to this many characters (--task).")]
    = 2000,
    prompts: Annotated[bool, typer.Option("--prompts", help="With --task: each step's model calls, their prompts "
                                          "and raw replies (a message printed before is one line).")] = False,
) -> RunSummary | str:
    """Print a run's summary (success with bootstrap CI, latency, tokens, skills), or a task's trajectory; an ATIF
    file or Harbor job folder: its trajectories, or one of them."""
    from skilltransfer.log.atif_files import looks_like_atif

    if run.exists() and looks_like_atif(run):
        return _show_atif(run, task, max_chars=max_chars, as_json=as_json, prompts=prompts)
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


def _show_atif(path: Path, task: str | None, *, max_chars: int, as_json: bool, prompts: bool) -> str:
    """``show`` of ATIF trajectories: one trajectory (``--task``, or the only one) as text, else one line each."""
    from skilltransfer.log.atif_files import read_atif

    read = read_atif([path])
    for line in [*read.unusable]:
        echo(f"not read: {terminal_safe(line)}", err=True)
    items = read.trajectories
    if not items:
        raise InputError("no ATIF trajectory could be read here" + (" (see the lines above)" if read.unusable
                                                                     else ""), path=path)
    if prompts and task is None and len(items) > 1:
        raise InputError(f"--prompts needs --task (these are {len(items)} trajectories)", path=path)
    if task is None and len(items) > 1:
        rows = [{"task": i + 1, "task_id": t.record.task_id, "agent": t.agent, "model": t.model,
                 "steps": t.record.steps, "reward": t.reward, "source": t.source} for i, t in enumerate(items)]
        if as_json:
            echo(json.dumps({"atif": rows, "unusable": read.unusable}, indent=2))
            return ""
        lines = [f"{len(items)} ATIF trajectories" + (f" ({len(read.unusable)} file(s) not read)" if read.unusable
                                                      else "") + " (--task N prints one):"]
        lines += [f"  {r['task']:>3}. {r['task_id']}  {r['agent']} / {r['model'] or '?'}  {r['steps']} steps  reward "
                  + ("?" if r["reward"] is None else f"{r['reward']:g}") for r in rows]
        lines += [f"  note: {note}" for note in read.notes()]
        text = "\n".join(lines) + "\n"
        echo(terminal_safe(text), nl=False)
        return text
    chosen = items[0] if task is None else next((t for t in items if t.record.task_id == task), None)
    if chosen is None and task is not None and task.isdigit() and 1 <= int(task) <= len(items):
        chosen = items[int(task) - 1]
    if chosen is None:
        raise InputError(f"--task {task}: no such trajectory (give 1 to {len(items)} or a task id)", path=path)
    calls = chosen.trajectory.calls
    shown = [{"messages": None, "reply": (chosen.prompts.get(c["reply"]) or {}).get("content") if c.get("reply")
              else None, "reasoning": (chosen.prompts.get(c["reasoning"]) or {}).get("content")
              if c.get("reasoning") else None} for c in calls] if prompts else None
    head = f"{chosen.source}: {chosen.agent}" + (f" {chosen.agent_version}" if chosen.agent_version else "") \
        + f", model {chosen.model or '?'}" + (f", session {chosen.session_id}" if chosen.session_id else "") + "\n"
    head += "".join(f"note: {note}\n" for note in chosen.notes)
    if chosen.reward is None and not chosen.own:
        head += "note: no reward known (no Harbor result.json beside it): shown as not successful\n"
    text = head + format_trajectory(chosen.record, chosen.trajectory, max_chars=max_chars, prompts=shown,
                                    path=chosen.source)
    echo(terminal_safe(text), nl=False)
    return text


def summary_table(summary: RunSummary) -> Table:
    """A run's summary as a two-column table (what ``show`` prints, and ``run`` at its end)."""
    table = Table(title=f"Run {summary.run}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    for label, value in summary_rows(summary):
        table.add_row(label, Text(terminal_safe(value)))  # plain text: "[success]" is data, not rich markup
    return table
