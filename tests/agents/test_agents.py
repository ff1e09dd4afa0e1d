"""Task-level and subtask-level agents on the tiny counter world with scripted models."""

from __future__ import annotations

import json

import pytest
from helpers_tinyenv import CODE_SKILL, CounterScript, TinyEnv, role_of

from skilltransfer.agents import (
    ActionStep,
    Agent,
    AgentConfig,
    InductionStep,
    ModelCall,
    PlanStep,
    RetrievalStep,
    SummaryStep,
    parse_action,
    parse_plan,
)
from skilltransfer.induction import Inducer
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.store import SkillMemory
from skilltransfer.skill import Provenance, Skill


@pytest.fixture
def env(tmp_path):
    return TinyEnv([4, 7], workdir=tmp_path / "ws")


def solve(env, model, task_index=0, **kwargs):
    task = env.tasks()[task_index]
    episode = env.start(task)
    try:
        result = Agent(model, **{"harness": "small-model", **kwargs}).run(episode, stream_position=task_index)
        return result, episode.evaluate()
    finally:
        episode.close()


def test_parse_action_thought_code_and_blocks():
    assert parse_action("hmm") == ("hmm", None, 0)
    thought, code, n = parse_action("Look.\n```python\nprint(1)\n```\nand\n```py\nprint(2)\n```")
    assert (thought, code, n) == ("Look.", "print(1)\n", 2)
    assert parse_action("```\nx = 1\n```")[1] == "x = 1\n"


@pytest.mark.parametrize(("reply", "expected"), [
    ("SUBTASK: find the email", ("subtask", "find the email")),
    ("Thinking...\n**SUBTASK:** read x", ("subtask", "read x")),
    ("SUBTASK:\nopen the file", ("subtask", "open the file")),
    ("DONE", ("done", None)),
    ("All good.\nDONE.", ("done", None)),
    ("I am not sure", None),
])
def test_parse_plan(reply, expected):
    assert parse_plan(reply) == expected


def test_task_agent_solves_with_growing_context(env):
    model = ScriptedModel(CounterScript())
    result, score = solve(env, model)
    assert score.success
    assert result.exit_status == "submitted"
    assert [type(s) for s in result.steps] == [ActionStep, ActionStep]
    assert result.n_subtasks == 1
    # h_t = h_{t-1} + (a_t, o_t): each executor prompt extends the previous one by the reply and the observation
    first, second = model.calls
    assert second[: len(first)] == first
    assert second[len(first)]["role"] == "assistant"
    assert second[len(first) + 1]["content"].startswith("Observation:")
    assert "apis.counter.add(n: int)" in first[0]["content"]  # env docs are in the system prompt
    assert "Set the counter to 4." in first[1]["content"]
    assert len(result.calls.calls) == 2
    assert result.calls.peak_context == max(c.prompt_tokens for c in result.calls.calls)


def test_format_error_counts_as_step_and_step_limit(env):
    model = ScriptedModel(["no code here", "still none", "nope"])
    result, score = solve(env, model, step_limit=3)
    assert not score.success
    assert result.exit_status == "limits_exceeded"
    actions = result.actions
    assert len(actions) == 3
    assert all(a.format_error and a.action is None for a in actions)
    assert "```python" in actions[0].observation
    assert "FORMAT ERROR" in model.calls[1][-1]["content"]


def test_step_limit_with_actions(env):
    model = ScriptedModel(lambda messages: "```python\nprint(apis.counter.add(1))\n```")
    result, _ = solve(env, model, step_limit=5)
    assert result.exit_status == "limits_exceeded"
    assert [a.observation for a in result.actions] == ["1\n", "2\n", "3\n", "4\n", "5\n"]


def test_error_observation_and_multiple_blocks(env):
    model = ScriptedModel(['```python\napis.counter.add("x")\n```\n```python\nprint(2)\n```',
                           "```python\ncomplete_task()\n```"])
    result, _ = solve(env, model)
    first = result.actions[0]
    assert first.error
    assert "add() needs an int" in first.observation
    assert "only the first of your 2 code blocks was run" in first.observation


def test_subtask_agent_cycle(env):
    script = CounterScript()
    model = ScriptedModel(script)
    result, score = solve(env, model, level="subtask")
    assert score.success
    assert result.exit_status == "submitted"
    kinds = [type(s).__name__ for s in result.steps]
    assert kinds == ["PlanStep", "ActionStep", "ActionStep", "SummaryStep", "PlanStep", "ActionStep"]
    assert script.roles == ["planner", "executor", "executor", "summarizer", "planner", "executor"]
    assert result.n_subtasks == 2
    assert [a.index for a in result.actions] == [0, 1, 2]  # one shared executor budget
    assert [a.subtask_index for a in result.actions] == [0, 0, 1]
    # the second subtask's executor starts from a fresh context that carries the running summary
    second_exec = [c for c in model.calls if role_of(c) == "executor"][-1]
    assert len(second_exec) == 2
    assert "- the counter value was read" in second_exec[1]["content"]
    assert len(result.contexts) == 2


