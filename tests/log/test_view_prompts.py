"""What the model saw is part of the run log: every call's messages and raw reply in ``prompts.jsonl``, stored once by
content id, read through the run log, printed by ``show --task N --prompts`` (through the mock server's HTTP)."""

from __future__ import annotations

import json

from helpers_cli import cli, records_of, run_tiny, trajectory_of
from helpers_tinyenv import TEXT_SKILL, CounterScript, role_of

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import PROMPTS, PromptStore, RunFolder, message_id, reply_message


def _script_with_bad_induction() -> CounterScript:
    """Induction fails to parse on the first task, then gives a skill."""
    return CounterScript(lambda n, _messages: "I would rather not write a skill." if n == 0 else TEXT_SKILL)


def test_every_call_prompt_and_reply_logged_once_by_content(tmp_path):
    out = tmp_path / "run"
    with MockServer(replies=_script_with_bad_induction()) as server:
        run_tiny(server, out, "subtask+text")
        requests = [r["messages"] for r in server.requests]
    folder = RunFolder(out)
    stored = folder.prompts.read()
    lines = (out / PROMPTS).read_text().splitlines()
    assert len(lines) == len(stored) == len({json.loads(line)["id"] for line in lines})  # each message once
    sent = [m for messages in requests for m in messages]
    assert len(stored) < len(sent)  # system prompts and conversation prefixes are shared
    calls = [c for r in records_of(out) for c in trajectory_of(out, r).calls]
    assert len(calls) == len(requests)
    for call, messages, prompt in zip(calls, requests, folder.call_prompts(calls), strict=True):
        assert prompt["messages"] == messages  # exactly what went over HTTP
        assert call["messages"] == [message_id(m) for m in messages]
        assert isinstance(prompt["reply"], str)
        assert call["finish_reason"] is not None
    # the failed induction's raw reply is kept
    first = trajectory_of(out, records_of(out)[0])
    induction = next(s for s in first.steps if s["type"] == "InductionStep")
    assert induction["status"] == "unparseable"
    induction_calls = [p for c, p in zip(first.calls, folder.call_prompts(first.calls), strict=True)
                       if c["role"] == "induction"]
    assert induction_calls[0]["reply"] == "I would rather not write a skill."
    assert role_of(induction_calls[0]["messages"]) == "induction"


def test_store_skips_partial_last_line_and_repairs(tmp_path):
    store = PromptStore(tmp_path / PROMPTS)
    ids = store.add([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                     {"role": "system", "content": "s"}])
    assert ids[0] == ids[2] != ids[1]
    with (tmp_path / PROMPTS).open("a") as handle:
        handle.write('{"id":"0123456789abcdef","message":{"role":"us')  # a crash mid-append
    fresh = PromptStore(tmp_path / PROMPTS)
    assert set(fresh.read()) == set(ids)
    fresh.repair()
    assert (tmp_path / PROMPTS).read_text().endswith("}\n")
    fresh.add([reply_message("done")])
    assert set(PromptStore(tmp_path / PROMPTS).read()) == {*ids, message_id(reply_message("done"))}


def test_show_prompts_prints_each_steps_prompt(tmp_path):
    out = tmp_path / "run"
    with MockServer(replies=_script_with_bad_induction()) as server:
        run_tiny(server, out, "task+text")
    text = cli("show", str(out), "--task", "1", "--prompts").output
    assert "[call 0] executor" in text
    assert "--- system" in text
    assert "(as in call 0)" in text  # the system prompt printed once
    assert "I would rather not write a skill." in text  # the unparseable induction reply
    assert text.index("[step 0]") < text.index("[call 0]") < text.index("[step 1]")
