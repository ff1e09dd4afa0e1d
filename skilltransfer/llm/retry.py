"""Retries with exponential backoff and full jitter, honouring Retry-After, and the errors the model layer raises."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skilltransfer.errors import InputError
from skilltransfer.protocols import Completion, Message

T = TypeVar("T")


class TransientModelError(RuntimeError):
    """A failure worth retrying: rate limit, 5xx, timeout or a dropped connection.

    Args:
        kind: "rate_limit", "server_error", "timeout" or "connection".
        message: what happened.
        retry_after_s: the server's Retry-After, if it sent one.
    """

    def __init__(self, kind: str, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s


class ModelCallError(InputError):
    """A model call that cannot succeed as configured (budget exhausted, bad key, unreachable endpoint): one line."""


@dataclass
class RetryPolicy:
    """How often and how long to retry.

    Args:
        max_retries: retries after the first attempt.
        base_s: first wait; doubles per retry; 0 disables all waits (tests).
        max_s: cap on one wait, Retry-After included.
        seed: seeds the jitter (None: nondeterministic).
    """

    max_retries: int = 4
    base_s: float = 1.0
    max_s: float = 30.0
    seed: int | None = None
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def wait_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): full jitter, at least Retry-After, capped."""
        if self.base_s <= 0 or self.max_s <= 0:
            return 0.0
        backoff = self._rng.uniform(0, min(self.max_s, self.base_s * 2**attempt))
        if retry_after_s is not None:
            backoff = max(backoff, retry_after_s)
        return min(backoff, self.max_s)


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, what: str,
                      sleep: Callable[[float], None] = time.sleep,
                      on_retry: Callable[[TransientModelError, float], None] | None = None) -> T:
    """Call ``fn`` and retry it on `TransientModelError` per ``policy``.

    Args:
        fn: the attempt.
        policy: the retry budget and backoff.
        what: names the endpoint in the final error.
        sleep: the wait function (tests record or skip waits).
        on_retry: called with the error and the wait before each retry.

    Raises:
        ModelCallError: once the budget is spent; says what failed last and what to change.
    """
    for attempt in range(policy.max_retries + 1):
        try:
            return fn()
        except TransientModelError as exc:
            if attempt >= policy.max_retries:
                hint = ("is the server running? set --base-url / OPENAI_BASE_URL to a reachable endpoint"
                        if exc.kind == "connection" else "retry later or raise max_retries / timeout_s")
                raise ModelCallError(f"{what} failed after {attempt + 1} attempts (last: {exc.kind}: {exc}); "
                                     f"{hint}") from exc
            wait = policy.wait_s(attempt, exc.retry_after_s)
            if on_retry is not None:
                on_retry(exc, wait)
            if wait > 0:
                sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


class RetryingModel:
    """Wraps any ChatModel and retries its `TransientModelError`s (e.g. a `FaultyModel` in agent tests).

    Args:
        inner: the model to call.
        policy: retry budget and backoff.
    """

    def __init__(self, inner: Any, policy: RetryPolicy | None = None) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.retries = 0

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        def attempt() -> Completion:
            completion: Completion = self.inner.complete(messages, **params)
            return completion

        def count(_exc: TransientModelError, _wait: float) -> None:
            self.retries += 1

        return call_with_retries(attempt, self.policy, what=f"model {getattr(self.inner, 'model', '?')}",
                                 on_retry=count)
