"""Retries within a time budget: exponential backoff with full jitter, honouring Retry-After, and the errors the
model layer raises.

A rate-limited or overloaded endpoint is retried until ``RetryPolicy.budget_s`` seconds (default 300) have passed
since the call's first attempt, so a run rides out a rate-limit window or a short outage; then one clear
`ModelCallError`. Waits go through this module's ``_sleep`` and ``_now`` (tests replace them with a fake clock).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from skilltransfer.errors import InputError
from skilltransfer.protocols import ChatModel, Completion, Message

T = TypeVar("T")
log = logging.getLogger(__name__)

_sleep: Callable[[float], None] = time.sleep
"""How retries wait (module-level so that tests can swap in a fake clock)."""
_now: Callable[[], float] = time.monotonic
"""The clock the retry budget is measured on."""
LOUD_WAIT_S = 10.0
"""Retries that wait at least this long are logged as warnings (shorter ones at INFO)."""


class TransientModelError(RuntimeError):
    """A failure worth retrying: rate limit, 5xx, timeout, a dropped connection or an unparsable body.

    Args:
        kind: "rate_limit", "server_error", "timeout", "connection" or "bad_response".
        message: what happened.
        retry_after_s: the server's Retry-After in seconds, if it sent one.
    """

    def __init__(self, kind: str, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s


class ModelCallError(InputError):
    """A model call that cannot succeed as configured (budget exhausted, bad key, unreachable endpoint): one line."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds (``"120"``, ``"1.5"``) or an HTTP date.

    Args:
        value: the header value (None: no header).
        now: the current Unix time for HTTP dates (default ``time.time()``).

    Returns:
        The wait (0 for a date in the past), or None when absent or unparsable.
    """
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def requested_wait(headers: Mapping[str, str]) -> float | None:
    """The wait a 429/5xx answer asks for: ``retry-after-ms`` (OpenAI), else ``Retry-After`` (seconds or HTTP date);
    ``headers`` is read case-insensitively by the caller's mapping (an HTTP answer's headers)."""
    milliseconds = parse_retry_after(headers.get("retry-after-ms"))
    return milliseconds / 1000 if milliseconds is not None else parse_retry_after(headers.get("retry-after"))


@dataclass
class RetryPolicy:
    """When to retry and how long to wait.

    Args:
        max_retries: most retries after the first attempt; None: only ``budget_s`` limits them.
        base_s: first backoff window; doubles per retry; 0 disables all waits (tests; then set ``max_retries``,
            or a failing endpoint is called in a tight loop until the budget is spent).
        max_s: cap on one backoff wait (a server's Retry-After may ask for longer, within the budget).
        seed: seeds the jitter (None: nondeterministic).
        budget_s: keep retrying for at most this many seconds after the first attempt started.
    """

    max_retries: int | None = None
    base_s: float = 1.0
    max_s: float = 30.0
    seed: int | None = None
    budget_s: float = 300.0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def backoff_s(self, attempt: int) -> float:
        """The jittered wait before retry number ``attempt`` (0-based): uniform in [0, min(max_s, base_s·2^attempt)]."""
        if self.base_s <= 0 or self.max_s <= 0:
            return 0.0
        return self._rng.uniform(0, min(self.max_s, self.base_s * 2.0 ** min(attempt, 64)))

    def wait_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry ``attempt``: the jittered backoff, but at least the server's Retry-After.

        With waits disabled (``base_s`` 0) it is always 0, Retry-After included.
        """
        if self.base_s <= 0 or self.max_s <= 0:
            return 0.0
        return max(self.backoff_s(attempt), retry_after_s or 0.0)


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, what: str,
                      sleep: Callable[[float], None] | None = None,
                      on_retry: Callable[[TransientModelError, float], None] | None = None) -> T:
    """Call ``fn`` and retry it on `TransientModelError` until it succeeds or ``policy``'s budget is spent.

    A retry happens while fewer than ``max_retries`` were made and the budget is not spent; a backoff wait that
    would pass the budget is cut short so that the last attempt happens at the deadline. A Retry-After that lies
    beyond the budget ends the call at once (retrying earlier would only be refused again).

    Args:
        fn: the attempt.
        policy: the retry limits and backoff.
        what: names the endpoint in the final error.
        sleep: the wait function (default: this module's ``_sleep``).
        on_retry: called with the error and the wait before each retry.

    Raises:
        ModelCallError: once the budget is spent; says what failed last and what to change.
    """
    wait_fn = sleep or _sleep
    start = _now()
    attempt = 0
    while True:
        try:
            return fn()
        except TransientModelError as exc:
            attempt += 1
            elapsed = _now() - start
            remaining = policy.budget_s - elapsed
            wait = policy.wait_s(attempt - 1, exc.retry_after_s)
            reason = None
            if policy.max_retries is not None and attempt > policy.max_retries:
                reason = f"raise max_retries (now {policy.max_retries})"
            elif remaining <= 0:
                reason = f"raise retry_budget_s (now {policy.budget_s:g} s)"
            elif exc.retry_after_s is not None and wait > 0 and exc.retry_after_s > remaining:
                reason = (f"the server asked to retry after {exc.retry_after_s:.0f} s, beyond the "
                          f"{remaining:.0f} s left of retry_budget_s ({policy.budget_s:g} s)")
            if reason is not None:
                hint = ("is the server running? set --base-url / OPENAI_BASE_URL to a reachable endpoint"
                        if exc.kind == "connection" else f"retry later or {reason}")
                raise ModelCallError(f"{what} failed after {attempt} attempts (last: {exc.kind}: {exc}) "
                                     f"in {elapsed:.0f} s; {hint}") from exc
            wait = min(wait, remaining)
            log.log(logging.WARNING if wait >= LOUD_WAIT_S else logging.INFO,
                    "%s: %s (%s); retry %d in %.0f s (%.0f of %g s retry budget spent)",
                    what, exc.kind, exc, attempt, wait, elapsed, policy.budget_s)
            if on_retry is not None:
                on_retry(exc, wait)
            if wait > 0:
                wait_fn(wait)


class RetryingModel:
    """Wraps any ChatModel and retries its `TransientModelError`s (e.g. a `FaultyModel` in agent tests).

    Args:
        inner: the model to call.
        policy: retry budget and backoff.
    """

    def __init__(self, inner: ChatModel, policy: RetryPolicy | None = None) -> None:
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
