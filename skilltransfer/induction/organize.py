"""Building a hierarchical library organisation with an LLM: ``tree`` or ``graph`` (study "Subagents vs Agent Skills",
App. A.1; the data model, validation and navigation are `skilltransfer.memory.organization`).

The model groups the leaf skills (name and description, numbered) into routing nodes, replying with
``GROUP:`` / ``DESCRIPTION:`` / ``MEMBERS:`` blocks (prompts ``organize*.md`` beside the induction prompts); with
``height=3`` it then groups those routing nodes the same way. A large library is grouped in batches
(``batch_size``) whose groups are merged by name; a prompt too long for the model's window halves the batch.

Small models answer loosely, so parsing is lenient (markdown decoration, ``GROUP 1:``, ranges ``3-5``, members by
name) and output is repaired where the intent is clear: out-of-range numbers are ignored; for a ``tree`` an item
listed in several groups stays in the first; a group name that repeats another's or a skill's gets a number. A reply
with no usable group, or one that leaves items out, is retried (``retries``, default 2) with the problem stated; after
that, left-out items go to a group "other skills" when some reply was usable. When no reply was usable the
organisation falls back to the task tree (one routing node per source task; `task_tree`), recorded as
``built_by.method = "fallback:task-tree"`` with the reason. A failed second level (``height=3``) keeps the first.
Endpoint errors are not parse failures: they propagate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.induction.inducer import INDUCTION_PROMPTS
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.memory.organization import Organization, RoutingNode, task_tree, unique_name, validate
from skilltransfer.protocols import ChatModel
from skilltransfer.skill import Skill
from skilltransfer.util.prompts import load_prompt

_DECOR = r"^[ \t>*_#\-]*"
_GROUP = re.compile(_DECOR + r"(?:\d+[.)][ \t]*)?GROUP(?:[ \t]*\d+)?[ \t*_]*[:.\-][ \t*_]*(.*)$",
                    re.MULTILINE | re.IGNORECASE)
_DESCRIPTION = re.compile(_DECOR + r"DESCRIPTION[ \t*_]*:[ \t*_]*", re.MULTILINE | re.IGNORECASE)
_MEMBERS = re.compile(_DECOR + r"(?:MEMBERS|ITEMS|SKILLS)[ \t*_]*:[ \t*_]*", re.MULTILINE | re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?:[ \t]*[-\u2013][ \t]*(\d+))?(?![\w])")
_OTHER = "other skills"
_MIN_SPLIT = 8
"""A batch whose prompt is too long is halved down to this many items; below, the build falls back."""


class OrganizeConfig(BaseModel):
    """Settings of an LLM-built library organisation."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["tree", "graph"] = "tree"
    """"tree": one parent per skill and routing node; "graph": several allowed (acyclic)."""
    height: int = Field(default=2, ge=2, le=3)
    """Levels from the top to the skills: 2 = routing nodes over skills; 3 = routing nodes over those."""
    max_groups: int | None = Field(default=None, ge=2)
    """Most groups asked for per call (default: the square root of the items, between 2 and 12)."""
    batch_size: int = Field(default=60, ge=_MIN_SPLIT)
    """Most items listed in one call."""
    retries: int = Field(default=2, ge=0)
    """Further calls after an unusable reply (the problem is stated to the model)."""
    max_description_chars: int = Field(default=200, ge=40)
    """Each item's description is cut to this many characters in the prompt."""
    max_tokens: int | None = Field(default=1024, ge=16)
    """Completion budget of each call (None: the model's default)."""
    prompt_dir: str | None = None
    """A folder of replacement prompt files (organize.md, organize_user.md, organize_retry.md)."""
    model_params: dict[str, Any] = Field(default_factory=dict)
    """Extra sampling parameters for each call."""


@dataclass(frozen=True)
class Item:
    """One thing to group: a skill (``key`` its id) or a routing node (``key`` its name)."""

    key: str
    name: str
    description: str


@dataclass
class Group:
    """A group parsed from a reply: members are 0-based item indices."""

    name: str
    description: str
    members: list[int] = field(default_factory=list)


class GroupingFailed(Exception):
    """No usable grouping came back from the model."""


class _TooLong(Exception):
    """The prompt does not fit the model's window."""


