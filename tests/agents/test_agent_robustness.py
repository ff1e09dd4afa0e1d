"""Harness features against small-model failure modes: stop/trim of invented observations, unterminated code
blocks, stuck detection, refusal of premature DONE / SUBTASK DONE, and the hint for importing a namespace object."""

from __future__ import annotations

import pytest
from helpers_tinyenv import TinyEnv, role_of, solve_first_task

from skilltransfer.agents import PlanStep
from skilltransfer.agents.harness.observations import api_hint, detect, import_hint, normalise_code
from skilltransfer.agents.harness.reply_forms import trim_reply
from skilltransfer.agents.replies import parse_action, uncopied
from skilltransfer.induction import Inducer
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import ActionStep, SummaryStep
from skilltransfer.memory import SkillMemory
from skilltransfer.skill import Skill


@pytest.fixture
def env(tmp_path):
    return TinyEnv([4, 7], workdir=tmp_path / "ws")



def step(code: str | None, observation: str, *, error: bool = False) -> ActionStep:
    return ActionStep(index=0, subtask_index=None, reply="", thought="", action=code, observation=observation,
                      error=error)


def test_parse_action_accepts_a_block_cut_by_a_stop_sequence_but_not_by_the_token_limit():
    assert parse_action("Look.\n```python\nprint(1)\n") == ("Look.", "print(1)\n", 1)
    assert parse_action("Look.\n```python\nprint(1)\n", complete=False)[1] is None
    assert parse_action("Look.\n```python\n")[1] is None  # nothing after the fence is not code
    assert parse_action("```python\nx = 1\n```\n```python\ny")[1:] == ("x = 1\n", 1)  # the closed one wins


def test_trim_reply_cuts_an_invented_observation_after_the_code():
    reply = ("Read it.\n```python\nprint(x)\n```\nObservation: 42\nSo the answer is 42.\n"
             "```python\ncomplete_task(42)\n```")
    assert trim_reply(reply) == "Read it.\n```python\nprint(x)\n```"
    thinking = "Observation: first I think\n```python\nx\n```"
    assert trim_reply(thinking) == thinking
    assert trim_reply("no code, Observation: here") == "no code, Observation: here"


def test_api_hint_lists_the_objects_documented_apis():
    docs = ("  apis.excel.read_file(file_path): rows\n"
            "  apis.excel.set_cell(file_path, row_idx, column_idx, text): set\n"
            "  apis.email.send_email(sender, recipient, subject, content): send")
    error = "Traceback ...\nAttributeError: 'ExcelApp' object has no attribute 'delete_file'\n"
    hint = api_hint(error, "apis.excel.delete_file('data/a.xlsx')\n", docs)
    assert "`apis.excel` has no API `delete_file`" in hint
    assert "read_file, set_cell." in hint
    assert "send_email" not in hint
    assert api_hint(error, "x = apis.word.delete_file('a')", docs) == ""  # an object the docs do not document
    assert api_hint(error, "print(1)", docs) == ""  # the attribute is not in the code
    assert api_hint("NameError: name 'x' is not defined", "apis.excel.x", docs) == ""


def test_import_hint_only_for_documented_objects():
    error = "Traceback...\nModuleNotFoundError: No module named 'apis'"
    assert "already defined in your namespace" in import_hint(error, "call apis.email.login(...)")
    assert import_hint("ModuleNotFoundError: No module named 'apis.word'", "apis.word.read()") != ""
    assert import_hint("ModuleNotFoundError: No module named 'numpyy'", "call apis.email.login(...)") == ""
    assert import_hint("NameError: x", "apis.x") == ""


def _token_loop() -> list[ActionStep]:
    """A wrong login and a right one, alternating; each right one prints a new access token."""
    steps = []
    for token in ("9ba644a52f83035d", "09e2365794e19e35", "4f1c0b9e77a2d310"):
        steps += [step("login('x')", "ApiError: no account", error=True),
                  step("t = login(u, p)", f"{{'access_token': 'contacts-{token}', 'token_type': 'Bearer'}}")]
    return steps