def test_subtask_agent_planner_done_and_format_retry(env):
    replies = iter(["hmm, let me think", "DONE"])
    model = ScriptedModel(lambda messages: next(replies))
    result, score = solve(env, model, level="subtask", refuse_premature_done=False)
    assert result.exit_status == "planner_done"
    assert not score.success
    plan = result.steps[0]
    assert isinstance(plan, PlanStep)
    assert plan.decision == "done"
    assert "not in the expected format" in model.calls[1][-1]["content"]


def test_subtask_agent_planner_gives_up(env):
    model = ScriptedModel(lambda messages: "no idea")
    result, _ = solve(env, model, level="subtask", planner_retries=1)
    assert result.exit_status == "planner_format_error"
    assert len(model.calls) == 2


def test_subtask_limits(env):
    def script(messages):
        if role_of(messages) == "planner":
            return "SUBTASK: add one"
        if role_of(messages) == "summarizer":
            return "- added"
        return "```python\nprint(apis.counter.add(1))\n```" if messages[-1]["role"] == "user" and len(messages) < 3 \
            else "SUBTASK DONE: added"

    result, _ = solve(env, ScriptedModel(script), level="subtask", subtask_limit=3)
    assert result.exit_status == "subtask_limit"
    assert result.n_subtasks == 3
    assert sum(isinstance(s, PlanStep) for s in result.steps) == 3

    looping = ScriptedModel(lambda m: "SUBTASK: add" if role_of(m) == "planner" else
                            "- s" if role_of(m) == "summarizer" else "```python\nprint(apis.counter.add(1))\n```")
    result, _ = solve(env, looping, level="subtask", step_limit=4)
    assert result.exit_status == "limits_exceeded"
    assert len(result.actions) == 4


def _memory(hash_embedder, *skills):
    memory = SkillMemory(hash_embedder)
    for skill in skills:
        assert memory.add(skill).action == "added"
    return memory


def test_task_agent_retrieves_once_with_instruction(env, hash_embedder):
    text = Skill(name="counter_note", description="Set the counter to a target value.", body="Reset, then add.",
                 provenance=Provenance(source_task_id="old", stream_position=0))
    model = ScriptedModel(CounterScript())
    result, _ = solve(env, model, memory=_memory(hash_embedder, text))
    retrievals = result.retrievals
    assert len(retrievals) == 1
    assert retrievals[0].query == "Set the counter to 4."
    assert retrievals[0].query_kind == "instruction"
    assert retrievals[0].skills[0]["id"] == text.id
    assert retrievals[0].skills[0]["source_position"] == 0
    assert result.steps.index(retrievals[0]) == 0  # read before acting
    assert text.render().strip() in model.calls[0][1]["content"]  # description + body in the context


def test_retrieval_leaves_out_skills_below_the_minimum_score(env, hash_embedder):
    related = Skill(name="counter_note", description="Set the counter to a target value.", body="Reset, then add.")
    unrelated = Skill(name="flights", description="Book a flight to Lisbon.", body="Open the travel app.")
    memory = _memory(hash_embedder, related, unrelated)
    scores = dict((s.name, score) for s, score in memory.retrieve("Set the counter to 4.", k=2))
    assert scores["flights"] < 0.2 <= scores["counter_note"]
    model = ScriptedModel(CounterScript())
    result, _ = solve(env, model, memory=memory)
    assert [s["name"] for s in result.retrievals[0].skills] == ["counter_note"]
    assert result.retrievals[0].below_min_score == 1
    assert "Book a flight" not in model.calls[0][1]["content"]
    assert "below_min_score" in result.retrievals[0].to_dict()
    plain, _ = solve(env, ScriptedModel(CounterScript()), memory=memory, retrieval_min_score=-1)
    assert [s["name"] for s in plain.retrievals[0].skills] == ["counter_note", "flights"]
    assert "below_min_score" not in plain.retrievals[0].to_dict()  # logs as before


@pytest.mark.parametrize(("query", "expected"), [("subtask", ["Read the current counter value.",
                                                              "Set the counter to 4 and complete the task."]),
                                                 ("instruction", ["Set the counter to 4.", "Set the counter to 4."])])
