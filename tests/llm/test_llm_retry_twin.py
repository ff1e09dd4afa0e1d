"""The retry layer's behaviour, pinned call by call on the fake clock: attempts, waits (the seeded jitter), the log
lines and the final error, for every way a retried call ends. The expectations were recorded from the hand-written
loop the retry layer had before it moved onto ``tenacity`` (issue 58): the two must agree on all of them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import FakeClock

from skilltransfer.llm.retry import ModelCallError, RetryPolicy, TransientModelError


def retried(fn: Callable[[], Any], policy: RetryPolicy, what: str = "model endpoint http://h/v1") -> Any:
    """One call through the retry layer (the seam these tests hold still while the layer changes)."""
    from skilltransfer.llm.chain import Retry

    return Retry(policy, what=what)(fn)


def failing(*errors: BaseException | None, then: Any = "ok") -> tuple[Callable[[], Any], list[int]]:
    """An attempt raising ``errors`` in turn (the last one for ever when ``then`` is None), else returning ``then``;
    and the list its attempt numbers go to."""
    calls: list[int] = []
    queue: Iterator[BaseException | None] = iter(errors)

    def attempt() -> Any:
        calls.append(len(calls) + 1)
        error = next(queue, errors[-1] if then is None else None)
        if error is not None:
            raise error
        return then

    return attempt, calls


def transient(kind: str, message: str = "", retry_after_s: float | None = None) -> TransientModelError:
    return TransientModelError(kind, message or kind.upper(), retry_after_s=retry_after_s)


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records
            if record.name.startswith("skilltransfer.llm")]


def test_three_faults_then_an_answer(fast_retry_waits: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    attempt, calls = failing(transient("rate_limit"), transient("server_error", "HTTP 502"), transient("timeout"))
    assert retried(attempt, RetryPolicy(base_s=1.0, max_s=30.0, seed=7, budget_s=300)) == "ok"
    assert calls == [1, 2, 3, 4]
    assert [round(w, 6) for w in fast_retry_waits.waits] == [0.323833, 0.301698, 2.603738]
    assert logged(caplog) == [
        ("INFO", "model endpoint http://h/v1: rate_limit (RATE_LIMIT); retry 1 in 0 s (0 of 300 s retry budget spent)"),
        ("INFO", "model endpoint http://h/v1: server_error (HTTP 502); retry 2 in 0 s (0 of 300 s retry budget spent)"),
        ("INFO", "model endpoint http://h/v1: timeout (TIMEOUT); retry 3 in 3 s (1 of 300 s retry budget spent)")]


def test_the_same_seed_draws_the_same_waits(fast_retry_waits: FakeClock) -> None:
    for _ in range(2):
        attempt, _ = failing(*[transient("server_error")] * 5)
        retried(attempt, RetryPolicy(base_s=2.0, max_s=10.0, seed=11))
    first, second = fast_retry_waits.waits[:5], fast_retry_waits.waits[5:]
    assert first == second
    assert all(0 <= w <= min(10.0, 2.0 * 2**n) for n, w in enumerate(first))


def test_max_retries_ends_the_call_with_what_to_raise(fast_retry_waits: FakeClock) -> None:
    attempt, calls = failing(transient("server_error", "HTTP 500"), then=None)
    with pytest.raises(ModelCallError) as caught:
        retried(attempt, RetryPolicy(max_retries=2, base_s=1.0, seed=1))
    assert str(caught.value) == ("model endpoint http://h/v1 failed after 3 attempts (last: server_error: HTTP 500) in "
                                 "2 s; retry later or raise max_retries (now 2)")
    assert isinstance(caught.value.__cause__, TransientModelError)
    assert calls == [1, 2, 3]
    assert len(fast_retry_waits.waits) == 2


def test_the_budget_ends_the_call_and_the_last_wait_is_cut_to_the_deadline(fast_retry_waits: FakeClock,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    start = fast_retry_waits.now()
    attempt, calls = failing(transient("rate_limit", "429 Too Many Requests"), then=None)
    with pytest.raises(ModelCallError) as caught:
        retried(attempt, RetryPolicy(base_s=4.0, max_s=30.0, seed=3, budget_s=20.0))
    assert str(caught.value) == ("model endpoint http://h/v1 failed after 5 attempts (last: rate_limit: 429 Too Many "
                                 "Requests) in 20 s; retry later or raise retry_budget_s (now 20 s)")
    assert len(calls) == 5
    drawn = [0.951859, 4.353834, 5.919283]  # then 18.117601, cut to what is left of the 20 s
    assert [round(w, 6) for w in fast_retry_waits.waits[:3]] == drawn
    assert fast_retry_waits.waits[3] == pytest.approx(20.0 - sum(drawn), abs=0.05)
    assert 20.0 <= fast_retry_waits.now() - start < 20.1  # the last attempt is at the deadline
    assert [level for level, _ in logged(caplog)] == ["INFO"] * 4
    assert logged(caplog)[-1][1].endswith("retry 4 in 9 s (11 of 20 s retry budget spent)")


def test_a_long_wait_is_a_warning(fast_retry_waits: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    attempt, _ = failing(transient("rate_limit", "429", retry_after_s=12.0))
    retried(attempt, RetryPolicy(base_s=1.0, max_s=5.0, seed=0))
    assert fast_retry_waits.waits == [12.0]
    assert logged(caplog) == [("WARNING", "model endpoint http://h/v1: rate_limit (429); retry 1 in 12 s (0 of 300 s "
                                          "retry budget spent)")]


def test_retry_after_is_honoured_beyond_the_backoff_cap(fast_retry_waits: FakeClock) -> None:
    attempt, calls = failing(transient("rate_limit", retry_after_s=45.0))
    assert retried(attempt, RetryPolicy(base_s=1.0, max_s=5.0, seed=0)) == "ok"
    assert (calls, fast_retry_waits.waits) == ([1, 2], [45.0])


def test_retry_after_beyond_the_budget_ends_the_call_at_once(fast_retry_waits: FakeClock) -> None:
    attempt, calls = failing(transient("rate_limit", "429 Too Many Requests", retry_after_s=3600.0))
    with pytest.raises(ModelCallError) as caught:
        retried(attempt, RetryPolicy(base_s=1.0, seed=0))
    assert str(caught.value) == ("model endpoint http://h/v1 failed after 1 attempts (last: rate_limit: 429 Too Many "
                                 "Requests) in 0 s; retry later or the server asked to retry after 3600 s, beyond the "
                                 "300 s left of retry_budget_s (300 s)")
    assert (calls, fast_retry_waits.waits) == ([1], [])


def test_retry_after_is_ignored_when_waits_are_off(fast_retry_waits: FakeClock) -> None:
    attempt, calls = failing(transient("rate_limit", retry_after_s=3600.0))
    assert retried(attempt, RetryPolicy(max_retries=3, base_s=0)) == "ok"
    assert (calls, fast_retry_waits.waits) == ([1, 2], [])


def test_an_unreachable_endpoint_says_what_to_set(fast_retry_waits: FakeClock) -> None:
    attempt, _ = failing(transient("connection", "connection refused"), then=None)
    with pytest.raises(ModelCallError) as caught:
        retried(attempt, RetryPolicy(max_retries=1, base_s=0))
    assert str(caught.value) == ("model endpoint http://h/v1 failed after 2 attempts (last: connection: connection "
                                 "refused) in 0 s; is the server running? set --base-url / OPENAI_BASE_URL to a "
                                 "reachable endpoint")


def test_other_errors_pass_through_at_once(fast_retry_waits: FakeClock) -> None:
    refused = ModelCallError("model endpoint http://h/v1 rejected the API key (401): set OPENAI_API_KEY or --api-key")
    attempt, calls = failing(transient("server_error"), refused)
    with pytest.raises(ModelCallError) as caught:
        retried(attempt, RetryPolicy(base_s=1.0, seed=0))
    assert caught.value is refused
    assert calls == [1, 2]
    attempt, calls = failing(KeyError("x"))
    with pytest.raises(KeyError):
        retried(attempt, RetryPolicy())
    assert calls == [1]


def test_a_zero_budget_never_retries(fast_retry_waits: FakeClock) -> None:
    attempt, calls = failing(transient("server_error", "HTTP 500"), then=None)
    with pytest.raises(ModelCallError, match=r"failed after 1 attempts .* raise retry_budget_s \(now 0 s\)"):
        retried(attempt, RetryPolicy(budget_s=0))
    assert calls == [1]
