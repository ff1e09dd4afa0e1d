"""Fault injection (wrapper and mock server), retry policy, and the mock server's scripted replies."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skilltransfer.errors import InputError
from skilltransfer.llm.chain import Retry
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.retry import ModelCallError, RetryPolicy, TransientModelError
from skilltransfer.llm.testing import ScriptedModel, ScriptExhausted
from skilltransfer.llm.testing.faults import WRAPPER_FAULTS, FaultyModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.script import ReplyRule, load_replies

HI = [{"role": "user", "content": "hi"}]
NO_WAIT = RetryPolicy(max_retries=5, base_s=0.0)


def test_faulty_model_is_seeded_and_hits_its_rate() -> None:
    def run(seed: int) -> list[str]:
        model = FaultyModel(ScriptedModel(lambda m: "fine"), rate=0.3, seed=seed)
        for _ in range(400):
            try:
                model.complete(HI)
            except TransientModelError:
                pass
        return model.faults

    assert run(1) == run(1)
    assert run(1) != run(2)
    share = len(run(3)) / 400
    assert 0.22 < share < 0.38
    assert set(run(3)) == set(WRAPPER_FAULTS)


@pytest.mark.parametrize("fault", ["rate_limit", "server_error", "timeout"])
def test_the_retry_layer_recovers_from_each_transport_fault(fault: str) -> None:
    inner = ScriptedModel(["answer"])
    model = FaultyModel(inner, plan=[fault, fault], rate=0.0)
    assert Retry(NO_WAIT, what="model")(lambda: model.complete(HI)).text == "answer"
    assert (model.calls, model.faults) == (3, [fault, fault])
    assert len(inner.calls) == 1  # transport faults never reach the wrapped model


def test_content_faults_damage_the_answer() -> None:
    model = FaultyModel(ScriptedModel(["the full answer", "the full answer"]), plan=["truncated", "garbage_text"])
    cut = model.complete(HI)
    assert (cut.text, cut.finish_reason) == ("the ful", "length")  # half of 15 characters
    junk = model.complete(HI)
    assert junk.text != "the full answer"
    assert len(junk.text) == len("the full answer")


def test_retry_budget_exhausted_names_the_last_fault() -> None:
    model = FaultyModel(ScriptedModel(["x"]), rate=1.0, kinds=["timeout"])
    with pytest.raises(ModelCallError, match=r"failed after 3 attempts \(last: timeout"):
        Retry(RetryPolicy(max_retries=2, base_s=0), what="model")(lambda: model.complete(HI))


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    policy = RetryPolicy(base_s=1.0, max_s=5.0, seed=0)
    waits = [[policy.wait_s(attempt) for _ in range(200)] for attempt in range(5)]
    for attempt, ws in enumerate(waits):
        bound = min(5.0, 2.0**attempt)
        assert all(0 <= w <= bound for w in ws)
        assert max(ws) > 0.8 * bound  # the jitter spans the window
    assert policy.wait_s(0, retry_after_s=3.0) >= 3.0
    assert policy.wait_s(0, retry_after_s=60.0) == 60.0  # Retry-After is honoured beyond the backoff cap
    assert RetryPolicy(base_s=0).wait_s(3, retry_after_s=10) == 0.0


def test_bad_fault_settings_are_input_errors() -> None:
    with pytest.raises(InputError, match="Unknown fault kind 'meteor'"):
        FaultyModel(ScriptedModel(["x"]), kinds=["meteor"])
    with pytest.raises(InputError, match="fault rate"):
        FaultyModel(ScriptedModel(["x"]), rate=1.5)
    with pytest.raises(InputError, match="Unknown fault kind"):
        MockServer(fault_kinds=["meteor"])


def test_scripted_model_runs_out_loudly() -> None:
    model = ScriptedModel(["one"])
    assert model.complete(HI).text == "one"
    with pytest.raises(ScriptExhausted):
        model.complete(HI)


def test_mock_server_fault_rate_is_seeded() -> None:
    def faults(seed: int) -> list[str]:
        with MockServer(lambda m: "ok", fault_rate=0.5, fault_kinds=["rate_limit", "server_error"],
                        seed=seed) as server:
            model = OpenAIChatModel(ModelConfig(base_url=server.url, model="m", backoff_base_s=0, max_retries=50))
            for _ in range(10):
                model.complete(HI)
            return server.faults

    first = faults(5)
    assert first == faults(5)
    assert 3 <= len(first)


def test_replies_from_jsonl_in_order_and_as_rules(tmp_path: Path) -> None:
    ordered = tmp_path / "ordered.jsonl"
    ordered.write_text('"first"\n{"text": "second"}\n\n')
    assert load_replies(ordered) == ["first", "second"]
    rules = tmp_path / "rules.jsonl"
    rules.write_text(json.dumps({"match": r"email", "reply": "apis.email.send()"}) + "\n"
                     + json.dumps({"reply": "complete_task()"}) + "\n")
    assert load_replies(rules) == [ReplyRule("apis.email.send()", "email"), ReplyRule("complete_task()")]
    with MockServer(rules) as server:
        model = OpenAIChatModel(ModelConfig(base_url=server.url, model="m", backoff_base_s=0))
        assert model.complete([{"role": "user", "content": "send an email"}]).text == "apis.email.send()"
        assert model.complete([{"role": "user", "content": "anything"}]).text == "complete_task()"


def test_bad_replies_files_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{not json}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: not JSON"):
        load_replies(bad)
    bad.write_text('{"match": "(", "reply": "x"}\n')
    with pytest.raises(InputError, match=r":1: bad regex"):
        load_replies(bad)
    bad.write_text('"a"\n{"match": "x", "reply": "y"}\n')
    with pytest.raises(InputError, match="mixes"):
        load_replies(bad)
    with pytest.raises(InputError, match="does not exist"):
        load_replies(tmp_path / "nope.jsonl")


def test_mock_server_latency_and_token_rate() -> None:
    with MockServer(["x" * 40], latency_s=0.1, tokens_per_s=100) as server:
        model = OpenAIChatModel(ModelConfig(base_url=server.url, model="m"))
        start = time.perf_counter()
        out = model.complete(HI)
        elapsed = time.perf_counter() - start
    assert out.completion_tokens == 10
    assert 0.2 <= elapsed < 1.0  # 0.1 s latency + 10 tokens at 100 tok/s


def test_mock_server_runs_from_the_command_line(tmp_path: Path) -> None:
    replies = tmp_path / "r.jsonl"
    replies.write_text('"from the cli"\n')
    proc = subprocess.Popen([sys.executable, "-m", "skilltransfer.llm.testing.mock_server", "--replies", str(replies)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:")
        out = OpenAIChatModel(ModelConfig(base_url=url, model="m")).complete(HI)
        assert out.text == "from the cli"
    finally:
        proc.terminate()
        proc.wait(10)


def test_server_model_helper_drives_a_scripted_stream() -> None:
    def agent_reply(messages: list[dict[str, str]]) -> str:
        return "complete_task()" if len(messages) > 2 else "apis.email.search()"

    with MockServer(agent_reply, fault_plan=["server_error"], api_key="k") as server:
        model = server.model()
        first = model.complete(HI)
        second = model.complete([*HI, {"role": "assistant", "content": first.text}, {"role": "user", "content": "[]"}])
    assert (first.text, first.attempts) == ("apis.email.search()", 2)
    assert second.text == "complete_task()"
