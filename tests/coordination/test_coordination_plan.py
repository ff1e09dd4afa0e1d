"""Plans: structural validation (one line per problem), the plan folder (frozen files), and the plan writer's parsing,
re-asks and fallback under scripted models."""

from __future__ import annotations

import json

import pytest
from helpers_compose import ComposeScript, counter_plan, plan_json

from skilltransfer.agents.context import ContextFitter
from skilltransfer.agents.steps import CallLog
from skilltransfer.coordination import (
    Plan,
    PlanError,
    PlanFolder,
    PlanNode,
    PlanWriter,
    check_plan,
    parse_plan_reply,
    validate_plan,
)
from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.protocols import TaskSpec
from skilltransfer.skill import Skill

SKILLS = {"add-to-counter", "read-counter"}


def node(node_id, *deps, skill=None, bindings=None):
    return PlanNode(id=node_id, skill=skill, instructions=f"do {node_id}", depends_on=list(deps),
                    bindings=bindings or {})


def plan(*nodes):
    return Plan(task_id="t", nodes=list(nodes))


def test_valid_plan_has_no_problems_and_a_topological_order():
    p = counter_plan()
    assert validate_plan(p, SKILLS) == []
    assert check_plan(p, SKILLS) is p
    assert p.topological_order() == ["v1", "v2", "v3", "v4"]
    assert p.ancestors("v4") == {"v1", "v2", "v3"}
    assert p.dependents()["v1"] == ["v2", "v3"]
    reordered = plan(node("b", "a"), node("a"))
    assert reordered.topological_order() == ["a", "b"]


@pytest.mark.parametrize(("nodes", "expected"), [
    ([], ["the plan has no nodes"]),
    ([node("v1"), node("v1")], ["duplicate node id 'v1' (nodes 1 and 2)"]),
    ([node("v1", skill="fly-to-moon")], ["node v1: unknown skill 'fly-to-moon' (available: add-to-counter, "
                                         "read-counter)"]),
    ([node("v1", "v9")], ["node v1: depends on unknown node 'v9'"]),
    ([node("v1", "v2"), node("v2", "v1")], ["cycle: v1 -> v2 -> v1"]),
    ([node("v1", "v1")], ["cycle: v1 -> v1"]),
    ([node("v1"), node("v2"), node("v3", "v1", bindings={"x": "outputs.v2"})],
     ["node v3: binding 'x' refers to outputs.v2, which is not a predecessor of v3 (add it to depends_on)"]),
    ([node("v1"), node("v2", "v1", bindings={"x": "v1"})],
     ["node v2: binding 'x' is 'v1', not of the form outputs.<node id>"]),
    ([node("v1", bindings={"x": "outputs.v1"})],
     ["node v1: binding 'x' refers to outputs.v1, which is not a predecessor of v1 (add it to depends_on)"]),
    ([node("v1", "v2"), node("v2", "v1"), node("v3", "v2"), node("v4", "v3")],
     ["cycle: v1 -> v2 -> v1", "node v3 can never run: it depends on v2, which is in a cycle",
      "node v4 can never run: it depends on v3, which can never run"]),
    ([node("v1", "v9"), node("v2", "v1")],
     ["node v1: depends on unknown node 'v9'", "node v2 can never run: it depends on v1, which can never run"]),
    ([node("1st")], ["node 1: invalid id '1st' (a letter, then letters, digits, '_' or '-')"]),
    ([node("v1"), node("v2", "v1", bindings={"not a name": "outputs.v1"})],
     ["node v2: binding name 'not a name' is not an identifier"]),
])
def test_each_structural_problem_is_one_line(nodes, expected):
    assert validate_plan(plan(*nodes), SKILLS) == expected


def test_transitive_predecessor_binding_is_allowed_and_skills_unchecked_without_a_catalog():
    p = plan(node("v1"), node("v2", "v1"), node("v3", "v2", bindings={"x": "outputs.v1"}, skill="anything"))
    assert validate_plan(p) == []
    assert validate_plan(p, SKILLS) == ["node v3: unknown skill 'anything' (available: add-to-counter, read-counter)"]