def _member_indices(text: str, names: list[str]) -> tuple[list[int], list[int]]:
    """(0-based indices listed in ``text`` by number or range, else by exact name; numbers out of range)."""
    found: list[int] = []
    bad: list[int] = []
    for match in _NUMBER.finditer(text):
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        numbers = range(low, max(low, min(high, len(names) + 1)) + 1) if high >= low else [low, high]
        for number in numbers:
            (found if 1 <= number <= len(names) else bad).append(number - 1)
    if not found and not bad:
        lowered = text.casefold()
        found = [i for i, name in enumerate(names) if re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", lowered)]
    return list(dict.fromkeys(found)), [number + 1 for number in bad]


def parse_groups(reply: str, names: list[str]) -> tuple[list[Group], list[str]]:
    """Parse ``GROUP`` / ``DESCRIPTION`` / ``MEMBERS`` blocks leniently (see the module docstring).

    Args:
        reply: the model's reply.
        names: the item names, in listing order (item k is number k + 1).

    Returns:
        (groups with at least one member, notes on what was ignored).
    """
    headers = list(_GROUP.finditer(reply))
    groups: list[Group] = []
    notes: list[str] = []
    for index, header in enumerate(headers):
        block = reply[header.end():headers[index + 1].start() if index + 1 < len(headers) else len(reply)]
        name = header.group(1).strip().strip("`*_\"' ").strip()
        members_at = _MEMBERS.search(block)
        description_at = _DESCRIPTION.search(block)
        description = ""
        if description_at is not None:
            end = members_at.start() if members_at and members_at.start() > description_at.start() else len(block)
            description = " ".join(block[description_at.end():end].split())
        if members_at is not None:
            members_text = block[members_at.end():]
        else:
            members_text = block[description_at.end():] if description_at else block
            if description_at is not None:  # no MEMBERS line: the description's first line is the description
                first, _, members_text = members_text.partition("\n")
                description = " ".join(first.split())
        members, bad = _member_indices(members_text, names)
        if bad:
            notes.append(f"group {name!r}: ignored item numbers {', '.join(map(str, bad))} (out of range)")
        if members:
            groups.append(Group(name, description, members))
        else:
            notes.append(f"group {name!r}: no valid members, dropped")
    return groups, notes


def _missing(groups: list[Group], count: int) -> list[int]:
    listed = {member for group in groups for member in group.members}
    return [i for i in range(count) if i not in listed]


class Organizer:
    """Builds a ``tree`` or ``graph`` organisation of a skill library with a chat model.

    Args:
        model: the chat model.
        config: settings; keyword arguments override its fields (e.g. ``kind="graph"``).
    """

    def __init__(self, model: ChatModel, *, config: OrganizeConfig | None = None, **kwargs: Any) -> None:
        self.model = model
        self.config = OrganizeConfig.model_validate({**(config or OrganizeConfig()).model_dump(), **kwargs})
        folder, default = self.config.prompt_dir, INDUCTION_PROMPTS
        self.system = load_prompt("organize", folder, default_folder=default)
        self.user = load_prompt("organize_user", folder, default_folder=default)
        self.retry = load_prompt("organize_retry", folder, default_folder=default)
        self.stats: dict[str, Any] = {}
        self.notes: list[str] = []

    @property
    def prompt_id(self) -> str:
        """Id of the system prompt template."""
        return self.system.id

    def organize(self, skills: list[Skill]) -> Organization:
        """Group ``skills`` under routing nodes (one or two levels, per ``height``); falls back to the task tree
        when the model gives no usable grouping.

        Raises:
            ModelCallError: the endpoint failed (after its own retries).
        """
        self.stats = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0, "model": None}
        self.notes = []
        taken = {skill.name.casefold() for skill in skills}
        try:
            first = self._level([Item(s.id, s.name, s.description) for s in skills], "agent skills", taken)
        except GroupingFailed as exc:
            return task_tree(skills, kind=self.config.kind,
                             built_by=self._built_by("fallback:task-tree", reason=str(exc)))
        nodes = [RoutingNode(name=g.name, description=g.description, skills=[skills[i].id for i in g.members])
                 for g in first]
        roots = [node.name for node in nodes]
        if self.config.height == 3:
            if len(nodes) > 2:
                try:
                    upper = self._level([Item(n.name, n.name, n.description) for n in nodes], "skill groups", taken)
                except GroupingFailed as exc:
                    self.notes.append(f"second level not built ({exc}); the first level is the top")
                else:
                    top = [RoutingNode(name=g.name, description=g.description,
                                       children=[nodes[i].name for i in g.members]) for g in upper]
                    nodes, roots = [*top, *nodes], [node.name for node in top]
            else:
                self.notes.append(f"second level not built: only {len(nodes)} groups at the first")
        organization = Organization(kind=self.config.kind, roots=roots, nodes=nodes, built_by=self._built_by("llm"))
        validate(organization, skills)
        return organization

    def _built_by(self, method: str, **more: Any) -> dict[str, Any]:
        return {"method": method, "kind": self.config.kind, "height": self.config.height,
                "prompt_id": self.prompt_id, **self.stats, "notes": list(self.notes), **more}

    # ------------------------------------------------------------------------------------------- one level
    def _level(self, items: list[Item], what: str, taken: set[str]) -> list[Group]:
        """Group ``items`` (in batches), merge groups of the same name, give them unique names."""
        merged: dict[str, Group] = {}
        for start in range(0, len(items), self.config.batch_size):
            batch = items[start:start + self.config.batch_size]
            for group in self._group_batch(batch, what):
                members = [start + i for i in group.members]
                key = group.name.casefold()
                if key in merged:
                    merged[key].members.extend(m for m in members if m not in merged[key].members)
                else:
                    merged[key] = Group(group.name, group.description, members)
        out = []
        for number, group in enumerate(merged.values(), start=1):
            name = unique_name(group.name or f"group {number}", taken)
            if name != group.name:
                self.notes.append(f"group {group.name!r} renamed {name!r} (empty or taken)")
            out.append(Group(name, group.description, group.members))
        return out

    def _group_batch(self, batch: list[Item], what: str) -> list[Group]:
        try:
            return self._ask(batch, what)
        except _TooLong as exc:
            if len(batch) < 2 * _MIN_SPLIT:
                raise GroupingFailed(f"the prompt does not fit the model's window ({exc})") from None
            half = len(batch) // 2
            self.notes.append(f"a batch of {len(batch)} items was too long for the model; split in two")
            first = self._group_batch(batch[:half], what)
            second = self._group_batch(batch[half:], what)
            return first + [Group(g.name, g.description, [half + m for m in g.members]) for g in second]

    def _ask(self, batch: list[Item], what: str) -> list[Group]:
        """Ask for a grouping of one batch, retrying unusable replies; repair the best one."""
        count = len(batch)
        limit = self.config.max_groups or min(12, max(2, round(math.sqrt(count))))
        membership = ("Put every item in exactly ONE group." if self.config.kind == "tree" else
                      "Put every item in each group where an agent would look for it: one group, or several when "
                      "it serves several kinds of goal.")
        listing = "\n".join(f"{number}. {item.name}: {_cut(item.description, self.config.max_description_chars)}"
                            for number, item in enumerate(batch, start=1))
        messages = [{"role": "system", "content": self.system.render(what=what, max_groups=limit,
                                                                      membership=membership)},
                    {"role": "user", "content": self.user.render(items=listing, count=count)}]
        names = [item.name for item in batch]
        best: tuple[list[Group], list[str]] | None = None
        problem = ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                self.stats["retries"] += 1
            reply = self._complete(messages)
            groups, notes = parse_groups(reply, names)
            missing = _missing(groups, count)
            if groups and (best is None or len(missing) < len(_missing(best[0], count))):
                best = (groups, notes)
            if not groups:
                problem = "it has no GROUP block with valid MEMBERS numbers"
            elif missing:
                problem = (f"items {', '.join(str(i + 1) for i in missing[:20])} are in no group; every item "
                           f"must be in a group")
            else:
                break
            messages = [*messages, {"role": "assistant", "content": reply},
                        {"role": "user", "content": self.retry.render(problem=problem)}]
        if best is None:
            raise GroupingFailed(f"no usable grouping in {self.config.retries + 1} replies: {problem}")
        groups, notes = best
        self.notes.extend(notes)
        return self._repair(groups, count)

    def _repair(self, groups: list[Group], count: int) -> list[Group]:
        if self.config.kind == "tree":
            seen: set[int] = set()
            for group in groups:
                again = [m for m in group.members if m in seen]
                if again:
                    self.notes.append(f"group {group.name!r}: {len(again)} item(s) already in an earlier group "
                                      f"removed (a tree has one parent)")
                group.members = [m for m in group.members if m not in seen]
                seen.update(group.members)
            groups = [group for group in groups if group.members]
        missing = _missing(groups, count)
        if missing:
            self.notes.append(f"{len(missing)} item(s) in no group were put in {_OTHER!r}")
            groups.append(Group(_OTHER, "Items the grouping left out.", missing))
        return groups

    def _complete(self, messages: list[dict[str, str]]) -> str:
        params = dict(self.config.model_params)
        if self.config.max_tokens is not None:
            params.setdefault("max_tokens", self.config.max_tokens)
        try:
            completion = self.model.complete(messages, **params)
        except ContextLengthError as exc:
            raise _TooLong(str(exc)) from None
        self.stats["calls"] += 1
        self.stats["prompt_tokens"] += int(completion.prompt_tokens)
        self.stats["completion_tokens"] += int(completion.completion_tokens)
        self.stats["model"] = completion.model or self.stats["model"]
        return completion.text


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
