"""The stream runner's loop: an env's tasks in order under one condition, with a skill memory that persists across the
stream. `run_stream` builds the parts once (`skilltransfer.runner.stream_build`), then for each task not yet committed:
start, run, evaluate, induce, commit (the record and the commit: `skilltransfer.runner.stream_record`).

Every task is logged and committed through the run log (`skilltransfer.log`): rerunning the same stream resumes,
skipping committed tasks and starting from the memory saved after the last one. A task whose prompt cannot fit the
model's window is not an error: it ends with exit status ``context_exceeded`` and is recorded like any failed task.

An exception inside a task (the agent, the env, the evaluation) is that task's record, not the stream's end: exit
status ``error``, reward 0, the traceback in its trajectory's ``error``. A task past ``agent.task_timeout_s`` (checked
by `skilltransfer.runner.clock.TaskClock` before each model call) is recorded the same way with exit status
``task_timeout``. What is not the task's fault still stops the stream, leaving the task to be redone on resume: a
user-input or model-call error (`InputError`: an endpoint down past its retry budget, a bad key, a cache miss in
replay) and Ctrl-C; the task's trajectory is then written once more, as "aborted".

With ``coordination`` set (nl-sop, prompt-graph, metaskill) each task is carried out from its frozen plan by
`skilltransfer.runner.coordinated.CoordinatedTask` instead of the agent's `TaskLoop`. Every stream snapshots the
episode's workspace right after ``env.start`` and, after ``evaluate()``, writes the task's artifacts
(`RunFolder.write_artifacts`). After ``evaluate()`` the task's loop induces what waited for the verdict
(``finish``: ``only_successful`` or the ``contract`` induction variant). ``skill_exec``/``library_organization`` are
the agent's settings. A stream whose tasks are independent (`independent_tasks`) runs several at once and commits
them in stream order.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from skilltransfer.agents.agent import Agent
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.envs.artifacts import episode_artifacts, snapshot_workspace
from skilltransfer.errors import InputError
from skilltransfer.log import TASK_ERROR, TASK_TIMEOUT, TaskRecord
from skilltransfer.protocols import ChatModel, Embedder, Env, Episode, Score, TaskSpec
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import LockedEmbedder
from skilltransfer.runner.clock import TaskTimeout
from skilltransfer.runner.coordinated import CoordinatedTask
from skilltransfer.runner.guard import GuardedEnv
from skilltransfer.runner.stream_build import StreamInputs, StreamParts, build_stream
from skilltransfer.runner.stream_record import LiveTrajectory, commit_task, task_outcome, task_record
from skilltransfer.settings.config import StreamConfig
from skilltransfer.util import secrets

MAX_PARALLEL_TASKS = 16
"""Most tasks one stream of independent tasks runs at once (each may hold a sandbox worker process)."""
MAX_TRACEBACK_CHARS = 20_000
"""The longest traceback kept in a task's trajectory (its tail)."""


@dataclass
class StreamSummary:
    """What ``run_stream`` did: all records of the run (earlier and new) and how many tasks ran now."""

    path: Path
    records: list[TaskRecord]
    ran: list[str]
    stopped: str | None = None
    """Why the stream stopped before its last task (a reached `Budget` limit), else None."""

    @property
    def success_rate(self) -> float:
        return sum(r.success for r in self.records) / len(self.records) if self.records else 0.0


