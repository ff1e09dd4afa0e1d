"""The metaskill runtime on the counter world with scripted models: readiness and the K bound, serialised env actions,
bindings rendered exactly, the failure policy, the budget, and an audit that catches a forced precedence violation."""

from __future__ import annotations

import threading
import time

import pytest
from helpers_compose import ComposeScript, counter_plan, wide_plan
from helpers_tinyenv import TinyEnv

from skilltransfer.coordination import (
    CoordinationConfig,
    MetaSkillRuntime,
    Plan,
    PlanError,
    PlanNode,
    run_plan,
)
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.skill import Skill

ADD_SKILL = Skill(name="add-to-counter", description="Add a number to the counter.",
                  body="1. Call apis.counter.add(n) with the number.\n2. Report the new value.")


@pytest.fixture
def env(tmp_path):
    return TinyEnv([5, 4], workdir=tmp_path / "ws")


def run(env, plan, script, *, task=0, skills=(ADD_SKILL,), runtime_cls=MetaSkillRuntime, **config):
    episode = env.start(env.tasks()[task])
    try:
        runtime = runtime_cls(ScriptedModel(script), {s.name: s for s in skills},
                              config=CoordinationConfig(**config))
        result = runtime.run(episode, plan)
        return result, episode.evaluate()
    finally:
        episode.close()


def test_metaskill_solves_the_counter_task_with_a_clean_audit(env):
    script = ComposeScript()
    result, score = run(env, counter_plan(), script, max_parallel=2)
    assert score.success
    assert result.exit_status == "submitted"
    assert result.outputs == {"v1": "value 0", "v2": "value 2", "v3": "value 5", "v4": "value 5"} or \
        result.outputs["v4"] == "value 5"
    audit = result.audit
    assert audit.source == "runtime"
    assert audit.completed_nodes == 4
    assert audit.violations == []
    assert [(c.before, c.after, c.kind, c.held) for c in audit.constraints] == [
        ("v1", "v2", "depends_on", True), ("v1", "v3", "depends_on", True), ("v2", "v4", "depends_on", True),
        ("v3", "v4", "depends_on", True), ("v1", "v4", "binding", True)]
    assert all(len(n.attempts) == 1 and n.attempts[0].exit_status == "subtask_done" for n in audit.nodes)
    assert audit.nodes[3].output_chars == len(result.outputs["v4"])
    assert audit.finish["exit_status"] == "submitted"
    assert script.kinds[-1] == "finish"
    assert [s.index for s in result.actions] == list(range(len(result.actions)))  # renumbered in order
    assert {s.subtask_index for s in result.actions} == {0, 1, 2, 3, None}
    data = result.coordination_dict()
    assert data["audit"]["violated_constraints"] == 0
    assert data["audit"]["completed_nodes"] == 4
    assert data["plan_fingerprint"] == counter_plan().fingerprint


def test_bindings_are_rendered_exactly_and_long_ones_cut(env):
    script = ComposeScript()
    result, _ = run(env, counter_plan(), script)
    prompt = script.node_prompts["v4"][0]
    for name, source in (("after_two", "v2"), ("after_three", "v3"), ("first", "v1")):
        assert f"## {name} (the result of {source})\n{result.outputs[source]}\n" in prompt + "\n"
    assert "# Inputs from earlier steps" not in script.node_prompts["v3"][0]  # v3 binds nothing
    assert "# Skill package for this step" in script.node_prompts["v2"][0]
    assert ADD_SKILL.body.splitlines()[0] in script.node_prompts["v2"][0]
    assert result.audit.nodes[3].inputs["first"] == {"ref": "outputs.v1", "node": "v1", "chars": 7, "missing": False,
                                                     "truncated": False}

    class LongOutput(ComposeScript):
        def _node(self, node_id, instructions, user, messages, n_actions):
            reply = super()._node(node_id, instructions, user, messages, n_actions)
            return reply + " " + "x" * 300 if reply.startswith("SUBTASK DONE") else reply

    script = LongOutput()
    result, _ = run(env, counter_plan(), script, max_binding_chars=100)
    prompt = script.node_prompts["v4"][0]
    expected = result.outputs["v1"][:100] + f"\n[... {len(result.outputs['v1']) - 100:,} more characters cut]"
    assert f"## first (the result of v1)\n{expected}" in prompt
    assert result.audit.nodes[3].inputs["first"]["truncated"] is True


def test_k1_runs_ready_nodes_in_plan_order(env):
    result, score = run(env, wide_plan(4, add=1), ComposeScript(), task=1, max_parallel=1)
    audit = result.audit
    starts = sorted((n.attempts[0].start_seq, n.id) for n in audit.nodes)
    assert [node_id for _, node_id in starts] == ["w1", "w2", "w3", "w4", "sink"]
    assert audit.peak_parallel == 1
    assert score.success


