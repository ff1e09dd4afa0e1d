"""Skill execution modes (issue 14 §2-§3): how retrieved skills enter the executor's context, and the harness-side
skill actions ``load_skill``, ``run_skill`` and ``open_node``.

A mode (``skill_exec``) and a library organisation decide what the skills section shows and which actions exist:

- ``inline`` (default): every retrieved skill rendered in full (description, contracts, body), as before; with a
  hierarchical organisation the top level lists groups and ``open_node`` shows a group's skills in full.
- ``agent-skill``: skill cards only (name, description, contracts); ``load_skill("name")`` puts that skill's
  instructions into the caller's context as the observation of that step (once per load).
- ``subagent``: skill cards only; ``run_skill("name", inputs)`` runs the skill in a fresh executor context (see
  `skilltransfer.agents.executor.Executor`) and returns only its output. With a hierarchical organisation, routing
  nodes run as subagents too: ``run_skill("group", inputs)`` starts a subagent that sees the group's listing and may
  ``run_skill`` its children.
- ``hybrid``: routing nodes are opened in the caller's context (``open_node``), leaf skills run as subagents.

What the organisation holds is the ``library_exposure``: ``retrieved`` (default) organises only the top-k retrieved
skills; ``whole`` organises the whole library (the study's set-up: a flat library lists every skill, a hierarchy shows
its top level and every group can be opened), and the top-k retrieved skills are only the first view, listed above it
(``first_view``).

The actions are harness-side calls, like ``complete_task`` is for the world: the model writes one of them as the
only statement of its code block (``load_skill("x")`` or ``print(load_skill("x"))``, literal arguments); the executor
handles it without running code in the episode (`parse_skill_call`). Each handled call is an executor step (it counts
against the step budget) whose observation is the action's result.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.agents.config import SkillExec
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.memory.library import materialize_skill, package_dirname
from skilltransfer.memory.organization import (
    Entry,
    LibraryView,
    NodeNotFound,
    Organization,
    RoutingNode,
    flat_organization,
    task_tree,
    unique_name,
)
from skilltransfer.memory.package import PackageWriteError
from skilltransfer.skill import Skill
from skilltransfer.util import pyast

ACTION_NAMES: tuple[str, ...] = ("load_skill", "run_skill", "open_node")


@dataclass(frozen=True)
class SkillCall:
    """A parsed skill action: its name and literal arguments."""

    action: str
    target: str
    inputs: Any = ""


def parse_skill_call(code: str, offered: frozenset[str]) -> SkillCall | str | None:
    """The skill action a code block is, if any.

    Returns:
        A `SkillCall` when the block is one offered action with literal arguments; an error message (str) when the
        block uses an offered action in any other way; None when it does not use one (the code runs in the episode).
    """
    if not offered:
        return None
    try:
        tree = pyast.parse(code)
    except SyntaxError:
        return None
    used = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in offered})
    if not used:
        return None
    usage = (f"`{used[0]}` is a harness action, not a Python function: write it as the only statement of its code "
             f"block, with literal arguments, e.g. {_EXAMPLES[used[0]]}")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return usage
    call = tree.body[0].value
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
            and len(call.args) == 1 and not call.keywords):
        call = call.args[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in offered):
        return usage
    try:
        args = [pyast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: pyast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
    except (ValueError, SyntaxError, TypeError):
        return usage
    if len(kwargs) != len(call.keywords):
        return usage
    target = kwargs.pop("name", args.pop(0) if args else None)
    inputs = kwargs.pop("inputs", args.pop(0) if args else "")
    if not isinstance(target, str) or args or kwargs or (call.func.id != "run_skill" and inputs != ""):
        return usage
    return SkillCall(call.func.id, target.strip(), inputs)


_EXAMPLES = {"load_skill": '`load_skill("skill name")`', "open_node": '`open_node("group name")`',
             "run_skill": '`run_skill("skill name", {"key": "value"})`'}


def render_inputs(inputs: Any) -> str:
    """The caller's ``inputs`` argument as the text a subagent is given."""
    if isinstance(inputs, str):
        return inputs.strip() or "(none given)"
    if isinstance(inputs, dict):
        return "\n".join(f"- {k}: {v if isinstance(v, str) else json.dumps(v, default=str)}"
                         for k, v in inputs.items()) or "(none given)"
    return json.dumps(inputs, default=str)


