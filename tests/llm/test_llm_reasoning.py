"""Reasoning models through the real client: the reasoning split from the answer in every style the mock server
serves (each compared with a plain twin giving the same answers), and OpenAI's strict API adapted once per
parameter."""

from __future__ import annotations

import threading

import pytest

from skilltransfer.llm.reasoning import split_reply, split_think
from skilltransfer.llm.strict import ParamAdapter, cut_at_stop, rejected_parameter
from skilltransfer.llm.testing.mock_server import REASONING_MARKER, REASONING_STYLES, MockServer

ANSWER = "Thought: look first.\n```python\nprint(1)\n```\nObservation: invented\nmore"


def _reply(messages: list[dict]) -> str:
    return ANSWER if "act" in str(messages[-1]["content"]) else "SUBTASK: do it"


@pytest.mark.parametrize(("content", "answer", "reasoning"), [
    ("plain answer", "plain answer", ""),
    ("<think>\nhmm\n</think>\n\nthe answer", "the answer", "hmm"),
    ("  <think>cut by the length lim", "", "cut by the length lim"),
    ("opened by the template\n</think>\nthe answer", "the answer", "opened by the template"),
    ("answer mentioning <think> and </think> later", "answer mentioning <think> and </think> later", ""),
])
def test_split_think(content: str, answer: str, reasoning: str) -> None:
    assert split_think(content) == (answer, reasoning)


def test_split_reply_reads_both_fields_and_inline() -> None:
    assert split_reply({"content": "a", "reasoning_content": "r"}) == ("a", "r")
    assert split_reply({"content": "a", "reasoning": "r1"}) == ("a", "r1")
    assert split_reply({"content": None, "reasoning": "only"}) == ("", "only")
    assert split_reply({"content": "<think>x</think>a", "reasoning": "f"}) == ("a", "f\n\nx")


@pytest.mark.parametrize("style", REASONING_STYLES)
def test_each_style_answers_as_its_plain_twin(style: str) -> None:
    messages = [{"role": "user", "content": "act now"}]
    with MockServer(_reply) as plain, MockServer(_reply, reasoning=style, reasoning_tokens=50) as thinking:
        want = plain.model().complete(messages)
        model = thinking.model()
        got = model.complete(messages)
        assert got.text == want.text == ANSWER
        assert got.finish_reason == want.finish_reason == "stop"
        assert REASONING_MARKER not in got.text
        if style == "openai":
            assert got.reasoning == ""
            assert got.reasoning_tokens == 50
        else:
            assert REASONING_MARKER in got.reasoning
            assert got.reasoning_tokens >= 45
        assert got.completion_tokens == want.completion_tokens + got.reasoning_tokens


@pytest.mark.parametrize("style", ["think", "reasoning_content", "openai"])
def test_a_cap_spent_inside_the_reasoning_is_a_length_cut_without_answer(style: str) -> None:
    with MockServer(_reply, reasoning=style, reasoning_tokens=120) as server:
        done = server.model().complete([{"role": "user", "content": "act"}], max_tokens=96)
    assert done.text == ""
    assert done.finish_reason == "length"
    assert REASONING_MARKER not in done.text


def test_openai_style_rejects_each_parameter_once_and_adapts(capsys: pytest.CaptureFixture[str]) -> None:
    with MockServer(_reply, reasoning="openai", reasoning_tokens=20) as server:
        model = server.model()
        results: list[str] = []

        def call() -> None:
            done = model.complete([{"role": "user", "content": "act"}], max_tokens=500, stop=["\nObservation:"],
                                  temperature=0.0)
            results.append(done.text)

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(server.rejected) == ["max_tokens", "stop", "temperature"]
        assert model.adapter.changes == {"max_tokens": "max_completion_tokens", "stop": "dropped",
                                         "temperature": "dropped"}
        # the dropped stop is applied by the client, as the server would have
        assert results == [ANSWER.split("\nObservation:")[0]] * 6
        last = server.requests[-1]
        assert last["max_completion_tokens"] == 500
        assert not {"max_tokens", "stop", "temperature"} & set(last)
    err = capsys.readouterr().err
    assert err.count("warning: model mock rejected") == 3


def test_recorded_changes_are_sent_from_the_first_request() -> None:
    with MockServer(_reply, reasoning="openai") as server:
        model = server.model()
        model.adapter.adopt({"max_tokens": "max_completion_tokens", "temperature": "dropped", "bogus": "x"})
        model.complete([{"role": "user", "content": "act"}], max_tokens=300, temperature=0.2)
        assert server.rejected == []
        assert model.adapter.changes.keys() == {"max_tokens", "temperature"}


def test_openai_url_sends_max_completion_tokens_from_the_start() -> None:
    from skilltransfer.llm.config import ModelConfig
    from skilltransfer.llm.openai_client import OpenAIChatModel

    model = OpenAIChatModel(ModelConfig(name="openai", model="o3", api_key="sk-test"))
    assert model.adapter.apply({"max_tokens": 5}) == {"max_completion_tokens": 5}


def test_a_refusal_of_an_unadaptable_parameter_is_an_error() -> None:
    assert rejected_parameter(400, {"param": "messages"}, "", {"messages": []}) is None
    assert rejected_parameter(400, {"param": "stop"}, "", {}) is None  # not sent: not ours to drop
    assert rejected_parameter(400, {"error": {"param": None}}, "Unsupported parameter: 'stop' is ...",
                              {"stop": ["x"]}) == "stop"
    assert rejected_parameter(400, None, "", {"extra_body": {"reasoning_effort": "x"}}) is None
    assert rejected_parameter(400, {"param": "reasoning_effort"}, "", {"extra_body": {"reasoning_effort": "x"}}) \
        == "reasoning_effort"
    assert cut_at_stop("a\nObservation: b", ["\nObservation:", "zz"]) == ("a", True)
    adapter = ParamAdapter("m")
    adapter.learn("reasoning_effort")
    assert adapter.apply({"extra_body": {"reasoning_effort": "low", "k": 1}}) == {"extra_body": {"k": 1}}


def test_model_config_shortcuts_fold_into_the_request() -> None:
    from skilltransfer.llm.config import ModelConfig

    config = ModelConfig(max_completion_tokens=4000, reasoning_effort="low")
    assert config.params == {"max_tokens": 4000}
    assert config.extra_body == {"reasoning_effort": "low"}
    config = ModelConfig(max_completion_tokens=4000, params={"max_tokens": 9}, extra_body={"reasoning_effort": "hi"})
    assert config.params == {"max_tokens": 9}
    assert config.extra_body == {"reasoning_effort": "hi"}
