"""A frozen library grown per task with near-miss distractors (``library_size``; docs/selection.md, the library-size
study).

Each task chooses from a library of ``library_size`` skills: its **right skills** (`right_skills`: the task's
metadata ``relevant_skills``, else the frozen library's skills induced from that very task; and any skills its
metadata lists under ``library_skills``) and **near misses**
drawn from a **pool**: the frozen library's other skills and the skills of ``near_miss.corpus`` (real public skills,
or model-written paraphrases: ``skilltransfer library near-miss``). A pool skill's closeness is its description
cosine to the nearest right skill (to the task's instruction when it has none). Near misses are taken in this order:

1. the pool skills whose closeness lies in the band ``[low, high]`` (default 0.55-0.75: where routing errors
   concentrate), in a seeded random order (a hash of the seed, the task and the skill);
2. when the band runs out, the pool skills below it, nearest first; skills above the band (near duplicates of a right
   skill) are never drawn.

The order does not depend on the size, so a task's library at size 20 holds its library at size 5 (nested): sizes
differ only by what was added. When the pool runs out the library is smaller than asked (`LibraryDraw.size`).
Vectors are embedded once per stream; a task's library is a read-only memory of the same skill objects. The corpus
is not part of the run's saved memory (it is read again on resume), so a commit saves only the library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from skilltransfer.memory.library import read_library
from skilltransfer.memory.package import DEFAULT_RESOURCE_BYTES
from skilltransfer.memory.store import SkillMemory, unique_skill_name
from skilltransfer.protocols import TaskSpec
from skilltransfer.skill import Provenance, Skill

NEAR_MISS_SOURCE = "near-miss/"
"""The start of a corpus skill's ``provenance.source_task_id`` (``near-miss/<corpus>``): never a right skill, and no
transfer event."""
RELEVANT_KEY = "relevant_skills"
"""The task metadata key that names a task's right skills (names or ids)."""
LIBRARY_KEY = "library_skills"
"""The task metadata key that names skills a task's library must hold whether or not they are right (a trigger eval's
isolated setting: the skill under test alone, for its should-not-trigger queries too)."""


class NearMissConfig(BaseModel):
    """Where a per-task library's near misses come from (``library_size``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    corpus: list[str] = Field(default_factory=list)
    """Skill libraries whose skills may be drawn as near misses (SKILL.md folders, .jsonl files, run memories),
    besides the frozen library's own other skills; a SKILL.md that cannot be read is left out."""
    band: tuple[float, float] = (0.55, 0.75)
    """(low, high): the description-cosine band to the right skill that near misses are drawn from first."""
    seed: int = 0
    """The seed of the order within the band."""

    @model_validator(mode="after")
    def _check_band(self) -> NearMissConfig:
        low, high = self.band
        if not -1.0 <= low <= high <= 1.0:
            raise ValueError(f"near_miss.band must be two cosines with low <= high in [-1, 1], got {list(self.band)}")
        return self


def read_corpus(path: str | Path, *, resource_bytes: int = DEFAULT_RESOURCE_BYTES) -> tuple[list[Skill], list[str]]:
    """A corpus's skills, read as any library is (`skilltransfer.memory.library.read_library`: every layout, skills
    of one name in several folders each named by its folder's path), an identical skill (same id) kept once, and one
    line per SKILL.md that could not be read.

    Raises:
        InputError: a missing path, or a corpus in which no skill could be read.
    """
    read = read_library(path, resource_bytes=resource_bytes)
    skills = list({skill.id: skill for skill in reversed(read.skills)}.values())[::-1]  # the first of each id
    return skills, list(read.unreadable)


def corpus_skills(libraries: Iterable[tuple[str, Sequence[Skill]]], taken: Iterable[Skill]) -> list[Skill]:
    """The corpus as pool skills: copies marked ``near-miss/<corpus>`` in their provenance, skills already in the
    library (same id) or seen in an earlier corpus left out, and a name another skill has made unique
    (``name_2``) so that ``load_skill("name")`` names one skill."""
    kept = list(taken)
    seen_ids = {skill.id for skill in kept}
    names = {skill.name for skill in kept}
    out: list[Skill] = []
    for label, skills in libraries:
        for skill in skills:
            if skill.id in seen_ids:
                continue
            seen_ids.add(skill.id)
            copy = unique_skill_name(skill, names)
            copy.provenance = Provenance(source_task_id=f"{NEAR_MISS_SOURCE}{label}")
            names.add(copy.name)
            out.append(copy)
    return out


