"""The running task's deadline (``agent.task_timeout_s``): a stream's timed models
(`skilltransfer.llm.chain.TimedModel`) ask it before each model call, and `TaskTimeout` ends the task (recorded with
exit status ``task_timeout``)."""

from __future__ import annotations

import threading
import time


class TaskTimeout(Exception):
    """A task ran past ``agent.task_timeout_s`` (raised by `TaskClock` before a model call)."""


class TaskClock:
    """The running task's deadline, shared by the stream's timed models (`TimedModel`); one per thread (a stream
    of independent tasks runs several at once, each in its own thread)."""

    def __init__(self, limit_s: float | None) -> None:
        self.limit_s = limit_s
        self._local = threading.local()

    @property
    def deadline(self) -> float | None:
        return getattr(self._local, "deadline", None)

    def start(self) -> None:
        self._local.deadline = time.monotonic() + self.limit_s if self.limit_s is not None else None

    def stop(self) -> None:
        self._local.deadline = None

    def check(self) -> None:
        """Raises `TaskTimeout` past the deadline."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise TaskTimeout(f"the task ran past agent.task_timeout_s={self.limit_s:g}")