def test_at_most_k_nodes_run_at_once_and_model_calls_overlap(env):
    script = ComposeScript(latency_s=0.05)
    result, score = run(env, wide_plan(4, add=1), script, task=1, max_parallel=2)
    assert score.success
    assert result.audit.violations == []
    assert result.audit.peak_parallel == 2
    assert script.peak == 2
    script = ComposeScript(latency_s=0.5)  # long enough that all four are in flight at once on a loaded machine
    result, _ = run(env, wide_plan(4, add=1), script, task=1, max_parallel=8)
    assert result.audit.peak_parallel == 4
    assert 2 <= script.peak <= 4


def test_env_actions_of_one_episode_never_overlap(env):
    episode = env.start(env.tasks()[1])
    active, peak, lock = [0], [0], threading.Lock()
    original = episode.step

    def slow_step(action):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        try:
            return original(action)
        finally:
            with lock:
                active[0] -= 1

    episode.step = slow_step
    script = ComposeScript(latency_s=0.5)  # long enough that all 4 nodes are in flight on a loaded machine
    try:
        result = MetaSkillRuntime(ScriptedModel(script), {}, config=CoordinationConfig(max_parallel=4)).run(
            episode, wide_plan(4, add=1))
        assert episode.evaluate().success
    finally:
        episode.close()
    assert script.peak >= 2
    assert peak[0] == 1
    assert result.audit.peak_parallel == 4


def test_failed_node_is_retried_once_then_its_dependents_are_skipped(env):
    plan = Plan(task_id="tiny/0", nodes=[
        PlanNode(id="a", instructions="Add 2 to the counter."),
        PlanNode(id="b", instructions="Add 3 to the counter.", depends_on=["a"]),
        PlanNode(id="c", instructions="Read the counter.", depends_on=["b"]),
        PlanNode(id="d", instructions="Add 1 to the counter."),
    ])
    script = ComposeScript(fail={"b": 2})
    result, score = run(env, plan, script, node_step_limit=3)
    audit = {n.id: n for n in result.audit.nodes}
    assert result.exit_status == "node_failed"
    assert not score.success
    assert [a.exit_status for a in audit["b"].attempts] == ["limits_exceeded", "limits_exceeded"]
    assert audit["b"].status == "failed"
    assert audit["c"].status == "skipped"
    assert audit["c"].attempts == []
    assert audit["c"].skipped_because == "b failed"
    assert audit["a"].status == audit["d"].status == "completed"  # another branch still runs
    assert "finish" not in script.kinds
    assert result.audit.finish is None
    assert "An earlier attempt at this step ended with limits_exceeded" in script.node_prompts["b"][1]
    assert result.audit.violations == []
    held = {(c.before, c.after): c.held for c in result.audit.constraints}
    assert held == {("a", "b"): True, ("b", "c"): None}


def test_retry_that_succeeds_completes_the_node(env):
    script = ComposeScript(fail={"v2": 1})
    result, score = run(env, counter_plan(), script, node_step_limit=2)
    v2 = result.audit.nodes[1]
    assert score.success
    assert v2.status == "completed"
    assert len(v2.attempts) == 2
    assert result.audit.violations == []


def test_shared_step_budget_runs_out(env):
    script = ComposeScript()
    result, _ = run(env, wide_plan(4, add=1), script, task=1, max_parallel=1, step_limit=10, finish_step_limit=5,
                    node_step_limit=2)
    nodes = result.audit.nodes  # 10 - 5 (finishing) = 5 steps: w1 and w2 take 2 each, w3 gets one
    assert [n.status for n in nodes] == ["completed", "completed", "failed", "failed", "skipped"]
    assert [(a.exit_status, a.steps) for a in nodes[2].attempts] == [("limits_exceeded", 1), ("budget_spent", 0)]
    assert nodes[2].attempts[0].message == "the task's shared step budget is spent"
    assert [a.exit_status for a in nodes[3].attempts] == ["budget_spent"]
    assert result.exit_status == "node_failed"
    assert len(result.actions) == 5
    with pytest.raises(ValueError, match="must exceed finish_step_limit"):
        MetaSkillRuntime(ScriptedModel([]), {}, config=CoordinationConfig(step_limit=5, finish_step_limit=5))


def test_an_exception_in_a_node_is_raised_after_running_nodes_end(env):
    script = ComposeScript(latency_s=0.02, raise_in="w2")
    with pytest.raises(RuntimeError, match="simulated endpoint failure in w2"):
        run(env, wide_plan(3, add=1), script, task=1, max_parallel=3)


class IgnoresDependencies(MetaSkillRuntime):
    """A broken scheduler (test double): every pending node counts as ready."""

    def ready(self, plan, state):
        return [node.id for node in plan.nodes if state[node.id] == "pending"]