def named_skills(task: TaskSpec, library: Iterable[Skill], key: str) -> list[str] | None:
    """The ids of the skills of ``library`` that ``task``'s metadata names under ``key`` (ids or names); None when the
    metadata has no such list."""
    named = task.metadata.get(key) if isinstance(task.metadata, Mapping) else None
    if not isinstance(named, list | tuple):
        return None
    wanted = {str(item) for item in named}
    return [s.id for s in library if s.id in wanted or s.name in wanted]


def right_skills(task: TaskSpec, library: Iterable[Skill]) -> list[str] | None:
    """The ids of ``task``'s right skills in ``library``: those its metadata names (``relevant_skills``: ids or
    names), else those induced from the task itself (provenance); None when neither names one."""
    skills = list(library)
    named = named_skills(task, skills, RELEVANT_KEY)
    if named is not None:
        return named
    own = [s.id for s in skills if s.provenance.source_task_id == task.id]
    return own or None


def _order_key(seed: int, task_id: str, skill_id: str) -> bytes:
    return hashlib.sha256(f"{seed}\x1f{task_id}\x1f{skill_id}".encode()).digest()


@dataclass(frozen=True)
class TaskLibrary:
    """What one task's library holds (the run log's `skilltransfer.log.LibraryDraw`)."""

    size: int
    requested: int
    right: int
    in_band: int
    nn_cosine: float | None


class SizedLibrary:
    """Per-task libraries of ``size`` skills over a frozen library and a corpus (module docstring).

    Args:
        library: the stream's frozen library (read-only): right skills and the other tasks' skills.
        corpus: the corpus's skills in a memory of their own (`corpus_skills`; embedded once, never saved with the
            run: a resumed run reads it again from ``near_miss.corpus``).
        size: ``library_size``.
        config: the band, the seed.
    """

    def __init__(self, library: SkillMemory, corpus: SkillMemory | None, size: int, config: NearMissConfig) -> None:
        self.library, self.size, self.config = library, size, config
        ids, vectors = library.embeddings()
        self.skills = {skill.id: skill for skill in library}
        if corpus is not None and len(corpus):
            more, more_vectors = corpus.embeddings()
            self.skills.update({skill.id: skill for skill in corpus})
            ids, vectors = [*ids, *more], np.vstack([vectors, more_vectors])
        self.ids, self.vectors = ids, vectors
        self._row = {skill_id: row for row, skill_id in enumerate(self.ids)}

    def draw(self, task: TaskSpec, right: Sequence[str] | None,
             include: Sequence[str] = ()) -> tuple[list[str], TaskLibrary]:
        """The ids of ``task``'s library (right skills and ``include`` first, then near misses in draw order) and its
        record (``right``: the right skills among them)."""
        right_count = len([i for i in dict.fromkeys(right or []) if i in self._row])
        right_ids = [i for i in dict.fromkeys([*(right or []), *include]) if i in self._row]
        if right_ids:
            anchors = self.vectors[[self._row[i] for i in right_ids]]
        else:
            anchors = self.library.embed([task.instruction])
        closeness = (self.vectors @ anchors.T).max(axis=1) if len(self.ids) else np.zeros(0)
        low, high = self.config.band
        excluded = set(right_ids)
        band = [i for row, i in enumerate(self.ids) if i not in excluded and low <= closeness[row] <= high]
        band.sort(key=lambda i: _order_key(self.config.seed, task.id, i))
        below = [i for row, i in enumerate(self.ids) if i not in excluded and closeness[row] < low]
        below.sort(key=lambda i: (-closeness[self._row[i]], i))
        room = max(0, self.size - len(right_ids))
        near = [*band, *below][:room]
        nn: float | None = None
        if right_ids and near:  # the nearest other skill of the library to a right skill (right skills aside)
            nn = round(float(closeness[[self._row[i] for i in near]].max()), 6)
        record = TaskLibrary(size=len(right_ids) + len(near), requested=self.size, right=right_count,
                             in_band=min(len(band), room), nn_cosine=nn)
        return [*right_ids, *near], record

    def memory_for(self, task: TaskSpec, right: Sequence[str] | None,
                   include: Sequence[str] = ()) -> tuple[SkillMemory, TaskLibrary]:
        """The read-only memory of ``task``'s library (the same skills and vectors) and its record."""
        chosen, record = self.draw(task, right, include)
        rows = [self._row[i] for i in chosen]
        return SkillMemory.frozen(self.library.embedder, [self.skills[i] for i in chosen], self.vectors[rows],
                                  config=self.library.config), record
