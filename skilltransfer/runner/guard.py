"""Sharing a process between episodes: in-process episodes act under one process-wide lock (they switch the
process's cwd and stdout), so concurrent streams, or concurrent tasks of one stream, can share it."""

from __future__ import annotations

import threading
from typing import Any

from skilltransfer.protocols import Env, Episode, TaskSpec
from skilltransfer.sandbox import InProcessRunner

_IN_PROCESS_LOCK = threading.Lock()


class _GuardedEpisode:
    """An in-process episode whose actions hold a process-wide lock (they switch cwd and stdout for the process)."""

    def __init__(self, inner: Episode) -> None:
        self._inner = inner

    def step(self, action: str) -> Any:
        with _IN_PROCESS_LOCK:
            return self._inner.step(action)

    def load_code(self, source: str, skill_id: str | None = None) -> Any:
        with _IN_PROCESS_LOCK:
            return self._inner.load_code(source, skill_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GuardedEnv:
    """Wraps an env so that concurrent streams can share a process: in-process episodes act one at a time."""

    def __init__(self, inner: Env) -> None:
        self._inner = inner

    def start(self, task: TaskSpec) -> Any:
        episode = self._inner.start(task)
        if isinstance(episode, _GuardedEpisode) or not isinstance(getattr(episode, "runner", None), InProcessRunner):
            return episode  # already guarded (an env wrapped twice), or acting in its own process
        return _GuardedEpisode(episode)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
