"""What a retry needs to know: the errors the model layer raises, the retry limits and backoff (`RetryPolicy`), and
the wait a server asks for (Retry-After).

A rate-limited or overloaded endpoint is retried until ``RetryPolicy.budget_s`` seconds (default 300) have passed
since the call's first attempt, so a run rides out a rate-limit window or a short outage; then one clear
`ModelCallError`. The retrying itself is `skilltransfer.llm.chain.Retry`, a layer of the chain around a model call.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime

from skilltransfer.errors import InputError


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

    @property
    def waits(self) -> bool:
        """Whether retries wait at all (``base_s`` and ``max_s`` above 0)."""
        return self.base_s > 0 and self.max_s > 0

    def backoff_s(self, attempt: int) -> float:
        """The jittered wait before retry number ``attempt`` (0-based): uniform in [0, min(max_s, base_s·2^attempt)]."""
        if not self.waits:
            return 0.0
        return self._rng.uniform(0, min(self.max_s, self.base_s * 2.0 ** min(attempt, 64)))

    def wait_s(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry ``attempt``: the jittered backoff, but at least the server's Retry-After.

        With waits disabled (``base_s`` 0) it is always 0, Retry-After included.
        """
        if not self.waits:
            return 0.0
        return max(self.backoff_s(attempt), retry_after_s or 0.0)
