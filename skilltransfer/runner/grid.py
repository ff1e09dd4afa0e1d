"""The grid runner: independent streams run concurrently, resumably, with failures isolated.

Each stream stays sequential (its memory evolves task by task); streams run side by side in threads (or as Ray
tasks, see ``skilltransfer.runner.ray_backend``). Streams on one endpoint share its concurrency limit: models are
built once per spec entry and shared by the streams (the OpenAI client also keys its limiter by endpoint URL).

The output folder holds ``grid.json`` (the resolved spec and the streams), ``status.json`` (each stream's state,
task counts and error, the tasks that ended in an error, and the command that resumes) and one `run_stream` run
folder per stream. A stream that fails (an exception outside its tasks: an endpoint down past its retry budget) is
started again up to ``stream_retries`` times, resuming from its last committed task, before the streams that depend
on it are marked failed. Rerunning resumes: finished streams are skipped without building anything, unfinished ones
resume from their last committed task, failed ones are retried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model, with_response_cache
from skilltransfer.llm.cache import CachedModel
from skilltransfer.llm.openai_client import EndpointKey, EndpointProbe, endpoint_key
from skilltransfer.llm.openai_client import check_endpoints as preflight
from skilltransfer.log import TASK_ERROR, TASK_TIMEOUT, RunFolder, TaskRecord
from skilltransfer.protocols import TaskSpec
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import (
    LockedEmbedder,
    build_embedder,
    single_thread_faiss,
    stream_library,
)
from skilltransfer.runner.execute import (
    StreamOutcome,
    TaskSink,
    execute_stream,
    finished_records,
    library_note,
    list_tasks,
    listing_key,
)
from skilltransfer.runner.plan import StreamPlan, check_source_overlap, plan_streams
from skilltransfer.runner.spec import GridSpec
from skilltransfer.settings.config import axes
from skilltransfer.util.files import atomic_write_text
from skilltransfer.util.pyast import guard_stdlib_parse
from skilltransfer.util.urls import without_credentials

GRID_FORMAT_VERSION = 1
Backend = Literal["thread", "ray"]


# --------------------------------------------------------------------------------------------- grid state
@dataclass
class GridSummary:
    """What ``run_grid`` did: the output folder and each stream's outcome (in plan order)."""

    out: Path
    outcomes: list[StreamOutcome]
    seconds: float
    backend: str
    counts: dict[str, int] = field(default_factory=dict)
    resume_command: str | None = None
    """The command that resumes the grid (None when it finished)."""

    @property
    def failed(self) -> list[StreamOutcome]:
        return [o for o in self.outcomes if o.state == "failed"]

    @property
    def tasks_ran(self) -> int:
        return sum(o.ran for o in self.outcomes)

    @property
    def model_calls(self) -> int:
        return sum(o.model_calls for o in self.outcomes)

    @property
    def tokens(self) -> int:
        return sum(o.tokens for o in self.outcomes)

    @property
    def cost_usd(self) -> float | None:
        """What the tasks run now cost (None when no model has a price)."""
        costs = [o.cost_usd for o in self.outcomes if o.cost_usd is not None]
        return round(sum(costs), 6) if costs else None

    stopped: str | None = None
    """Why the grid stopped before its last task (a spending limit), else None."""