def run_stream(env: Env, model: ChatModel, config: StreamConfig, *, embedder: Embedder | None = None,
               tasks: Sequence[TaskSpec] | None = None, induction_model: ChatModel | None = None,
               on_task: Callable[[TaskRecord], None] | None = None,
               on_event: Callable[[AgentEvent], None] | None = None,
               verifier: ChatModel | None = None, inputs: StreamInputs | None = None,
               budget: Budget | None = None, parallel_tasks: int = 1) -> StreamSummary:
    """Run ``tasks`` (default ``env.tasks()``) in order under ``config.condition``, resuming a partial run: build
    the parts once (`build_stream`), then for each task not yet committed: start, run, evaluate, induce, commit.
    A stream whose tasks are independent (`independent_tasks`) runs up to ``parallel_tasks`` of them at once, one
    agent per thread, and commits them in stream order: its records are a sequential run's (timings aside).

    Args:
        env: the environment (``start(task) -> Episode``).
        model: the agent's policy.
        config: the run settings.
        embedder: the retrieval embedder (required by the memory conditions and libraries).
        tasks: the stream, in order (default: ``env.tasks()``, picked by ``config.task_positions``).
        induction_model: the model that induces skills (default: ``model``).
        on_task: called with each new record after it is committed.
        on_event: called with each agent event (task/subtask/step/call starts and ends) of the tasks run now.
        verifier: the lens verifier's model (default: built from ``config.verifier_model`` when set, and closed when
            the stream ends; else ``model``).
        inputs: the stream's checked library and organisation (`prepare_stream`), when the caller loaded them.
        budget: a spending limit (shared with other streams): once reached no new task starts and the summary says
            why (``stopped``); rerunning resumes.
        parallel_tasks: most tasks run at once when they are independent (the env must tolerate concurrent episodes:
            a grid wraps in-process ones in a lock).

    Raises:
        InputError: a run folder started with other settings, a bad library.
    """
    parts = build_stream(env, model, config, embedder=embedder, tasks=tasks, induction_model=induction_model,
                         inputs=inputs, verifier=verifier)
    finished = {r.task_id for r in parts.records}
    ran: list[str] = []
    stopped = None
    todo = [(position, task) for position, task in enumerate(parts.tasks) if task.id not in finished]
    if parallel_tasks > 1 and len(todo) > 1 and independent_tasks(config) and parts.masking is None \
            and parts.make_agent is not None and getattr(env, "concurrent_episodes", True):
        stopped = _run_parallel(env, config, parts, todo, parallel_tasks, on_event, on_task, budget, ran)
        todo = []
    for position, task in todo:
        if task.id in finished:
            continue
        stopped = budget.reached() if budget is not None else None
        if stopped is not None:
            break
        record = _run_task(env, config, parts, position, task, on_event)
        parts.records.append(record)
        ran.append(task.id)
        if budget is not None:
            budget.add(record)
        if on_task is not None:
            on_task(record)
    close = getattr(parts.own_verifier, "close", None)
    if close is not None:
        close()
    return StreamSummary(parts.folder.path, parts.records, ran, stopped)


def _perform_task(env: Env, config: StreamConfig, parts: StreamParts, position: int, task: TaskSpec,
                  on_event: Callable[[AgentEvent], None] | None, agent: Agent) -> TaskRecord:
    """A task up to its commit: start, run, evaluate, induce, write the finished trajectory; returns the record."""
    folder, memory = parts.folder, parts.memory
    trajectory = folder.trajectory_file(task.id)
    live = LiveTrajectory(folder, trajectory, task, position)
    drawn = parts.task_view(agent, task)  # masking, own-task scope, library size: what this task sees
    events = _fan_out(live.on_event, on_event)
    started = time.perf_counter()
    episode = None
    failure: tuple[BaseException, str] | None = None
    parts.clock.start()
    try:
        episode = env.start(task)
        workspace = getattr(episode, "workspace", None)
        before = snapshot_workspace(workspace) if workspace is not None else {}
        result, finish = _carry_out(agent, parts.coordinated, episode, position, config.run, events, live)
        parts.clock.stop()  # evaluation and deferred induction finish what the agent did
        score = episode.evaluate()
        finish(score.success)
        folder.write_artifacts(trajectory, episode_artifacts(episode, before))
    except Exception as exc:  # noqa: BLE001 - the task's failure is its record (see the module docstring)
        if isinstance(exc, InputError):
            live.write("aborted", error=_one_line(exc))
            raise
        failure = (exc, secrets.redact(traceback.format_exc())[-MAX_TRACEBACK_CHARS:])
    except BaseException as exc:
        live.write("aborted", error=_one_line(exc))
        raise
    finally:
        parts.clock.stop()
        if episode is not None:
            episode.close()
    if failure is not None:
        result = live.result if live.result is not None else AgentResult(task.id)
        result.exit_status = TASK_TIMEOUT if isinstance(failure[0], TaskTimeout) else TASK_ERROR
        result.latency_s = time.perf_counter() - started
        score = Score(reward=0.0, success=False)
    live.result = result
    live.write("finished", score={"reward": score.reward, "success": score.success,
                                  "checks": [asdict(c) for c in score.checks]},
               error=failure[1] if failure is not None else None)
    record = task_record(config, position, task, result, score, memory, trajectory, live.plan, drawn)
    if memory is not None and memory.config.capacity is not None:
        memory.evict(position, [task_outcome(r) for r in (*parts.records, record)])
        record.memory_size = len(memory)
    return record