def organize_retrieved(kind: str, skills: list[Skill], frozen: LibraryView | None) -> Organization:
    """The organisation an agent navigates for one retrieval.

    ``flat``: the skills at the top. ``task-tree``: built from the skills (no LLM). ``tree``/``graph``: the frozen
    organisation restricted to the retrieved skills it holds, plus task-tree groups (one per source task) for the
    skills it does not hold; without a frozen organisation, the task tree of all of them (the documented fallback:
    ``built_by.method`` says so).
    """
    if kind == "flat":
        return flat_organization(skills)
    if kind == "task-tree" or frozen is None:
        method = "task-tree" if kind == "task-tree" else "fallback:task-tree (no organization given)"
        return task_tree(skills, kind="task-tree" if kind == "task-tree" else kind,  # type: ignore[arg-type]
                         built_by={"method": method})
    known = {s.id for s in frozen.skills}
    held = frozen.subset(s.id for s in skills if s.id in known)
    rest = [s for s in skills if s.id not in known]
    if not rest:
        return held
    taken = {n.name.casefold() for n in held.nodes} | {s.name.casefold() for s in skills}
    extra = [RoutingNode(name=unique_name(n.name, taken), description=n.description, skills=n.skills)
             for n in task_tree(rest).nodes]
    return Organization(kind=held.kind, roots=[*held.roots, *(n.name for n in extra)], root_skills=held.root_skills,
                        nodes=[*held.nodes, *extra],
                        built_by={**held.built_by, "task_tree_for_new_skills": len(rest)})


@dataclass
class SubagentRequest:
    """A ``run_skill`` the executor must run: the seed message and the actions the subagent is offered."""

    target: str
    seed: str
    inputs_text: str
    actions: SkillActions | None


