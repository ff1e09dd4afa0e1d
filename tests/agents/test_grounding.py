"""The ungrounded-answer refusal: a literal complete_task answer whose parts no output showed is refused once."""

from __future__ import annotations

import pytest
from helpers_tinyenv import TinyEnv, role_of, solve_first_task

from skilltransfer.agents.harness.grounding import literal_answers, missing_numbers, missing_parts
from skilltransfer.llm.testing import ScriptedModel


def test_literal_answers_reads_keyword_and_positional_literals_only():
    assert literal_answers('complete_task(answer="Call the dentist")') == ["Call the dentist"]
    assert literal_answers("x = 1\ncomplete_task(42)") == ["42"]
    assert literal_answers("complete_task(answer=len(events))") == []  # computed in code: not checked
    assert literal_answers("complete_task()") == []
    assert literal_answers("complete_task(answer=True)") == []
    assert literal_answers("complete_task(answer=") == []  # does not parse
    assert literal_answers('apis.x.complete_task(answer="a")') == []  # not the harness's complete_task


def test_missing_parts_matches_numbers_by_value_and_words_by_word():
    outputs = ["[{'note_id': 21, 'title': 'Parking spot'}]", "Total: $1,045.20", "first_name: Ivan, last_name: Murphy"]
    assert missing_parts("1", outputs) == ["1"]  # 21 is not 1
    assert missing_parts("1045.2", outputs) == []
    assert missing_parts("$1,045.20", outputs) == []
    assert missing_parts("Ivan Murphy", outputs) == []  # the words may come from different fields
    assert missing_parts("The answer is Ivan Brennan", outputs) == ["brennan"]
    assert missing_parts("", outputs) == []
    assert missing_parts("555-939-6462", ["phone: 555-939-6462"]) == []


@pytest.fixture
def env(tmp_path):
    return TinyEnv([4], workdir=tmp_path / "ws")



def test_a_guessed_answer_is_refused_once_without_running_its_code(env):
    model = ScriptedModel(["```python\ncomplete_task(answer='7')\n```", "```python\nprint(apis.counter.add(4))\n```",
                           "```python\ncomplete_task(answer='4')\n```"])
    result, score = solve_first_task(env, model)
    first, _, last = result.actions
    assert first.refused == "ungrounded_answer"
    assert first.observation.startswith('REFUSED: complete_task was not run. Your answer "7" contains "7"')
    assert not first.done
    assert last.done
    assert result.exit_status == "submitted"
    assert score.success
    assert [params.get("temperature") for params in model.params] == [None, 0.8, 0.8]  # sampled anew after it


def test_the_refusal_is_once_per_task_and_can_be_switched_off(env):
    guesses = ["```python\ncomplete_task(answer='7')\n```", "```python\ncomplete_task(answer='8')\n```"]
    result, _ = solve_first_task(env, ScriptedModel(list(guesses)))
    assert [a.refused for a in result.actions] == ["ungrounded_answer", None]
    assert result.exit_status == "submitted"
    result, _ = solve_first_task(env, ScriptedModel(list(guesses)), refuse_ungrounded_answer=False)
    assert [a.refused for a in result.actions] == [None]


def test_an_answer_seen_in_an_earlier_subtask_is_grounded(env):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return "SUBTASK: add 4" if "(none yet)" in messages[1]["content"] else "SUBTASK: submit 4"
        if role == "summarizer":
            return "- the counter is 4"
        if "submit 4" in messages[-1]["content"]:
            return "```python\ncomplete_task(answer='4')\n```"
        return "```python\nprint(apis.counter.add(4))\n```" if messages[-1]["role"] == "user" and \
            "Observation" not in messages[-1]["content"] else "SUBTASK DONE: the counter is 4"

    result, score = solve_first_task(env, ScriptedModel(script), level="subtask")
    assert [a.refused for a in result.actions] == [None, None, None]
    assert score.success


def test_show_marks_refused_and_stuck_steps():
    from skilltransfer.log import read_step
    from skilltransfer.report.trajectory import format_step

    step = {"type": "ActionStep", "index": 2, "subtask_index": None, "action": "complete_task(answer='7')",
            "thought": "", "observation": "REFUSED: ...", "refused": "ungrounded_answer", "stuck": None,
            "reply": ""}
    assert format_step(read_step(step)).splitlines()[0] == "[step 2] refused=ungrounded_answer"
    plan = {"type": "PlanStep", "subtask_index": 1, "decision": "subtask", "subtask": "call complete_task()",
            "refused_reply": "DONE", "refused": "unfinished_planner_done", "reply": "DONE",
            "prompt_id": "planner"}
    expected = "[plan 1] call complete_task() (after a refused DONE: unfinished_planner_done)"
    assert format_step(read_step(plan)) == expected


def test_zero_padded_ids_do_not_ground_a_number():
    assert missing_numbers("38 planets have no radius", ["PL-00038, PL-00401"]) == ["38"]
    assert missing_numbers("38 planets have no radius", ["38"]) == []
    assert missing_parts("PL-00038", ["planet PL-00038"]) == []


def _solve_as(env, model, instruction, **config):
    """`solve_first_task` with the first task's instruction replaced (the target stays in its metadata)."""
    import dataclasses

    from skilltransfer.agents import Agent

    episode = env.start(dataclasses.replace(env.tasks()[0], instruction=instruction))
    try:
        return Agent(model, **{"harness": "small-model", **config}).run(episode), episode.evaluate()
    finally:
        episode.close()


def test_requested_change_reads_the_instructions_verb():
    from skilltransfer.agents.harness.grounding import requested_change

    assert requested_change("In data/sales.xlsx, change the Revenue of keyboard to 2090.") == "change"
    assert requested_change("Forward the email with the subject 'x' to Paul.") == "forward"
    assert requested_change("Which product has the highest Units? Answer with its name.") is None
    assert requested_change("Which contact was added last?") is None  # a past participle asks for nothing


def test_completing_before_the_requested_change_is_refused_once(env):
    """The 1.5B executor printed the row it was to change and called complete_task()."""
    read, add = "```python\nprint(apis.counter.get())\n```", "```python\nprint(apis.counter.add(4))\n```"
    done = "```python\ncomplete_task()\n```"
    result, score = _solve_as(env, ScriptedModel([read, done, add, done]), "Change the counter to 4.")
    assert [a.refused for a in result.actions] == [None, "unmade_completion", None, None]
    refusal = result.actions[1].observation
    assert refusal.startswith("REFUSED: complete_task was not run. The task asks you to change something")
    assert "the functions it called are get." in refusal
    assert score.success
    result, _ = _solve_as(env, ScriptedModel([read, done, done]), "Change the counter to 4.")
    assert [a.refused for a in result.actions] == [None, "unmade_completion", None]  # once per task
    result, _ = _solve_as(env, ScriptedModel([f"{add[:-3]}complete_task()\n```"]), "Change the counter to 4.")
    assert [a.refused for a in result.actions] == [None]  # the completing code makes the change itself
    result, _ = _solve_as(env, ScriptedModel([read, done]), "What is the counter?")
    assert [a.refused for a in result.actions] == [None, None]  # a question asks for no change
    result, _ = _solve_as(env, ScriptedModel([read, done]), "Change the counter to 4.", refuse_unmade_completion=False)
    assert [a.refused for a in result.actions] == [None, None]
