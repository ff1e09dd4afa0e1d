"""Retrieval and routing over the skill graph: seeds, walk expansion, the verifier's recursive decisions, the context.

``route(graph, query, model, config) -> RoutedContext``:

1. **Seeds**: the ``seeds_k`` units whose texts are most similar to the query (cosine under the graph's embedder).
2. **Expansion**: the degree-corrected random walk adds up to ``walk.expand_k`` units (`skilltransfer.lens.walk`);
   mode ``no-walk`` skips it.
3. **Routing**: candidates are visited general-first (by layer, then rank: seeds before expanded units). The
   verifier role (prompts ``verify``/``verify_user``, with the graph's routing notes) answers each with one decision:
   ACCEPT (use the unit and its subtree as they are), DECOMPOSE (visit its children, recursively), REWRITE (the
   rewriter role, prompts ``rewrite``/``rewrite_user``, adapts the unit's subtree to the task) or SKIP. A unit
   already visited, or inside a subtree already accepted or rewritten, is not visited again (so shared children and
   cycles cost nothing twice). DECOMPOSE of a unit without children is treated as REWRITE. A reply naming no
   decision is asked again once (``retries``), then ``fallback_decision`` applies (ACCEPT: what flat reuse would do
   with the unit); so does a prompt that does not fit the model's window. At most ``max_visits`` units are visited
   per query. Mode ``rewrite-all`` rewrites every candidate without a verifier call.
4. **Context**: the accepted and rewritten units, minus any inside another one's subtree, are kept by the rank of
   the candidate they came from (seeds by cosine, then expanded units by walk weight) while their blocks fit
   ``token_budget`` tokens (`skilltransfer.llm.context.estimate_tokens`), and written in graph order. A rewrite
   that comes back empty keeps the unit's stored text (logged).

Every query returns its `RouteLog`: seeds, expansion, each visit (unit, layer, decision, depth, how it was decided),
rewrites, verifier calls and tokens (rewrites included), the context's units and tokens, units cut by the budget and
candidates left unrouted by ``max_visits``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.lens.graph import DEPTH, SkillGraph
from skilltransfer.lens.prompts import lens_prompt
from skilltransfer.lens.walk import WalkConfig, expand
from skilltransfer.llm.context import ContextLengthError, estimate_tokens
from skilltransfer.protocols import ChatModel, Message

Decision = Literal["ACCEPT", "DECOMPOSE", "REWRITE", "SKIP"]
RouteMode = Literal["lens", "rewrite-all", "no-walk"]
ROUTE_MODES: tuple[str, ...] = ("lens", "rewrite-all", "no-walk")
_DECISION = re.compile(r"\b(ACCEPT|DECOMPOSE|REWRITE|SKIP)\b", re.IGNORECASE)
_MARKED = re.compile(r"DECISION\W*(ACCEPT|DECOMPOSE|REWRITE|SKIP)\b", re.IGNORECASE)
_MAX_PARTS = 8


class RouteConfig(BaseModel):
    """Settings of retrieval and routing (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    mode: RouteMode = "lens"
    """``lens`` (verifier routing), ``rewrite-all`` (rewrite every candidate) or ``no-walk`` (seeds only)."""
    seeds_k: int = Field(default=5, ge=1)
    """Seed units retrieved by embedding."""
    walk: WalkConfig = Field(default_factory=WalkConfig)
    """The degree-corrected random walk's parameters."""
    token_budget: int = Field(default=1200, ge=1)
    """Most tokens of the context section."""
    max_visits: int = Field(default=24, ge=1)
    """Most units routed per query (verifier decisions, or rewrites under ``rewrite-all``)."""
    retries: int = Field(default=1, ge=0)
    """Re-asks after a verifier reply that names no decision."""
    fallback_decision: Decision = "ACCEPT"
    """The decision when the verifier gives none (or its prompt does not fit)."""
    verifier_max_tokens: int | None = Field(default=16, ge=1)
    """Completion budget of a verifier call; None: no cap (a stream under the ``paper`` harness that does not set
    it)."""
    rewrite_max_tokens: int | None = Field(default=256, ge=16)
    """Completion budget of a rewrite call; None: no cap (as ``verifier_max_tokens``)."""
    prompt_dir: str | None = None
    """A folder of replacement lens prompt files."""
    model_params: dict[str, Any] = Field(default_factory=dict)
    """Extra sampling parameters of verifier and rewrite calls."""


class Visit(BaseModel):
    """One routed unit."""

    unit: str
    layer: str
    decision: Decision
    depth: int
    """0 for a candidate, +1 per DECOMPOSE below it."""
    via: str | None = None
    """The unit whose DECOMPOSE led here (None for a candidate)."""
    how: str = "verifier"
    """``verifier``, ``verifier-retry``, ``fallback:unparseable``, ``fallback:context``, ``rewrite-all``, or
    ``leaf-decompose`` (DECOMPOSE of a unit without children, done as REWRITE)."""


class RouteLog(BaseModel):
    """What routing did for one query (one record per (sub)task query in phase B's run logs)."""

    query: str
    mode: RouteMode
    seeds: list[tuple[str, float]] = Field(default_factory=list)
    expanded: list[tuple[str, float]] = Field(default_factory=list)
    visits: list[Visit] = Field(default_factory=list)
    rewrites: dict[str, str] = Field(default_factory=dict)
    """Unit id -> its rewritten text."""
    empty_rewrites: list[str] = Field(default_factory=list)
    verifier_calls: int = 0
    """Model calls of routing (verifier and rewriter)."""
    verifier_prompt_tokens: int = 0
    verifier_completion_tokens: int = 0
    context_units: list[str] = Field(default_factory=list)
    context_tokens: int = 0
    """Sum of the context blocks' `estimate_tokens` (what the budget counts)."""
    retrieved_tree: int = 0
    """Distinct units in the subtrees of the seeds and expanded units: what flat reuse of the retrieved units would
    insert (the study's n, against which the adaptation cost is plotted)."""
    cut_units: list[str] = Field(default_factory=list)
    """Selected units left out by the token budget."""
    unrouted: list[str] = Field(default_factory=list)
    """Candidates not visited because ``max_visits`` was reached."""
    prompts: dict[str, str] = Field(default_factory=dict)
    route_s: float = 0.0
    """Wall time of the whole query, model calls included."""

    @property
    def visited(self) -> int:
        return len(self.visits)

    @property
    def adaptation_cost(self) -> int:
        """Units visited plus units rewritten (the study's C_adapt)."""
        return len(self.visits) + len(self.rewrites)

    def to_dict(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "visited": self.visited, "adaptation_cost": self.adaptation_cost}


@dataclass(frozen=True)
class RoutedUnit:
    """One unit of the context: accepted (its subtree as stored) or rewritten (its adapted text)."""

    unit: str
    layer: str
    decision: Decision
    score: float
    """The cosine of the seed, or the walk weight of the expanded unit, it was reached from."""
    text: str
    """The block as it enters the context."""
    tokens: int
    """The block's `estimate_tokens`."""
    skills: tuple[str, ...]
    """Source skill names."""


@dataclass
class RoutedContext:
    """The routed skill section for one query, its units (graph order) and the log."""

    text: str
    units: list[RoutedUnit]
    log: RouteLog


class _Router:
    """One query's routing state (see the module docstring)."""

    def __init__(self, graph: SkillGraph, query: str, model: ChatModel, config: RouteConfig,
                 rewriter: ChatModel | None = None) -> None:
        self.graph, self.query, self.model, self.cfg = graph, query, model, config
        self.rewriter = rewriter or model
        folder = config.prompt_dir
        self.prompts = {name: lens_prompt(name, folder) for name in ("verify", "verify_user", "rewrite",
                                                                      "rewrite_user")}
        notes = "\n".join(f"{i}. {note}" for i, note in enumerate(graph.routing_notes, start=1)) or "(none yet)"
        self.system = self.prompts["verify"].render(notes=notes)
        self.log = RouteLog(query=query, mode=config.mode, prompts={n: p.id for n, p in self.prompts.items()})
        self.visited: set[str] = set()
        self.covered: set[str] = set()
        self.selected: dict[str, tuple[Decision, int, float]] = {}
        """Unit -> (decision, rank of the candidate it came from, that candidate's score)."""

    # ----------------------------------------------------------------- model calls
    def _call(self, messages: list[Message], max_tokens: int | None, model: ChatModel | None = None) -> str:
        cap = {"max_tokens": max_tokens} if max_tokens is not None else {}
        done = (model or self.model).complete(messages, **{**cap, **self.cfg.model_params})
        self.log.verifier_calls += 1
        self.log.verifier_prompt_tokens += done.prompt_tokens
        self.log.verifier_completion_tokens += done.completion_tokens
        return done.text

    def _skills(self, uid: str) -> str:
        return ", ".join(self.graph.skill_names(self.graph.units[uid])) or "?"

    def decide(self, uid: str) -> tuple[Decision, str]:
        """The verifier's decision on one unit and how it was reached."""
        unit = self.graph.units[uid]
        kids = self.graph.children(uid)
        parts = "\n".join(f"- ({self.graph.units[k].layer}) {self.graph.units[k].text}" for k in kids[:_MAX_PARTS])
        if len(kids) > _MAX_PARTS:
            parts += f"\n- ... and {len(kids) - _MAX_PARTS} more"
        user = self.prompts["verify_user"].render(query=self.query, layer=unit.layer, skills=self._skills(uid),
                                                  text=unit.text, parts=parts or "(none: it cannot be decomposed)")
        messages: list[Message] = [{"role": "system", "content": self.system}, {"role": "user", "content": user}]
        for attempt in range(self.cfg.retries + 1):
            try:
                reply = self._call(messages, self.cfg.verifier_max_tokens)
            except ContextLengthError:
                return self.cfg.fallback_decision, "fallback:context"
            decision = parse_decision(reply)
            if decision is not None:
                return decision, "verifier" if attempt == 0 else "verifier-retry"
            messages = [*messages, {"role": "assistant", "content": reply},
                        {"role": "user", "content": "Answer with one line: DECISION: ACCEPT, DECOMPOSE, REWRITE "
                                                    "or SKIP."}]
        return self.cfg.fallback_decision, "fallback:unparseable"

    def rewrite(self, uid: str) -> None:
        """Ask the rewriter to adapt the unit's subtree; an empty answer keeps the stored text."""
        unit = self.graph.units[uid]
        user = self.prompts["rewrite_user"].render(query=self.query, skills=self._skills(uid), layer=unit.layer,
                                                   text=self.outline(uid))
        messages: list[Message] = [{"role": "system", "content": self.prompts["rewrite"].render()},
                                   {"role": "user", "content": user}]
        try:
            text = clean_rewrite(self._call(messages, self.cfg.rewrite_max_tokens, self.rewriter))
        except ContextLengthError:
            text = ""
        if text:
            self.log.rewrites[uid] = text
        else:
            self.log.empty_rewrites.append(uid)

    # ----------------------------------------------------------------- recursion
    def visit(self, uid: str, rank: int, score: float, depth: int, via: str | None) -> None:
        if uid in self.visited or uid in self.covered:
            return
        if len(self.log.visits) >= self.cfg.max_visits:
            if depth == 0:
                self.log.unrouted.append(uid)
            return
        self.visited.add(uid)
        kids = self.graph.children(uid)
        decision: Decision
        if self.cfg.mode == "rewrite-all":
            decision, how = "REWRITE", "rewrite-all"
        else:
            decision, how = self.decide(uid)
            if decision == "DECOMPOSE" and not kids:
                decision, how = "REWRITE", "leaf-decompose"
        self.log.visits.append(Visit(unit=uid, layer=self.graph.units[uid].layer, decision=decision, depth=depth,
                                     via=via, how=how))
        if decision == "DECOMPOSE":
            for kid in kids:
                self.visit(kid, rank, score, depth + 1, uid)
        elif decision in ("ACCEPT", "REWRITE"):
            if decision == "REWRITE":
                self.rewrite(uid)
            self.selected[uid] = (decision, rank, score)
            self.covered.update(self.graph.subtree(uid))

    def outline(self, uid: str) -> str:
        """A unit's subtree as an indented outline (each unit once)."""
        depth_of = {uid: 0}
        lines = []
        for node in self.graph.subtree(uid):
            lines.append("  " * depth_of[node] + ("" if node == uid else "- ") + self.graph.units[node].text)
            for kid in self.graph.children(node):
                depth_of.setdefault(kid, depth_of[node] + 1)
        return "\n".join(lines)

    def block(self, uid: str, decision: Decision) -> str:
        unit = self.graph.units[uid]
        adapted = decision == "REWRITE" and uid in self.log.rewrites
        body = self.log.rewrites[uid] if adapted else self.outline(uid)
        return f"#### {self._skills(uid)} · {unit.layer}{' (adapted to this task)' if adapted else ''}\n{body}\n"

    # ----------------------------------------------------------------- context
    def context(self) -> list[RoutedUnit]:
        """The units of the context in graph order: selected units outside other selected subtrees, by rank while
        their blocks fit the budget."""
        inner: set[str] = set()
        for uid in self.selected:
            inner.update(node for node in self.graph.subtree(uid) if node != uid)
        order = self.graph.order()
        ranked = sorted((item for item in self.selected.items() if item[0] not in inner),
                        key=lambda item: (item[1][1], order[item[0]]))
        kept: list[RoutedUnit] = []
        used = 0
        for uid, (decision, _, score) in ranked:
            text = self.block(uid, decision)
            cost = estimate_tokens(text)
            if used + cost > self.cfg.token_budget:
                self.log.cut_units.append(uid)
                continue
            kept.append(RoutedUnit(uid, self.graph.units[uid].layer, decision, score, text, cost,
                                   tuple(self.graph.skill_names(self.graph.units[uid]))))
            used += cost
        kept.sort(key=lambda item: order[item.unit])
        return kept


def parse_decision(reply: str) -> Decision | None:
    """The decision a verifier reply names: the one after ``DECISION``, else the first of the four words."""
    match = _MARKED.search(reply) or _DECISION.search(reply)
    return match.group(1).upper() if match else None  # type: ignore[return-value]


def clean_rewrite(reply: str) -> str:
    """A rewriter reply without code fences, a leading label line or surrounding blank space."""
    text = reply.strip()
    fenced = re.fullmatch(r"```[\w-]*\n(.*?)\n?```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    return re.sub(r"^(?:adapted(?: for this task)?|rewrite|rewritten)\s*:\s*", "", text, flags=re.IGNORECASE).strip()


def route(graph: SkillGraph, query: str, model: ChatModel, config: RouteConfig | None = None, *,
          rewriter: ChatModel | None = None) -> RoutedContext:
    """Retrieve, expand and route the skill graph's units for one query (see the module docstring).

    Args:
        graph: the skill graph (its routing notes go into the verifier's prompt).
        query: the task instruction or subtask text.
        model: the verifier's (and, without ``rewriter``, the rewriter's) chat model.
        config: settings (default `RouteConfig()`).
        rewriter: the rewriter's chat model (e.g. the same model logged under another role).

    Returns:
        The context section (empty text when nothing was accepted), its units and the log.
    """
    cfg = config or RouteConfig()
    start = time.perf_counter()
    router = _Router(graph, query, model, cfg, rewriter)
    seeds = graph.top_units(query, cfg.seeds_k)
    expanded = [] if cfg.mode == "no-walk" else expand(graph, seeds, cfg.walk)
    router.log.seeds, router.log.expanded = seeds, expanded
    ranked = list(enumerate([*seeds, *expanded]))
    tree: set[str] = set()
    for uid, _ in [*seeds, *expanded]:
        tree.update(graph.subtree(uid))
    router.log.retrieved_tree = len(tree)
    for rank, (uid, score) in sorted(ranked, key=lambda item: (DEPTH[graph.units[item[1][0]].layer], item[0])):
        router.visit(uid, rank, score, 0, None)
    kept = router.context()
    router.log.context_units = [item.unit for item in kept]
    router.log.context_tokens = sum(item.tokens for item in kept)
    router.log.route_s = time.perf_counter() - start
    return RoutedContext(text="\n".join(item.text for item in kept), units=kept, log=router.log)
