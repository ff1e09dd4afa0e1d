"""Build a skill graph from a skill library: an LLM decomposes each skill, near-duplicate units are merged.

**Decomposition.** The decomposer role (prompts ``decompose``/``decompose_user``) answers with one unit per line,
each starting with its layer tag (``POLICY:``, ``STRATEGY:``, ``PROCEDURE:``, ``PRIMITIVE:``; case, bullets, numbers
and markdown emphasis are tolerated, other lines are ignored). A unit's parent is the nearest line above it with a
more general tag; a unit with none hangs under the policy. The first POLICY line is the skill's root; later POLICY
lines count as STRATEGY; without one the skill's description is the root. A reply is usable when it gives at least
``min_units`` units below the root; units beyond ``max_units`` are dropped. An unusable reply is answered with the
reason (``decompose_retry``) up to ``retries`` times; then, and when the prompt does not fit the model's window, the
**fallback** decomposes without a model: the description is the policy; a text skill's non-empty body lines (list
markers and headings stripped, fenced code skipped) become procedures; a code skill gives one procedure per top-level
function (its signature and docstring's first line) with one primitive per distinct ``apis.<app>.<api>`` call in it.

**Merging** (shared children). Units on the same layer whose embeddings have cosine >= ``merge_threshold`` (default
0.90) are merged greedily in graph order: each unit is folded into the most similar earlier kept unit, unless one lies
below the other (that would close a cycle). Policies (skill roots) are never merged. The kept unit keeps its text and
position and gains the other's parents, children and source skills (``merged_from`` records the folded ids).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.lens.graph import DEPTH, LAYERS, Layer, SkillGraph, Unit, unit_id
from skilltransfer.lens.prompts import lens_prompt
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.protocols import ChatModel, Message
from skilltransfer.skill import Skill
from skilltransfer.util import pyast

_TAG = re.compile(r"^(policy|strategy|procedure|primitive)s?[\s*_]*\d*[\s*_]*[:\-\u2013\u2014][\s*_]*(.*)$",
                  re.IGNORECASE)
_LEAD = re.compile(r"^[\s>#*_+\-\u2022]*(?:\d+[.)]\s*)?[\s*_]*")
_LIST_LEAD = re.compile(r"^\s*(?:[#>]+|[-*+\u2022]|\d+[.)])\s*")
_API_CALL = re.compile(r"\bapis\.([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*\(")


class DecomposeConfig(BaseModel):
    """Settings of library decomposition."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0)
    """Re-asks after an unusable reply (each with the reason), before the fallback."""
    min_units: int = Field(default=2, ge=1)
    """A usable reply gives at least this many units below the root."""
    max_units: int = Field(default=40, ge=2)
    """Units per skill beyond this are dropped."""
    merge_threshold: float = 0.90
    """Cosine at or above which two same-layer units are merged (> 1 disables merging)."""
    max_body_chars: int = Field(default=6000, ge=200)
    """A longer skill body is cut (head kept) in the prompt."""
    max_tokens: int | None = Field(default=512, ge=16)
    """Completion budget of one decomposer call; None: no cap (a stream under the ``paper`` harness that does not
    set it)."""
    prompt_dir: str | None = None
    """A folder of replacement lens prompt files."""
    model_params: dict[str, Any] = Field(default_factory=dict)
    """Extra sampling parameters of the decomposer call."""


Outline = list[tuple[Layer, str, int | None]]
"""A skill's units in order: (layer, text, index of the parent in the list; None for the root)."""


@dataclass
class DecomposeRecord:
    """How one skill was decomposed."""

    skill_id: str
    name: str
    status: Literal["model", "fallback"]
    attempts: int
    """Model calls made (0: fallback without a call)."""
    units: int
    reason: str = ""
    """Why the fallback was used, or what was dropped."""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_outline(reply: str) -> tuple[list[tuple[Layer, str]], int]:
    """The tagged lines of a decomposer reply as (layer, text), and how many other non-empty lines were ignored."""
    items: list[tuple[Layer, str]] = []
    ignored = 0
    for raw in reply.replace("\r\n", "\n").split("\n"):
        line = _LEAD.sub("", raw.strip(), count=1)
        match = _TAG.match(line)
        if match is None:
            ignored += bool(raw.strip())
            continue
        text = match.group(2).strip().strip("*_").strip()
        if text:
            layer: Layer = match.group(1).lower()  # type: ignore[assignment]
            items.append((layer, text))
    return items, ignored