@pytest.mark.parametrize(("steps", "pattern"), [
    ([step("f()", "ValueError: bad", error=True)] * 3, "repeated_error"),
    ([step("f()  # try again", "ValueError: bad", error=True), step("f()", "ValueError:  bad", error=True),
      step("\nf()\n", "ValueError: bad", error=True)], "repeated_error"),
    ([step("print(1)", "1")] * 4, "repeated_action"),
    ([step("a()", "E1", error=True), step("b()", "E2", error=True)] * 3, "alternation"),
    ([step(None, "FORMAT ERROR")] * 3, "no_action"),
    ([step(None, "FORMAT ERROR"), step("print('hello')", "hello")] * 3, "alternation"),
    ([step("a()", "E1", error=True), step("import os", ""), step("c()", "E3", error=True)] * 2, "cycle"),
    (_token_loop(), "alternation"),  # a fresh access token in every other observation: still a loop
])
def test_stuck_patterns(steps, pattern):
    assert detect(steps).pattern == pattern


@pytest.mark.parametrize("steps", [
    [step("f()", "ValueError: bad", error=True)] * 2,
    [step("f()", "ValueError: bad", error=True), step("f()", "ValueError: other", error=True),
     step("f()", "ValueError: bad", error=True)],
    [step("print(1)", "1")] * 3,
    [step(f"add({i})", str(i)) for i in range(8)],
    [step("print(n)", n) for n in ["123456789012", "123456789013", "123456789014", "123456789015"]],  # digits only
    [step("a()", "E1", error=True), step("b()", "E2", error=True)] * 2 + [step("c()", "E3", error=True)],
    ([step("a()", "E1", error=True), step("b()", "E2", error=True), step("c()", "E3", error=True)] * 2)[:5]
    + [step("c()", "E4", error=True)],  # the cycle's last observation changed
])
def test_not_stuck(steps):
    assert detect(steps) is None


def test_normalise_code_ignores_comments_and_blank_lines():
    assert normalise_code("# try\nx = 1\n\n  \ny = 2  # c") == normalise_code("x=1\ny = 2")
    assert normalise_code("print('#1')") != normalise_code("print('#2')")
    assert normalise_code("if x:\n  (") == "if x: ("  # does not tokenize: whitespace collapsed
    assert normalise_code(None) == ""


def test_repeated_failing_code_gets_a_hint_then_ends_the_task(env):
    model = ScriptedModel(lambda messages: "Retry.\n```python\napis.counter.add('x')\n```")
    result, score = solve_first_task(env, model, step_limit=20)
    assert not score.success
    assert result.exit_status == "stuck"
    actions = result.actions
    assert [a.stuck for a in actions] == [None, None, "repeated_error", "repeated_error"]  # ignored the hint: ends
    assert "(stuck: You have run the same code 3 times" in actions[2].observation
    assert "(stuck:" in model.calls[3][-1]["content"]  # the hint reached the model
    assert len(model.calls) == 4
    assert [p.get("temperature") for p in model.params] == [None, None, None, 0.8]  # resampled after the hint


def test_a_step_that_changes_after_the_hint_goes_on_until_a_loop_shows_again(env):
    replies = iter(["```python\napis.counter.add('x')\n```"] * 3 + ["```python\nprint(apis.counter.get())\n```"]
                   + ["```python\napis.counter.add('y')\n```"] * 3)
    result, _ = solve_first_task(env, ScriptedModel(lambda messages: next(replies)), step_limit=20)
    assert result.exit_status == "stuck"
    assert [a.stuck for a in result.actions] == [None, None, "repeated_error", None, None, None, "repeated_error"]


def test_stuck_detection_can_be_switched_off(env):
    model = ScriptedModel(lambda messages: "```python\napis.counter.add('x')\n```")
    result, _ = solve_first_task(env, model, step_limit=6, stuck_detection=False)
    assert result.exit_status == "limits_exceeded"
    assert all(a.stuck is None for a in result.actions)


def test_invented_observation_never_enters_the_context(env):
    replies = iter(["Add.\n```python\nprint(apis.counter.add(4))\n```\nObservation: 4\n```python\ncomplete_task()\n```",
                    "```python\ncomplete_task()\n```"])
    model = ScriptedModel(lambda messages: next(replies))
    result, score = solve_first_task(env, model)
    assert score.success
    assert model.params[0]["stop"] == ["\nObservation:"]
    assert model.calls[1][2]["content"] == "Add.\n```python\nprint(apis.counter.add(4))\n```"
    assert "Observation: 4" in result.actions[0].reply  # the log keeps the raw reply


def test_premature_subtask_done_is_refused_once(env):
    executor_replies = iter(["SUBTASK DONE: done already", "```python\nprint(apis.counter.add(4))\n```",
                             "SUBTASK DONE: set to 4"])

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: set the counter to 4" if "(none yet)" in messages[-1]["content"] else "DONE"
        if role == "summarizer":
            return "- counter is 4"
        return next(executor_replies)

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    actions = result.actions
    assert actions[0].refused == "premature_subtask_done"
    assert "REFUSED" in actions[0].observation
    assert actions[1].action is not None
    assert actions[2].observation == "(subtask marked done)"