class GridState:
    """Thread-safe live state of a grid: outcomes, counters for the progress view, and ``status.json``."""

    def __init__(self, out: Path, plans: Sequence[StreamPlan], totals: dict[str, int], *,
                 resume_command: str | None = None) -> None:
        self.out = out
        self.resume_command = resume_command
        self.plans = list(plans)
        self.totals = totals
        self.outcomes: dict[str, StreamOutcome] = {p.run: StreamOutcome(p.run, "pending", totals[p.run])
                                                   for p in plans}
        self.start = time.perf_counter()
        self.new_tasks = 0
        self.tokens = 0
        self.model_calls = 0
        self.cost_usd = 0.0
        self._lock = threading.Lock()

    def on_task(self, run: str, record: TaskRecord) -> None:
        """Count one newly committed task of a running stream."""
        with self._lock:
            outcome = self.outcomes[run]
            if outcome.state != "running":
                return
            outcome.tasks_done += 1
            self.new_tasks += 1
            self.tokens += record.prompt_tokens + record.completion_tokens
            self.model_calls += record.model_calls
            self.cost_usd += record.cost_usd or 0.0

    def set(self, outcome: StreamOutcome, *, save: bool = True) -> None:
        """Record a stream's new state (and write ``status.json`` unless ``save`` is False)."""
        with self._lock:
            self.outcomes[outcome.run] = outcome
        if save:
            self.save()

    def snapshot(self) -> dict[str, Any]:
        """Counters for the progress view."""
        with self._lock:
            outcomes = list(self.outcomes.values())
            elapsed = time.perf_counter() - self.start
            tasks_done = sum(o.tasks_done for o in outcomes)
            remaining = sum(o.tasks_total - o.tasks_done for o in outcomes if o.state in ("pending", "running"))
            rate = self.new_tasks / elapsed if elapsed > 0 and self.new_tasks else 0.0
            return {"streams": len(outcomes), "finished": sum(o.state in ("done", "skipped") for o in outcomes),
                    "running": sum(o.state == "running" for o in outcomes),
                    "failed": sum(o.state == "failed" for o in outcomes),
                    "tasks": sum(o.tasks_total for o in outcomes), "tasks_done": tasks_done,
                    "new_tasks": self.new_tasks, "tokens": self.tokens, "model_calls": self.model_calls,
                    "cost_usd": self.cost_usd,
                    "elapsed_s": elapsed, "eta_s": remaining / rate if rate else None}

    def save(self) -> None:
        """Write ``status.json`` atomically."""
        with self._lock:
            rows = {run: asdict(o) for run, o in self.outcomes.items()}
        failed = [run for run, row in rows.items() if row["state"] == "failed"]
        errors = {run: row["task_errors"] for run, row in rows.items() if row["task_errors"]}
        unfinished = failed or any(row["state"] in ("pending", "running", "stopped") for row in rows.values())
        payload = {"format_version": GRID_FORMAT_VERSION, "updated": _now(), "failed_streams": failed,
                   "task_errors": errors, "resume": self.resume_command if unfinished else None, "streams": rows}
        atomic_write_text(self.out / "status.json", json.dumps(payload, indent=1) + "\n")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_grid_file(spec: GridSpec, plans: Sequence[StreamPlan], totals: dict[str, int]) -> None:
    """``grid.json``: the resolved spec (API keys, header values and credentials in URLs left out) and every
    stream."""
    streams = [{"run": p.run, "phase": p.phase, "env": p.config.env.display_label,
                "model": p.config.model.display_label,
                **{name: getattr(p.config, name) for name, axis in axes().items() if not axis.labelled},
                "library": p.config.library, "depends_on": p.depends_on, "tasks": totals[p.run]} for p in plans]
    spec_data = json.loads(spec.model_dump_json(exclude={"phases"}))
    spec_data = json.loads(without_credentials(json.dumps(spec_data)))  # an embedder's URL, any other URL
    spec_data["phases"] = [json.loads(phase.model_dump_json(exclude={"models": {"__all__": {"api_key"}}}))
                           for phase in spec.phases]
    for phase in spec_data["phases"]:
        for model in (phase.get("models") or {}).values():
            model["headers"] = dict.fromkeys(model.get("headers") or {}, "(not recorded)")
    spec_data["phases"] = json.loads(without_credentials(json.dumps(spec_data["phases"])))
    payload = {"format_version": GRID_FORMAT_VERSION, "created": _now(), "spec": spec_data, "streams": streams}
    atomic_write_text(spec.out_dir / "grid.json", json.dumps(payload, indent=1) + "\n")


