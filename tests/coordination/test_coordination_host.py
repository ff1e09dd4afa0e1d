"""The host interfaces (nl-sop, prompt-graph), their reported audit, and one frozen plan reused by all three
interfaces."""

from __future__ import annotations

import json

import pytest
from helpers_compose import ComposeScript, counter_plan, plan_json
from helpers_tinyenv import CODE_SKILL, TinyEnv

from skilltransfer.coordination import INTERFACES, PlanFolder, PlanWriter, reported_audit, run_plan
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.coordination.render import render_graph, render_procedure
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.skill import Skill

ADD_SKILL = Skill(name="add-to-counter", description="Add a number to the counter.", body="Call apis.counter.add(n).")


@pytest.fixture
def env(tmp_path):
    return TinyEnv([5], workdir=tmp_path / "ws")


def test_procedure_numbers_steps_in_dependency_order_and_names_bindings():
    text = render_procedure(counter_plan())
    assert text.splitlines() == [
        "1. Read the counter. Result: the counter value",
        "2. Add 2 to the counter. Follow the skill package `add-to-counter`. Use the result of step 1 as `start`. "
        "Result: the new value",
        "3. Add 3 to the counter. Result: the new value",
        "4. Read the counter. Use the result of step 2 as `after_two`, the result of step 3 as `after_three`, the "
        "result of step 1 as `first`. Result: the final value",
    ]
    graph = json.loads(render_graph(counter_plan()))
    assert graph["nodes"] == [n.model_dump() for n in counter_plan().nodes]


@pytest.mark.parametrize("interface", ["nl-sop", "prompt-graph"])
def test_host_interface_solves_the_task_and_reports_every_node(env, interface):
    script = ComposeScript()
    model = ScriptedModel(script)
    episode = env.start(env.tasks()[0])
    try:
        result = run_plan(interface, episode, model, counter_plan(), [ADD_SKILL])
        score = episode.evaluate()
    finally:
        episode.close()
    assert score.success
    assert result.exit_status == "submitted"
    assert result.interface == interface
    first = model.calls[0][1]["content"]
    assert ("# Procedure" in first) == (interface == "nl-sop")
    assert ("# Plan graph" in first) != (interface == "nl-sop")
    assert "# Skill packages" in first
    assert ADD_SKILL.body in first
    assert set(script.kinds) == {"host"}
    assert len(result.contexts) == 1
    audit = result.audit
    assert audit.source == "reported"
    assert audit.completed_nodes == 4
    assert audit.violations == []
    assert [n.reported_at for n in audit.nodes] == [1, 2, 3, 4]
    prompts = CoordinationPrompts.load()
    assert result.prompt_ids["host"] == (prompts.nl_sop.id if interface == "nl-sop" else prompts.prompt_graph.id)


def test_code_skills_are_defined_for_the_host(env):
    code = Skill(name="set_counter_to", description="Set the counter.", format="code",
                 body=CODE_SKILL.split("```python\n")[1].split("```")[0])
    plan = counter_plan().model_copy(update={"nodes": [counter_plan().nodes[0].model_copy(
        update={"skill": "set_counter_to"})]})
    model = ScriptedModel(["Use it.\n```python\nset_counter_to(5)\ncomplete_task()\n```"])
    episode = env.start(env.tasks()[0])
    try:
        result = run_plan("nl-sop", episode, model, plan, [code])
        assert episode.evaluate().success
        assert result.exit_status == "submitted"
    finally:
        episode.close()


def test_reported_audit_flags_out_of_order_and_missing_reports():
    plan = counter_plan()
    replies = ["NODE DONE v1: 0\n```python\nx\n```", "NODE DONE v4: 5 and NODE DONE v2: 2", "nothing"]
    audit = reported_audit(plan, "prompt-graph", replies, by_number=False)
    held = {(c.before, c.after): c.held for c in audit.constraints}
    assert held == {("v1", "v2"): True, ("v1", "v3"): None, ("v2", "v4"): False, ("v3", "v4"): None,
                    ("v1", "v4"): True}
    assert [c.detail for c in audit.violations] == ["v4 was reported done before v2"]
    assert [n.status for n in audit.nodes] == ["reported", "reported", "not_reported", "reported"]
    by_number = reported_audit(plan, "nl-sop", ["STEP DONE 1: ok", "step done 3: ok", "STEP DONE 9: ?"],
                               by_number=True)
    assert [n.status for n in by_number.nodes] == ["reported", "not_reported", "reported", "not_reported"]


