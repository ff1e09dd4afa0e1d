"""The Ray backend of the grid runner: each stream is a Ray task, so a grid can use many machines.

Ray is an optional extra (``pip install skilltransfer[ray]``). Every stream task builds its own env, model and
embedder on its worker; the concurrency limit of each endpoint is shared across all workers through one named
async actor per endpoint (a cluster-wide semaphore). Progress (one message per committed task) comes back through a
``ray.util.queue.Queue``. The output folder must be on a filesystem that every node sees (run folders are written
by the workers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model, with_response_cache
from skilltransfer.llm.chain import LimitedModel
from skilltransfer.log import TaskRecord
from skilltransfer.protocols import TaskSpec
from skilltransfer.runner.build import build_embedder, single_thread_faiss
from skilltransfer.runner.execute import StreamOutcome, TaskSink, execute_stream
from skilltransfer.runner.plan import StreamPlan


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--backend ray needs Ray: pip install 'skilltransfer[ray]' (or pip install ray)") from None
    return ray


class EndpointLimiter:
    """A cluster-wide semaphore (run as a Ray async actor, one per endpoint)."""

    def __init__(self, limit: int) -> None:
        self._sem = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        await self._sem.acquire()

    async def release(self) -> None:
        self._sem.release()


class ActorSlot:
    """One slot of an `EndpointLimiter` actor, held as a context manager (the chain's `LimitedModel` holds it around
    each call)."""

    def __init__(self, limiter: Any) -> None:
        self._limiter = limiter

    def __enter__(self) -> None:
        import ray

        ray.get(self._limiter.acquire.remote())

    def __exit__(self, *exc: object) -> None:
        self._limiter.release.remote()


def run_stream_task(plan: StreamPlan, tasks: Sequence[TaskSpec], limiter: Any, progress: Any) -> StreamOutcome:
    """The body of one stream's Ray task (runs on a worker)."""
    single_thread_faiss()
    try:
        base = make_model(plan.config.model, cache=False)
        model = with_response_cache(base, plan.config.model)
        if limiter is not None:
            model = LimitedModel(model, ActorSlot(limiter))
        embedder = build_embedder(plan.config) if plan.config.has_memory else None
    except Exception as exc:  # noqa: BLE001 - reported as the stream's failure
        return StreamOutcome(plan.run, "failed", len(tasks), error=f"{type(exc).__name__}: {exc}")

    def on_task(run: str, record: TaskRecord) -> None:
        progress.put((run, record.model_dump_json()))

    try:
        return execute_stream(plan, tasks, model, embedder, on_task=on_task)
    finally:
        if hasattr(base, "close"):
            base.close()


class RayBackend:
    """Submits streams as Ray tasks (``address``: a running cluster; None starts or reuses a local Ray)."""

    name = "ray"

    def __init__(self, plans: Sequence[StreamPlan], *, address: str | None = None,
                 cpus_per_stream: float = 1.0) -> None:
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        from ray.util.queue import Queue

        self._ray = ray
        self._task = ray.remote(run_stream_task).options(num_cpus=cpus_per_stream, max_retries=0)
        self._actor = ray.remote(num_cpus=0)(EndpointLimiter)
        self._progress = Queue()
        self._limiters: dict[tuple[str, int], Any] = {}
        self._refs: dict[Any, tuple[StreamPlan, int]] = {}
        self._on_task: TaskSink | None = None
        for plan in plans:
            self._limiter(plan)

    def _limiter(self, plan: StreamPlan) -> Any:
        url = plan.config.model.resolved_base_url()
        if not url:
            return None
        key = (url.rstrip("/"), max(1, plan.config.model.max_concurrency))
        if key not in self._limiters:
            self._limiters[key] = self._actor.options(name=f"skilltransfer-limit:{key[0]}:{key[1]}",
                                                      get_if_exists=True).remote(key[1])
        return self._limiters[key]

    def submit(self, plan: StreamPlan, tasks: Sequence[TaskSpec], on_task: TaskSink) -> None:
        self._on_task = on_task
        ref = self._task.remote(plan, list(tasks), self._limiter(plan), self._progress)
        self._refs[ref] = (plan, len(tasks))

    def _drain(self) -> None:
        while self._on_task is not None and not self._progress.empty():
            run, record = self._progress.get_nowait()
            self._on_task(run, TaskRecord.model_validate_json(record))

    def wait(self, timeout: float) -> StreamOutcome | None:
        if not self._refs:
            return None
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        self._drain()  # a task's progress messages are all queued before it returns
        if not ready:
            return None
        plan, n_tasks = self._refs.pop(ready[0])
        try:
            outcome: StreamOutcome = self._ray.get(ready[0])
        except Exception as exc:  # noqa: BLE001 - a lost worker fails its stream only
            message = str(exc).strip().splitlines()[-1] if str(exc).strip() else ""
            return StreamOutcome(plan.run, "failed", n_tasks, error=f"{type(exc).__name__}: {message}")
        return outcome

    def close(self) -> None:
        for ref in self._refs:
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        self._progress.shutdown()
        for actor in self._limiters.values():
            self._ray.kill(actor)