def build_outline(items: Sequence[tuple[Layer, str]], description: str, max_units: int) -> tuple[Outline, int]:
    """Arrange tagged lines into a tree (see the module docstring); returns the outline and how many were dropped."""
    root_text = next((text for layer, text in items if layer == "policy"), description.strip())
    outline: Outline = [("policy", root_text, None)]
    stack: list[int] = []
    seen_root = False
    dropped = 0
    for layer, text in items:
        if layer == "policy" and not seen_root:
            seen_root = True
            continue
        layer = "strategy" if layer == "policy" else layer
        if len(outline) > max_units:
            dropped += 1
            continue
        while stack and DEPTH[outline[stack[-1]][0]] >= DEPTH[layer]:
            stack.pop()
        parent = stack[-1] if stack else 0
        if any(outline[i][:2] == (layer, text) and outline[i][2] == parent for i in range(1, len(outline))):
            continue  # the same line twice under one parent
        outline.append((layer, text, parent))
        stack.append(len(outline) - 1)
    return outline, dropped


def fallback_outline(skill: Skill, max_units: int) -> Outline:
    """The model-free decomposition (see the module docstring)."""
    outline: Outline = [("policy", skill.description.strip() or skill.name, None)]
    if skill.format == "code":
        outline.extend(_code_units(skill.body))
    if len(outline) == 1:
        in_fence = False
        for raw in skill.body.split("\n"):
            if raw.strip().startswith("```"):
                in_fence = not in_fence
                continue
            text = _LIST_LEAD.sub("", raw).strip()
            if text and not in_fence:
                outline.append(("procedure", text, 0))
    if len(outline) == 1:
        outline.append(("procedure", f"Follow the skill {skill.name}: {skill.description.strip()}", 0))
    return outline[:max_units + 1]


def _code_units(body: str) -> Outline:
    try:
        tree = pyast.parse(body)
    except SyntaxError:
        return []
    out: Outline = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        doc = (ast.get_docstring(node) or "").strip().split("\n")[0]
        head = f"Call {node.name}({ast.unparse(node.args)})" + (f": {doc}" if doc else "")
        out.append(("procedure", head, 0))
        parent = len(out)
        source = ast.get_source_segment(body, node) or ""
        calls = dict.fromkeys(f"apis.{app}.{api}" for app, api in _API_CALL.findall(source))
        out.extend(("primitive", f"Call {call}(...).", parent) for call in calls)
    return out


class Decomposer:
    """The decomposer role: one skill -> an outline, through the model with retries, else the fallback.

    Args:
        model: the chat model.
        config: settings.
    """

    def __init__(self, model: ChatModel, config: DecomposeConfig | None = None) -> None:
        self.model = model
        self.config = config or DecomposeConfig()
        folder = self.config.prompt_dir
        self.system, self.user, self.retry = (lens_prompt(name, folder)
                                              for name in ("decompose", "decompose_user", "decompose_retry"))

    def prompt_ids(self) -> dict[str, str]:
        return {p.name: p.id for p in (self.system, self.user, self.retry)}

    def __call__(self, skill: Skill) -> tuple[Outline, DecomposeRecord]:
        """Decompose one skill (never raises for a bad reply; model-call failures other than an over-long prompt
        propagate)."""
        cfg = self.config
        body = skill.body if len(skill.body) <= cfg.max_body_chars else skill.body[:cfg.max_body_chars] + "\n[...]"
        messages: list[Message] = [
            {"role": "system", "content": self.system.render()},
            {"role": "user", "content": self.user.render(name=skill.name, description=skill.description,
                                                         format=skill.format, body=body)}]
        record = DecomposeRecord(skill.id, skill.name, "fallback", 0, 0)
        reason = ""
        for _ in range(cfg.retries + 1):
            try:
                cap = {"max_tokens": cfg.max_tokens} if cfg.max_tokens is not None else {}
                done = self.model.complete(messages, **{**cap, **cfg.model_params})
            except ContextLengthError as exc:
                reason = f"prompt does not fit the model's window ({exc})"
                break
            record.attempts += 1
            record.prompt_tokens += done.prompt_tokens
            record.completion_tokens += done.completion_tokens
            items, _ = parse_outline(done.text)
            outline, dropped = build_outline(items, skill.description, cfg.max_units)
            below = len(outline) - 1
            if below >= cfg.min_units:
                record.status, record.units = "model", len(outline)
                record.reason = f"{dropped} units beyond max_units dropped" if dropped else ""
                return outline, record
            reason = ("no line starts with a layer tag" if not items else
                      f"only {below} unit(s) below the POLICY line (need at least {cfg.min_units})")
            messages = [*messages, {"role": "assistant", "content": done.text},
                        {"role": "user", "content": self.retry.render(reason=reason)}]
        outline = fallback_outline(skill, cfg.max_units)
        record.units, record.reason = len(outline), reason
        return outline, record