def test_subtask_agent_retrieves_per_subtask(env, hash_embedder, query, expected):
    text = Skill(name="n", description="counter", body="b")
    result, _ = solve(env, ScriptedModel(CounterScript()), level="subtask", retrieval_query=query,
                      memory=_memory(hash_embedder, text))
    assert [r.query for r in result.retrievals] == expected
    assert [r.subtask_index for r in result.retrievals] == [0, 1]


def test_code_skill_is_loaded_and_callable(env, hash_embedder):
    body = CODE_SKILL.split("```python\n")[1].split("```")[0]
    skill = Skill(name="set_counter_to", description="Set the counter to a target value.", body=body, format="code")
    broken = Skill(name="boom", description="Set the counter value quickly.", format="code",
                   body="import no_such_module_xyz\n\n\ndef boom():\n    return 1\n")
    memory = _memory(hash_embedder, skill)
    memory.config.validate_code = False
    memory.add(broken)
    result, score = solve(env, ScriptedModel(CounterScript()), memory=memory)
    assert score.success
    loads = {s["name"]: s["load_error"] for s in result.retrievals[0].skills}
    assert loads["set_counter_to"] is None
    assert "no_such_module_xyz" in loads["boom"]
    assert "set_counter_to called" in result.actions[0].observation


def test_induction_one_skill_per_subtask_and_order(env, hash_embedder):
    memory = SkillMemory(hash_embedder)
    model = ScriptedModel(CounterScript())
    result, _ = solve(env, model, level="subtask", memory=memory, inducer=Inducer(model))
    order = [type(s).__name__ for s in result.steps]
    assert order == ["PlanStep", "RetrievalStep", "ActionStep", "ActionStep", "InductionStep", "SummaryStep",
                     "PlanStep", "RetrievalStep", "ActionStep", "InductionStep"]
    inductions = result.inductions
    assert [i.subtask_index for i in inductions] == [0, 1]
    assert inductions[0].status == "added"
    assert inductions[1].status == "dropped"
    stored = memory.get(inductions[0].skill_id)
    assert stored.level == "subtask"
    assert stored.provenance.source_task_id == "tiny/0"
    assert stored.provenance.subtask_index == 0
    assert stored.provenance.stream_position == 0
    # the second subtask retrieved the skill induced from the first one
    assert result.retrievals[1].skills[0]["id"] == stored.id


def test_read_only_memory_disables_induction(env, hash_embedder):
    memory = _memory(hash_embedder, Skill(name="n", description="counter", body="b"))
    memory.read_only = True
    script = CounterScript()
    result, _ = solve(env, ScriptedModel(script), memory=memory, inducer=Inducer(ScriptedModel(script)))
    assert not result.inductions
    assert "induction" not in script.roles


def test_steps_serialise_and_dependency():
    call = ModelCall("executor", prompt_tokens=10, completion_tokens=3, latency_s=0.1)
    assert call.dependency == 10 * 3 + 3 * 4 // 2 == 36
    steps = [RetrievalStep("q", "instruction", None, [{"id": "x"}]),
             PlanStep(0, "subtask", "do", "SUBTASK: do", "planner@1"),
             ActionStep(0, 0, "r", "t", "print(1)", "1"), SummaryStep(0, "s", "summarizer@1"),
             InductionStep(0, "induction@1", "added", skill_id="sk")]
    dumped = json.loads(json.dumps([s.to_dict() for s in steps]))
    assert [d["type"] for d in dumped] == ["RetrievalStep", "PlanStep", "ActionStep", "SummaryStep", "InductionStep"]


def test_config_validation_and_prompt_dir(tmp_path, env):
    with pytest.raises(ValueError, match="step_limit"):
        AgentConfig(step_limit=0)
    (tmp_path / "executor_task.md").write_text("CUSTOM TASK PROMPT: {{instruction}}{{skills}}")
    model = ScriptedModel(CounterScript())
    solve(env, model, prompt_dir=str(tmp_path))
    assert model.calls[0][1]["content"].startswith("CUSTOM TASK PROMPT: Set the counter to 4.")


def test_best_ranked_code_skill_wins_a_name_clash(env, hash_embedder):
    good = Skill(name="helper", description="Set the counter to a target value.", format="code",
                 body="def helper():\n    return 'best'\n")
    worse = Skill(name="helper", description="Counter.", format="code", body="def helper():\n    return 'worse'\n")
    model = ScriptedModel(["```python\nprint(helper())\n```", "```python\ncomplete_task()\n```"])
    result, _ = solve(env, model, memory=_memory(hash_embedder, good, worse))
    assert [s["id"] for s in result.retrievals[0].skills] == [good.id, worse.id]
    assert result.actions[0].observation == "best\n"