def test_plan_error_is_one_input_error_line_listing_every_problem():
    with pytest.raises(PlanError) as info:
        check_plan(plan(node("v1", "v2"), node("v2", "v1"), node("v1")))
    assert isinstance(info.value, InputError)
    assert info.value.problems == ["duplicate node id 'v1' (nodes 1 and 3)", "cycle: v1 -> v2 -> v1"]
    assert "\n" not in str(info.value)
    assert "invalid plan for task t (2 problems)" in str(info.value)


def test_fingerprint_ignores_origin_and_changes_with_nodes():
    p = counter_plan()
    assert p.model_copy(update={"origin": p.origin.model_copy(update={"attempts": 3})}).fingerprint == p.fingerprint
    changed = p.model_copy(update={"nodes": [*p.nodes[:3], p.nodes[3].model_copy(update={"instructions": "x"})]})
    assert changed.fingerprint != p.fingerprint


# ------------------------------------------------------------------------------------------------- plan folder
def test_plan_folder_round_trip_frozen_and_checked(tmp_path):
    folder = PlanFolder(tmp_path / "plans")
    p = counter_plan("apps/1 x")
    assert folder.load("apps/1 x") is None
    path = folder.save(p)
    assert path.name.startswith("apps_1_x-")
    assert path.name.endswith(".plan.json")
    assert folder.load("apps/1 x") == p
    assert folder.save(p) == path  # the same plan again: a no-op
    other = p.model_copy(update={"nodes": p.nodes[:1]})
    with pytest.raises(InputError, match="already has a different frozen plan"):
        folder.save(other)
    assert folder.task_ids() == ["apps/1 x"]
    assert folder.path_for("apps/1 x") != folder.path_for("apps_1 x")  # unsafe characters never collide


def test_plan_folder_refuses_broken_and_foreign_files(tmp_path):
    folder = PlanFolder(tmp_path)
    folder.path_for("a").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="plan file is not JSON"):
        folder.load("a")
    folder.path_for("b").write_text(counter_plan("c").model_dump_json(), encoding="utf-8")
    with pytest.raises(InputError, match="holds the plan of task 'c', not 'b'"):
        folder.load("b")
    folder.path_for("d").write_text(json.dumps({"task_id": "d", "nodes": [{"id": "v1"}]}), encoding="utf-8")
    with pytest.raises(InputError, match="not a plan"):
        folder.load("d")


def test_plan_for_writes_once_then_replays(tmp_path):
    folder = PlanFolder(tmp_path)
    calls = []

    def write():
        calls.append(1)
        return counter_plan("t1")

    first, written = folder.plan_for("t1", write)
    again, written_again = folder.plan_for("t1", write)
    assert (written, written_again, len(calls)) == (True, False, 1)
    assert again.fingerprint == first.fingerprint


# ------------------------------------------------------------------------------------------------- parsing
def test_parse_accepts_what_small_models_write():
    reply = """Sure! Plan:
```json
{"plan": [
  {"id": 1, "skill": "`Add-To-Counter`", "instruction": "Add 2.", "expected": "value",},
  {"id": 2, "skill": "none", "task": ["Read", "the counter."], "deps": "1"},
  {"instructions": "Report.", "needs": [1, 2], "bindings": {"a": "v1", "b": "outputs.v2"}},
]}
```"""
    p = parse_plan_reply(reply, "t", ["add-to-counter"])
    assert [n.id for n in p.nodes] == ["v1", "v2", "v3"]
    assert p.nodes[0].skill == "add-to-counter"
    assert p.nodes[0].expected_output == "value"
    assert p.nodes[1].skill is None
    assert p.nodes[1].instructions == "Read\nthe counter."
    assert p.nodes[1].depends_on == ["v1"]
    assert p.nodes[1].bindings == {"v1": "outputs.v1"}
    assert p.nodes[2].depends_on == ["v1", "v2"]
    assert p.nodes[2].bindings == {"a": "outputs.v1", "b": "outputs.v2"}
    python_literal = "[{'id': 'a', 'skill': None, 'instructions': 'x', 'depends_on': []}]"
    assert parse_plan_reply(python_literal, "t").nodes[0].id == "a"


