"""One stream of a grid: building its env, model and embedder, running (or resuming) it, and recording the outcome.

A crashing stream becomes a failed `StreamOutcome` carrying its error and traceback; it never raises. Streams that
share a process share models and embedders: in-process episodes act under one lock (they switch the process's cwd and
stdout), and a shared embedder embeds one batch at a time.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skilltransfer.envs.base import InProcessRunner
from skilltransfer.errors import InputError
from skilltransfer.experiments.config import CONDITIONS
from skilltransfer.experiments.launch import build_env, select_tasks
from skilltransfer.experiments.plan import StreamPlan
from skilltransfer.experiments.runlog import RunFolder, TaskRecord
from skilltransfer.experiments.stream import run_stream
from skilltransfer.llm.config import ModelConfig
from skilltransfer.memory.embedders import EmbedderWrapper
from skilltransfer.protocols import TaskSpec

State = Literal["pending", "running", "done", "skipped", "failed"]
TaskSink = Callable[[str, TaskRecord], None]
"""Receives (run name, record) for each task a stream commits."""


def make_env(plan: StreamPlan, workdir: Path) -> Any:
    """The stream's env (``launch.build_env``: registry name, ``officebench[:path]`` or ``module:Class``)."""
    return build_env(plan.env_name, plan.env.args, {"workdir": workdir})


def list_tasks(plan: StreamPlan) -> list[TaskSpec]:
    """The stream's tasks: the env's (split) tasks in ``stream_order(order_seed)``, cut to ``task_limit``."""
    workdir = Path(tempfile.mkdtemp(prefix="grid-tasks-"))
    try:
        env = make_env(plan, workdir)
        return select_tasks(env, order_seed=plan.order_seed, limit=plan.task_limit, split=plan.env.split,
                            stream=plan.env.stream)
    except InputError as exc:
        raise InputError(f"stream {plan.run}: {exc}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def needs_embedder(plan: StreamPlan) -> bool:
    """Whether the stream has a skill memory (a memory condition or a library)."""
    return CONDITIONS[plan.condition][1] is not None or plan.library is not None


def build_base_model(config: ModelConfig) -> Any:
    """The shared client of a model entry (the response cache, if any, is added per stream by `stream_model`)."""
    from skilltransfer.llm import make_model

    data = config.model_dump(exclude_unset=True)
    data.pop("cache_path", None)
    return make_model(data)


def stream_model(base: Any, config: ModelConfig) -> Any:
    """``base`` wrapped in the entry's response cache (one wrapper per stream: replay order is per stream)."""
    if not config.cache_path or config.cache_mode == "off":
        return base
    from skilltransfer.llm.cache import CachedModel, ResponseCache

    return CachedModel(base, ResponseCache(config.cache_path, config.cache_mode))


class LockedEmbedder(EmbedderWrapper):
    """An embedder shared by threads: one ``embed`` at a time (tokenizers are not re-entrant)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        with self._lock:
            return self.inner.embed(texts)


_IN_PROCESS_LOCK = threading.Lock()


class _GuardedEpisode:
    """An in-process episode whose actions hold a process-wide lock (they switch cwd and stdout for the process)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def step(self, action: str) -> Any:
        with _IN_PROCESS_LOCK:
            return self._inner.step(action)

    def load_code(self, source: str) -> Any:
        with _IN_PROCESS_LOCK:
            return self._inner.load_code(source)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GuardedEnv:
    """Wraps an env so that concurrent streams can share a process: in-process episodes act one at a time."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def start(self, task: TaskSpec) -> Any:
        episode = self._inner.start(task)
        return _GuardedEpisode(episode) if isinstance(getattr(episode, "runner", None), InProcessRunner) else episode

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


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
    seconds: float = 0.0
    error: str | None = None
    traceback: str | None = None


def finished_records(plan: StreamPlan, out: Path, task_ids: Sequence[str]) -> list[TaskRecord] | None:
    """The stream's records if its run folder already holds every task under the same settings, else None."""
    folder = RunFolder(out / plan.run)
    try:
        saved = folder.read_config()
        records = folder.read_records()
    except InputError:
        return None
    if saved.task_ids != list(task_ids) or saved.config != plan.stream_config(out):
        return None
    return records if {r.task_id for r in records} >= set(task_ids) else None


def execute_stream(plan: StreamPlan, out: Path, tasks: Sequence[TaskSpec], model: Any, embedder: Any,
                   on_task: Callable[[str, TaskRecord], None] | None = None) -> StreamOutcome:
    """Run (or resume) one stream; any exception becomes a failed outcome carrying its message and traceback."""
    start = time.perf_counter()
    outcome = StreamOutcome(plan.run, "running", tasks_total=len(tasks))
    workdir = Path(tempfile.mkdtemp(prefix="work-", dir=_mkdir(out / ".work")))

    def record(rec: TaskRecord) -> None:
        outcome.model_calls += rec.model_calls
        outcome.tokens += rec.prompt_tokens + rec.completion_tokens
        if on_task is not None:
            on_task(plan.run, rec)

    try:
        if plan.library is not None and not Path(plan.library).exists():
            raise InputError(f"library {plan.library} does not exist"
                             + (f" (source stream {plan.depends_on} has no memory)" if plan.depends_on else ""))
        env = GuardedEnv(make_env(plan, workdir))
        summary = run_stream(env, model, plan.stream_config(out), embedder=embedder if needs_embedder(plan) else None,
                             tasks=tasks, on_task=record)
        outcome.state = "done"
        outcome.ran = len(summary.ran)
        outcome.tasks_done = len(summary.records)
        outcome.successes = sum(r.success for r in summary.records)
    except Exception as exc:  # noqa: BLE001 - a crashing stream is recorded and must not stop the grid
        outcome.state = "failed"
        outcome.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        outcome.traceback = traceback.format_exc()
        outcome.tasks_done = RunFolder(out / plan.run).committed()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    outcome.seconds = round(time.perf_counter() - start, 3)
    return outcome


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


