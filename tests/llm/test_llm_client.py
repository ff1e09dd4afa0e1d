"""The real openai client path against the mock server: success, usage, retries, errors, concurrency."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.local import free_port
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.retry import ModelCallError
from skilltransfer.llm.testing.mock_server import CONTENT_FAULTS, TRANSPORT_FAULTS, MockServer

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]


@pytest.fixture
def fast() -> dict[str, float]:
    """ModelConfig overrides that zero backoff waits and keep timeouts short."""
    return {"backoff_base_s": 0.0, "backoff_max_s": 0.0, "timeout_s": 2.0}


def client(server: MockServer, **kwargs: object) -> OpenAIChatModel:
    return OpenAIChatModel(ModelConfig(base_url=server.url, model="mock-model", api_key="k", **kwargs))


def test_success_with_server_usage_and_raw_request(fast: dict[str, float]) -> None:
    with MockServer(["Thought: ok"]) as server:
        model = client(server, params={"temperature": 0.0, "max_tokens": 50},
                       extra_body={"chat_template_kwargs": {"enable_thinking": False}}, **fast)
        out = model.complete(HELLO, seed=7)
    assert out.text == "Thought: ok"
    assert out.finish_reason == "stop"
    assert out.model == "mock-model"
    assert out.usage_source == "server"
    assert out.prompt_tokens == 14  # the mock reports its chars/4 count: 3 + 4 + 3 + 4
    assert out.completion_tokens == 3  # ceil(11 chars / 4), as the mock reports
    assert out.attempts == 1
    assert out.latency_s > 0
    sent = server.requests[0]
    assert sent["temperature"] == 0.0
    assert sent["max_tokens"] == 50
    assert sent["seed"] == 7
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body is merged into the body
    assert out.raw_request["messages"] == HELLO
    assert out.raw_response["choices"][0]["message"]["content"] == "Thought: ok"


def test_missing_usage_falls_back_to_approximation(fast: dict[str, float]) -> None:
    with MockServer(["abcdefgh"], report_usage=False) as server:
        out = client(server, **fast).complete(HELLO)
    assert out.usage_source == "approx"
    assert out.completion_tokens == 2
    assert out.prompt_tokens == (9 + 3) // 4 + 4 + (11 + 3) // 4 + 4


def test_missing_usage_counted_with_a_local_tokenizer(tmp_path: Path, fast: dict[str, float]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    with MockServer(["one two three four five"], report_usage=False) as server:
        out = client(server, tokenizer=str(tmp_path), **fast).complete([{"role": "user", "content": "hello there"}])
    assert out.usage_source == "tokenizer"
    assert out.completion_tokens == 5  # five words; the chars/4 approximation would say 6
    assert out.prompt_tokens == 2 + 4


def test_missing_tokenizer_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="tokenizer"):
        OpenAIChatModel(ModelConfig(base_url="http://127.0.0.1:1/v1", model="m", tokenizer=str(tmp_path / "no")))


@pytest.mark.parametrize("fault", TRANSPORT_FAULTS)
def test_each_transport_fault_is_retried_then_recovers(fault: str, fast: dict[str, float]) -> None:
    with MockServer(["recovered"], fault_plan=[fault, fault], hang_s=3.0) as server:
        out = client(server, max_retries=3, **{**fast, "timeout_s": 0.8}).complete(HELLO)
    assert out.text == "recovered"
    assert out.attempts == 3
    assert server.faults == [fault, fault]
    assert len(server.requests) == 3


@pytest.mark.parametrize("fault", CONTENT_FAULTS)
def test_content_faults_reach_the_caller_as_answers(fault: str, fast: dict[str, float]) -> None:
    with MockServer(["a perfectly fine answer"], fault_plan=[fault]) as server:
        out = client(server, **fast).complete(HELLO)
    assert out.attempts == 1
    assert out.text != "a perfectly fine answer"
    if fault == "truncated":
        assert out.finish_reason == "length"
        assert "a perfectly fine answer".startswith(out.text)


def test_retry_budget_exhausted_is_a_clear_error(fast: dict[str, float]) -> None:
    with MockServer(["never"], fault_rate=1.0, fault_kinds=["server_error"]) as server:
        model = client(server, max_retries=2, **fast)
        with pytest.raises(ModelCallError, match=r"failed after 3 attempts \(last: server_error") as info:
            model.complete(HELLO)
    assert len(server.requests) == 3
    assert "\n" not in str(info.value)
    assert isinstance(info.value, InputError)


def test_retry_after_is_honoured_and_backoff_grows() -> None:
    waits: list[float] = []
    with MockServer(["ok"], fault_plan=["rate_limit", "server_error", "server_error"], retry_after_s=0.7) as server:
        model = OpenAIChatModel(ModelConfig(base_url=server.url, model="m", backoff_base_s=0.01, backoff_max_s=5,
                                            max_retries=3), sleep=waits.append)
        assert model.complete(HELLO).text == "ok"
    assert len(waits) == 3
    assert waits[0] >= 0.7  # Retry-After beats the small jittered backoff
    assert all(0 <= w <= 0.04 for w in waits[1:])  # full jitter within base * 2**attempt


def test_wrong_key_is_a_one_line_input_error(fast: dict[str, float]) -> None:
    with MockServer(["x"], api_key="right") as server:
        with pytest.raises(InputError, match="401.*OPENAI_API_KEY"):
            client(server, **fast).complete(HELLO)
        assert len(server.requests) == 0  # rejected before reading the body, and not retried


def test_unknown_model_is_an_input_error(fast: dict[str, float]) -> None:
    with MockServer(["x"], models=["other"]) as server, pytest.raises(InputError, match="404.*--model"):
        client(server, **fast).complete(HELLO)


def test_unreachable_endpoint_says_what_to_set(fast: dict[str, float]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    model = OpenAIChatModel(ModelConfig(base_url=url, model="m", max_retries=1, **fast))
    with pytest.raises(InputError, match="connection.*OPENAI_BASE_URL"):
        model.complete(HELLO)


def test_missing_settings_are_input_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SKILLTRANSFER_MODEL", raising=False)
    with pytest.raises(InputError, match=r"needs a model id: --model openai/<id>"):
        make_model("openai")  # OpenAI's own endpoint by default: the id is asked for, not guessed
    with pytest.raises(InputError, match="SKILLTRANSFER_MODEL"):
        make_model("openai", base_url="http://127.0.0.1:1/v1")


def test_env_vars_configure_the_endpoint(monkeypatch: pytest.MonkeyPatch, fast: dict[str, float]) -> None:
    with MockServer(["from env"], api_key="secret") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "secret")
        monkeypatch.setenv("SKILLTRANSFER_MODEL", "env-model")
        model = make_model(None, **fast)  # an endpoint is configured -> "openai"
        out = model.complete(HELLO)
    assert isinstance(model, OpenAIChatModel)
    assert out.text == "from env"
    assert out.model == "env-model"


def test_concurrency_limit_is_respected_at_the_server(fast: dict[str, float]) -> None:
    limit, callers, per_caller = 4, 12, 3
    with MockServer(lambda messages: "ok", latency_s=0.05) as server:
        model = client(server, max_concurrency=limit, **{**fast, "timeout_s": 5.0})
        errors: list[BaseException] = []

        def run() -> None:
            try:
                for _ in range(per_caller):
                    model.complete(HELLO)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(callers)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
    assert not errors
    assert len(server.requests) == callers * per_caller
    assert server.max_in_flight == limit  # never more than N, and the limit is actually used
    assert elapsed >= callers * per_caller / limit * 0.05 * 0.9


def test_a_second_model_on_the_same_endpoint_shares_the_limit(fast: dict[str, float]) -> None:
    with MockServer(lambda messages: "ok", latency_s=0.05) as server:
        models = [client(server, max_concurrency=2, **{**fast, "timeout_s": 5.0}) for _ in range(3)]
        threads = [threading.Thread(target=m.complete, args=(HELLO,)) for m in models for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(server.requests) == 9
    assert server.max_in_flight == 2


def test_the_mock_servers_stats_give_its_busy_span(fast: dict[str, float]) -> None:
    """``/stats`` (read by benchmarks/grid_throughput.py): requests, most in flight, first request and last answer."""
    import json
    import urllib.request

    def stats(query: str = "") -> dict[str, object]:
        with urllib.request.urlopen(f"{server.url.removesuffix('/v1')}/stats{query}") as resp:
            return dict(json.load(resp))

    with MockServer(lambda _messages: "ok", latency_s=0.05) as server:
        assert stats()["first_request_at"] is None
        before = time.time()
        model = client(server, **fast)
        model.complete(HELLO)
        model.complete(HELLO)
        seen = stats("?reset=1")
        assert seen["requests"] == 2
        first, last = float(seen["first_request_at"]), float(seen["last_answer_at"])  # type: ignore[arg-type]
        assert before <= first < last <= time.time()
        assert last - first >= 0.1  # two answers of 50 ms, one after the other
        assert stats()["first_request_at"] is None  # reset
