"""Plans: a task's DAG of skill invocations, its JSON file, and the structural checks run before anything executes.

A plan node invokes one skill package (or none) with local instructions; ``depends_on`` lists the nodes that must
finish first and ``bindings`` name predecessors' output text (``{"contacts": "outputs.v2"}``) that is rendered into
the node's prompt. Files flow through the episode's shared workspace, not through bindings.

`validate_plan` returns one line per problem: an empty plan, a malformed id, a duplicate id, an unknown skill, a
dependency on an unknown node, each cycle, a binding that is malformed or names a node that is not a predecessor
(direct or transitive), and each node that can never run because something it depends on is in a cycle or missing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.errors import InputError
from skilltransfer.skill import Skill

FORMAT_VERSION = 1
NODE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
"""A node id: a letter, then up to 31 letters, digits, '_' or '-' (no dots: ``outputs.<id>`` must parse)."""
REFERENCE = re.compile(r"^outputs\.([A-Za-z][A-Za-z0-9_-]{0,31})$")
"""A binding's reference to a predecessor's output text."""
BINDING_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class PlanNode(BaseModel):
    """One skill invocation of a plan."""

    model_config = ConfigDict(extra="forbid")

    id: str
    """Case-local id (``v1``, ``v2``, ...), unique in the plan."""
    skill: str | None = None
    """Name of the skill package the node invokes (None: local instructions only)."""
    instructions: str
    """Local instructions: what this node does, in natural language."""
    depends_on: list[str] = Field(default_factory=list)
    """Ids of the nodes that must finish before this one starts."""
    bindings: dict[str, str] = Field(default_factory=dict)
    """Name -> ``outputs.<node id>``: predecessors' output text rendered into this node's prompt."""
    expected_output: str = ""
    """What the node should hand on (its output text), in natural language."""


class PlanOrigin(BaseModel):
    """How a plan was written (for the logs; not part of the plan's fingerprint)."""

    writer: str = ""
    """The planner prompt id (``plan_writer@hash``), or ``"manual"``."""
    model: str = ""
    attempts: int = 0
    """Planner calls made (1 + re-asks)."""
    fallback: str | None = None
    """Why the documented fallback (a one-node plan) was used, if it was."""
    problems: list[str] = Field(default_factory=list)
    """The problems of the last rejected reply (empty when the first reply was accepted)."""
    skills_offered: list[str] = Field(default_factory=list)
    """Skill package names the planner could choose from."""
    replies: list[str] = Field(default_factory=list)
    """The planner's raw replies, in order."""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Plan(BaseModel):
    """A task's frozen plan: a DAG of `PlanNode`s (``plans/<task>.json``)."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    task_id: str
    nodes: list[PlanNode]
    origin: PlanOrigin = Field(default_factory=PlanOrigin)
    packages: list[Skill] = Field(default_factory=list)
    """The skill packages the nodes name, as they were when the plan was written: frozen with the plan, so every
    interface (and every stream) that replays it runs the same packages (`with_packages`)."""

    def node(self, node_id: str) -> PlanNode:
        """The node with this id (KeyError if none)."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    @property
    def ids(self) -> list[str]:
        return [node.id for node in self.nodes]

    @property
    def fingerprint(self) -> str:
        """SHA-256 (16 hex) of the task id and nodes: equal fingerprints mean the same plan (origin aside)."""
        body = json.dumps({"task_id": self.task_id, "nodes": [n.model_dump() for n in self.nodes]}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def with_packages(self, skills: Iterable[Skill]) -> Plan:
        """A copy holding the packages among ``skills`` that the nodes name (by name; the first of a name wins)."""
        named = set(self.skills())
        chosen: dict[str, Skill] = {}
        for skill in skills:
            if skill.name in named:
                chosen.setdefault(skill.name, skill)
        return self.model_copy(update={"packages": list(chosen.values())})

    def skills(self) -> list[str]:
        """The skill names the plan invokes, first use first, each once."""
        return list(dict.fromkeys(node.skill for node in self.nodes if node.skill))

    def dependents(self) -> dict[str, list[str]]:
        """Node id -> ids of the nodes that depend on it directly (plan order)."""
        out: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        for node in self.nodes:
            for dep in node.depends_on:
                if dep in out:
                    out[dep].append(node.id)
        return out

    def ancestors(self, node_id: str) -> set[str]:
        """Every node ``node_id`` depends on, directly or through others (known ids only)."""
        deps: dict[str, list[str]] = {}
        for node in self.nodes:
            deps.setdefault(node.id, node.depends_on)  # a duplicate id: the first node counts
        seen: set[str] = set()
        stack = list(deps.get(node_id, []))
        while stack:
            current = stack.pop()
            if current in seen or current not in deps:
                continue
            seen.add(current)
            stack.extend(deps[current])
        return seen

    def topological_order(self) -> list[str]:
        """Node ids so that every node comes after its dependencies, ties in plan order (a valid plan only)."""
        remaining = {node.id: set(node.depends_on) for node in self.nodes}
        order: list[str] = []
        while remaining:
            ready = [node_id for node_id in self.ids if node_id in remaining and not remaining[node_id]]
            if not ready:
                raise ValueError("the plan has a cycle or an unknown dependency; validate it first")
            for node_id in ready:
                del remaining[node_id]
                order.append(node_id)
            for deps in remaining.values():
                deps.difference_update(ready)
        return order


class PlanError(InputError):
    """A plan that fails validation; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str], *, path: object | None = None, task_id: str = "") -> None:
        self.problems = list(problems)
        task = f" for task {task_id}" if task_id else ""
        super().__init__(f"invalid plan{task} ({len(problems)} problem{'s' if len(problems) != 1 else ''}): "
                         + "; ".join(problems), path=path)


def _cycles(deps: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components that hold a cycle (Tarjan), each as a closed path in plan order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # recursion depth is bounded by the plan size (small)
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for dep in deps[node]:
            if dep not in deps:
                continue
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in deps[node]:
                found.append(component)

    for node in deps:
        if node not in index:
            visit(node)
    order = list(deps)
    return [_cycle_path(sorted(c, key=order.index), deps) for c in found]


def _cycle_path(component: list[str], deps: dict[str, list[str]]) -> list[str]:
    """A closed dependency path through a cycle's component, starting at its first node in plan order."""
    members = set(component)
    start = component[0]
    path, current = [start], start
    while True:
        nxt = next(d for d in deps[current] if d in members)
        if nxt in path:
            return [*path[path.index(nxt):], nxt]
        path.append(nxt)
        current = nxt


def validate_plan(plan: Plan, skills: Collection[str] | None = None) -> list[str]:
    """Structural problems of a plan, one line each ([] when it may run).

    Args:
        plan: the plan.
        skills: the skill package names available (None: skill names are not checked).
    """
    problems: list[str] = []
    if not plan.nodes:
        return ["the plan has no nodes"]
    positions: dict[str, int] = {}
    for number, node in enumerate(plan.nodes, start=1):
        if not NODE_ID.match(node.id):
            problems.append(f"node {number}: invalid id {node.id!r} (a letter, then letters, digits, '_' or '-')")
        if node.id in positions:
            problems.append(f"duplicate node id {node.id!r} (nodes {positions[node.id]} and {number})")
        else:
            positions[node.id] = number
    for node in plan.nodes:
        if node.skill is not None and skills is not None and node.skill not in skills:
            choices = ", ".join(sorted(skills)[:12]) or "none"
            problems.append(f"node {node.id}: unknown skill {node.skill!r} (available: {choices})")
        for dep in node.depends_on:
            if dep not in positions:
                problems.append(f"node {node.id}: depends on unknown node {dep!r}")
    deps: dict[str, list[str]] = {}
    for node in plan.nodes:
        deps.setdefault(node.id, list(dict.fromkeys(node.depends_on)))  # a duplicate id: the first node counts
    cycles = _cycles(deps)
    problems += [f"cycle: {' -> '.join(path)}" for path in cycles]
    for node in plan.nodes:
        ancestors = plan.ancestors(node.id)
        for name, ref in node.bindings.items():
            match = REFERENCE.match(ref.strip())
            if not BINDING_NAME.match(name):
                problems.append(f"node {node.id}: binding name {name!r} is not an identifier")
            if match is None:
                problems.append(f"node {node.id}: binding {name!r} is {ref!r}, not of the form outputs.<node id>")
            elif match.group(1) not in ancestors or match.group(1) == node.id:
                problems.append(f"node {node.id}: binding {name!r} refers to {ref.strip()}, which is not a "
                                f"predecessor of {node.id} (add it to depends_on)")
    problems += _never_run(plan, deps, {member for path in cycles for member in path}, positions)
    return problems


def _never_run(plan: Plan, deps: dict[str, list[str]], in_cycle: set[str], known: dict[str, int]) -> list[str]:
    """One line per node that can never become ready because a dependency is in a cycle or can never run itself
    (cycle members and nodes with an unknown dependency are reported by their own lines)."""
    missing = {n for n, ds in deps.items() if n not in in_cycle and any(d not in known for d in ds)}
    blocked: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for node in plan.nodes:
            if node.id in blocked or node.id in in_cycle or node.id in missing:
                continue
            why = next((f"{d}, which is in a cycle" if d in in_cycle else f"{d}, which can never run"
                        for d in deps[node.id] if d in in_cycle or d in blocked or d in missing), None)
            if why is not None:
                blocked[node.id] = why
                changed = True
    return [f"node {node_id} can never run: it depends on {why}" for node_id, why in blocked.items()]


def check_plan(plan: Plan, skills: Collection[str] | None = None, *, path: object | None = None) -> Plan:
    """``plan`` if it is valid; raises `PlanError` (one line per problem) otherwise."""
    problems = validate_plan(plan, skills)
    if problems:
        raise PlanError(problems, path=path, task_id=plan.task_id)
    return plan


def single_node_plan(task_id: str, instruction: str, *, origin: PlanOrigin | None = None) -> Plan:
    """The fallback plan: one node, no skill package, the whole task as its local instructions."""
    node = PlanNode(id="v1", skill=None, instructions=instruction,
                    expected_output="the finished task (its answer, if it asks a question)")
    return Plan(task_id=task_id, nodes=[node], origin=origin or PlanOrigin())


def referenced_nodes(bindings: dict[str, str]) -> Iterable[tuple[str, str]]:
    """(binding name, node id) for each well-formed binding."""
    for name, ref in bindings.items():
        match = REFERENCE.match(ref.strip())
        if match is not None:
            yield name, match.group(1)


def plan_from_json(data: Any, *, path: object | None = None) -> Plan:
    """A `Plan` from parsed JSON; raises `InputError` naming the field when the shape is wrong."""
    try:
        return Plan.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        detail = " ".join(first[1:3]).strip() if len(first) > 1 else first[0]
        raise InputError(f"not a plan: {detail}", path=path) from None