def test_one_frozen_plan_is_reused_by_all_three_interfaces(env, tmp_path):
    folder = PlanFolder(tmp_path / "plans")
    task = env.tasks()[0]
    planner = ScriptedModel(ComposeScript([plan_json(counter_plan())]))
    writer = PlanWriter(planner)
    fingerprints, successes = {}, {}
    for interface in INTERFACES:
        episode = env.start(task)
        try:
            plan, _ = folder.plan_for(task.id, lambda episode=episode: writer.write(task, episode.docs(), [ADD_SKILL]))
            result = run_plan(interface, episode, ScriptedModel(ComposeScript()), plan, [ADD_SKILL])
            successes[interface] = episode.evaluate().success
        finally:
            episode.close()
        fingerprints[interface] = result.plan_fingerprint
        assert result.audit.plan_fingerprint == plan.fingerprint
    assert len(planner.calls) == 1  # written once, then replayed from the folder
    assert len(set(fingerprints.values())) == 1
    assert fingerprints["metaskill"] == counter_plan().fingerprint
    assert successes == dict.fromkeys(INTERFACES, True)
    assert folder.task_ids() == [task.id]


@pytest.mark.parametrize(("retries", "attempts"), [(1, 2), (0, 1)])
def test_a_host_run_that_does_not_submit_is_retried_like_a_node(env, retries, attempts):
    """One retry policy for every interface: a host context that ends without submitting (here: stuck, repeating one
    action) is run again (fresh, told why), within what is left of the task's budget."""
    from skilltransfer.agents.config import AgentConfig
    from skilltransfer.coordination import CoordinationConfig

    calls = {"n": 0}

    def script(messages):
        calls["n"] += 1
        first = str(messages[1]["content"])
        if "An earlier attempt at this task ended with" in first:
            return "Finish.\n```python\napis.counter.reset()\napis.counter.add(5)\ncomplete_task()\n```"
        return "Looking.\n```python\nprint(apis.counter.get())\n```"  # the same action again and again: stuck

    model = ScriptedModel(script)
    episode = env.start(env.tasks()[0])
    try:
        result = run_plan("nl-sop", episode, model, counter_plan(), [ADD_SKILL],
                          agent_config=AgentConfig(harness="small-model"),  # stuck detection ends the attempt
                          config=CoordinationConfig(step_limit=12, retries=retries))
        score = episode.evaluate()
    finally:
        episode.close()
    host = result.audit.host_attempts
    assert [a["exit_status"] for a in host] == ["stuck", "submitted"][:attempts]
    assert len(result.contexts) == attempts
    assert score.success == (attempts == 2)
    assert result.audit.submitted_by == ("host" if attempts == 2 else None)
    assert result.audit.not_run == ["v1", "v2", "v3", "v4"]  # the host never reported a step done
    if attempts == 2:
        assert host[1]["steps"] == 1
        assert [s.index for s in result.actions] == list(range(host[0]["steps"] + 1))  # one budget, one numbering


def test_a_once_per_task_refusal_spans_the_host_attempts(env):
    """Guards act per task in coordinated runs (issue 40): the ungrounded answer refused in the first host attempt is
    not refused again in the retry (one harness per task, not one per executor context)."""
    from skilltransfer.agents.config import AgentConfig
    from skilltransfer.coordination import CoordinationConfig

    answer = "Answer.\n```python\ncomplete_task('999')\n```"

    def script(messages):
        first = str(messages[1]["content"])
        if "An earlier attempt at this task ended with" in first:
            return answer
        if not any(m["role"] == "assistant" for m in messages[2:]):
            return answer  # refused: 999 was never printed
        return "Looking.\n```python\nprint(apis.counter.get())\n```"  # then stuck

    episode = env.start(env.tasks()[0])
    try:
        result = run_plan("nl-sop", episode, ScriptedModel(script), counter_plan(), [ADD_SKILL],
                          agent_config=AgentConfig(harness="small-model"),
                          config=CoordinationConfig(step_limit=14, retries=1))
    finally:
        episode.close()
    refusals = [s.refused for s in result.actions if s.refused]
    assert refusals == ["ungrounded_answer"], refusals
    assert [a["exit_status"] for a in result.audit.host_attempts] == ["stuck", "submitted"]