def merge_near_duplicates(graph: SkillGraph, threshold: float, only: set[str] | None = None) -> list[dict[str, Any]]:
    """Merge same-layer units with cosine >= ``threshold`` (see the module docstring).

    Args:
        graph: the graph (changed in place).
        threshold: the merge cosine (> 1: nothing is merged).
        only: merge only these (new) units, each into the most similar unit already kept (every other unit counts
            as kept); None: all units.

    Returns:
        One ``{"kept", "merged", "cosine"}`` record per merge.
    """
    if threshold > 1:
        return []
    ids, matrix = graph.matrix()
    row = {uid: i for i, uid in enumerate(ids)}
    order = graph.order()
    merges: list[dict[str, Any]] = []
    for layer in LAYERS[1:]:
        same = sorted((uid for uid in ids if uid in graph.units and graph.units[uid].layer == layer),
                      key=order.__getitem__)
        members = same if only is None else [uid for uid in same if uid in only]
        kept: list[str] = [] if only is None else [uid for uid in same if uid not in only]
        for uid in members:
            folded = False
            if kept:
                scores = matrix[[row[k] for k in kept]] @ matrix[row[uid]]
                for i in np.argsort(-scores, kind="stable"):
                    if scores[i] < threshold - 1e-6:
                        break
                    target = kept[int(i)]
                    if not (graph.reaches(target, uid) or graph.reaches(uid, target)):
                        graph.merge(target, uid)
                        merges.append({"kept": target, "merged": uid, "cosine": round(float(scores[i]), 4)})
                        folded = True
                        break
            if not folded:
                kept.append(uid)
    return merges


def add_outline(graph: SkillGraph, skill: Skill, outline: Outline) -> list[str]:
    """Add a skill's decomposition to the graph (root registered as the skill's); returns the new unit ids (from the
    skill id and the position; a re-added skill whose old units survive as shared ones gets ``<id>#<n>`` ids)."""
    key, again = skill.id, 0
    while any(unit_id(key, position) in graph.units for position in range(len(outline))):
        again += 1
        key = f"{skill.id}#{again}"
    ids = [unit_id(key, position) for position in range(len(outline))]
    for position, (layer, text, parent) in enumerate(outline):
        unit = Unit(id=ids[position], layer=layer, text=text, sources=[skill.id])
        if parent is None:
            graph.add_skill(skill, unit)
        else:
            graph.add_unit(unit)
            graph.add_edge(ids[parent], ids[position])
    return ids


def add_skill(graph: SkillGraph, skill: Skill, decomposer: Decomposer) -> tuple[DecomposeRecord, list[dict[str, Any]]]:
    """Decompose one skill into the graph and merge its units into near-duplicates already there (incremental:
    a growing memory's graph stays as a whole-library build would merge it, up to merge order). A skill already in
    the graph is replaced.

    Returns:
        The decomposition record and the merges made.
    """
    if skill.id in graph.roots:
        graph.remove_skill(skill.id)
    outline, record = decomposer(skill)
    new = add_outline(graph, skill, outline)
    merges = merge_near_duplicates(graph, decomposer.config.merge_threshold, only=set(new[1:]))
    graph.validate()
    return record, merges


def decompose_library(skills: Sequence[Skill], model: ChatModel, embedder: Any, config: DecomposeConfig | None = None,
                      *, on_skill: Callable[[int, int, DecomposeRecord], None] | None = None,
                      info: dict[str, Any] | None = None) -> tuple[SkillGraph, list[DecomposeRecord]]:
    """Decompose every skill, merge near-duplicate units, validate.

    Args:
        skills: the library, in order (the graph's root order).
        model: the decomposer's chat model.
        embedder: embeds unit texts (saved with the graph).
        config: settings.
        on_skill: called after each skill with (index, total, record) (progress).
        info: extra build information for the manifest (e.g. the model's record).

    Returns:
        The validated graph and one record per skill.
    """
    decomposer = Decomposer(model, config)
    cfg = decomposer.config
    graph = SkillGraph(embedder)
    records: list[DecomposeRecord] = []
    for index, skill in enumerate(skills):
        outline, record = decomposer(skill)
        add_outline(graph, skill, outline)
        records.append(record)
        if on_skill is not None:
            on_skill(index, len(skills), record)
    merges = merge_near_duplicates(graph, cfg.merge_threshold)
    graph.validate()
    graph.info = {**(info or {}), "config": cfg.model_dump(), "prompts": decomposer.prompt_ids(),
                  "skills": len(skills), "by_model": sum(r.status == "model" for r in records),
                  "fallback": sum(r.status == "fallback" for r in records), "merges": merges}
    return graph, records
