"""Skill execution modes (issue 14 §2-§3): how retrieved skills enter the executor's context, and the harness-side
skill actions ``load_skill``, ``run_skill``, ``open_node`` and ``read_skill_file``.

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

Under progressive disclosure (``agent.skill_disclosure: progressive``, an external library;
`skilltransfer.agents.disclosure`) every mode shows cards without file lists under a header that names the library
and its size; ``inline`` shows a short skill whole and offers ``load_skill`` for the others, ``inline`` and
``agent-skill`` offer ``read_skill_file("name", "path")`` for a skill's files, and a ``run_skill`` subagent is offered
``read_skill_file`` for the files of the skill it runs.

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
from skilltransfer.agents.context import SkillBlock
from skilltransfer.agents.disclosure import Disclosure, one_line
from skilltransfer.agents.prompts import DISCLOSURE_SECTIONS, AgentPrompts
from skilltransfer.memory.library import package_dirname, place_skill
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
from skilltransfer.util.prompts import Prompt

ACTION_NAMES: tuple[str, ...] = ("load_skill", "run_skill", "open_node")
READ_FILE = "read_skill_file"
"""The action that reads a skill's file (progressive disclosure)."""


@dataclass(frozen=True)
class SkillCall:
    """A parsed skill action: its name and literal arguments (``path`` and ``start``: ``read_skill_file``'s)."""

    action: str
    target: str
    inputs: Any = ""
    path: str = ""
    start: int = 0


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
    if call.func.id == READ_FILE:
        return _read_call(args, kwargs) or usage
    target = kwargs.pop("name", args.pop(0) if args else None)
    inputs = kwargs.pop("inputs", args.pop(0) if args else "")
    if not isinstance(target, str) or args or kwargs or (call.func.id != "run_skill" and inputs != ""):
        return usage
    return SkillCall(call.func.id, target.strip(), inputs)


def _read_call(args: list[Any], kwargs: dict[str, Any]) -> SkillCall | None:
    """``read_skill_file(name, path[, start])`` from literal arguments (None when they are not that)."""
    values = dict(zip(("name", "path", "start"), args, strict=False))
    if len(args) > 3 or set(values) & set(kwargs) or set(kwargs) - {"name", "path", "start"}:
        return None
    values.update(kwargs)
    name, path, start = values.get("name"), values.get("path"), values.get("start", 0)
    if not isinstance(name, str) or not isinstance(path, str) or type(start) is not int or start < 0:
        return None
    return SkillCall(READ_FILE, name.strip(), path=path, start=start)


_EXAMPLES = {"load_skill": '`load_skill("skill name")`', "open_node": '`open_node("group name")`',
             "run_skill": '`run_skill("skill name", {"key": "value"})`',
             READ_FILE: '`read_skill_file("skill name", "references/guide.md")`'}


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


def _card(skill: Skill) -> str:
    """A skill's card under full disclosure: `Skill.render_card` with its files counted, not listed."""
    if not skill.resources:
        return skill.render_card()
    files = len(skill.resources)
    return f"{skill.model_copy(update={'resources': {}}).render_card()}Files: {files}.\n"


@dataclass
class SubagentRequest:
    """A ``run_skill`` the executor must run: the seed message and the actions the subagent is offered."""

    target: str
    seed: str
    inputs_text: str
    actions: SkillActions | None


