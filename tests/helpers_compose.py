"""Scripted policies and plans for the coordination tests and benchmark (test doubles, counter world).

`ComposeScript` plays every coordination role in the tiny counter world (``helpers_tinyenv``): the plan writer (a
fixed reply), node executors ("Add N to the counter." adds N; "Read the counter." prints it), the finishing context
and the host executor (nl-sop / prompt-graph: it runs every step it is shown, then completes). It counts how many
model calls overlap.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from helpers_tinyenv import task_start

from skilltransfer.coordination import Plan, PlanNode

PLANNER_MARKER = "You write the whole plan for one task at once"


def counter_plan(task_id: str = "tiny/0") -> Plan:
    """v1 reads the counter; v2 and v3 add 2 and 3 in parallel; v4 reads it again, bound to v1, v2 and v3."""
    return Plan(task_id=task_id, nodes=[
        PlanNode(id="v1", instructions="Read the counter.", expected_output="the counter value"),
        PlanNode(id="v2", skill="add-to-counter", instructions="Add 2 to the counter.", depends_on=["v1"],
                 bindings={"start": "outputs.v1"}, expected_output="the new value"),
        PlanNode(id="v3", instructions="Add 3 to the counter.", depends_on=["v1"], expected_output="the new value"),
        PlanNode(id="v4", instructions="Read the counter.", depends_on=["v2", "v3"],
                 bindings={"after_two": "outputs.v2", "after_three": "outputs.v3", "first": "outputs.v1"},
                 expected_output="the final value"),
    ])


def wide_plan(n: int = 4, task_id: str = "tiny/0", add: int = 1) -> Plan:
    """``n`` independent nodes that each add ``add``, then one node bound to all of them."""
    nodes = [PlanNode(id=f"w{i}", instructions=f"Add {add} to the counter.") for i in range(1, n + 1)]
    nodes.append(PlanNode(id="sink", instructions="Read the counter.", depends_on=[f"w{i}" for i in range(1, n + 1)]))
    return Plan(task_id=task_id, nodes=nodes)


def plan_json(plan: Plan) -> str:
    """A planner reply holding ``plan``."""
    return "Here is the plan.\n```json\n" + json.dumps({"nodes": [n.model_dump() for n in plan.nodes]}) + "\n```"


class ComposeScript:
    """A callable script for ``ScriptedModel`` (see the module docstring).

    Args:
        plan_replies: the plan writer's replies in order (the last repeats).
        latency_s: seconds each call takes (slept inside the script, so overlapping calls are counted).
        fail: node id -> how many attempts of that node never finish (they act until their budget is spent).
        node_done: the ``SUBTASK DONE`` report of a node, from the last observation (default: ``value <obs>``).
    """

    def __init__(self, plan_replies: list[str] | None = None, *, latency_s: float = 0.0,
                 fail: dict[str, int] | None = None, raise_in: str | None = None) -> None:
        self.plan_replies = list(plan_replies or [])
        self.latency_s = latency_s
        self.fail = dict(fail or {})
        self.raise_in = raise_in
        self.kinds: list[str] = []
        self.node_prompts: dict[str, list[str]] = {}
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.latency_s:
                time.sleep(self.latency_s)
            return self._reply(messages)
        finally:
            with self._lock:
                self.active -= 1

    def _reply(self, messages: list[dict[str, Any]]) -> str:
        start = task_start(messages)  # after a demonstration's turns, if the env's docs carry one
        system, user = messages[0]["content"], messages[start]["content"]
        n_actions = sum(1 for m in messages[start:] if m["role"] == "assistant")
        if PLANNER_MARKER in system:
            with self._lock:
                self.kinds.append("plan")
                count = self.kinds.count("plan")
            return self.plan_replies[min(count, len(self.plan_replies)) - 1]
        step = re.search(r"# Your step \(([^)]+)\)\n(.*?)\n\nExpected output", user, re.DOTALL)
        if step is not None:
            return self._node(step.group(1), step.group(2), user, messages, n_actions)
        if "# Results of the plan's steps" in user:
            with self._lock:
                self.kinds.append("finish")
            return "All steps are done.\n```python\ncomplete_task()\n```"
        with self._lock:
            self.kinds.append("host")
        return self._host(user, messages, n_actions)

    def _node(self, node_id: str, instructions: str, user: str, messages: list[dict[str, Any]], n_actions: int) -> str:
        with self._lock:
            self.kinds.append(f"node:{node_id}")
            if n_actions == 0:
                self.node_prompts.setdefault(node_id, []).append(user)
                self._attempts[node_id] = self._attempts.get(node_id, 0) + 1
            attempt = self._attempts[node_id]
        if self.raise_in == node_id:
            raise RuntimeError(f"simulated endpoint failure in {node_id}")
        if attempt <= self.fail.get(node_id, 0):
            return f"Still checking (step {n_actions + 1}).\n```python\nprint('check {n_actions + 1}')\n```"
        if n_actions == 0:
            return f"Do it.\n```python\n{_code(instructions)}\n```"
        observation = messages[-1]["content"].removeprefix("Observation:").strip()
        return f"SUBTASK DONE: value {observation}"

    @staticmethod
    def _host(user: str, messages: list[dict[str, Any]], n_actions: int) -> str:
        if "# Procedure" in user:
            steps = re.findall(r"^(\d+)\. (.*)$", user.split("# Procedure")[1], re.MULTILINE)
            marker = "STEP DONE"
        else:
            graph = json.loads(user.split("```json\n")[1].split("\n```")[0])
            steps = [(n["id"], n["instructions"]) for n in graph["nodes"]]
            marker = "NODE DONE"
        done = f"{marker} {steps[n_actions - 1][0]}: ok. " if n_actions else ""
        if n_actions < len(steps):
            return f"{done}Next.\n```python\n{_code(steps[n_actions][1])}\n```"
        return f"{done}Finish.\n```python\ncomplete_task()\n```"


def _code(instructions: str) -> str:
    add = re.search(r"Add (\d+)", instructions)
    return f"print(apis.counter.add({add.group(1)}))" if add else "print(apis.counter.get())"
