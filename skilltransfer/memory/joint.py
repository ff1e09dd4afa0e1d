"""A frozen library beside a growing memory (`JointMemory`): the "both" arm of the study of curated against induced
skills (``library_use: beside``, docs/studies/curated-vs-induced.md).

The agent's skills come from two stores searched as one: the **library** (a frozen `SkillMemory`: an Agent Skills
folder, a ``.jsonl`` or another run's memory) and the agent's **own** memory, which grows by induction as in the
paper's memory conditions. The rules:

- **Retrieval ranks both together**: the query is embedded once, each store gives its top-k by cosine, and the k
  best of the union are returned (ties: the library's skill first). The prompt holds k skills in every arm, whatever
  their source. Under another retrieval mode (``ranker``, `skilltransfer.memory.ranking`) the union is ranked as
  one corpus, the library's skills first.
- **Induction writes only to the own memory** (its dedup, merging, pruning and capacity see only its own skills): a
  library skill is never merged into, replaced, pruned or evicted. An induced skill whose id is a library skill's is
  dropped; one whose name a library skill has is stored under the first free ``<name>_2``, ... (agents address skills
  by name).
- **Saving writes the own memory only** (a run's ``memory/`` holds the skills it induced; the library stays where
  it is and is read again on resume). Usage counts of the library's skills live for the stream only; the run's
  records (``retrieved``, with ``source``) are their account.
- `source` tells where a skill comes from: `LIBRARY` or `MEMORY` (recorded with each retrieved skill).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from skilltransfer.memory.capacity import TaskOutcome
from skilltransfer.memory.ranking import Corpus, Ranker, RankingCache
from skilltransfer.memory.store import MemoryConfig, ReadOnlyMemoryError, SkillMemory, unique_skill_name
from skilltransfer.protocols import Embedder
from skilltransfer.skill import AddResult, Skill

SkillOrigin = Literal["library", "memory"]
LIBRARY: SkillOrigin = "library"
"""A skill of the frozen library."""
MEMORY: SkillOrigin = "memory"
"""A skill the stream induced (the agent's own memory)."""


class JointMemory:
    """A `SkillStore` over a frozen ``library`` and the agent's growing ``own`` memory (see the module docstring).

    Args:
        library: the frozen library (made read-only here).
        own: the agent's own memory (writable; a resumed stream's saved memory).

    Raises:
        ValueError: the two stores embed with different embedders.
    """

    def __init__(self, library: SkillMemory, own: SkillMemory) -> None:
        if str(library.embedder.id) != str(own.embedder.id) or library.dim != own.dim:
            raise ValueError(f"the library ({library.embedder.id}) and the memory ({own.embedder.id}) must share "
                             "one embedder")
        library.read_only = True
        self.library = library
        self.own = own
        self.read_only = False
        """Induction writes to the own memory (`add`), never to the library."""
        self.ranker: Ranker | None = None
        """A retrieval mode other than dense over the union (None: each store's cosine top-k, merged)."""
        self.ranking_cache = RankingCache()

    # ----------------------------------------------------------------- container protocol
    def __len__(self) -> int:
        return len(self.library) + len(self.own)

    def __iter__(self) -> Iterator[Skill]:
        """The library's skills, then the own memory's."""
        return iter([*self.library, *self.own])

    def __contains__(self, item: object) -> bool:
        return item in self.library or item in self.own

    def get(self, skill_id: str) -> Skill:
        """The skill with this id, from either store (``KeyError`` if absent)."""
        return self.library.get(skill_id) if skill_id in self.library else self.own.get(skill_id)

    def source(self, skill_id: str) -> SkillOrigin:
        """`LIBRARY` for a skill of the library, else `MEMORY`."""
        return LIBRARY if skill_id in self.library else MEMORY

    def from_library(self, skill_id: str) -> bool:
        return skill_id in self.library

    @property
    def config(self) -> MemoryConfig:
        """The own memory's settings (its dedup threshold, capacity and eviction policy)."""
        return self.own.config

    @property
    def embedder(self) -> Embedder:
        return self.own.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        """Both stores query with ``embedder`` (e.g. a locked wrapper of the same one)."""
        self.library.embedder = self.own.embedder = embedder

    # ----------------------------------------------------------------- writing (the own memory only)
    def add(self, skill: Skill) -> AddResult:
        """Add an induced skill to the own memory (its rules: `SkillMemory.add`), under a name no library skill has;
        a skill whose id is a library skill's is dropped."""
        if skill.id in self.library:
            return AddResult("dropped", skill.id, skill.id, "a skill of the library has this id")
        taken = {s.name for s in self.library}
        if skill.name in taken:
            skill = unique_skill_name(skill, taken | {s.name for s in self.own})
        return self.own.add(skill)

    def remove(self, skill_id: str) -> None:
        """Remove a skill of the own memory (``ReadOnlyMemoryError`` for a library skill, ``KeyError`` if absent)."""
        if skill_id in self.library:
            raise ReadOnlyMemoryError(f"cannot remove skill {skill_id}: it is a skill of the frozen library")
        self.own.remove(skill_id)

    def evict(self, position: int, history: Sequence[TaskOutcome]) -> list[str]:
        """Evict over the own memory's capacity (`SkillMemory.evict`); library skills are never evicted."""
        return self.own.evict(position, history)

    def record_retrieval(self, skill_ids: Iterable[str], success: bool) -> None:
        """Count one retrieval of each skill in the store it belongs to (``KeyError`` for an unknown id, nothing
        updated then)."""
        ids = list(dict.fromkeys(skill_ids))
        missing = [skill_id for skill_id in ids if skill_id not in self]
        if missing:
            raise KeyError(f"skills not in memory: {', '.join(missing)}")
        self.library.record_retrieval([i for i in ids if i in self.library], success)
        self.own.record_retrieval([i for i in ids if i not in self.library], success)

    def save(self, path: str | Path) -> Path:
        """Save the own memory (the library is not copied: see the module docstring)."""
        return self.own.save(path)

    # ----------------------------------------------------------------- retrieval
    def retrieve(self, query: str, k: int = 5) -> list[tuple[Skill, float]]:
        """The ``k`` skills of both stores whose descriptions are most similar to ``query``, best first."""
        return self.retrieve_many([query], k)[0]

    def retrieve_many(self, queries: list[str], k: int = 5) -> list[list[tuple[Skill, float]]]:
        """Batched `retrieve`: one embedding call; each store's top-k, merged by score (ties: the library first)."""
        if not queries:
            return []
        if not len(self) or k <= 0:
            return [[] for _ in queries]
        vectors = self.own.embed(list(queries))
        if self.ranker is not None and self.ranker.mode != "dense":
            return self.ranker.rank(self, list(queries), vectors, k)
        return self.search_vectors(vectors, k)

    @property
    def ranking_version(self) -> tuple[int, int]:
        """Changes whenever either store changes (`skilltransfer.memory.ranking.RankedStore`)."""
        return self.library.ranking_version, self.own.ranking_version

    def ranking_corpus(self) -> Corpus:
        """The library's skills, then the own memory's, with their indexed texts and embeddings."""
        mine, yours = self.library.ranking_corpus(), self.own.ranking_corpus()
        return Corpus([*mine.skills, *yours.skills], [*mine.texts, *yours.texts],
                      np.concatenate([mine.vectors, yours.vectors]).astype(np.float32))

    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[list[tuple[Skill, float]]]:
        """Each store's top-k for each query vector, merged by score (ties: the library first)."""
        from_library = self.library.search_vectors(vectors, k)
        from_own = self.own.search_vectors(vectors, k)
        return [sorted([*mine, *yours], key=lambda hit: -hit[1])[:k]  # stable: the library's first on a tie
                for mine, yours in zip(from_library, from_own, strict=True)]