# --------------------------------------------------------------------------------------------- scheduling
class ThreadBackend:
    """Runs streams in daemon threads of this process, sharing models and embedders per spec entry."""

    name = "thread"

    def __init__(self, plans: Sequence[StreamPlan], budget: Budget | None = None,
                 probes: Mapping[EndpointKey, EndpointProbe] | None = None) -> None:
        self.budget = budget
        self._probes = dict(probes or {})
        """The endpoints' answers to ``GET /models`` from the grid's check: the clients ask no more."""
        self._models: dict[str, Any] = {}
        self._embedders: dict[tuple[str, bool], Any] = {}
        self._done: queue.Queue[StreamOutcome] = queue.Queue()
        single_thread_faiss()  # OpenMP threads of concurrent searches only fight over the cores
        for plan in plans:  # build everything up front: a bad model/embedder setting fails before any stream runs
            self._model(plan)
            if plan.config.has_memory:
                self._embedder(plan)

    def _model(self, plan: StreamPlan) -> Any:
        key = plan.config.model.model_dump_json(exclude={"label"})
        if key not in self._models:
            endpoint = endpoint_key(plan.config.model)
            probe = self._probes.get(endpoint) if endpoint is not None else None
            self._models[key] = make_model(plan.config.model, probe=probe, cache=False)
        return self._models[key]

    def _embedder(self, plan: StreamPlan) -> Any:
        key = (plan.config.embedder, plan.config.embedder_cache)
        if key not in self._embedders:
            self._embedders[key] = LockedEmbedder(build_embedder(plan.config))
        return self._embedders[key]

    def submit(self, plan: StreamPlan, tasks: Sequence[TaskSpec], on_task: TaskSink) -> None:
        base = self._model(plan)
        model = with_response_cache(base, plan.config.model)
        embedder = self._embedder(plan) if plan.config.has_memory else None

        def work() -> None:
            try:
                outcome = execute_stream(plan, tasks, model, embedder, on_task=on_task, budget=self.budget)
            finally:
                if model is not base and isinstance(model, CachedModel):  # this stream's own cache wrapper
                    model.cache.close()
            self._done.put(outcome)

        threading.Thread(target=work, name=f"stream:{plan.run}", daemon=True).start()

    def wait(self, timeout: float) -> StreamOutcome | None:
        try:
            return self._done.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        for model in self._models.values():
            if hasattr(model, "close"):
                model.close()


def schedule(plans: Sequence[StreamPlan], tasks: dict[str, list[TaskSpec]], state: GridState, backend: Any,
             max_concurrency: int, on_tick: Callable[[], None] | None = None, tick_s: float = 0.25,
             stream_retries: int = 0, budget: Budget | None = None) -> None:
    """Run the pending streams, at most ``max_concurrency`` at once, each after the stream it depends on; a failed
    stream is started again (resuming) up to ``stream_retries`` times before it counts as failed. Once ``budget``
    is reached, no stream starts (pending ones are marked "stopped")."""
    pending = [p for p in plans if state.outcomes[p.run].state == "pending"]
    by_run = {p.run: p for p in plans}
    attempts: dict[str, int] = {}
    running = 0
    while pending or running:
        launched = False
        for plan in list(pending):
            if running >= max_concurrency:
                break
            dep = state.outcomes[plan.depends_on].state if plan.depends_on else "done"
            if dep in ("pending", "running"):
                continue
            pending.remove(plan)
            launched = True
            reached = budget.reached() if budget is not None else None
            if reached is not None:
                state.set(StreamOutcome(plan.run, "stopped", len(tasks[plan.run]),
                                        tasks_done=state.outcomes[plan.run].tasks_done, error=reached), save=False)
                continue
            if dep == "failed":
                state.set(StreamOutcome(plan.run, "failed", len(tasks[plan.run]),
                                        error=f"source stream {plan.depends_on} failed"), save=False)
                continue
            attempts[plan.run] = attempts.get(plan.run, 0) + 1
            state.set(StreamOutcome(plan.run, "running", len(tasks[plan.run]),
                                    tasks_done=state.outcomes[plan.run].tasks_done, attempts=attempts[plan.run]),
                      save=False)
            backend.submit(plan, tasks[plan.run], state.on_task)
            running += 1
        if launched:  # one status.json write per round of launches
            state.save()
        if not running:
            if pending:  # unreachable with plans in phase order; never spin
                for plan in pending:
                    state.set(StreamOutcome(plan.run, "failed", len(tasks[plan.run]), error="unresolved dependency"))
            break
        outcome = backend.wait(tick_s)
        if on_tick is not None:
            on_tick()
        if outcome is not None:
            running -= 1
            outcome.attempts = attempts.get(outcome.run, 1)
            if outcome.state == "failed" and outcome.attempts <= stream_retries:
                state.set(dataclasses.replace(outcome, state="pending"))
                pending.insert(0, by_run[outcome.run])
            else:
                state.set(outcome)


