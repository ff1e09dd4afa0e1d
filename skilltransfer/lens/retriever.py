"""Lens reuse in a stream: a `SkillRetriever` that routes the skill graph instead of inserting the top-k skills.

`LensRetriever.retrieve(query, k, models)` (the agent calls it before each (sub)task, unaware of the mode):

1. **Keep the graph current** (`LensRetriever.sync`): every skill of the memory that the graph lacks, or holds in
   another version (a memory merge changed it), is decomposed (the decomposer role over the run's model, with the
   model-free fallback of `skilltransfer.lens.decompose`) and its units merged into near-duplicates already there
   (``add_skill``); skills the memory no longer holds are removed. A growing memory is so synced at the next
   retrieval after an induction (the next subtask or task); a frozen library without a prebuilt graph is decomposed
   whole at the stream's first retrieval.
2. **Route** (`skilltransfer.lens.route`) with ``seeds_k = k`` (the agent's ``top_k``) and the reuse mode (``lens``,
   ``rewrite-all``, ``no-walk``); the verifier, rewriter and decomposer calls go through the task's call log under
   those roles (``verifier``, ``rewriter``, ``decomposer``).
3. The skills section is the routed context's blocks (only accepted and rewritten units, graph order, within the
   token budget); the hits are the source skills of those units (code skills are loaded into the namespace), best
   unit score first; the `RouteLog` (plus what syncing did) is logged with the retrieval step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.lens.decompose import DecomposeConfig, Decomposer, add_skill
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.prompts import lens_prompt
from skilltransfer.lens.route import RouteConfig, RouteMode, route
from skilltransfer.protocols import ChatModel, Embedder, Retrieval, SkillStore
from skilltransfer.skill import Skill

GRAPH_DIR = "graph"
"""The skill graph's folder inside a run's memory folder (saved with every memory snapshot)."""
VERIFIER_ROLE, REWRITER_ROLE, DECOMPOSER_ROLE = "verifier", "rewriter", "decomposer"


class LensConfig(BaseModel):
    """Settings of lens reuse (a stream's ``lens`` key; used when ``reuse`` is not ``flat``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    route: RouteConfig = Field(default_factory=RouteConfig)
    """Routing settings (token budget, walk, verifier budgets, ...); ``mode`` and ``seeds_k`` are set by the stream
    (its ``reuse`` and ``agent.top_k``)."""
    decompose: DecomposeConfig = Field(default_factory=DecomposeConfig)
    """How skills added to the memory are decomposed into the graph (retries, merge threshold, ...)."""

    def uncapped(self) -> LensConfig:
        """This config without the completion caps nobody set (verifier, rewriter, decomposer): what a stream under
        the ``paper`` harness sends (the paper keeps each provider's default; a reasoning model thinks first)."""
        route = {k: None for k in ("verifier_max_tokens", "rewrite_max_tokens") if k not in self.route.model_fields_set}
        decompose = {"max_tokens": None} if "max_tokens" not in self.decompose.model_fields_set else {}
        return self.model_copy(update={"route": self.route.model_copy(update=route),
                                       "decompose": self.decompose.model_copy(update=decompose)})


def skill_version(skill: Skill) -> str:
    """A short hash of what decomposition reads of a skill (name, description, format, body)."""
    text = "\x1f".join((skill.name, skill.description, skill.format, skill.body))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lens_prompt_ids(config: LensConfig) -> dict[str, str]:
    """The prompt ids of the verifier, rewriter and decomposer roles (recorded with the run's prompt ids)."""
    names = {"verifier": "verify", "verifier_user": "verify_user", "rewriter": "rewrite",
             "rewriter_user": "rewrite_user", "decomposer": "decompose", "decomposer_user": "decompose_user"}
    return {key: lens_prompt(name, config.route.prompt_dir if "decompose" not in name else
                             config.decompose.prompt_dir).id for key, name in names.items()}


class LensRetriever:
    """Routes a skill graph kept in step with a skill memory (see the module docstring).

    Args:
        memory: the stream's skill memory (growing or a frozen library).
        graph: the graph to start from (a resumed run's, a prebuilt one); None: an empty graph, built lazily.
        embedder: the graph's embedder (the stream's retrieval embedder).
        mode: ``lens``, ``rewrite-all`` or ``no-walk``.
        config: routing and decomposition settings.
    """

    def __init__(self, memory: SkillStore, graph: SkillGraph | None, embedder: Embedder, *, mode: RouteMode,
                 config: LensConfig | None = None) -> None:
        self.memory = memory
        self.config = config or LensConfig()
        self.mode = mode
        self.graph = graph if graph is not None else SkillGraph(embedder, info={"built": "incrementally"})
        self.versions: dict[str, str] = dict(self.graph.info.get("skill_versions") or {})
        """Skill id -> `skill_version` of the skill the graph's units came from."""
        for skill_id, skill in self.graph.skills.items():
            self.versions.setdefault(skill_id, skill_version(skill))

    def sync(self, model: ChatModel) -> dict[str, Any]:
        """Bring the graph in step with the memory (see the module docstring); returns what changed."""
        decomposer = Decomposer(model, self.config.decompose)
        held = {skill.id: skill for skill in self.memory}
        removed = [skill_id for skill_id in list(self.graph.roots) if skill_id not in held]
        for skill_id in removed:
            self.graph.remove_skill(skill_id)
            self.versions.pop(skill_id, None)
        added: list[dict[str, Any]] = []
        for skill_id, skill in held.items():
            version = skill_version(skill)
            if skill_id in self.graph.roots and self.versions.get(skill_id) == version:
                continue
            record, merges = add_skill(self.graph, skill, decomposer)
            self.versions[skill_id] = version
            added.append({"skill_id": skill_id, "status": record.status, "units": record.units,
                          "merges": len(merges), "reason": record.reason})
        if added or removed:
            self.graph.info["skill_versions"] = dict(self.versions)
        return {"added": added, "removed": removed} if added or removed else {}

    def retrieve(self, query: str, k: int, models: Callable[[str], ChatModel]) -> Retrieval:
        """Sync the graph, route ``query`` and return the routed skills section (see the module docstring)."""
        synced = self.sync(models(DECOMPOSER_ROLE))
        cfg = self.config.route.model_copy(update={"mode": self.mode, "seeds_k": max(1, k)})
        routed = route(self.graph, query, models(VERIFIER_ROLE), cfg, rewriter=models(REWRITER_ROLE))
        best: dict[str, float] = {}
        for unit in routed.units:
            for skill_id in self.graph.units[unit.unit].sources:
                best[skill_id] = max(best.get(skill_id, float("-inf")), unit.score)
        held = {skill.id: skill for skill in self.memory}
        hits = sorted(((held[sid], score) for sid, score in best.items() if sid in held), key=lambda h: -h[1])
        log = routed.log.to_dict()
        log["graph_units"] = len(self.graph)
        if synced:
            log["synced"] = synced
        return Retrieval(hits=hits, blocks=[unit.text for unit in routed.units], log=log)

    def save(self, memory_folder: Path) -> None:
        """Save the graph into a memory snapshot folder (``<memory folder>/graph``)."""
        self.graph.info["skill_versions"] = dict(self.versions)
        self.graph.save(Path(memory_folder) / GRAPH_DIR)