@pytest.mark.parametrize(("reply", "message"), [
    ("I will add 2 and then read.", "no ```json block"),
    ('```json\n{"nodes": [{"id": "v1", "instructions": "a"}', "not closed"),
    ('```json\n{"nodes": [{"id": "v1"}]}\n```', "node 1 has no instructions"),
    ('```json\n{"nodes": "v1"}\n```', "list of node objects"),
    ("```json\n{nodes: [}\n```", "not valid JSON"),
])
def test_parse_failures_say_what_is_wrong(reply, message):
    with pytest.raises(ValueError, match=message):
        parse_plan_reply(reply, "t")


# ------------------------------------------------------------------------------------------------- the writer
TASK = TaskSpec(id="tiny/0", instruction="Set the counter to 5.", difficulty=1, template="set")
OFFERED = [Skill(name="add-to-counter", description="Add a number to the counter.", body="apis.counter.add(n)")]


def test_writer_accepts_a_valid_first_reply():
    script = ComposeScript([plan_json(counter_plan())])
    model = ScriptedModel(script)
    p = PlanWriter(model).write(TASK, "apis.counter docs", OFFERED)
    assert p.fingerprint == counter_plan().fingerprint
    assert p.origin.attempts == 1
    assert p.origin.fallback is None
    assert p.origin.skills_offered == ["add-to-counter"]
    prompt = model.calls[0]
    assert "apis.counter docs" in prompt[0]["content"]
    assert "- add-to-counter: Add a number" in prompt[1]["content"]
    assert model.params[0]["max_tokens"] == 768


def test_writer_reasks_with_the_problems_then_accepts():
    bad = counter_plan().model_copy(update={"nodes": [*counter_plan().nodes[:3], PlanNode(
        id="v4", skill="fly", instructions="x", depends_on=["v2"], bindings={"y": "outputs.v3"})]})
    model = ScriptedModel(ComposeScript([plan_json(bad), plan_json(counter_plan())]))
    p = PlanWriter(model).write(TASK, "docs", OFFERED)
    assert p.origin.attempts == 2
    assert p.origin.fallback is None
    assert p.fingerprint == counter_plan().fingerprint
    retry = model.calls[1][-1]["content"]
    assert "- node v4: unknown skill 'fly'" in retry
    assert "- node v4: binding 'y' refers to outputs.v3, which is not a predecessor of v4" in retry


def test_writer_falls_back_to_one_node_after_retries():
    model = ScriptedModel(ComposeScript(["no plan here"]))
    p = PlanWriter(model, retries=1).write(TASK, "docs", OFFERED)
    assert len(model.calls) == 2
    assert [n.model_dump() for n in p.nodes] == [{"id": "v1", "skill": None, "instructions": "Set the counter to 5.",
                                                   "depends_on": [], "bindings": {},
                                                   "expected_output": p.nodes[0].expected_output}]
    assert p.origin.fallback == "no valid plan after 2 replies"
    assert p.origin.problems == ["the reply has no ```json block"]
    assert len(p.origin.replies) == 2


def test_writer_refuses_too_many_nodes_and_falls_back_on_context_exceeded():
    model = ScriptedModel(ComposeScript([plan_json(counter_plan())]))
    p = PlanWriter(model, retries=0, max_nodes=3).write(TASK, "docs", OFFERED)
    assert p.origin.fallback
    assert p.origin.problems == ["the plan has 4 steps; use at most 3"]
    tiny_window = ScriptedModel(ComposeScript([plan_json(counter_plan())]), context_window=300)
    calls = CallLog(fitter=ContextFitter({"plan_writer": 200}))
    p = PlanWriter(tiny_window, max_tokens=200).write(TASK, "docs " * 400, OFFERED, calls=calls)
    assert p.origin.fallback.startswith("context_exceeded")
    assert len(p.nodes) == 1
    assert not tiny_window.calls