# --------------------------------------------------------------------------------------------- checking a spec
def resolve_streams(spec: GridSpec) -> tuple[list[StreamPlan], dict[str, list[TaskSpec]]]:
    """Every stream of ``spec`` and its tasks, checked before any stream runs: each (phase, env) resolves to a
    non-empty task list (its split exists; a curated stream's tasks are in that split), a stream that filters a library
    by utility has at least 2 tasks, a library given by path loads, a library from an earlier phase comes from a
    stream with a skill memory. Streams with the same `listing_key` share one listing.

    Raises:
        InputError: the first problem, naming the spec (its file), the phase, the env and what is missing.
    """
    try:
        plans = plan_streams(spec)
    except InputError as exc:
        raise InputError(f"spec {spec.name!r}: {exc}", path=spec.source) from None
    by_listing: dict[str, list[TaskSpec]] = {}
    tasks: dict[str, list[TaskSpec]] = {}
    libraries: set[str] = set()
    for plan in plans:
        config = plan.config
        key = listing_key(plan)
        try:
            if key not in by_listing:
                by_listing[key] = list_tasks(plan)
                if not by_listing[key]:
                    raise InputError("no tasks to run")
            tasks[plan.run] = by_listing[key]
            if config.library_filter is not None and len(tasks[plan.run]) < 2:
                raise InputError(f"library_filter {config.library_filter!r} ranks the library against the stream's "
                                 f"tasks and needs at least 2, the stream has {len(tasks[plan.run])}")
            library = f"{config.library}@{config.library_snapshot}"
            if config.library is not None and plan.source is None and library not in libraries:
                stream_library(config)
                libraries.add(library)
        except InputError as exc:
            raise InputError(f"{_where(spec, plan)}: {exc}", path=spec.source) from None
    try:
        check_source_overlap(plans, tasks)
    except InputError as exc:
        raise InputError(f"spec {spec.name!r}: {exc}", path=spec.source) from None
    return plans, tasks


def _where(spec: GridSpec, plan: StreamPlan) -> str:
    env = plan.config.env
    selects = {k: v for k, v in {"split": env.split, "stream": env.stream, "task_limit": plan.config.task_limit,
                                 "order_seed": plan.config.order_seed or None}.items() if v is not None}
    detail = ", ".join(f"{k} {v!r}" for k, v in selects.items())
    return (f"spec {spec.name!r}, phase {plan.phase!r}, env {env.display_label!r} ({env.name}"
            + (f"; {detail}" if detail else "") + ")")