@dataclass
class SkillActions:
    """The skills section and the skill actions of one executor context (the caller's, or a subagent's).

    Args:
        mode: the execution mode.
        view: the organised skills this context may reach.
        prompts: the agent prompts (listing and action templates).
        workspace: the episode folder, where a skill's resources are placed (``skills/<name>/``); None: not placed.
        start: the routing node this context starts from (a routing subagent); None: the top level.
        first_view: skills listed before the library's top level (``whole`` exposure: the retrieved ones).
        disclosure: progressive disclosure of the library (None: skills in full, as the paper's agent).
        library_size: skills in the library (the header's true size; progressive disclosure).
        below_floor: retrieved skills left out below a similarity floor (the header says so).
        reader: a ``run_skill`` subagent under progressive disclosure: only ``read_skill_file``, for its skill.
    """

    mode: SkillExec
    view: LibraryView
    prompts: AgentPrompts
    workspace: Path | None = None
    start: str | None = None
    first_view: list[Skill] = field(default_factory=list)
    disclosure: Disclosure | None = None
    library_size: int = 0
    below_floor: int = 0
    reader: bool = False
    loads: int = 0
    opened: list[str] = field(default_factory=list)
    blocks: list[SkillBlock] = field(default_factory=list)
    """The skills the last `section` listed (context fitting may shorten them; progressive disclosure)."""

    @property
    def hierarchical(self) -> bool:
        return bool(self.view.organization.nodes)

    @property
    def offered(self) -> frozenset[str]:
        """The actions of this context (see the module docstring)."""
        if self.reader:
            return frozenset({READ_FILE})
        out: set[str] = set()
        if self.mode == "agent-skill" or self.disclosure is not None and self.mode == "inline":
            out.add("load_skill")
        if self.mode in ("subagent", "hybrid"):
            out.add("run_skill")
        if self.hierarchical and self.mode != "subagent":
            out.add("open_node")
        if self.disclosure is not None and "load_skill" in out:
            out.add(READ_FILE)
        return frozenset(out)

    def section(self) -> str:
        """The skills section of the task message."""
        self.blocks = []
        entries = self.view.children(self.start) if self.start else self.view.roots()
        listing = "".join(self._entry(e, listed=True) for e in entries)
        if self.first_view and not self.start:
            first = "".join(self._entry(Entry(s.name, "skill", s.description, s), listed=True)
                            for s in self.first_view)
            listing = (f"Retrieved for this task (first view; every skill of the library below can be used):\n{first}"
                       f"\nThe library{' (top level)' if self.hierarchical else ''}:\n{listing}")
        if self.disclosure is not None:
            return self._disclosed_section(listing)
        how = "".join(getattr(self.prompts, f"action_{name}").render() for name in ACTION_NAMES
                      if name in self.offered)
        size = len(self.view.skills)
        head = f"{size} skill{'s' if size != 1 else ''}"
        if self.start:
            head = f"{head}; the members of group {self.start!r}"
        elif self.hierarchical:
            head += f" in {len(self.view.organization.nodes)} groups ({self.view.organization.kind}); the top level"
        return self.prompts.skills_library.render(summary=head, listing=listing.rstrip("\n"), actions=how.rstrip())

    def _disclosed_section(self, listing: str) -> str:
        """The section under progressive disclosure: the library's name and true size, the cards, the actions."""
        assert self.disclosure is not None
        size, shown = self.library_size, len(self.view.skills)
        summary = f"{self.disclosure.holder} holds {size} skill{'s' if size != 1 else ''}"
        if self.start:
            summary += f"; these are the members of group {self.start!r}, which you were asked to run."
        elif self.first_view:
            summary += (f"; all of them can be used: the {len(self.first_view)} nearest to this task are listed first, "
                        "then the library.")
        else:
            summary += f"; {'this is' if shown == 1 else 'these are'} the {shown} nearest to this task"
            if self.below_floor:
                summary += (f" ({self.below_floor} more of the nearest were left out as too far from it: below the "
                            "similarity floor)")
            summary += "."
        if self.hierarchical and not self.start:
            summary += (f" They are in {len(self.view.organization.nodes)} groups ({self.view.organization.kind}); "
                        "the top level is shown.")
        section: Prompt = getattr(self.prompts, DISCLOSURE_SECTIONS[self.disclosure.origin])
        return section.render(library=f"`{self.disclosure.library}`", summary=summary, listing=listing.rstrip("\n"),
                              actions=self.actions_text())

    def actions_text(self) -> str:
        """The "Skill actions" part under progressive disclosure ('' when none is offered)."""
        assert self.disclosure is not None
        offered = self.offered
        lines = []
        for name in (*ACTION_NAMES, READ_FILE):
            if name not in offered:
                continue
            if name == "load_skill":
                lines.append(self.prompts.disclosure_load_skill.render())
            elif name == READ_FILE:
                lines.append(self.prompts.disclosure_read_skill_file.render(page=f"{self.disclosure.page_chars:,}"))
            else:
                lines.append(getattr(self.prompts, f"action_{name}").render())
        if not lines:
            return ""
        return "\n" + self.prompts.disclosure_actions.render(actions="".join(lines).rstrip())

    def _entry(self, entry: Any, *, listed: bool = False) -> str:
        if entry.skill is None:
            name = one_line(entry.name, 200) if self.disclosure is not None else entry.name
            description = one_line(entry.description, 300) if self.disclosure is not None else entry.description
            return f"- [group] {name}: {description}\n".replace(": \n", "\n")
        if self.disclosure is None:
            return entry.skill.render() if self.mode == "inline" else _card(entry.skill)
        if self.mode == "inline":
            block = self.disclosure.inline(entry.skill)
        else:
            block = self.disclosure.card(entry.skill, "load" if "load_skill" in self.offered else "run")
        if listed:
            self.blocks.append(block)
        return block.text + "\n"  # a blank line between skills

    def skill_id(self, name: str) -> str | None:
        """The id of the skill ``name`` names in this context (None for a group or an unknown name): what a pick
        records (`skilltransfer.log.selection`)."""
        if self._is_node(name):
            return None
        try:
            return self.view.skill(name).id
        except NodeNotFound:
            return None

    def handle(self, call: SkillCall) -> str | SkillBlock | SubagentRequest:
        """The observation of a load/open/read (a page of a skill as a `SkillBlock` under progressive disclosure, which
        context fitting may shorten), or the subagent to run for ``run_skill``; unknown names and actions not allowed
        on a target get a one-line error as the observation."""
        try:
            if call.action == "open_node":
                return self._open(call.target)
            if call.action == "load_skill":
                return self._load(call.target)
            if call.action == READ_FILE:
                return self._read(call)
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
        if self.disclosure is not None:  # a library's organisation: its names and descriptions are one line of text
            about = f"{one_line(node.description, 300)}\n" if node.description else ""
            name = one_line(name, 200)
        return f"## Group: {name}\n{about}{listing}"

    def _load(self, name: str) -> str | SkillBlock:
        if self._is_node(name):
            return f"load_skill error: {name!r} is a group; open it with open_node(\"{name}\")"
        skill = self.view.skill(name)
        self.loads += 1
        if self.disclosure is not None:
            return self.disclosure.loaded(skill, self._placed(skill))
        return f"Loaded skill {skill.name!r}:\n{skill.render()}{self._place(skill)}"

    def _read(self, call: SkillCall) -> str | SkillBlock:
        if self.disclosure is None or self._is_node(call.target):
            return f"{READ_FILE} error: {call.target!r} is not a skill whose files can be read here"
        return self.disclosure.read(self.view.skill(call.target), call.path, call.start)

    def _run(self, call: SkillCall) -> str | SubagentRequest:
        inputs = render_inputs(call.inputs)
        if self._is_node(call.target):
            if self.mode != "subagent":
                return f"run_skill error: {call.target!r} is a group; open it with open_node(\"{call.target}\")"
            node = self.view.organization.node(call.target)
            nested = SkillActions(self.mode, self.view, self.prompts, self.workspace, start=call.target,
                                  disclosure=self.disclosure, library_size=self.library_size)
            instructions = (f"Group {node.name!r}: {node.description}\nRun the member skill(s) below that produce what "
                            "the caller asked for, then report their output.")
            seed = self.prompts.subagent_task.render(name=node.name, inputs=inputs, instructions=instructions,
                                                     resources="", actions=nested.section())
            return SubagentRequest(call.target, seed, inputs, nested)
        skill = self.view.skill(call.target)
        if self.disclosure is not None:
            return self._run_disclosed(skill, inputs)
        seed = self.prompts.subagent_task.render(name=skill.name, inputs=inputs, instructions=skill.render().strip(),
                                                 resources=self._place(skill).strip(), actions="")
        return SubagentRequest(skill.name, seed, inputs, None)

    def _run_disclosed(self, skill: Skill, inputs: str) -> SubagentRequest:
        """A subagent for ``skill`` under progressive disclosure: the first page of its instructions, its files, and
        ``read_skill_file`` for them (and for the rest of the instructions)."""
        assert self.disclosure is not None
        loaded = self.disclosure.loaded(skill, self._placed(skill)).text
        instructions = loaded.partition("\n")[2].rstrip()
        reader = SkillActions(self.mode, LibraryView(flat_organization([skill]), [skill]), self.prompts,
                              self.workspace, disclosure=self.disclosure, library_size=self.library_size, reader=True)
        seed = self.prompts.subagent_task.render(name=skill.name, inputs=inputs, instructions=instructions,
                                                 resources="", actions=reader.actions_text())
        return SubagentRequest(skill.name, seed, inputs, reader)

    def _placed(self, skill: Skill) -> str | None:
        """Place a skill's package in the workspace (`place_skill`); the folder (relative to it), None when not
        placed."""
        if not _has_files(skill) or self.workspace is None:
            return None
        try:
            folder = place_skill(skill, self.workspace).folder
        except PackageWriteError:
            return None
        return folder.relative_to(self.workspace).as_posix() if folder.is_relative_to(self.workspace) else \
            f"skills/{package_dirname(skill.name)}"

    def _place(self, skill: Skill) -> str:
        """Place a skill's package in the workspace (`place_skill`); the line that says where (or why not), and
        what of the package it holds beyond the text resources or leaves out."""
        if not _has_files(skill):
            return ""
        if self.workspace is None:
            return "\n(this skill's resource files cannot be placed: the episode has no workspace folder)\n"
        try:
            placed = place_skill(skill, self.workspace)
        except PackageWriteError as exc:
            return f"\n(this skill's resource files could not be placed: {exc})\n"
        folder = placed.folder
        relative = folder.relative_to(self.workspace).as_posix() if folder.is_relative_to(self.workspace) else \
            f"skills/{package_dirname(skill.name)}"
        named = [*skill.resources, *placed.more]
        more = f"; and {len(placed.left_out) - 5} more" if len(placed.left_out) > 5 else ""
        left = f" (not placed: {'; '.join(placed.left_out[:5])}{more})" if placed.left_out else ""
        return f"\nResources of this skill are in the folder `{relative}/`: {', '.join(named)}{left}\n"


def _has_files(skill: Skill) -> bool:
    """Whether a skill has files to place in a workspace: text resources, or a package with files."""
    return bool(skill.resources) or (skill.package is not None and bool(skill.package.files))
