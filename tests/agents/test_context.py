"""Context fitting: the policy (what is kept, elided and cut, determinism, the log), the model layer's window and
token counts, context-length error classification, and how the agent ends a (sub)task that cannot fit."""

from __future__ import annotations

import pytest
from helpers_tinyenv import CounterScript, HistoryScript, TinyEnv

from skilltransfer.agents import Agent, CallLog, ContextExceeded, ContextFitter
from skilltransfer.agents.context import CONVERSATION_BLOCK, SKILL_LEVELS, margin_tokens, variants
from skilltransfer.agents.steps import TrajectoryText
from skilltransfer.llm.cache import ResponseCache
from skilltransfer.llm.chain import CachedModel
from skilltransfer.llm.context import (
    ContextLengthError,
    PromptCounter,
    classify_context_error,
    context_window,
    count_prompt_tokens,
    estimate_tokens,
    messages_tokens,
    window_from_models,
)
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.faults import FaultyModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import ActionStep
from skilltransfer.memory import Skill, SkillMemory

SYSTEM = {"role": "system", "content": "You are the EXECUTOR. " + "Rules. " * 20}
TASK = {"role": "user", "content": "# Task\nSet the counter to 3.\nBegin."}


def conversation(n_steps: int, obs_chars: int = 800, thought_chars: int = 0) -> list[dict[str, str]]:
    messages = [dict(SYSTEM), dict(TASK)]
    for i in range(n_steps):
        thought = f"Step {i}. " + "I think it over. " * (thought_chars // 17)
        code = f"```python\nprint(apis.counter.history({i}))\n```"
        messages.append({"role": "assistant", "content": f"{thought}\n{code}"})
        messages.append({"role": "user", "content": f"Observation:\nrun {i}\n" + "1234567 " * (obs_chars // 8)})
    return messages


def window_for(messages: list[dict[str, str]], budget: int, spare: int) -> int:
    """A window that leaves exactly ``spare`` prompt tokens beyond ``messages`` (under ScriptedModel's counting)."""
    prompt = messages_tokens(messages) + spare
    # window - budget - margin(window) == prompt; margin = 16 + window // 64
    for window in range(prompt + budget, 4 * (prompt + budget)):
        if window - budget - margin_tokens(window) >= prompt:
            return window
    raise AssertionError("no window")


# --------------------------------------------------------------------------------------------- the ladder
def test_ladder_order_and_blocks():
    ladder = variants(n_steps=11, keep_steps=4, n_skills=2, block=4)  # (dropped, elided obs, elided replies, cut)
    assert ladder[0] == (0, 0, 0, 0)
    assert ladder[1:3] == [(0, 4, 0, 0), (0, 7, 0, 0)]  # older observations in blocks of 4, up to n - keep
    assert ladder[3:5] == [(0, 7, 4, 0), (0, 7, 7, 0)]  # then older replies
    assert ladder[5:7] == [(4, 7, 7, 0), (7, 7, 7, 0)]  # then the older steps are dropped
    assert ladder[7:10] == [(7, 8, 8, 0), (7, 9, 9, 0), (7, 10, 10, 0)]  # then kept steps elided...
    assert ladder[10:13] == [(8, 10, 10, 0), (9, 10, 10, 0), (10, 10, 10, 0)]  # ... and dropped, but the last
    assert ladder[13:] == [(10, 10, 10, s) for s in range(1, 2 * SKILL_LEVELS + 1)]  # then skills (skill_levels)
    assert variants(0, 4, 0, 4) == [(0, 0, 0, 0)]
    trajectory = variants(3, 1, 0, 1, elide_last_observation=True)
    assert trajectory == [(0, 0, 0, 0), (0, 1, 0, 0), (0, 2, 0, 0), (0, 2, 1, 0), (0, 2, 2, 0), (1, 2, 2, 0),
                          (2, 2, 2, 0), (2, 3, 2, 0)]


def test_a_prompt_that_fits_is_sent_unchanged_and_logged():
    messages = conversation(3)
    model = ScriptedModel(["x"], context_window=8192)
    fitted, fit = ContextFitter({"executor": 256}).fit(model, messages, 256)
    assert fitted == messages
    assert fit is not None
    assert not fit.changed
    assert fit.tokens_before == fit.tokens_after == messages_tokens(messages)
    assert (fit.window, fit.budget, fit.counted_by) == (8192, 256, "approx")


def test_no_window_means_no_fitting():
    messages = conversation(30)
    assert ContextFitter({}).fit(ScriptedModel(["x"]), messages, 512) == (messages, None)


def test_older_observations_are_elided_head_and_last_steps_kept_and_deterministic():
    messages = conversation(12)
    budget = 256
    # room for the head + 4 full steps + the rest elided, but not for everything
    target = conversation(4)
    window = window_for(target, budget, spare=400)
    model = ScriptedModel(["x"], context_window=window)
    fitter = ContextFitter({"executor": budget}, keep_steps=4)
    fitted, fit = fitter.fit(model, messages, budget)
    assert fit is not None
    assert fit.changed
    assert fitted[:2] == messages[:2]  # system prompt and task message verbatim
    assert fitted[-8:] == messages[-8:]  # the last 4 steps verbatim
    assert fit.elided_steps % CONVERSATION_BLOCK == 0 or fit.elided_steps == 12 - 4
    assert fit.elided_replies == 0
    assert fit.cut_skills == 0
    elided = [m for m in fitted[2:] if m["content"].startswith("[elided observation")]
    assert len(elided) == fit.elided_steps
    assert all("\n" not in m["content"] for m in elided)  # one line each
    assert "run 0" in fitted[3]["content"]  # the gist of what was elided
    assert fit.tokens_after == messages_tokens(fitted) <= window - budget - margin_tokens(window)
    assert fit.tokens_before == messages_tokens(messages)
    assert fitter.fit(model, messages, budget) == (fitted, fit)  # deterministic


def test_replies_then_kept_steps_are_elided_when_observations_are_not_enough():
    messages = conversation(8, obs_chars=200, thought_chars=400)
    model = ScriptedModel(["x"], context_window=window_for(messages[:2], 128, spare=900))
    fitted, fit = ContextFitter({"executor": 128}, keep_steps=4).fit(model, messages, 128)
    assert fit is not None
    assert fit.elided_replies > 0
    assert fit.dropped_steps == 0
    assert [m["content"].startswith("[elided reply") for m in fitted[2::2]].count(True) == fit.elided_replies
    assert fitted[:2] == messages[:2]
    assert fitted[-2:] == messages[-2:]  # the last step is always verbatim
    assert fit.elided_steps >= fit.elided_replies


def test_skills_are_cut_worst_ranked_first():
    skills = [f"### Skill: skill-{rank}\nUse it.\n" + "step. " * 60 + "\n" for rank in range(3)]
    task = {"role": "user", "content": "# Task\nSet the counter.\n# Skills\n" + "\n".join(skills)}
    messages = [dict(SYSTEM), task]
    full = messages_tokens(messages)
    model = ScriptedModel(["x"], context_window=window_for(messages, 64, spare=-60))
    fitted, fit = ContextFitter({"executor": 64}).fit(model, messages, 64, skills=skills)
    assert fit is not None
    assert fit.cut_skills == 1
    assert fit.tokens_after < full
    content = fitted[1]["content"]
    assert skills[0] in content
    assert skills[1] in content
    assert skills[2] not in content
    assert "### Skill: skill-2 [cut to fit the context]" in content


def test_a_prompt_that_cannot_fit_raises_with_the_log():
    messages = [dict(SYSTEM), {"role": "user", "content": "x " * 3000}]
    model = ScriptedModel(["x"], context_window=1024)
    with pytest.raises(ContextExceeded) as caught:
        ContextFitter({"executor": 256}).fit(model, messages, 256)
    assert caught.value.fit["window"] == 1024
    assert caught.value.fit["tokens_after"] > 1024 - 256 - margin_tokens(1024)
    assert "even with everything elidable elided" in caught.value.message


def test_role_budget_is_sent_unless_the_call_or_the_model_sets_max_tokens():
    fitter = ContextFitter({"executor": 512, "planner": 96})
    model = ScriptedModel(["x"])
    assert fitter.params(model, "planner", {"temperature": 0}) == ({"temperature": 0, "max_tokens": 96}, 96)
    assert fitter.params(model, "executor", {"max_tokens": 40}) == ({"max_tokens": 40}, 40)
    assert fitter.params(model, "other", {}) == ({}, None)

    class Configured:  # a model whose own params set max_tokens (e.g. --max-tokens)
        class config:  # noqa: N801 - mimics ModelConfig
            params = {"max_tokens": 300}

    assert fitter.params(Configured(), "executor", {}) == ({}, 300)
    assert fitter.params(FaultyModel(Configured(), rate=0.0), "executor", {}) == ({}, 300)  # through wrappers


def test_trajectory_inside_one_message_is_fitted_step_by_step():
    steps = [ActionStep(index=i, subtask_index=0, reply=f"r{i}\n```python\nx = {i}\n```", thought=f"t{i}",
                        action=f"x = {i}", observation=f"out {i}\n" + "987654 " * 150) for i in range(6)]
    trajectory = TrajectoryText(steps, 2000)
    messages = [{"role": "system", "content": "You are the SUMMARIZER."},
                {"role": "user", "content": "# Its trajectory\n" + trajectory.render() + "\nReply."}]
    model = ScriptedModel(["x"], context_window=window_for(messages[:1], 128, spare=900))
    fitted, fit = ContextFitter({"summarizer": 128}).fit(model, messages, 128, trajectory=trajectory)
    assert fit is not None
    assert 0 < fit.elided_steps < 6
    text = fitted[1]["content"]
    assert text.startswith("# Its trajectory\n")
    assert text.endswith("\nReply.")
    assert text.count("[elided observation") == fit.elided_steps - fit.dropped_steps
    assert f"out 5\n{'987654 ' * 3}" in text  # the last step verbatim


# --------------------------------------------------------------------------------------------- call log and agent
def test_call_log_records_the_fit_and_turns_a_refusal_into_context_exceeded():
    calls = CallLog(fitter=ContextFitter({"executor": 64}))
    model = ScriptedModel(["ok"], context_window=4096)
    calls.complete(model, conversation(1), "executor")
    assert calls.calls[0].context_fit["window"] == 4096
    assert model.calls
    assert calls.calls[0].error is None

    class Refusing:
        context_window = None

        def complete(self, messages, **params):
            raise ContextLengthError("the prompt does not fit (HTTP 400: maximum context length is 2048 tokens)",
                                     window=2048)

    with pytest.raises(ContextExceeded):
        calls.complete(Refusing(), conversation(1), "executor")
    assert calls.calls[-1].error.startswith("context_exceeded")
    assert calls.calls[-1].to_dict()["prompt_tokens"] == 0


@pytest.fixture
def env(tmp_path):
    return TinyEnv([4, 7], workdir=tmp_path / "ws")


def solve(env, model, **config):
    task = env.tasks()[0]
    episode = env.start(task)
    try:
        result = Agent(model, **{"harness": "small-model", **config}).run(episode)
        return result, episode.evaluate()
    finally:
        episode.close()


def test_long_observations_are_elided_and_the_task_still_succeeds(env):
    model = ScriptedModel(HistoryScript(reads=8), context_window=3072)
    result, score = solve(env, model)
    assert score.success
    assert result.exit_status == "submitted"
    fits = [c.context_fit for c in result.calls.calls]
    assert all(f is not None for f in fits)
    assert result.calls.fitted_calls > 0
    assert max(c.prompt_tokens for c in result.calls.calls) <= 3072 - 512 - margin_tokens(3072)
    task_message = result.contexts[0][1]["content"]
    assert all(call[1]["content"].startswith(task_message) for call in model.calls)  # kept (a note may follow)


def test_a_system_prompt_that_cannot_fit_ends_the_task_as_context_exceeded(tmp_path):
    env = TinyEnv([4], workdir=tmp_path / "ws", docs_padding=6000)
    model = ScriptedModel(CounterScript(), context_window=1024)
    result, score = solve(env, model)
    assert result.exit_status == "context_exceeded"
    assert not score.success
    assert not model.calls  # nothing was sent
    assert result.calls.calls[0].error.startswith("context_exceeded")


def test_subtask_agent_planner_that_cannot_fit_ends_the_task(tmp_path):
    env = TinyEnv([4], workdir=tmp_path / "ws", docs_padding=6000)
    result, _ = solve(env, ScriptedModel(CounterScript(), context_window=1024), level="subtask")
    assert result.exit_status == "context_exceeded"
    assert [c.role for c in result.calls.calls] == ["planner"]


def test_summarizer_and_induction_that_cannot_fit_are_logged_and_the_task_goes_on(env, hash_embedder):
    from skilltransfer.induction import Inducer

    script = CounterScript()

    def reply(messages):
        return script(messages)

    model = ScriptedModel(reply, context_window=4096)
    memory = SkillMemory(hash_embedder)
    # summarizer and induction budgets larger than the window: those prompts can never fit
    result, score = solve(env, model, level="subtask", memory=memory, inducer=Inducer(model, format="text"),
                          role_max_tokens={"executor": 256, "planner": 64, "summarizer": 5000, "induction": 5000})
    assert score.success
    assert result.exit_status == "submitted"
    summaries = [s for s in result.steps if type(s).__name__ == "SummaryStep"]
    assert summaries
    assert all(s.status == "context_exceeded" for s in summaries)
    assert all(s.summary == "(nothing done yet)" for s in summaries)  # the previous summary is kept
    assert result.inductions
    assert all(s.status == "context_exceeded" for s in result.inductions)
    assert len(memory) == 0
    assert "summarizer" not in script.roles
    assert "induction" not in script.roles


def test_events_report_task_subtask_steps_and_calls(env):
    events = []
    solve(env, ScriptedModel(CounterScript()), level="subtask", on_event=events.append)
    kinds = [e.kind for e in events]
    assert kinds[0] == "task_start"
    assert kinds[-1] == "task_end"
    assert "subtask_start" in kinds
    starts = [e for e in events if e.kind == "step_start"]
    ends = [e for e in events if e.kind == "step_end"]
    assert [e.step_index for e in starts] == [e.step_index for e in ends] == list(range(len(starts)))
    assert {e.subtask_index for e in starts} == {0, 1}
    assert all(e.step_limit == 50 for e in starts)
    assert {e.role for e in events if e.kind == "call_end"} == {"planner", "executor", "summarizer"}
    assert all(e.tokens > 0 for e in events if e.kind == "call_end")


# --------------------------------------------------------------------------------------------- model layer
def test_estimate_tokens_counts_digits_one_by_one():
    assert estimate_tokens("") == 0
    assert estimate_tokens("2024") == 4
    assert estimate_tokens("hello world") == 2  # a word with its leading space is one piece
    assert estimate_tokens("a" * 40) == 1 + 37 // 4
    assert estimate_tokens("x = [1, 2]") == estimate_tokens("x = [1, 2]")


def test_prompt_counter_learns_overhead_and_only_raises_estimates():
    exact = PromptCounter(lambda text: len(text.split()), exact=True)
    messages = [{"role": "user", "content": "one two"}, {"role": "user", "content": "three"}]
    assert exact.count(messages) == 3 + 2 * 8
    exact.observe(messages, 3 + 11)  # ChatML: 5 per message + 3 for the assistant header
    assert exact.per_message == 6
    assert exact.count(messages) == 3 + 12
    rough = PromptCounter()
    before = rough.count(messages)
    rough.observe(messages, 1)  # the server counted fewer: the estimate is kept
    assert rough.count(messages) == before
    rough.observe(messages, before * 3)
    assert rough.count(messages) >= before * 3 - 1


BODIES = [
    ("openai", 400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 8223 "
     "tokens. Please reduce the length of the messages.",
     {"error": {"message": "...", "type": "invalid_request_error", "code": "context_length_exceeded"}}, 8192, 8223),
    ("vllm", 400, "Error code: 400", {"object": "error", "type": "BadRequestError", "code": 400, "message":
     "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (1600 in the messages, "
     "500 in the completion). Please reduce the length of the messages or completion."}, 2048, 2100),
    ("vllm-new", 400, "The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure "
     "that `max_model_len` is no smaller than the number of text tokens.", None, 8192, 9000),
    ("llama-server", 400, "request (8708 tokens) exceeds the available context size (8192 tokens), try increasing it",
     {"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 8708, "n_ctx": 8192}},
     8192, 8708),
    ("llama-server-old", 500, "the request exceeds the available context size. try increasing the context size or "
     "enable context shift", {"error": {"code": 500, "type": "exceed_context_size_error", "n_prompt_tokens": 1407,
                                        "n_ctx": 256}}, 256, 1407),
    ("tgi", 422, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` "
     "tokens and 500 `max_new_tokens`", None, 4096, None),
    ("anthropic", 400, "prompt is too long: 210000 tokens > 200000 maximum", None, 200000, 210000),
]


@pytest.mark.parametrize(("name", "status", "message", "body", "window", "requested"), BODIES,
                         ids=[b[0] for b in BODIES])
def test_context_length_errors_are_classified(name, status, message, body, window, requested):
    error = classify_context_error(status, message, body)
    assert isinstance(error, ContextLengthError)
    assert (error.window, error.requested) == (window, requested)
    assert "does not fit the model's context window" in str(error)


@pytest.mark.parametrize(("status", "message"), [(400, "temperature must be between 0 and 2"), (401, "bad key"),
                                                 (500, "internal error"), (404, "maximum context length is 8")])
def test_other_errors_are_not_context_errors(status, message):
    assert classify_context_error(status, message, {"error": {"message": message}}) is None


def test_window_from_models_listing():
    assert window_from_models({"data": [{"id": "a", "max_model_len": 4096}]}, "a") == 4096
    assert window_from_models({"data": [{"id": "x", "meta": {"n_ctx_train": 32768}}]}) == 32768
    assert window_from_models({"data": [{"id": "a", "context_length": 1000}, {"id": "b", "context_length": 2000}]},
                              "b") == 2000
    assert window_from_models({"data": [{"id": "a"}]}, "a") is None
    assert window_from_models({"oops": 1}) is None


@pytest.mark.parametrize("style", ["vllm", "openai", "llamacpp"])
def test_the_client_probes_the_window_and_learns_it_from_a_refusal(style):
    prompt = [{"role": "user", "content": "word " * 3000}]
    with MockServer(["ok", "ok"], context_window=2048, context_error=style) as server:
        assert server.model().context_window == 2048  # from /v1/models (max_model_len)
        configured = server.model(context_window=100_000)
        assert configured.context_window == 100_000
        with pytest.raises(ContextLengthError) as caught:
            configured.complete(prompt, max_tokens=10)
        assert configured.context_window == 2048  # learnt from the refusal
        assert caught.value.window == 2048
        assert server.context_refusals == 1
        assert len(server.requests) == 1  # never retried
    with MockServer(["ok"], context_window=2048, advertise_window=False) as server:
        assert server.model().context_window is None


def test_window_from_the_environment(monkeypatch):
    with MockServer(["ok"]) as server:
        monkeypatch.setenv("SKILLTRANSFER_CONTEXT_WINDOW", "4096")
        assert server.model().context_window == 4096


def test_client_counts_and_calibrates_from_server_usage():
    with MockServer(["ok"]) as server:
        model = server.model()
        messages = [{"role": "user", "content": "hello " * 400}]  # the mock counts chars / 4: more than estimated
        assert count_prompt_tokens(model, messages)[0] < messages_tokens(messages)
        model.complete(messages)
        assert count_prompt_tokens(model, messages)[0] >= messages_tokens(messages)


def test_wrappers_pass_window_and_counts_through_and_the_cache_replays_them(tmp_path):
    inner = ScriptedModel(["ok", "ok"], context_window=3000)
    wrapped = FaultyModel(inner, rate=0.0)
    messages = [{"role": "user", "content": "hello there"}]
    assert context_window(wrapped) == 3000
    assert count_prompt_tokens(wrapped, messages) == (messages_tokens(messages), "approx")
    path = tmp_path / "cache.sqlite"
    recording = CachedModel(inner, ResponseCache(path, "rw"))
    assert context_window(recording) == 3000
    assert count_prompt_tokens(recording, messages)[0] == messages_tokens(messages)
    recording.complete(messages)

    class Absent:  # a replay has no model to ask
        model = "scripted"

        def complete(self, messages, **params):
            raise AssertionError("replay called the model")

    replay = CachedModel(Absent(), ResponseCache(path, "ro"))
    assert context_window(replay) == 3000
    assert count_prompt_tokens(replay, messages)[0] == messages_tokens(messages)
    assert replay.complete(messages).text == "ok"


def test_cache_written_before_facts_is_still_replayable(tmp_path):
    path = tmp_path / "old.sqlite"
    CachedModel(ScriptedModel(["ok"]), ResponseCache(path, "rw")).complete([{"role": "user", "content": "hi"}])
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE facts")
    replay = CachedModel(ScriptedModel([]), ResponseCache(path, "ro"))
    assert context_window(replay) is None
    assert replay.complete([{"role": "user", "content": "hi"}]).text == "ok"


def test_local_model_window_is_the_server_context(tmp_path):
    from skilltransfer.llm.config import ModelConfig
    from skilltransfer.llm.local import LocalModel, fit_ctx

    model = LocalModel(ModelConfig(name="local", ctx=4096))  # the server is not started
    assert context_window(model) == fit_ctx(4096)
    command = model.server.command(tmp_path / "model.gguf")
    assert command[command.index("--n_ctx") + 1] == str(context_window(model))
    assert LocalModel(ModelConfig(name="local", context_window=2048)).context_window == fit_ctx(2048)


def test_elided_forms_are_one_line_and_never_longer():
    from skilltransfer.agents.context import cut_skill, elide_observation, elide_reply

    skill = Skill(name="set-counter", description="Set it.", body="1. reset the counter\n2. add " * 20).render()
    assert cut_skill(skill) == "### Skill: set-counter [cut to fit the context]\n"
    observation = "Observation:\nTraceback (most recent call last):\n" + "  line\n" * 50
    assert elide_observation(observation).count("\n") == 0
    assert "Traceback (most recent call last):" in elide_observation(observation)
    reply = "I will search.\n```python\nresult = apis.email.search(query='x')\nprint(result)\n```" + " " * 200
    assert "result = apis.email.search" in elide_reply(reply)
    for short in ("3", "ok", "```python\nx\n```"):
        assert elide_observation(short) == short
        assert elide_reply(short) == short