def run_grid(spec: GridSpec, *, backend: Backend = "thread", address: str | None = None,
             progress: Callable[[GridState], Any] | None = None, ray_cpus_per_stream: float = 1.0,
             stream_retries: int = 1, resume_command: str | None = None,
             check_endpoints: bool = True, budget: Budget | None = None) -> GridSummary:
    """Run every unfinished stream of ``spec`` (see the module docstring).

    Args:
        spec: the resolved grid.
        backend: "thread" (this process) or "ray" (Ray tasks; ``address`` of a running cluster, default local).
        progress: a context-manager factory given the live state (the CLI passes a rich view); None: silent.
        ray_cpus_per_stream: CPUs Ray reserves per stream.
        stream_retries: how often a failed stream is started again (resuming) before it counts as failed.
        resume_command: the command that resumes the grid, written to ``status.json`` while it is unfinished.
        check_endpoints: check each endpoint of the streams to run first
            (`skilltransfer.llm.openai_client.check_endpoints`).
        budget: a spending limit over all streams (thread backend): once reached no task starts; running tasks
            finish; the summary's ``stopped`` says why and rerunning resumes.

    Raises:
        InputError: a bad spec, env, model or embedder setting, an endpoint that does not answer or lacks a key
            (before any stream runs or anything is written).
    """
    start = time.perf_counter()
    out = spec.out_dir
    plans, tasks = resolve_streams(spec)
    totals = {run: len(ts) for run, ts in tasks.items()}
    state = GridState(out, plans, totals, resume_command=resume_command)
    for plan in plans:
        records = finished_records(plan, [t.id for t in tasks[plan.run]])
        if records is not None:
            state.outcomes[plan.run] = StreamOutcome(plan.run, "skipped", totals[plan.run], tasks_done=len(records),
                                                     successes=sum(r.success for r in records),
                                                     task_errors=sum(r.exit_status in (TASK_ERROR, TASK_TIMEOUT)
                                                                     for r in records),
                                                     library=library_note(plan))
        else:
            state.outcomes[plan.run].tasks_done = RunFolder(out / plan.run).committed()
    todo = [p for p in plans if state.outcomes[p.run].state == "pending"]
    probes = preflight(p.config.model for p in todo) if check_endpoints else {}  # GET /models once per endpoint
    if budget is not None and budget.limited:
        if backend != "thread":
            raise InputError("--token-limit and --cost-limit apply to the thread backend only")
        unpriced = sorted({p.config.model.display_label for p in todo if p.config.model.price is None})
        if budget.cost_limit is not None and unpriced:
            raise InputError(f"--cost-limit needs a price for every model: set models.<label>.price (e.g. -c "
                             f"'models.{unpriced[0]}.price={{input: 2.5, output: 10}}'); no price: "
                             f"{', '.join(unpriced)}")
    runner: Any
    if backend == "ray":
        from skilltransfer.runner.ray_backend import RayBackend

        runner = RayBackend(todo, address=address, cpus_per_stream=ray_cpus_per_stream)
    elif backend == "thread":
        # builds models and embedders: bad settings fail here, before any output
        runner = ThreadBackend(todo, budget, probes)
    else:
        raise InputError(f"unknown backend {backend!r}; choose one of: thread, ray")
    guard_stdlib_parse()  # streams run side by side from here (see skilltransfer.util.pyast)
    out.mkdir(parents=True, exist_ok=True)
    write_grid_file(spec, plans, totals)
    state.save()
    view = progress(state) if progress is not None else None
    try:
        if view is not None:
            view.__enter__()
        schedule(plans, tasks, state, runner, spec.max_concurrency,
                 on_tick=getattr(view, "refresh", None) if view is not None else None, stream_retries=stream_retries,
                 budget=budget)
    finally:
        if view is not None:
            view.__exit__(*sys.exc_info())
        runner.close()
        state.save()
        with contextlib.suppress(OSError):  # each stream removed its own work folder
            (out / ".work").rmdir()
    outcomes = [state.outcomes[p.run] for p in plans]
    counts = {s: sum(o.state == s for o in outcomes) for s in ("done", "skipped", "failed")}
    if any(o.state == "stopped" for o in outcomes):
        counts["stopped"] = sum(o.state == "stopped" for o in outcomes)
    resume = resume_command if counts["failed"] or counts.get("stopped") else None
    stopped = next((o.error for o in outcomes if o.state == "stopped"), None)
    return GridSummary(out, outcomes, round(time.perf_counter() - start, 3), runner.name, counts, resume, stopped)