def test_subtask_done_after_only_failing_code_is_refused_once(env):
    """Code ran, but all of it failed: the report would be a traceback, so the first SUBTASK DONE is refused."""
    executor_replies = iter(["```python\nprint(apis.counter.nope())\n```", "SUBTASK DONE: it failed",
                             "```python\nprint(apis.counter.add(4))\n```", "SUBTASK DONE: set to 4"])

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: set the counter to 4" if "(none yet)" in messages[-1]["content"] else "DONE"
        return "- counter is 4" if role == "summarizer" else next(executor_replies)

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    actions = result.actions
    assert actions[0].error
    assert actions[1].refused == "failed_subtask_done"
    assert "every code block you ran for this subtask ended in an error" in actions[1].observation
    assert [a.refused for a in actions[2:]] == [None, None]
    assert actions[3].observation == "(subtask marked done)"


def test_second_premature_subtask_done_is_accepted(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: look" if "(none yet)" in messages[-1]["content"] else "DONE"
        return "- nothing" if role == "summarizer" else "SUBTASK DONE: nothing to do"

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    assert [a.refused for a in result.actions] == ["premature_subtask_done", None]


def test_planner_done_before_any_subtask_is_refused_once(env):
    replies = iter(["DONE", "DONE"])
    model = ScriptedModel(lambda messages: next(replies))
    result, _ = solve_first_task(env, model, level="subtask")
    plan = result.steps[0]
    assert isinstance(plan, PlanStep)
    assert plan.decision == "done"
    assert plan.refused_reply == "DONE"
    assert "REFUSED" in model.calls[1][-1]["content"]
    assert result.exit_status == "planner_done"


def test_planner_done_before_complete_task_is_refused_once_per_task(env):
    """A DONE after subtasks ran, with nobody having called complete_task, is refused once; the planner then plans
    the call and the task is submitted. The refusal says why."""
    executor_replies = iter(["```python\nprint(apis.counter.add(4))\n```", "SUBTASK DONE: counter is 4",
                             "```python\ncomplete_task()\n```"])

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            if "(none yet)" in messages[1]["content"]:
                return "SUBTASK: set the counter to 4"
            return "SUBTASK: call complete_task()" if "REFUSED" in messages[-1]["content"] else "DONE"
        return "- counter is 4" if role == "summarizer" else next(executor_replies)

    result, score = solve_first_task(env, ScriptedModel(script), level="subtask")
    plans = [s for s in result.steps if isinstance(s, PlanStep)]
    assert [(p.decision, p.refused) for p in plans] == [("subtask", None), ("subtask", "unfinished_planner_done")]
    assert plans[1].refused_reply == "DONE"
    assert result.exit_status == "submitted"
    assert score.success


def test_a_second_unfinished_planner_done_in_a_task_is_accepted(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: look" if "(none yet)" in messages[1]["content"] else "DONE"
        if role == "summarizer":
            return "- looked"
        return "```python\nprint(apis.counter.get())\n```" if messages[-1]["role"] != "user" or \
            "Observation" not in messages[-1]["content"] else "SUBTASK DONE: it is 0"

    model = ScriptedModel(script)
    result, score = solve_first_task(env, model, level="subtask", close_unfinished=False)
    plans = [s for s in result.steps if isinstance(s, PlanStep)]
    assert [(p.decision, p.refused) for p in plans] == [("subtask", None), ("done", "unfinished_planner_done")]
    assert result.exit_status == "planner_done"
    assert not score.success
    refusals = [m[-1]["content"] for m in model.calls if m[-1]["content"].startswith("REFUSED")]
    assert len(refusals) == 1
    assert "complete_task` has not been called" in refusals[0]


def test_planner_refusal_can_be_switched_off(env):
    model = ScriptedModel(["DONE"])
    result, _ = solve_first_task(env, model, level="subtask", refuse_premature_done=False)
    assert result.steps[0].refused_reply is None
    assert len(model.calls) == 1


def _replanning_script(messages):
    """The planner plans the same subtask every time; the executor repeats one failing action."""
    role = role_of(messages)
    if role == "planner":
        return "SUBTASK: Add  the value"
    if role == "summarizer":
        return "- tried to add"
    return "Retry.\n```python\napis.counter.add('x')\n```"


def test_a_stuck_subtask_planned_again_ends_the_task(env):
    model = ScriptedModel(_replanning_script)
    result, _ = solve_first_task(env, model, level="subtask", step_limit=30)
    assert result.exit_status == "stuck"
    plans = [s for s in result.steps if isinstance(s, PlanStep)]
    assert len(plans) == 2  # the second plan repeats the stuck subtask: the task ends before it runs
    assert [a.subtask_index for a in result.actions] == [0] * 4


def test_a_different_subtask_after_a_stuck_one_runs(env):
    plans = iter(["SUBTASK: Add the value", "SUBTASK: Add the value another way", "DONE", "DONE"])  # one refused

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return next(plans)
        return "- tried to add" if role == "summarizer" else "Retry.\n```python\napis.counter.add('x')\n```"

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False, step_limit=30)
    assert result.exit_status == "planner_done"
    assert [a.subtask_index for a in result.actions] == [0] * 4 + [1] * 4


def test_a_stuck_subtask_copied_from_the_history_line_ends_the_task(env):
    """A planner that copies its history line (``<subtask> -> stuck: ...``) plans that subtask again."""
    plans = iter(["SUBTASK: Add the value", "SUBTASK: Add the value -> stuck: stuck: failing_action"])

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return next(plans)
        return "- tried to add" if role == "summarizer" else "Retry.\n```python\napis.counter.add('x')\n```"

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", step_limit=30)
    plans_made = [s for s in result.steps if isinstance(s, PlanStep)]
    assert plans_made[1].subtask == "Add the value"
    assert result.exit_status == "stuck"


def test_uncopied_drops_the_history_line_form():
    assert uncopied("2. Read the file -> subtask_done: 3 rows") == "Read the file"
    assert uncopied("List the files. -> stuck: stuck: repeated_action") == "List the files."
    assert uncopied("Map a -> b") == "Map a -> b"
    assert uncopied("2. Read the file") == "2. Read the file"


def _one_subtask_script(executor_replies, subtask="set the counter to 4", summary="- counter is 4"):
    """The planner plans ``subtask`` once, then says DONE; the executor sends ``executor_replies`` in turn."""
    replies = iter(executor_replies)

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return f"SUBTASK: {subtask}" if "(none yet)" in messages[-1]["content"] else "DONE"
        return summary if role == "summarizer" else next(replies)

    return script


def test_subtask_done_with_a_repeat_of_code_that_ran_ends_the_subtask(env):
    code = "```python\nprint(apis.counter.add(4))\n```"
    script = _one_subtask_script([f"SUBTASK DONE: 4\n\n{code}", f"SUBTASK DONE: the counter is 4\n\n{code}"])
    model = ScriptedModel(script)
    result, _ = solve_first_task(env, model, level="subtask", close_unfinished=False)
    assert len(result.actions) == 2
    first, second = result.actions
    assert first.observation.strip() == "4"  # the first time, the code runs
    assert "repeats step 1" in second.observation
    assert "not run again" in second.observation
    planner_calls = [messages for messages in model.calls if role_of(messages) == "planner"]
    assert "1. set the counter to 4 -> subtask_done: the counter is 4" in planner_calls[1][1]["content"]


def test_subtask_done_with_new_or_failed_code_runs_it(env):
    failing = "```python\napis.counter.add('x')\n```"
    script = _one_subtask_script([f"SUBTASK DONE: 4\n\n{failing}", f"SUBTASK DONE: 4\n\n{failing}",
                                     "SUBTASK DONE: gave up", "SUBTASK DONE: gave up"])
    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    assert [a.error for a in result.actions[:2]] == [True, True]  # a failed step is no result to report
    assert [a.refused for a in result.actions[2:]] == ["failed_subtask_done", None]  # refused once, then it stands


def test_done_on_repeat_can_be_switched_off(env):
    code = "```python\nprint(apis.counter.add(1))\n```"
    script = _one_subtask_script([f"SUBTASK DONE: 1\n\n{code}", f"SUBTASK DONE: 2\n\n{code}", "SUBTASK DONE: 2"])
    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False,
                                 done_on_repeat=False)
    assert [a.observation.strip() for a in result.actions[:2]] == ["1", "2"]