def _carry_out(agent: Agent, coordinated: CoordinatedTask | None, episode: Episode, position: int, run: str,
               events: Callable[[AgentEvent], None],
               live: LiveTrajectory) -> tuple[AgentResult, Callable[[bool], None]]:
    """Run the task: the agent's loop, or under ``coordination`` its frozen plan (recorded on ``live``); returns the
    result and what finishes the task once its verdict is known (the induction that waited for it)."""
    if coordinated is not None:
        coordinated_run = coordinated.task(episode, stream_position=position, run_id=run, on_event=events)
        result = coordinated_run.run()
        live.plan = coordinated_run.plan
        return result, coordinated_run.finish
    loop = agent.task(episode, stream_position=position, run_id=run, on_event=events)
    return loop.run(), loop.finish


def _run_task(env: Env, config: StreamConfig, parts: StreamParts, position: int, task: TaskSpec,
              on_event: Callable[[AgentEvent], None] | None) -> TaskRecord:
    """One task of the stream: start, run (the agent or the coordinated runner), evaluate, induce what waited for
    the verdict, commit (record, trajectory, artifacts, memory)."""
    record = _perform_task(env, config, parts, position, task, on_event, parts.agent)
    commit_task(parts, record)
    return record


def _run_parallel(env: Env, config: StreamConfig, parts: StreamParts, todo: list[tuple[int, TaskSpec]], width: int,
                  on_event: Callable[[AgentEvent], None] | None, on_task: Callable[[TaskRecord], None] | None,
                  budget: Budget | None, ran: list[str]) -> str | None:
    """Run independent tasks ``width`` at a time (one agent per thread), committing in stream order; returns why it
    stopped early (a reached budget), else None. An error that stops the stream stops it after the running tasks."""
    assert parts.make_agent is not None
    env = GuardedEnv(env)  # in-process episodes act one at a time
    if parts.memory is not None and not isinstance(parts.memory.embedder, LockedEmbedder):
        parts.memory.embedder = LockedEmbedder(parts.memory.embedder)  # the agents' retrievals embed one at a time
    agents = [parts.agent, *(parts.make_agent() for _ in range(width - 1))]
    free = list(agents)
    lock = threading.Lock()

    def perform(position: int, task: TaskSpec) -> TaskRecord:
        with lock:
            agent = free.pop()
        try:
            return _perform_task(env, config, parts, position, task, on_event, agent)
        finally:
            with lock:
                free.append(agent)

    pending = list(todo)
    in_flight: list[tuple[TaskSpec, Future[TaskRecord]]] = []
    stopped = None
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix=f"tasks:{config.run}") as pool:
        try:
            while pending or in_flight:
                while pending and len(in_flight) < width and stopped is None:
                    stopped = budget.reached() if budget is not None else None
                    if stopped is None:
                        position, task = pending.pop(0)
                        in_flight.append((task, pool.submit(perform, position, task)))
                if not in_flight:
                    break
                task, future = in_flight.pop(0)
                record = future.result()  # the next task in stream order: commit it as soon as it is done
                commit_task(parts, record)
                parts.records.append(record)
                ran.append(task.id)
                if budget is not None:
                    budget.add(record)
                if on_task is not None:
                    on_task(record)
        except BaseException:
            for _, future in in_flight:
                future.cancel()
            raise
    return stopped


def parallel_width(config: StreamConfig) -> int:
    """How many tasks a stream runs at once: its model's connection limit (``max_concurrency``, at most
    `MAX_PARALLEL_TASKS`) when its tasks are independent, else 1."""
    return max(1, min(config.model.max_concurrency, MAX_PARALLEL_TASKS)) if independent_tasks(config) else 1


def independent_tasks(config: StreamConfig) -> bool:
    """Whether a stream's tasks are independent of each other: no memory of its own (none, or a frozen library read
    as it is: flat reuse, organisation and exposure, inline skills, the whole library for every task; a library is
    read-only, so nothing is induced), no coordination plan, no evolution, no masking. They may then run
    concurrently with the records of a sequential run (a frozen library's usage counts are updated at each commit,
    in stream order)."""
    frozen = config.library is not None and config.library_use == "instead" and config.library_scope == "all" \
        and config.skill_exec == "inline" and config.library_organization == "flat" \
        and config.library_exposure == "retrieved"
    return ((not config.has_memory or frozen) and config.coordination == "none" and config.reuse == "flat"
            and config.evolution is None and not config.organize and not config.mask_rate)


def _fan_out(*sinks: Callable[[AgentEvent], None] | None) -> Callable[[AgentEvent], None]:
    live = [sink for sink in sinks if sink is not None]

    def send(event: AgentEvent) -> None:
        for sink in live:
            sink(event)

    return send


def _one_line(exc: BaseException) -> str:
    return " ".join(secrets.redact(f"{type(exc).__name__}: {exc}").split())[:1000]
