"""The progress display of a stream run: step-level progress on a terminal, task lines and heartbeats in a log.

`StreamProgress` follows the agent's events (task, subtask, step and model-call starts and ends) and the finished
task records; `WatchedModel` reports each model call's tokens to it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from skilltransfer.agents.result import AgentEvent
from skilltransfer.log import TaskRecord
from skilltransfer.protocols import Completion, Message
from skilltransfer.util.terminal import Console


def _clock_text(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class StreamProgress:
    """Progress of a stream at step granularity: task i/N, subtask j, step k/limit, tokens, elapsed time and ETA.

    On a terminal it is a live bar whose label names the task, subtask and step in progress. Otherwise (a log file,
    CI) it prints one line per finished task and, while a task runs, a heartbeat line at most every ``heartbeat_s``
    seconds (checked on every agent event and by a background thread, so a long model call is not silent either).

    Args:
        total: tasks in the stream.
        done: records already in the run folder (a resumed run starts from them).
        console: where to draw (default stderr).
        heartbeat_s: least seconds between heartbeat lines (0 turns them off).
        clock: the time source (tests pass a fake one).
    """

    def __init__(self, total: int, done: Sequence[TaskRecord] = (), console: Console | None = None, *,
                 heartbeat_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or Console(stderr=True)
        self.records = list(done)
        self.total = total
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.live_tokens = 0
        """Tokens of the model calls of the current, unfinished task."""
        self.calls = 0
        self.started = clock()
        self.task_started = self.started
        self.last_line = self.started
        self.current: dict[str, Any] = {}
        """The task in progress: task_id, subtask, step, step_limit, role."""
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                 console=self.console, transient=False)
        self._task = self.progress.add_task("tasks", total=total, completed=len(self.records), stats=self._stats())

    def _stats(self) -> str:
        n = len(self.records)
        ok = sum(r.success for r in self.records)
        tokens = sum(r.prompt_tokens + r.completion_tokens for r in self.records) + self.live_tokens
        rate = f"{ok / n:.0%}" if n else "-"
        return f"success {ok}/{n} ({rate}) | tokens {tokens:,}"

    def where(self) -> str:
        """The task, subtask and step in progress, e.g. ``task 3/5 apps/12 · subtask 2 · step 7/50``."""
        cur = self.current
        parts = [f"task {min(len(self.records) + 1, self.total)}/{self.total}"
                 + (f" {cur['task_id']}" if cur.get("task_id") else "")]
        if cur.get("subtask") is not None:
            parts.append(f"subtask {cur['subtask'] + 1}")
        if cur.get("step") is not None:
            parts.append(f"step {cur['step'] + 1}/{cur.get('step_limit') or '?'}")
        if cur.get("role") and cur["role"] != "executor":
            parts.append(str(cur["role"]))
        return " · ".join(parts)

    def eta_s(self, now: float) -> float | None:
        """Seconds left: the mean latency of finished tasks times the tasks left, minus the running task's time."""
        if not self.records:
            return None
        mean = sum(r.latency_s for r in self.records) / len(self.records)
        left = self.total - len(self.records)
        return max(0.0, mean * left - (now - self.task_started if self.current else 0.0))

    def __enter__(self) -> StreamProgress:
        self.progress.start()
        if not self.console.is_terminal and self.heartbeat_s > 0:
            self._thread = threading.Thread(target=self._beat_loop, name="progress-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.progress.stop()

    def _beat_loop(self) -> None:
        while not self._stop.wait(min(5.0, max(0.05, self.heartbeat_s / 3))):
            self.beat()

    def beat(self) -> bool:
        """Print a heartbeat line if one is due (not on a terminal); returns whether it printed."""
        with self._lock:
            now = self.clock()
            if self.console.is_terminal or self.heartbeat_s <= 0 or not self.current \
                    or now - self.last_line < self.heartbeat_s:
                return False
            eta = self.eta_s(now)
            self.console.print(f"... {self.where()} | {self._stats()} | task {_clock_text(now - self.task_started)}, "
                               f"run {_clock_text(now - self.started)} | ETA "
                               f"{_clock_text(eta) if eta is not None else '?'}", highlight=False, soft_wrap=True)
            self.last_line = now
            return True

    def on_event(self, event: AgentEvent) -> None:
        """Follow the agent (``run_stream``'s ``on_event``): task, subtask, step and model-call starts and ends."""
        with self._lock:
            if event.kind == "task_start":
                self.current = {"task_id": event.task_id, "step_limit": event.step_limit}
                self.task_started = self.clock()
            elif event.kind == "task_end":
                self.current = {}
            else:
                self.current.update(task_id=event.task_id, subtask=event.subtask_index, step_limit=event.step_limit)
                if event.kind in ("step_start", "step_end"):
                    self.current["step"] = event.step_index
                if event.kind == "call_start":
                    self.current["role"] = event.role
            where = escape(self.where()) if self.current else "tasks"  # a task id is text, not markup for the label
            self.progress.update(self._task, description=where)
        self.beat()

    def __call__(self, record: TaskRecord) -> None:
        """Count a finished task (``run_stream``'s ``on_task``)."""
        with self._lock:
            self.records.append(record)
            self.live_tokens = 0
            self.progress.update(self._task, advance=1, stats=self._stats())
            if not self.console.is_terminal:  # no live bar in a log file: one line per task instead
                outcome = "success" if record.success else f"failure ({record.exit_status})"
                self.console.print(f"[{len(self.records)}/{self.total}] {record.task_id}: {outcome} in "
                                   f"{record.latency_s:.1f} s | {self._stats()}", highlight=False, soft_wrap=True)
                self.last_line = self.clock()

    def on_call(self, completion: Completion) -> None:
        """Count one model call of the current task."""
        with self._lock:
            self.calls += 1
            self.live_tokens += completion.prompt_tokens + completion.completion_tokens
            self.progress.update(self._task, stats=self._stats())

    def watch(self, model: Any) -> WatchedModel:
        """``model`` wrapped so that every call updates the bar."""
        return WatchedModel(model, self)


class WatchedModel:
    """A ChatModel that reports each completion to a `StreamProgress` (everything else is the inner model's)."""

    def __init__(self, inner: Any, bar: StreamProgress) -> None:
        self.inner = inner
        self.bar = bar

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        completion: Completion = self.inner.complete(messages, **params)
        self.bar.on_call(completion)
        return completion