def test_audit_detects_a_forced_precedence_violation(env):
    # 0.3 s per call: with 0.02 s, on a loaded machine (a model run beside the suite) v1 finished before its
    # dependents' threads started, and the broken scheduler's violation went unseen
    result, _ = run(env, counter_plan(), ComposeScript(latency_s=0.3), runtime_cls=IgnoresDependencies,
                    max_parallel=4)
    violations = result.audit.violations
    assert violations, "the audit must see that dependents started before their predecessors finished"
    assert {(c.before, c.after) for c in violations} >= {("v1", "v2"), ("v1", "v3")}
    assert all("before" in c.detail or "never completed" in c.detail for c in violations)
    assert result.coordination_dict()["audit"]["violated_constraints"] == len(violations)


def test_invalid_plans_and_unknown_skills_are_refused_before_anything_runs(env):
    episode = env.start(env.tasks()[0])
    model = ScriptedModel([])
    try:
        bad = counter_plan().model_copy(update={"nodes": [*counter_plan().nodes, PlanNode(
            id="v5", instructions="x", depends_on=["v9"])]})
        with pytest.raises(PlanError, match="depends on unknown node 'v9'"):
            run_plan("metaskill", episode, model, bad, [ADD_SKILL])
        with pytest.raises(PlanError, match="unknown skill 'add-to-counter'"):
            run_plan("metaskill", episode, model, counter_plan(), [])
        with pytest.raises(Exception, match="unknown coordination interface 'dag'"):
            run_plan("dag", episode, model, counter_plan(), [ADD_SKILL])
    finally:
        episode.close()
    assert model.calls == []


# --------------------------------------------------------------------------------------------- a submission ends it
class SubmittingScript(ComposeScript):
    """``ComposeScript`` whose "Submit the task." node calls ``complete_task()`` at once (a node that submits)."""

    def _node(self, node_id, instructions, user, messages, n_actions):
        if instructions.startswith("Submit") and n_actions == 0:
            with self._lock:
                self.kinds.append(f"node:{node_id}")
            return "Submit.\n```python\ncomplete_task()\n```"
        return super()._node(node_id, instructions, user, messages, n_actions)


def submitting_plan() -> Plan:
    return Plan(task_id="tiny/0", nodes=[
        PlanNode(id="a", instructions="Add 5 to the counter."),
        PlanNode(id="s", instructions="Submit the task.", depends_on=["a"]),
        PlanNode(id="c", instructions="Read the counter.", depends_on=["s"]),
        PlanNode(id="e", instructions="Add 1 to the counter.", depends_on=["c"]),
    ])


def test_a_submission_ends_dispatch_and_the_audit_names_it(env):
    script = SubmittingScript()
    result, score = run(env, submitting_plan(), script, max_parallel=1)
    assert score.success
    assert result.exit_status == "submitted"
    audit = result.audit
    assert audit.submitted_by == "s"
    assert audit.not_run == ["c", "e"]
    nodes = {n.id: n for n in audit.nodes}
    assert (nodes["c"].status, nodes["c"].attempts) == ("not_run", [])
    assert nodes["c"].skipped_because == "the task was submitted by s"
    assert "node:c" not in script.kinds
    assert "finish" not in script.kinds
    assert audit.finish is None
    data = result.coordination_dict()["audit"]
    assert (data["submitted_by"], data["not_run_nodes"], data["completed_nodes"]) == ("s", 2, 2)
    held = {(c.before, c.after): c.held for c in audit.constraints}
    assert held[("s", "c")] is None  # not exercised: c never started


def test_a_submission_stops_a_running_node_without_a_retry(env):
    plan = Plan(task_id="tiny/0", nodes=[
        PlanNode(id="a", instructions="Add 5 to the counter."),
        PlanNode(id="slow", instructions="Read the counter."),
        PlanNode(id="s", instructions="Submit the task.", depends_on=["a"]),
    ])
    script = SubmittingScript(latency_s=0.02, fail={"slow": 5})
    result, score = run(env, plan, script, max_parallel=2, node_step_limit=12)
    assert score.success
    assert result.exit_status == "submitted"
    nodes = {n.id: n for n in result.audit.nodes}
    assert result.audit.submitted_by == "s"
    assert nodes["slow"].status == "stopped"
    assert len(nodes["slow"].attempts) == 1  # cut by the submission, not retried
    assert nodes["slow"].attempts[0].message == "the task's shared step budget is spent"
    assert result.audit.not_run == []


def test_the_finishing_context_is_named_when_it_submits(env):
    result, _ = run(env, counter_plan(), ComposeScript(), max_parallel=2)
    assert (result.audit.submitted_by, result.audit.not_run) == ("finish", [])