@dataclass
class SkillActions:
    """The skills section and the skill actions of one executor context (the caller's, or a routing subagent's).

    Args:
        mode: the execution mode.
        view: the organised skills this context may reach.
        prompts: the agent prompts (listing and action templates).
        workspace: the episode folder, where a skill's resources are placed (``skills/<name>/``); None: not placed.
        start: the routing node this context starts from (a routing subagent); None: the top level.
        first_view: skills listed before the library's top level (``whole`` exposure: the retrieved ones).
    """

    mode: SkillExec
    view: LibraryView
    prompts: AgentPrompts
    workspace: Path | None = None
    start: str | None = None
    first_view: list[Skill] = field(default_factory=list)
    loads: int = 0
    opened: list[str] = field(default_factory=list)

    @property
    def hierarchical(self) -> bool:
        return bool(self.view.organization.nodes)

    @property
    def offered(self) -> frozenset[str]:
        """The actions of this context (see the module docstring)."""
        out: set[str] = set()
        if self.mode == "agent-skill":
            out.add("load_skill")
        if self.mode in ("subagent", "hybrid"):
            out.add("run_skill")
        if self.hierarchical and self.mode != "subagent":
            out.add("open_node")
        return frozenset(out)

    def section(self) -> str:
        """The skills section of the task message."""
        entries = self.view.children(self.start) if self.start else self.view.roots()
        listing = "".join(self._entry(e) for e in entries)
        if self.first_view and not self.start:
            first = "".join(self._entry(Entry(s.name, "skill", s.description, s)) for s in self.first_view)
            listing = (f"Retrieved for this task (first view; every skill of the library below can be used):\n{first}"
                       f"\nThe library{' (top level)' if self.hierarchical else ''}:\n{listing}")
        how = "".join(getattr(self.prompts, f"action_{name}").render() for name in ACTION_NAMES
                      if name in self.offered)
        size = len(self.view.skills)
        head = f"{size} skill{'s' if size != 1 else ''}"
        if self.start:
            head = f"{head}; the members of group {self.start!r}"
        elif self.hierarchical:
            head += f" in {len(self.view.organization.nodes)} groups ({self.view.organization.kind}); the top level"
        return self.prompts.skills_library.render(summary=head, listing=listing.rstrip("\n"), actions=how.rstrip())

    def _entry(self, entry: Any) -> str:
        if entry.skill is None:
            return f"- [group] {entry.name}: {entry.description}\n".replace(": \n", "\n")
        if self.mode == "inline":
            return entry.skill.render()
        return entry.skill.render_card()

    def handle(self, call: SkillCall) -> str | SubagentRequest:
        """The observation of a load/open, or the subagent to run for ``run_skill``; unknown names and actions not
        allowed on a target get a one-line error as the observation."""
        try:
            if call.action == "open_node":
                return self._open(call.target)
            if call.action == "load_skill":
                return self._load(call.target)
            return self._run(call)
        except NodeNotFound as exc:
            return f"{call.action} error: {exc}"

    def _is_node(self, name: str) -> bool:
        return any(n.name == name for n in self.view.organization.nodes)

    def _open(self, name: str) -> str:
        if not self._is_node(name):
            skill = self.view.skill(name)
            verb = "load_skill" if "load_skill" in self.offered else "run_skill"
            return f"open_node error: {skill.name!r} is a skill, not a group; use {verb}(\"{skill.name}\")"
        self.opened.append(name)
        listing = "".join(self._entry(e) for e in self.view.children(name))
        node = self.view.organization.node(name)
        about = f"{node.description}\n" if node.description else ""
        return f"## Group: {name}\n{about}{listing}"

    def _load(self, name: str) -> str:
        if self._is_node(name):
            return f"load_skill error: {name!r} is a group; open it with open_node(\"{name}\")"
        skill = self.view.skill(name)
        self.loads += 1
        return f"Loaded skill {skill.name!r}:\n{skill.render()}{self._place(skill)}"

    def _run(self, call: SkillCall) -> str | SubagentRequest:
        inputs = render_inputs(call.inputs)
        if self._is_node(call.target):
            if self.mode != "subagent":
                return f"run_skill error: {call.target!r} is a group; open it with open_node(\"{call.target}\")"
            node = self.view.organization.node(call.target)
            nested = SkillActions(self.mode, self.view, self.prompts, self.workspace, start=call.target)
            instructions = (f"Group {node.name!r}: {node.description}\nRun the member skill(s) below that produce what "
                            "the caller asked for, then report their output.")
            seed = self.prompts.subagent_task.render(name=node.name, inputs=inputs, instructions=instructions,
                                                     resources="", actions=nested.section())
            return SubagentRequest(call.target, seed, inputs, nested)
        skill = self.view.skill(call.target)
        seed = self.prompts.subagent_task.render(name=skill.name, inputs=inputs, instructions=skill.render().strip(),
                                                 resources=self._place(skill).strip(), actions="")
        return SubagentRequest(skill.name, seed, inputs, None)

    def _place(self, skill: Skill) -> str:
        """Materialise a skill's resources in the workspace; the line that says where (or why not)."""
        if not skill.resources:
            return ""
        if self.workspace is None:
            return "\n(this skill's resource files cannot be placed: the episode has no workspace folder)\n"
        try:
            folder = materialize_skill(skill, self.workspace)
        except PackageWriteError as exc:
            return f"\n(this skill's resource files could not be placed: {exc})\n"
        relative = folder.relative_to(self.workspace).as_posix() if folder.is_relative_to(self.workspace) else \
            f"skills/{package_dirname(skill.name)}"
        return f"\nResources of this skill are in the folder `{relative}/`: {', '.join(skill.resources)}\n"
