"""Library organisations: how a skill library is shown to an agent (study "Subagents vs Agent Skills", App. A.1).

- ``flat``: every skill at the top.
- ``task-tree``: two levels, one routing node per source task holding the skills induced from it (no LLM).
- ``tree``: routing nodes (built by an LLM, `skilltransfer.induction.organize`) over the leaf skills; every node and
  skill has exactly one parent, so one path leads from the top to each skill.
- ``graph``: the same, but a node or skill may have several parents (a DAG: no cycles).

An organisation is saved as ``organization.json`` beside the library's skills (`save_organization`) and reloaded
against them (`load_organization`), which validates it: known kind, unique node names that differ from skill names,
every reference known, no empty routing node, one parent per node and skill for ``tree``/``task-tree``, no cycle
(``graph``), ``task-tree`` two levels deep, ``flat`` without nodes, and every routing node and every skill of the
library reachable from the top. `LibraryView` navigates it: ``roots()``, ``children(node)``, ``open(name)``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltransfer.errors import InputError
from skilltransfer.memory.library import load_library
from skilltransfer.skill import Skill
from skilltransfer.util.files import atomic_write_text, read_text

OrganizationKind = Literal["flat", "task-tree", "tree", "graph"]
ORGANIZATION_KINDS: tuple[str, ...] = ("flat", "task-tree", "tree", "graph")
ORGANIZATION_FILE = "organization.json"
FORMAT_VERSION = 1
_NO_TASK = "skills without a source task"


class RoutingNode(BaseModel):
    """A routing node: a named group whose children are other routing nodes and/or leaf skills."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    """Unique among nodes and different from every skill name (an agent opens it by name)."""
    description: str = ""
    """What the skills below it are for (shown in its parent's listing)."""
    children: list[str] = Field(default_factory=list)
    """Names of child routing nodes."""
    skills: list[str] = Field(default_factory=list)
    """Ids of child leaf skills."""


class Organization(BaseModel):
    """A library organisation (see the module docstring); validate it against its skills with `validate`."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    kind: OrganizationKind
    roots: list[str] = Field(default_factory=list)
    """Names of the routing nodes at the top."""
    root_skills: list[str] = Field(default_factory=list)
    """Ids of the skills at the top (``flat``: all of them)."""
    nodes: list[RoutingNode] = Field(default_factory=list)
    built_by: dict[str, Any] = Field(default_factory=dict)
    """How it was built: ``method`` ("flat", "task-tree", "llm" or "fallback:task-tree"), the model, prompt id, calls,
    notes on repaired model output, the fallback's reason."""

    def node(self, name: str) -> RoutingNode:
        """The routing node named ``name`` (``KeyError`` if none)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name (2)``, ``name (3)``... whichever is not in ``taken`` (case-insensitively); adds it."""
    candidate, number = name, 2
    while candidate.casefold() in taken:
        candidate = f"{name} ({number})"
        number += 1
    taken.add(candidate.casefold())
    return candidate


def flat_organization(skills: Iterable[Skill]) -> Organization:
    """Every skill at the top, no routing nodes."""
    return Organization(kind="flat", root_skills=[skill.id for skill in skills], built_by={"method": "flat"})


def task_tree(skills: Iterable[Skill], *, kind: OrganizationKind = "task-tree",
              built_by: dict[str, Any] | None = None) -> Organization:
    """Two levels without an LLM: one routing node per source task (``provenance.source_task_id``, in order of first
    appearance; skills without one share a node), holding that task's skills.

    Args:
        skills: the library.
        kind: recorded kind (``tree``/``graph`` when this is the fallback of an LLM build; a task tree is both).
        built_by: recorded in ``built_by`` (default ``{"method": "task-tree"}``).
    """
    skills = list(skills)
    groups: dict[str | None, list[Skill]] = {}
    for skill in skills:
        groups.setdefault(skill.provenance.source_task_id, []).append(skill)
    taken = {skill.name.casefold() for skill in skills}
    nodes = []
    for task_id, members in groups.items():
        name = unique_name(f"task {task_id}" if task_id is not None else _NO_TASK, taken)
        names = ", ".join(member.name for member in members)
        what = f"induced from task {task_id}" if task_id is not None else "with no recorded source task"
        description = f"{len(members)} skill{'s' if len(members) > 1 else ''} {what}: {names}"
        nodes.append(RoutingNode(name=name, description=_cut(description, 300), skills=[m.id for m in members]))
    return Organization(kind=kind, roots=[node.name for node in nodes], nodes=nodes,
                        built_by=built_by or {"method": "task-tree"})


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


# ----------------------------------------------------------------------------------------------- validation
def validate(organization: Organization, skills: Iterable[Skill], *, where: object | None = None) -> None:
    """Check ``organization`` against the library ``skills`` (rules in the module docstring).

    Args:
        organization: the organisation.
        skills: the library it organises.
        where: the file named in errors (e.g. the organization.json path).

    Raises:
        InputError: one line naming the first problem found.
    """
    problem = _problem(organization, list(skills))
    if problem is not None:
        raise InputError(f"invalid {organization.kind} organisation: {problem}", path=where)


def _problem(org: Organization, skills: list[Skill]) -> str | None:
    if org.format_version != FORMAT_VERSION:
        return f"format_version {org.format_version} is not supported (this version reads {FORMAT_VERSION})"
    by_id = {skill.id: skill for skill in skills}
    skill_names = {skill.name.casefold() for skill in skills}
    nodes: dict[str, RoutingNode] = {}
    folded: set[str] = set()
    for node in org.nodes:
        if node.name.casefold() in folded:
            return f"two routing nodes are named {node.name!r}"
        if node.name.casefold() in skill_names:
            return f"routing node {node.name!r} has the name of a skill"
        nodes[node.name] = node
        folded.add(node.name.casefold())
    if org.kind == "flat" and nodes:
        return "a flat library has no routing nodes"
    parents: dict[tuple[str, str], list[str]] = {}
    for parent, children, ids in [("(top)", org.roots, org.root_skills),
                                  *((n.name, n.children, n.skills) for n in org.nodes)]:
        for child in children:
            if child not in nodes:
                return f"{_label(parent)} lists an unknown routing node {child!r}"
            parents.setdefault(("node", child), []).append(parent)
        for skill_id in ids:
            if skill_id not in by_id:
                return f"{_label(parent)} lists an unknown skill id {skill_id!r}"
            parents.setdefault(("skill", skill_id), []).append(parent)
        for kind, listed in (("routing node", children), ("skill", ids)):
            twice = sorted({item for item in listed if listed.count(item) > 1})
            if twice:
                return f"{_label(parent)} lists the {kind} {twice[0]!r} twice"
        if parent != "(top)" and not children and not ids:
            return f"routing node {parent!r} is empty"
    if org.kind in ("tree", "task-tree"):
        for (kind, item), found in parents.items():
            if len(found) > 1:
                shown = by_id[item].name if kind == "skill" else item
                return (f"{'skill' if kind == 'skill' else 'routing node'} {shown!r} has {len(found)} parents "
                        f"({', '.join(found)}); a {org.kind} allows one")
    if org.kind == "task-tree":
        if org.root_skills:
            return "a task tree has no skills at the top"
        deep = [node.name for node in org.nodes if node.children]
        if deep:
            return f"a task tree is two levels deep, but routing node {deep[0]!r} holds routing nodes"
    cycle = _cycle(org.roots, nodes)
    if cycle:
        return f"cycle {' -> '.join(cycle)}"
    reached_nodes, reached_skills = _reachable(org, nodes)
    unreached = [node.name for node in org.nodes if node.name not in reached_nodes]
    if unreached:
        return f"routing node {unreached[0]!r} cannot be reached from the top"
    missing = [skill for skill in skills if skill.id not in reached_skills]
    if missing:
        return (f"skill {missing[0].name!r} ({missing[0].id}) cannot be reached from the top"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}")
    return None


def _label(parent: str) -> str:
    return "the top level" if parent == "(top)" else f"routing node {parent!r}"


def _cycle(roots: list[str], nodes: dict[str, RoutingNode]) -> list[str] | None:
    """A cycle among routing nodes (as a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for child in nodes[name].children:
            if state.get(child) == 1:
                return [*path[path.index(child):], child]
            if child not in state:
                found = visit(child)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for start in [*roots, *nodes]:
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def _reachable(org: Organization, nodes: dict[str, RoutingNode]) -> tuple[set[str], set[str]]:
    seen_nodes: set[str] = set()
    seen_skills = set(org.root_skills)
    stack = list(org.roots)
    while stack:
        name = stack.pop()
        if name in seen_nodes:
            continue
        seen_nodes.add(name)
        seen_skills.update(nodes[name].skills)
        stack.extend(nodes[name].children)
    return seen_nodes, seen_skills


# ----------------------------------------------------------------------------------------------- persistence
def save_organization(organization: Organization, folder: str | Path) -> Path:
    """Write ``folder/organization.json`` atomically."""
    path = Path(folder) / ORGANIZATION_FILE
    atomic_write_text(path, organization.model_dump_json(indent=2) + "\n")
    return path


def load_organization(folder: str | Path, skills: Iterable[Skill]) -> Organization:
    """Read ``folder/organization.json`` (or that file itself) and validate it against ``skills``.

    Raises:
        InputError: a missing or malformed file, or an invalid organisation (one line naming the file).
    """
    path = Path(folder)
    if path.is_dir():
        path = path / ORGANIZATION_FILE
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"broken JSON: {exc.msg}", path=path, line=exc.lineno) from None
    try:
        organization = Organization.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(part) for part in err["loc"]) or "organization"
        raise InputError(f"field {field!r}: {err['msg']}", path=path) from None
    validate(organization, skills, where=path)
    return organization


# ----------------------------------------------------------------------------------------------- navigation
@dataclass(frozen=True)
class Entry:
    """One item of a listing: a routing node or a leaf skill."""

    name: str
    kind: Literal["node", "skill"]
    description: str
    skill: Skill | None = None


class NodeNotFound(LookupError):
    """``open``/``children`` was given a name that is no routing node (or skill); the message suggests names."""


class LibraryView:
    """Navigation of an organised library (for the agent's ``open_node``): the top, a node's children, listings.

    Args:
        organization: the organisation (validated here against ``skills``).
        skills: the library.
    """

    def __init__(self, organization: Organization, skills: Iterable[Skill]) -> None:
        self.skills = list(skills)
        validate(organization, self.skills)
        self.organization = organization
        self._by_id = {skill.id: skill for skill in self.skills}
        self._by_name = {skill.name: skill for skill in self.skills}
        self._nodes = {node.name: node for node in organization.nodes}

    @classmethod
    def load(cls, folder: str | Path) -> LibraryView:
        """The library in ``folder`` (`load_library`) with its ``organization.json``."""
        skills = load_library(folder)
        return cls(load_organization(folder, skills), skills)

    def _entries(self, node_names: list[str], skill_ids: list[str]) -> list[Entry]:
        return ([Entry(name, "node", self._nodes[name].description) for name in node_names]
                + [Entry(self._by_id[i].name, "skill", self._by_id[i].description, self._by_id[i]) for i in skill_ids])

    def roots(self) -> list[Entry]:
        """The top level: routing nodes first, then skills."""
        return self._entries(self.organization.roots, self.organization.root_skills)

    def children(self, node: str) -> list[Entry]:
        """The children of routing node ``node``: routing nodes first, then skills.

        Raises:
            NodeNotFound: no routing node has that name.
        """
        found = self._nodes.get(node)
        if found is None:
            raise NodeNotFound(self._not_found(node))
        return self._entries(found.children, found.skills)

    def parents(self, name: str) -> list[str]:
        """The routing nodes that list ``name`` (a node or skill name); "" stands for the top level."""
        skill = self._by_name.get(name)
        out = []
        for parent, children, ids in [("", self.organization.roots, self.organization.root_skills),
                                      *((n.name, n.children, n.skills) for n in self.organization.nodes)]:
            if name in children or (skill is not None and skill.id in ids):
                out.append(parent)
        return out

    def skill(self, name: str) -> Skill:
        """The leaf skill named ``name`` (``NodeNotFound`` if none)."""
        if name not in self._by_name:
            raise NodeNotFound(self._not_found(name))
        return self._by_name[name]

    def _not_found(self, name: str) -> str:
        known = [*self._nodes, *self._by_name]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return f"no routing node or skill is named {name!r}{hint}"

    def listing(self, entries: list[Entry]) -> str:
        """Entries as text: ``- [group] name: description`` per routing node, a skill's name, description and
        contracts per skill."""
        lines = []
        for entry in entries:
            kind = "group" if entry.kind == "node" else "skill"
            lines.append(f"- [{kind}] {entry.name}: {entry.description}".rstrip(": "))
            if entry.skill is not None:
                lines.extend(f"  {line}" for line in entry.skill.contracts().splitlines())
        return "\n".join(lines) + "\n"

    def top(self) -> str:
        """The top-level listing."""
        skills = len(self.skills)
        head = f"Skill library ({self.organization.kind}): {skills} skill{'s' if skills != 1 else ''}"
        if self.organization.nodes:
            groups = len(self.organization.nodes)
            head += f" in {groups} group{'s' if groups != 1 else ''}; open a group to see what it holds"
        return f"{head}.\n{self.listing(self.roots())}"

    def open(self, name: str) -> str:
        """What opening ``name`` shows: a routing node's description and listing, or a leaf skill's card.

        Raises:
            NodeNotFound: no routing node or skill has that name (the message suggests close names).
        """
        if name in self._nodes:
            node = self._nodes[name]
            about = f"{node.description}\n" if node.description else ""
            return f"## Group: {name}\n{about}{self.listing(self.children(name))}"
        return self.skill(name).render_card()

    def subset(self, skill_ids: Iterable[str]) -> Organization:
        """The organisation restricted to the given skills: other skills are left out, then every routing node left
        without children (the structure is otherwise unchanged, so it stays valid for the kept skills)."""
        keep = set(skill_ids) & set(self._by_id)
        org = self.organization
        alive: dict[str, bool] = {}

        def live(name: str) -> bool:
            if name not in alive:
                node = self._nodes[name]
                alive[name] = any(i in keep for i in node.skills) | any([live(c) for c in node.children])
            return alive[name]

        nodes = [RoutingNode(name=n.name, description=n.description, children=[c for c in n.children if live(c)],
                             skills=[i for i in n.skills if i in keep]) for n in org.nodes if live(n.name)]
        return Organization(kind=org.kind, roots=[r for r in org.roots if live(r)],
                            root_skills=[i for i in org.root_skills if i in keep], nodes=nodes,
                            built_by={**org.built_by, "subset_of": len(self.skills)})
