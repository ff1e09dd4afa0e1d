"""The time-based retry budget: rate-limit windows and outages against the mock server on a fake clock."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from conftest import FakeClock

from skilltransfer.llm.chain import Retry
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.local import free_port
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.retry import ModelCallError, RetryPolicy, TransientModelError, parse_retry_after
from skilltransfer.llm.testing.mock_server import MockServer

HI = [{"role": "user", "content": "hi"}]


def endpoint(server: MockServer, **fields: object) -> OpenAIChatModel:
    """A client with the default retry settings (budget 300 s, backoff 1 s doubling to 30 s) unless overridden."""
    return OpenAIChatModel(ModelConfig(base_url=server.url, model="m", timeout_s=5.0, **fields))


def outage(clock: FakeClock, seconds: float, kind: str = "rate_limit") -> tuple[float, object]:
    """A ``fault_fn`` failing every request for ``seconds`` of clock time from now, and the start time."""
    start = clock.now()
    return start, lambda: kind if clock.now() - start < seconds else None


@pytest.mark.parametrize(("value", "expected"), [
    ("120", 120.0), ("1.5", 1.5), ("0", 0.0), ("-4", 0.0), (None, None), ("", None), ("soon", None),
    ("nan", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 30.0), ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
    ("Wed, 21 Oct 2015 07:28:00", None),  # a date without a zone is not an HTTP date
])
def test_retry_after_seconds_or_http_date(value: str | None, expected: float | None) -> None:
    now = 1445412450.0  # 2015-10-21 07:27:30 GMT
    assert parse_retry_after(value, now=now) == expected


def test_default_budget_is_five_minutes_of_retries_without_a_count_limit() -> None:
    config = ModelConfig()
    assert config.retry_budget_s >= 300
    assert config.max_retries is None
    policy = RetryPolicy()
    assert policy.budget_s >= 300
    assert policy.max_retries is None


@pytest.mark.parametrize("header", ["seconds", "http-date"])
def test_retry_after_is_honoured_beyond_the_backoff_cap(header: str, fast_retry_waits: FakeClock) -> None:
    retry_after: float | str = 45.0 if header == "seconds" else formatdate(time.time() + 46, usegmt=True)
    with MockServer(["ok"], fault_plan=["rate_limit"], retry_after_s=retry_after) as server:
        out = endpoint(server, backoff_max_s=5.0).complete(HI)
    assert (out.text, out.attempts) == ("ok", 2)
    assert len(fast_retry_waits.waits) == 1
    assert 44.0 <= fast_retry_waits.waits[0] <= 46.0  # the server's wait, not the 5 s backoff cap


def test_success_after_a_two_minute_window_of_429s(fast_retry_waits: FakeClock) -> None:
    start, faults = outage(fast_retry_waits, 120.0)
    with MockServer(["through"], fault_fn=faults) as server:  # type: ignore[arg-type]
        out = endpoint(server).complete(HI)
        requests = len(server.requests)
    elapsed = fast_retry_waits.now() - start
    assert out.text == "through"
    assert out.attempts == requests > 5
    assert 120.0 <= elapsed < 300.0
    assert all(w <= 30.0 for w in fast_retry_waits.waits)  # each backoff wait capped


def test_a_six_minute_outage_ends_in_one_clear_error_after_the_budget(fast_retry_waits: FakeClock) -> None:
    start, faults = outage(fast_retry_waits, 360.0, kind="server_error")
    with MockServer(["never"], fault_fn=faults) as server:  # type: ignore[arg-type]
        with pytest.raises(ModelCallError) as info:
            endpoint(server).complete(HI)
        requests = len(server.requests)
    elapsed = fast_retry_waits.now() - start
    message = str(info.value)
    assert f"failed after {requests} attempts (last: server_error: HTTP 500) in 300 s" in message
    assert "retry_budget_s" in message
    assert "\n" not in message
    assert 300.0 <= elapsed < 301.0  # the last wait is cut short so that the last attempt is at the deadline
    assert sum(fast_retry_waits.waits) <= 300.0


def test_max_retries_still_caps_the_attempts(fast_retry_waits: FakeClock) -> None:
    with MockServer(["never"], fault_rate=1.0, fault_kinds=["rate_limit"]) as server:
        with pytest.raises(ModelCallError, match=r"failed after 3 attempts .*raise max_retries \(now 2\)"):
            endpoint(server, max_retries=2).complete(HI)
        assert len(server.requests) == 3
    assert len(fast_retry_waits.waits) == 2


def test_retry_after_beyond_the_budget_fails_at_once(fast_retry_waits: FakeClock) -> None:
    with MockServer(["ok"], fault_plan=["rate_limit"], retry_after_s=3600) as server:
        with pytest.raises(ModelCallError, match=r"after 1 attempts .*asked to retry after 3600 s, beyond"):
            endpoint(server).complete(HI)
    assert fast_retry_waits.waits == []


def test_a_zero_budget_never_retries() -> None:
    with MockServer(["ok"], fault_plan=["server_error"]) as server:
        with pytest.raises(ModelCallError, match="failed after 1 attempts"):
            endpoint(server, retry_budget_s=0).complete(HI)


def test_an_unreachable_endpoint_is_retried_for_the_budget_then_says_what_to_set(fast_retry_waits: FakeClock) -> None:
    model = OpenAIChatModel(ModelConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", timeout_s=2.0,
                                        retry_budget_s=60))
    with pytest.raises(ModelCallError, match=r"last: connection.* in 60 s; is the server running\?.*OPENAI_BASE_URL"):
        model.complete(HI)
    assert 60.0 - 1 <= sum(fast_retry_waits.waits) <= 60.0


def test_budget_counts_real_time_when_waits_are_disabled(fast_retry_waits: FakeClock) -> None:
    calls = 0

    def failing() -> None:
        nonlocal calls
        calls += 1
        time.sleep(0.01)
        raise TransientModelError("server_error", "HTTP 500")

    with pytest.raises(ModelCallError, match="retry_budget_s"):
        Retry(RetryPolicy(base_s=0, budget_s=0.1), what="x")(failing)
    assert 3 <= calls <= 12
    assert fast_retry_waits.waits == []
