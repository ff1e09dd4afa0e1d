"""Running one stream of a plan in a grid: build its env, run (or resume) it, record the outcome; `run` shares every
step but the outcome record (`skilltransfer.runner.launch`).

A crashing stream becomes a failed `StreamOutcome` carrying its error and traceback; it never raises. Streams that
share a process share models and embedders: in-process episodes act under one lock (they switch the process's cwd and
stdout), and a shared embedder embeds one batch at a time (`LockedEmbedder`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skilltransfer.errors import InputError
from skilltransfer.log import MEMORY, TASK_ERROR, TASK_TIMEOUT, RunFolder, TaskRecord
from skilltransfer.protocols import ChatModel, Embedder, TaskSpec
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import build_env, open_stream, saved_memory_size
from skilltransfer.runner.evolve import run_evolution_stream, split_tasks
from skilltransfer.runner.guard import GuardedEnv
from skilltransfer.runner.organize import run_organize_stream
from skilltransfer.runner.plan import StreamPlan
from skilltransfer.runner.stream import parallel_width, run_stream
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.util import secrets

State = Literal["pending", "running", "done", "skipped", "failed", "stopped"]
"""A stream's state; "stopped": a spending limit (`Budget`) was reached before its last task (rerun to resume)."""
TaskSink = Callable[[str, TaskRecord], None]
"""Receives (run name, record) for each task a stream commits."""


def list_tasks(plan: StreamPlan) -> list[TaskSpec]:
    """The stream's tasks (`open_stream`), from an env built in a throw-away work folder.

    Raises:
        InputError: see `open_stream` (the caller names the stream).
    """
    workdir = Path(tempfile.mkdtemp(prefix="grid-tasks-"))
    try:
        return open_stream(plan.config, workdir)[1]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def listing_key(plan: StreamPlan) -> str:
    """What selects a stream's tasks (streams with equal keys share one listing): the resolved env name, its
    constructor arguments and seed, split, curated stream, order seed, task limit and positions."""
    config = plan.config
    env = config.env
    return json.dumps([env.name, env.args, env.seed, env.split, env.stream, config.order_seed, config.stream_length,
                       config.task_positions],
                      sort_keys=True, default=str)


# --------------------------------------------------------------------------------------------- one stream
@dataclass
class StreamOutcome:
    """What happened to one stream in this invocation."""

    run: str
    state: State
    tasks_total: int
    tasks_done: int = 0
    ran: int = 0
    """Tasks run now (not counting ones finished earlier)."""
    successes: int = 0
    model_calls: int = 0
    """Model calls of the tasks run now."""
    tokens: int = 0
    """Prompt + completion tokens of the tasks run now."""
    cost_usd: float | None = None
    """What the tasks run now cost at the model's price (None without a price)."""
    seconds: float = 0.0
    error: str | None = None
    traceback: str | None = None
    task_errors: int = 0
    """The stream's tasks recorded with exit status ``error`` or ``task_timeout`` (an exception or timeout inside the
    task, which ended it and not the stream)."""
    attempts: int = 0
    """How often this invocation started the stream (a failed stream is retried, ``--stream-retries``)."""
    library: str | None = None
    """A stream reading a frozen library: ``"<n> skills from <source stream or path>"`` (0 is a result: the source
    stream induced nothing), plus ``"; <m> skills as the stream ran with it"`` when a filter or distractors changed
    that."""


def library_note(plan: StreamPlan) -> str | None:
    """`StreamOutcome.library` of ``plan`` (None when it reads no frozen library)."""
    config = plan.config
    if config.library is None:
        return None
    size = saved_memory_size(config.library)
    ran = saved_memory_size(config.path / MEMORY)  # as the stream froze it (after a filter, with distractors)
    note = f"{_skills(size)} from {plan.source or config.library}"
    return note if ran is None or ran == size else f"{note}; {_skills(ran)} as the stream ran with it"


def _skills(count: int | None) -> str:
    return "? skills" if count is None else f"{count} skill{'' if count == 1 else 's'}"


def finished_records(plan: StreamPlan, task_ids: Sequence[str]) -> list[TaskRecord] | None:
    """The stream's records if its run folder already holds every task under the same settings, else None."""
    folder = RunFolder(plan.config.path)
    try:
        saved = read_run_settings(folder)
        records = folder.read_records()
        if plan.config.evolution is not None:  # its run folder holds the final pair's test run
            task_ids = split_tasks(plan.config, task_ids)[2]
        if plan.config.organize:  # an organise stream runs no task
            task_ids = []
    except InputError:
        return None
    if saved.task_ids != list(task_ids) or saved.config.differences(plan.config.recorded()):
        return None
    return records if {r.task_id for r in records} >= set(task_ids) else None


def execute_stream(plan: StreamPlan, tasks: Sequence[TaskSpec], model: ChatModel, embedder: Embedder | None,
                   on_task: TaskSink | None = None, budget: Budget | None = None) -> StreamOutcome:
    """Run (or resume) one grid stream in a work folder under ``<out>/.work``; any exception becomes a failed
    outcome carrying its message and traceback; a reached ``budget`` (shared by the grid's streams) stops it before
    its next task."""
    start = time.perf_counter()
    config = plan.config
    outcome = StreamOutcome(plan.run, "running", tasks_total=len(tasks))
    workdir = Path(tempfile.mkdtemp(prefix="work-", dir=_mkdir(Path(config.runs_dir) / ".work")))

    def record(rec: TaskRecord) -> None:
        outcome.model_calls += rec.model_calls
        outcome.tokens += rec.prompt_tokens + rec.completion_tokens
        if rec.cost_usd is not None:
            outcome.cost_usd = round((outcome.cost_usd or 0.0) + rec.cost_usd, 6)
        if on_task is not None:
            on_task(plan.run, rec)

    try:
        if config.library is not None and not Path(config.library).exists():
            raise InputError(f"library {config.library} does not exist"
                             + (f" (source stream {plan.source} has no memory)" if plan.source else ""))
        env = GuardedEnv(build_env(config.env, workdir))
        if config.organize:
            config.check_skill_exec()
            summary = run_organize_stream(model, config)
        elif config.evolution is not None:
            summary = run_evolution_stream(env, model, config, embedder=embedder, tasks=tasks, on_task=record)
        else:
            summary = run_stream(env, model, config, embedder=embedder if config.has_memory else None, tasks=tasks,
                                 on_task=record, budget=budget, parallel_tasks=parallel_width(config))
        outcome.state = "stopped" if summary.stopped else "done"
        outcome.error = summary.stopped
        outcome.ran = len(summary.ran)
        outcome.tasks_done = len(summary.records)
        outcome.successes = sum(r.success for r in summary.records)
        outcome.task_errors = sum(r.exit_status in (TASK_ERROR, TASK_TIMEOUT) for r in summary.records)
    except Exception as exc:  # noqa: BLE001 - a crashing stream is recorded and must not stop the grid
        outcome.state = "failed"
        message = secrets.redact(str(exc)).strip()
        outcome.error = f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}"
        outcome.traceback = secrets.redact(traceback.format_exc())
        outcome.tasks_done = RunFolder(config.path).committed()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    outcome.library = library_note(plan)
    outcome.seconds = round(time.perf_counter() - start, 3)
    return outcome


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