def test_a_subtask_done_line_in_a_code_fence_is_the_done_reply(env):
    script = _one_subtask_script(["```python\nprint(apis.counter.add(4))\n```",
                                     "I print it.\n```python\nSUBTASK DONE: the counter is 4\n```"])
    model = ScriptedModel(script)
    result, _ = solve_first_task(env, model, level="subtask", close_unfinished=False)
    assert [a.observation for a in result.actions][1] == "(subtask marked done)"
    assert result.actions[1].action is None
    planner_calls = [messages for messages in model.calls if role_of(messages) == "planner"]
    assert "-> subtask_done: the counter is 4\n" in planner_calls[1][1]["content"] + "\n"


def test_a_summary_ends_before_an_invented_heading(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: set the counter to 4" if "(none yet)" in messages[-1]["content"] else "DONE"
        if role == "summarizer":
            return "- counter is 4\n\n## Subtask just executed\nList the files."
        return "```python\nprint(apis.counter.add(4))\n```" if len(messages) < 4 else "SUBTASK DONE: 4"

    model = ScriptedModel(script)
    result, _ = solve_first_task(env, model, level="subtask")
    summaries = [s for s in result.steps if isinstance(s, SummaryStep)]
    assert summaries[0].summary == "- counter is 4"
    summarizer_params = [p for c, p in zip(model.calls, model.params, strict=True) if role_of(c) == "summarizer"]
    assert summarizer_params[0]["stop"] == ["\n#"]


def test_a_done_that_stands_without_complete_task_is_followed_by_the_closing_subtask(env, hash_embedder):
    """After the refused and the repeated DONE, the harness plans one closing subtask; the executor submits there.
    Its retrieval queries with the instruction (the closing text is the same for every task)."""
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: set the counter to 4" if "(none yet)" in messages[1]["content"] else "DONE"
        if role == "summarizer":
            return "- counter is 4"
        if "Finish the task now" in messages[-1]["content"]:
            return "```python\ncomplete_task()\n```"
        return "```python\nprint(apis.counter.add(4))\n```" if len(messages) < 4 else "SUBTASK DONE: 4"

    memory = SkillMemory(hash_embedder)
    memory.add(Skill(name="counter", description="Set the counter to a value.", body="add"))
    result, score = solve_first_task(env, ScriptedModel(script), level="subtask", memory=memory)
    plans = [s for s in result.steps if isinstance(s, PlanStep)]
    assert [p.decision for p in plans] == ["subtask", "done", "closing"]
    assert plans[-1].subtask.startswith("Finish the task now")
    assert [(r.query_kind, r.query) for r in result.retrievals] == [("subtask", "set the counter to 4"),
                                                                    ("instruction", "Set the counter to 4.")]
    assert result.exit_status == "submitted"
    assert score.success


def test_a_closing_subtask_that_does_not_submit_ends_the_task(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: look" if "(none yet)" in messages[1]["content"] else "DONE"
        if role == "summarizer":
            return "- looked"
        return "```python\nprint(apis.counter.get())\n```" if len(messages) < 4 else "SUBTASK DONE: it is 0"

    model = ScriptedModel(script)
    result, _ = solve_first_task(env, model, level="subtask")
    assert [p.decision for p in result.steps if isinstance(p, PlanStep)] == ["subtask", "done", "closing"]
    assert result.exit_status == "planner_done"
    assert sum(role_of(m) == "planner" for m in model.calls) == 3  # subtask, DONE (refused) + DONE; none after


def test_trim_reply_cuts_a_done_report_written_before_the_code_ran():
    reply = "Look.\n```python\nprint(1)\n```\nSUBTASK DONE: 23 rows, all fine\nmore"
    assert trim_reply(reply) == "Look.\n```python\nprint(1)\n```"
    assert trim_reply("SUBTASK DONE: 1\n```python\nprint(1)\n```") == "SUBTASK DONE: 1\n```python\nprint(1)\n```"


def test_a_subtask_report_with_an_unseen_number_is_refused_twice(env):
    script = _one_subtask_script([
        "```python\nprint(apis.counter.add(4))\n```", "SUBTASK DONE: the counter is 4, 37 steps left",
        "```python\nprint(apis.counter.get() + 1)\n```", "SUBTASK DONE: the counter is 4, 38 steps left",
        "SUBTASK DONE: the counter is 4, 38 steps left"])
    model = ScriptedModel(script)
    result, _ = solve_first_task(env, model, level="subtask", close_unfinished=False)
    first, _, refused, accepted = result.actions[1:5]
    assert first.refused == "ungrounded_report"
    assert "previous refusal" not in first.observation
    assert refused.refused == "ungrounded_report"
    assert '"38"' in refused.observation
    assert '"4"' not in refused.observation  # the output showed 4
    assert "The output of your code after the previous refusal:\n5\nReport what it shows." in refused.observation
    assert accepted.observation == "(subtask marked done)"


def test_a_subtask_report_of_numbers_from_the_task_message_is_accepted(env):
    script = _one_subtask_script(["```python\nprint(apis.counter.get())\n```", "SUBTASK DONE: the target is 4"],
                                 subtask="find the target", summary="- target 4")
    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    assert result.actions[1].refused is None


def _planned_script(plans, executor_replies):
    """The planner sends ``plans`` in turn, the executor ``executor_replies``; the summarizer one line."""
    plans, replies = iter(plans), iter(executor_replies)

    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return next(plans, "DONE")
        return "- counter is 4" if role == "summarizer" else next(replies)

    return script


def test_complete_task_in_a_subtask_that_did_not_ask_for_it_is_refused_once(env):
    both = "```python\nprint(apis.counter.add(4))\ncomplete_task()\n```"
    script = _planned_script(["SUBTASK: set the counter to 4", "SUBTASK: call complete_task()"],
                             [both, "```python\nprint(apis.counter.add(4))\n```", "SUBTASK DONE: the counter is 4",
                              "```python\ncomplete_task()\n```"])
    result, score = solve_first_task(env, ScriptedModel(script), level="subtask")
    refused, added = result.actions[:2]
    assert refused.refused == "early_completion"
    assert "was not run" in refused.observation
    assert "set the counter to 4" in refused.observation
    assert added.observation.strip() == "4"  # the refused code did not run: the counter was still 0
    assert score.success
    assert result.exit_status == "submitted"


def test_early_completion_is_refused_once_per_task_and_can_be_switched_off(env, tmp_path):
    both = "```python\nprint(apis.counter.add(4))\ncomplete_task()\n```"
    script = _planned_script(["SUBTASK: set the counter to 4"], [both, both])
    result, score = solve_first_task(env, ScriptedModel(script), level="subtask")
    assert [a.refused for a in result.actions] == ["early_completion", None]
    assert score.success
    assert result.exit_status == "submitted"
    script = _planned_script(["SUBTASK: set the counter to 4"], [both])
    result, score = solve_first_task(TinyEnv([4], workdir=tmp_path / "off"), ScriptedModel(script), level="subtask",
                                     refuse_early_completion=False)
    assert [a.refused for a in result.actions] == [None]
    assert score.success


@pytest.mark.parametrize("subtask", ["Submit the answer 4", "Set the counter to 4 and complete the task.",
                                     "call complete_task() now"])
def test_a_subtask_that_asks_for_completion_may_complete(env, subtask):
    script = _planned_script([f"SUBTASK: {subtask}"], ["```python\nprint(apis.counter.add(4))\ncomplete_task()\n```"])
    result, score = solve_first_task(env, ScriptedModel(script), level="subtask")
    assert [a.refused for a in result.actions] == [None]
    assert score.success


def test_a_report_claiming_a_change_no_code_made_is_refused(env):
    report = "SUBTASK DONE: the counter was updated"
    script = _one_subtask_script(["```python\nprint(apis.counter.get())\n```", report,
                                  "```python\nprint(apis.counter.add(4))\n```", report])
    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", close_unfinished=False)
    refused, added, accepted = result.actions[1:4]
    assert refused.refused == "ungrounded_report"
    assert '"the counter was updated" says updated' in refused.observation
    assert "are get" in refused.observation  # the functions it called, print left out
    assert added.observation.strip() == "4"
    assert accepted.observation == "(subtask marked done)"


def test_unmade_change_reads_function_names():
    from skilltransfer.agents.harness.grounding import unmade_change

    reading = "events = apis.calendar.list_events(username)\nprint(events)"
    assert unmade_change("The event is now removed from the calendar.", [reading]) == "removed"
    assert unmade_change("Removed.", [reading, "apis.calendar.delete_event(username, 'x')"]) is None
    assert unmade_change("Sent it.", ["apis.mail.sendEmail(to='x')"]) is None  # camelCase names too
    assert unmade_change("found 3 rows", [reading]) is None  # no change claimed
    assert unmade_change("deleted", ["apis.calendar.delete_event(username, 'x'"]) is None  # does not parse


def test_ungrounded_lines_drops_new_lines_with_unseen_numbers_or_unmade_changes():
    from skilltransfer.agents.harness.grounding import ungrounded_lines

    reading = "rows = apis.excel.read_file('data/s.xlsx')"
    summary = "- rows: 465, 969\n- sum_units = 3040\n- Forwarded email to Paul\n- old: 12 left"
    kept, dropped = ungrounded_lines(summary, "- old: 12 left", ["[['printer', 465], ['webcam', 969]]"], [reading])
    assert kept == "- rows: 465, 969\n- old: 12 left"  # a line of the previous summary is not checked again
    assert dropped == ["- sum_units = 3040", "- Forwarded email to Paul"]
    kept, dropped = ungrounded_lines("- Forwarded email to Paul", "", [], ["apis.email.send_email('a', 'b', 'c', 'd')"])
    assert (kept, dropped) == ("- Forwarded email to Paul", [])


def _summary_script(summary: str):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: add 4" if "(none yet)" in messages[1]["content"] else "SUBTASK: call complete_task()"
        if role == "summarizer":
            return summary
        if "call complete_task()" in messages[-1]["content"].split("# Current subtask")[-1]:
            return "```python\ncomplete_task()\n```"
        return "```python\nprint(apis.counter.add(4))\n```" if len(messages) < 4 else "SUBTASK DONE: the counter is 4"
    return script


def test_a_summary_line_with_an_unseen_number_is_dropped_and_logged(env):
    model = ScriptedModel(_summary_script("- the counter is 4\n- 17 steps are left\n- the counter was reset"))
    result, score = solve_first_task(env, model, level="subtask")
    summary = next(s for s in result.steps if isinstance(s, SummaryStep))
    assert summary.summary == "- the counter is 4\n- the counter was reset"  # reset() is not a change verb: kept
    assert summary.dropped == ["- 17 steps are left"]
    executor = [c for c in model.calls if role_of(c) == "executor"][-1]
    assert "17 steps" not in executor[-1]["content"]
    assert score.success
    result, _ = solve_first_task(env, ScriptedModel(_summary_script("- 17 steps are left")), level="subtask",
                                 ground_summary=False)
    assert next(s for s in result.steps if isinstance(s, SummaryStep)).summary == "- 17 steps are left"


def test_a_summary_of_only_ungrounded_lines_keeps_the_previous_summary(env):
    result, _ = solve_first_task(env, ScriptedModel(_summary_script("- 17 steps are left")), level="subtask")
    step = next(s for s in result.steps if isinstance(s, SummaryStep))
    assert step.summary == "(nothing done yet)"
    assert step.dropped == ["- 17 steps are left"]


def test_the_subtask_executor_sees_the_earlier_subtasks_and_their_reports(env):
    model = ScriptedModel(_summary_script("- the counter is 4"))
    solve_first_task(env, model, level="subtask")
    first, *_, last = [c for c in model.calls if role_of(c) == "executor"]
    assert "# Subtasks so far, with their reports\n(none yet)" in first[-1]["content"]
    task_message = next(m["content"] for m in last if m["role"] == "user" and "# Overall task" in m["content"])
    assert "# Subtasks so far, with their reports\n1. add 4 -> " in task_message
    assert "the counter is 4" in task_message.split("# Subtasks so far")[1]


def _failing_then(final: str):
    def script(messages):
        role = role_of(messages)
        if role == "induction":
            return "NAME: add_four\nDESCRIPTION: Add four to the counter.\nBODY:\n1. apis.counter.add(4)"
        n = sum(m["role"] == "assistant" for m in messages)
        return "```python\nprint(apis.counter.nope())\n```" if n == 0 else final
    return script


def test_no_skill_is_induced_from_a_trajectory_whose_code_all_failed(env, hash_embedder):
    from skilltransfer.log import InductionStep

    def run(final: str, **config):
        memory, model = SkillMemory(hash_embedder), ScriptedModel(_failing_then(final))
        result, _ = solve_first_task(env, model, memory=memory, inducer=Inducer(model), step_limit=2,
                                     stuck_detection=False, **config)
        return result, memory

    failing = "```python\nprint(apis.counter.nope(1))\n```"
    result, memory = run(failing)
    step = next(s for s in result.steps if isinstance(s, InductionStep))
    assert (step.status, step.reason) == ("skipped", "no code of this trajectory ran without an error")
    assert len(memory) == 0
    assert len(run(failing, induce_without_working_code=True)[1]) == 1
    assert len(run("```python\nprint(apis.counter.add(4))\n```")[1]) == 1  # one action that ran is enough


def test_undocumented_apis_lists_the_apis_a_skill_names_that_neither_docs_nor_code_show():
    from skilltransfer.agents.harness.grounding import undocumented_apis

    docs = "excel: Excel workbooks.\n  apis.excel.read_file(file_path): rows\n  apis.excel.set_cell(...)\n" \
           "- todo: APIs: login, show_todo_items"
    ran = ["rows = apis.excel.read_file('data/s.xlsx')\nprint(rows)", "apis.shop.buy(1)"]
    skill = "1. Load: `apis.excel.load_workbook(file_path='<path>')`.\n2. apis.excel.set_cell(<path>, 1, 1, 'x')"
    assert undocumented_apis(skill, docs, ran) == ["apis.excel.load_workbook"]
    assert undocumented_apis("apis.todo.show_todo_items, then apis.shop.buy", docs, ran) == []  # listed; or ran
    assert undocumented_apis("apis.email.send_email", docs, ran) == ["apis.email.send_email"]  # no such app
    assert undocumented_apis("Use openpyxl.", docs, ran) == []  # only the env's `apis` calls are checked


def test_a_skill_naming_an_api_the_docs_do_not_have_is_not_stored(env, hash_embedder):
    from skilltransfer.log import InductionStep

    def run(body: str, **config):
        def script(messages):
            if role_of(messages) == "induction":
                return f"NAME: set_counter\nDESCRIPTION: Set the counter.\nBODY:\n{body}"
            n = sum(m["role"] == "assistant" for m in messages)
            return "```python\nprint(apis.counter.add(4))\n```" if n == 0 else "```python\ncomplete_task()\n```"

        memory, model = SkillMemory(hash_embedder), ScriptedModel(script)
        result, _ = solve_first_task(env, model, memory=memory, inducer=Inducer(model), **config)
        return next(s for s in result.steps if isinstance(s, InductionStep)), memory

    step, memory = run("1. apis.counter.set_value(<n>)\n2. apis.counter.add(<n>)")
    assert step.status == "ungrounded"
    assert step.reason == "names apis.counter.set_value, which the env's docs do not document and no code ran"
    assert len(memory) == 0
    step, memory = run("1. apis.counter.reset()\n2. apis.counter.add(<n>)")  # reset is documented: kept
    assert (step.status, len(memory)) == ("added", 1)
    step, memory = run("1. apis.counter.set_value(<n>)", ground_skills=False)
    assert (step.status, len(memory)) == ("added", 1)


def _repeating_planner(messages):
    """Plans "look" until refused, then the completing subtask; the executor reads the counter or completes."""
    role = role_of(messages)
    if role == "planner":
        return "SUBTASK: call complete_task()" if "REFUSED" in messages[-1]["content"] else "SUBTASK: Look  at it"
    if role == "summarizer":
        return "- looked"
    if "complete_task" in messages[-1]["content"] and "Observation" not in messages[-1]["content"]:
        return "```python\ncomplete_task()\n```"
    return "```python\nprint(apis.counter.get())\n```" if "Observation" not in messages[-1]["content"] \
        else "SUBTASK DONE: it is 0"


def test_a_subtask_planned_again_after_it_was_done_is_refused_once_with_its_line(env):
    model = ScriptedModel(_repeating_planner)
    result, score = solve_first_task(env, model, level="subtask")
    plans = [s for s in result.steps if isinstance(s, PlanStep)]
    assert [(p.decision, p.subtask, p.refused) for p in plans] == [
        ("subtask", "Look  at it", None), ("subtask", "call complete_task()", "repeated_subtask")]
    assert plans[1].refused_reply == "SUBTASK: Look  at it"
    refusal = next(m[-1]["content"] for m in model.calls if m[-1]["content"].startswith("REFUSED"))
    assert "as subtask 1. Look  at it -> subtask_done: it is 0" in refusal
    assert result.exit_status == "submitted"


def test_a_repeated_subtask_runs_when_the_refusal_is_off(env):
    model = ScriptedModel(_repeating_planner)
    result, _ = solve_first_task(env, model, level="subtask", refuse_repeated_subtask=False, subtask_limit=3)
    plans = [s for s in result.steps if isinstance(s, PlanStep) and s.decision == "subtask"]
    assert [p.subtask for p in plans] == ["Look  at it"] * 3
    assert not any(m[-1]["content"].startswith("REFUSED: that subtask") for m in model.calls)


def test_the_planners_answer_after_a_repeat_refusal_stands(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: look at it"
        return "- looked" if role == "summarizer" else _repeating_planner(messages)

    result, _ = solve_first_task(env, ScriptedModel(script), level="subtask", subtask_limit=2)
    plans = [(s.subtask, s.refused) for s in result.steps if isinstance(s, PlanStep)]
    assert plans == [("look at it", None), ("look at it", "repeated_subtask")]
