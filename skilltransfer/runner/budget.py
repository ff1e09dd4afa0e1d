"""A spending limit shared by the streams of one invocation (``--token-limit``, ``--cost-limit``): once reached, no
new task starts; the tasks already running finish and are committed, so rerunning the same command resumes."""

from __future__ import annotations

import threading

from skilltransfer.log import TaskRecord


class Budget:
    """Tokens (prompt + completion) and dollars spent by the tasks of this invocation, against optional limits."""

    def __init__(self, *, token_limit: int | None = None, cost_limit: float | None = None) -> None:
        self.token_limit = token_limit
        self.cost_limit = cost_limit
        self.tokens = 0
        self.cost = 0.0
        self._lock = threading.Lock()

    @property
    def limited(self) -> bool:
        return self.token_limit is not None or self.cost_limit is not None

    def add(self, record: TaskRecord) -> None:
        """Count a committed task."""
        with self._lock:
            self.tokens += record.prompt_tokens + record.completion_tokens
            self.cost += record.cost_usd or 0.0

    def reached(self) -> str | None:
        """Which limit is reached (one phrase), or None while new tasks may start."""
        with self._lock:
            if self.token_limit is not None and self.tokens >= self.token_limit:
                return f"token limit {self.token_limit:,} reached ({self.tokens:,} tokens used)"
            if self.cost_limit is not None and self.cost >= self.cost_limit:
                return f"cost limit ${self.cost_limit:,.2f} reached (${self.cost:,.4f} spent)"
        return None
