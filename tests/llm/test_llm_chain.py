"""The chain around a model call (`skilltransfer.llm.chain`): each layer does its one job, hands everything else to
the model inside, and a layer wraps only the layers the chain puts below it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from skilltransfer.llm.cache import ResponseCache
from skilltransfer.llm.chain import (
    ORDER,
    CachedModel,
    LimitedModel,
    LoggedModel,
    ReportingModel,
    TimedModel,
)
from skilltransfer.llm.context import ContextLengthError, model_chain
from skilltransfer.llm.testing import ScriptedModel

HI = [{"role": "user", "content": "hi"}]


class Passed(Exception):
    """A deadline that has passed."""


class Clock:
    def __init__(self) -> None:
        self.late = False

    def check(self) -> None:
        if self.late:
            raise Passed("too late")


def test_the_order_is_the_documented_one_and_a_layer_refuses_to_wrap_one_above_it(tmp_path: Path) -> None:
    assert [layer.__name__ for layer in ORDER] == ["LoggedModel", "TimedModel", "ReportingModel", "LimitedModel",
                                                  "CachedModel"]
    cached = CachedModel(ScriptedModel(["a"]), ResponseCache(tmp_path / "c.sqlite"))
    timed = TimedModel(ReportingModel(ReportingModel(cached, print), print), Clock())
    assert [type(part).__name__ for part in model_chain(timed)] == [
        "TimedModel", "ReportingModel", "ReportingModel", "CachedModel", "ScriptedModel"]
    with pytest.raises(TypeError, match="CachedModel cannot wrap TimedModel: the chain's order is LoggedModel > "
                                        "TimedModel > ReportingModel > LimitedModel > CachedModel"):
        CachedModel(timed, ResponseCache(tmp_path / "d.sqlite"))
    with pytest.raises(TypeError, match="ReportingModel cannot wrap TimedModel"):
        ReportingModel(timed, print)


def test_a_timed_model_checks_the_deadline_before_it_asks() -> None:
    inner, clock = ScriptedModel(["a", "b"]), Clock()
    model = TimedModel(inner, clock)
    assert model.complete(HI).text == "a"
    clock.late = True
    with pytest.raises(Passed):
        model.complete(HI)
    assert len(inner.calls) == 1


def test_a_reporting_model_tells_its_listener_of_each_completion_and_hands_the_rest_on() -> None:
    heard: list[str] = []
    inner = ScriptedModel(["a", "b"])
    model = ReportingModel(inner, lambda completion: heard.append(completion.text))
    assert [model.complete(HI).text, model.complete(HI).text] == ["a", "b"] == heard
    assert model.calls is inner.calls  # everything else is the inner model's


def test_a_limited_model_holds_its_slot_during_the_call() -> None:
    slot = threading.BoundedSemaphore(1)
    seen: list[bool] = []

    def reply(_messages: list[dict[str, str]]) -> str:
        seen.append(not slot.acquire(blocking=False))  # taken while the model answers
        return "a"

    model = LimitedModel(ScriptedModel(reply), slot)
    assert model.complete(HI).text == "a"
    assert seen == [True]
    assert slot.acquire(blocking=False)  # given back


def test_a_logged_model_goes_through_the_call_log_and_turns_its_overflow_into_a_context_error() -> None:
    class Overflow(Exception):
        pass

    class Calls:
        def __init__(self) -> None:
            self.roles: list[str] = []

        def complete(self, model, messages, role, **params):  # type: ignore[no-untyped-def]
            self.roles.append(role)
            if params.get("max_tokens") == 1:
                raise Overflow("the prompt needs 9000 tokens of a 4096-token window")
            return model.complete(messages, **params)

    calls = Calls()
    model = LoggedModel(ScriptedModel(["yes"]), calls, "verifier", overflow=Overflow)
    assert model.complete(HI).text == "yes"
    with pytest.raises(ContextLengthError, match="9000 tokens") as caught:
        model.complete(HI, max_tokens=1)
    assert isinstance(caught.value.__cause__, Overflow)
    assert calls.roles == ["verifier", "verifier"]
