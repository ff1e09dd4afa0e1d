"""SkillMemory: a FAISS inner-product index over skill descriptions, with dedup, code-skill pruning and persistence.

Retrieval embeds the query and ranks skills by cosine with their *description* (seed §3.2: text and code skills are
matched on the description only; ``index_body=True`` also embeds the body). Adding a skill:

1. A skill whose id is already stored is ``dropped``.
2. A code skill that fails validation (parse, entry-point function, isolated load within a time limit) is ``pruned``;
   the reason goes to ``prune_log`` (saved as ``prune_log.jsonl``).
3. If the most similar stored skill *of the same format* X has cosine >= ``dedup_threshold`` (default 0.95):
   the new skill is ``dropped`` as a duplicate of X when its body (whitespace-normalised) equals or is contained in
   X's body; otherwise it is ``merged`` into X: X keeps its id, name, description, provenance and usage, takes the
   longer of the two bodies (for code skills with its entry-point signature; the package's contracts, resources and
   file manifest go with the body, so instructions and contracts stay matched), gains extra keys it lacked, and
   records the new skill's id in ``extra["merged_from"]``.
4. Otherwise it is ``added``; when another stored skill already has its name, it is stored under the first free
   ``<name>_2``, ``<name>_3``, ... (a code skill's function renamed with it): agents address skills by name
   (``load_skill``, ``run_skill``, a code skill's call), so names in a memory are unique.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.memory.ann import IndexInfo, IndexKind, IvfSearch, uses_ivf
from skilltransfer.memory.capacity import EVICTIONS_FILE, Eviction, TaskOutcome, victims
from skilltransfer.memory.library import MANIFEST, SKILLS_JSONL, export_jsonl, read_jsonl, replace_folder
from skilltransfer.memory.ranking import Corpus, Ranker, RankingCache
from skilltransfer.memory.validate import validate_code_skill
from skilltransfer.protocols import Embedder
from skilltransfer.skill import AddResult, Skill, parse_code_signature
from skilltransfer.util.files import atomic_write_text, jsonl_lines, parse_json_line, read_text

FORMAT_VERSION = 2
"""Version 2 added skill packages (contracts, resources) to ``skills.jsonl``; version 1 folders load unchanged."""
READABLE_VERSIONS = (1, 2)
INDEX_FILE = "index.faiss"
PRUNE_LOG = "prune_log.jsonl"
_EPS = 1e-6
"""Float tolerance of the dedup comparison (identical float32 vectors may score 0.9999999)."""


class MemoryConfig(BaseModel):
    """Settings of a skill memory (saved in its manifest)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dedup_threshold: float = 0.95
    """Cosine at or above which a new skill is a near-duplicate of the closest same-format skill (> 1 disables).

    With all-MiniLM-L6-v2, case/word-order rewordings score 0.95-1.0, but so can one-word changes of meaning
    ("date prefix" vs "date suffix": 0.97); lower it to merge looser paraphrases, raise it to merge fewer."""
    index_body: bool = False
    """Embed description + body instead of the description only (the paper matches descriptions only)."""
    validate_code: bool = True
    """Load code skills in an isolated subprocess before they enter; failures are pruned and logged."""
    load_timeout_s: float = 10.0
    """Wall-clock limit for loading one code skill."""
    capacity: int | None = Field(default=None, ge=1)
    """Most skills a growing stream's memory keeps (`skilltransfer.memory.capacity`): after each task the
    ``eviction`` policy removes skills beyond it; None: unbounded."""
    eviction: Eviction = "fifo"
    """Which skills go first when over ``capacity``: fifo, lru, utility or effect (`skilltransfer.memory.capacity`)."""
    index: IndexKind = "auto"
    """How retrieval searches (`skilltransfer.memory.ann`): ``flat`` exact over every skill; ``ivf`` an inverted-file
    index (approximate, its recall@5 measured when built); ``auto`` flat below 20,000 skills, ivf from there on.
    Deduplication always searches exactly."""


_FLAT_HEADER = struct.Struct("<4siqqqBiQ")
"""A saved ``IndexFlatIP``: fourcc ``IxFI``, d, ntotal, two unused counts, is_trained, metric, then the number of
floats and the floats (faiss's ``write_index`` layout)."""


def read_flat_index(folder: Path, count: int, dim: int) -> np.ndarray:
    """The vectors of a saved flat inner-product index, parsed here rather than by faiss (whose reader trusts the
    sizes a file claims: 45 bytes claiming 500M floats allocate 2 GiB first): the header must match the skills and
    the embedder, and the file must be exactly as long as it says.

    Raises:
        InputError: not such an index, or one whose header or length does not match.
    """
    expected = _FLAT_HEADER.size + 4 * count * dim
    try:
        fd, size = untrusted.open_regular(INDEX_FILE, root=folder, max_bytes=1 << 62)  # opened, not read
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"{INDEX_FILE}: {exc.reason}", path=folder) from None
    try:
        head = os.pread(fd, _FLAT_HEADER.size, 0)
        if len(head) < _FLAT_HEADER.size:
            raise InputError(f"{INDEX_FILE} is truncated ({size} bytes)", path=folder)
        fourcc, d, ntotal, _, _, _, metric, floats = _FLAT_HEADER.unpack(head)
        if fourcc != b"IxFI" or metric != faiss.METRIC_INNER_PRODUCT:
            raise InputError(f"{INDEX_FILE} is not a flat inner-product index written by this toolkit", path=folder)
        if ntotal != count or d != dim or floats != count * dim or size != expected:
            raise InputError(f"{INDEX_FILE} holds {ntotal} vectors of dim {d} ({size} bytes) but there are "
                             f"{count} skills and the embedder has dim {dim}", path=folder)
        data = bytearray()
        while len(data) < expected - _FLAT_HEADER.size:
            chunk = os.pread(fd, min(1 << 20, expected - _FLAT_HEADER.size - len(data)),
                             _FLAT_HEADER.size + len(data))
            if not chunk:
                raise InputError(f"{INDEX_FILE} shrank while read", path=folder)
            data.extend(chunk)
    finally:
        os.close(fd)
    return np.frombuffer(bytes(data), dtype="<f4").reshape(count, dim).astype(np.float32)


class ReadOnlyMemoryError(InputError):
    """A change was attempted on a read-only (frozen) skill memory."""


def _norm_body(body: str) -> str:
    return " ".join(body.split())


def unique_skill_name(skill: Skill, taken: Collection[str]) -> Skill:
    """A copy of ``skill`` under a name no other skill has (``<name>_2``, ...; a code skill's top-level function of
    that name renamed too, so calling the skill by its name still works). The id stays."""
    if skill.name not in taken:
        return skill.model_copy(deep=True)
    number = 2
    while f"{skill.name}_{number}" in taken:
        number += 1
    name = f"{skill.name}_{number}"
    if skill.format != "code" or skill.code is None or skill.code.function_name != skill.name:
        return skill.model_copy(update={"name": name}, deep=True)
    body = re.sub(rf"^(async\s+)?def\s+{re.escape(skill.name)}\b", lambda m: f"{m.group(1) or ''}def {name}",
                  skill.body, count=1, flags=re.MULTILINE)
    return skill.model_copy(update={"name": name, "body": body, "code": parse_code_signature(body, name)}, deep=True)


class SkillMemory:
    """A skill memory over FAISS ``IndexFlatIP`` (exact cosine on L2-normalised embeddings).

    Args:
        embedder: any object with ``id``, ``dim`` and ``embed(list[str]) -> np.ndarray`` (normalised float32 rows).
        config: settings; keyword arguments override its fields (e.g. ``dedup_threshold=0.9``).
        read_only: a frozen library: ``add``/``remove`` raise ``ReadOnlyMemoryError`` (usage stats still update).
    """

    def __init__(self, embedder: Embedder, *, config: MemoryConfig | None = None, read_only: bool = False,
                 **kwargs: Any) -> None:
        self.embedder = embedder
        self.config = MemoryConfig.model_validate({**(config or MemoryConfig()).model_dump(), **kwargs})
        self.read_only = read_only
        self.dim = int(embedder.dim)
        self.prune_log: list[dict[str, Any]] = []
        self.evictions: list[dict[str, Any]] = []
        """Skills evicted over ``config.capacity`` (`evict`), saved as ``evictions.jsonl``."""
        self._skills: dict[str, Skill] = {}
        self._key: dict[str, int] = {}
        self._id_of_key: dict[int, str] = {}
        self._next_key = 0
        self._formats: Counter[str] = Counter()
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        self._names: Counter[str] = Counter()
        """How many stored skills carry each name (a new skill's name is checked against it)."""
        self._ivf: IvfSearch | None = None
        """Retrieval's IVF index at library size (`skilltransfer.memory.ann`), built on the first search."""
        self.ranker: Ranker | None = None
        """A retrieval mode other than dense (`skilltransfer.memory.ranking`; the stream's ``retrieval``); None: the
        FAISS cosine top-k."""
        self.ranking_cache = RankingCache()
        self._version = 0
        """Counts the changes of the skills or their indexed texts (what the ranker's indexes are built for)."""

    # ----------------------------------------------------------------- container protocol
    def __len__(self) -> int:
        return len(self._skills)

    def __iter__(self) -> Iterator[Skill]:
        return iter(list(self._skills.values()))

    def __contains__(self, item: object) -> bool:
        skill_id = item.id if isinstance(item, Skill) else item
        return skill_id in self._skills

    def get(self, skill_id: str) -> Skill:
        """The stored skill with this id (raises ``KeyError`` if absent)."""
        return self._skills[skill_id]

    # ----------------------------------------------------------------- embedding and index internals
    def _text(self, skill: Skill) -> str:
        return f"{skill.description}\n{skill.body}" if self.config.index_body else skill.description

    @property
    def ranking_version(self) -> int:
        """Changes whenever a skill is added, removed or merged into (`skilltransfer.memory.ranking.RankedStore`)."""
        return self._version

    def ranking_corpus(self) -> Corpus:
        """The skills in memory order with their indexed texts and stored embeddings."""
        ids, vectors = self.embeddings()
        skills = [self._skills[skill_id] for skill_id in ids]
        return Corpus(skills, [self._text(skill) for skill in skills], vectors)

    def embed(self, texts: list[str]) -> np.ndarray:
        """The normalised embeddings of ``texts`` by the memory's embedder, one row each (shape checked)."""
        return self._embed(texts)

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.ascontiguousarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise ValueError(f"embedder {self.embedder.id} returned shape {vectors.shape}, "
                             f"expected {(len(texts), self.dim)}")
        return vectors

    def _insert(self, skill: Skill, vector: np.ndarray) -> None:
        key = self._next_key
        self._next_key += 1
        self._index.add_with_ids(vector.reshape(1, -1).astype(np.float32), np.array([key], dtype=np.int64))
        self._skills[skill.id] = skill
        self._key[skill.id] = key
        self._id_of_key[key] = skill.id
        self._formats[skill.format] += 1
        self._names[skill.name] += 1
        if self._ivf is not None:
            self._ivf.add(key, vector)
        self._version += 1

    def vector(self, skill_id: str) -> np.ndarray:
        """The stored (normalised) embedding of a skill's indexed text."""
        return np.asarray(self._index.reconstruct(self._key[skill_id]), dtype=np.float32)

    def embeddings(self) -> tuple[list[str], np.ndarray]:
        """All skill ids (iteration order) and their stored embeddings as an (n, dim) matrix."""
        ids = list(self._skills)
        if not ids:
            return ids, np.zeros((0, self.dim), dtype=np.float32)
        row = {int(key): i for i, key in enumerate(faiss.vector_to_array(self._index.id_map))}
        matrix = np.asarray(self._index.index.reconstruct_n(0, self._index.ntotal), dtype=np.float32)
        return ids, matrix[[row[self._key[skill_id]] for skill_id in ids]]

    def _closest_same_format(self, vector: np.ndarray, fmt: str) -> tuple[Skill, float] | None:
        """Best stored skill of format ``fmt`` if it could reach the dedup threshold (exact; widens k as needed)."""
        total = len(self)
        if not self._formats[fmt] or self.config.dedup_threshold - _EPS > 1.0 + _EPS:
            return None  # no skill of the format, or a threshold no cosine reaches (a frozen library: 1.01)
        k = min(total, 8)
        while True:
            scores, keys = self._index.search(vector.reshape(1, -1), k)
            for score, key in zip(scores[0], keys[0], strict=True):
                if key >= 0 and self._skills[self._id_of_key[int(key)]].format == fmt:
                    return self._skills[self._id_of_key[int(key)]], float(score)
            if k >= total or scores[0][-1] < self.config.dedup_threshold - _EPS:
                return None
            k = min(total, k * 4)

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyMemoryError(f"cannot {what}: this skill memory is read-only (a frozen library)")

    # ----------------------------------------------------------------- adding
    def _prune(self, skill: Skill, reason: str) -> AddResult:
        self.prune_log.append({"skill_id": skill.id, "name": skill.name, "format": skill.format, "reason": reason,
                               "source_task_id": skill.provenance.source_task_id,
                               "time": datetime.now(UTC).isoformat(timespec="seconds")})
        return AddResult("pruned", skill.id, None, reason)

    def _screen(self, skill: Skill) -> AddResult | None:
        if skill.id in self._skills:
            return AddResult("dropped", skill.id, skill.id, "a skill with this id is already in memory")
        if skill.format == "code" and self.config.validate_code:
            reason = validate_code_skill(skill, timeout_s=self.config.load_timeout_s)
            if reason is not None:
                return self._prune(skill, reason)
        return None

    def _place(self, skill: Skill, vector: np.ndarray) -> AddResult:
        if skill.id in self._skills:  # an earlier skill of the same batch had this id
            return AddResult("dropped", skill.id, skill.id, "a skill with this id is already in memory")
        merges = self.config.dedup_threshold <= 1.0 + _EPS  # above 1 no cosine reaches it (a frozen library)
        closest = self._closest_same_format(vector, skill.format) if merges else None
        if closest is not None and closest[1] >= self.config.dedup_threshold - _EPS:
            return self._fold(skill, *closest)
        stored = unique_skill_name(skill, self._names.keys())
        self._insert(stored, vector)
        renamed = f"name {skill.name!r} is taken: stored as {stored.name!r}" if stored.name != skill.name else ""
        return AddResult("added", skill.id, reason=renamed)

    def _fold(self, new: Skill, target: Skill, score: float) -> AddResult:
        near = f"near-duplicate (cosine {score:.3f} >= {self.config.dedup_threshold:g}) of {target.id} ({target.name})"
        new_body, old_body = _norm_body(new.body), _norm_body(target.body)
        if new_body == old_body or new_body in old_body:
            return AddResult("dropped", new.id, target.id, f"{near}; its body is identical to or contained in it")
        took_new = len(new_body) > len(old_body)
        if took_new:
            target.body = new.body
            target.code = new.code.model_copy() if new.code else None
            target.inputs, target.outputs, target.resources = new.inputs, new.outputs, dict(new.resources)
            target.package = new.package.model_copy(deep=True) if new.package is not None else None
        for extra_key, value in new.extra.items():
            target.extra.setdefault(extra_key, value)
        merged = [part for part in target.extra.get("merged_from", "").split(",") if part]
        target.extra["merged_from"] = ",".join([*merged, new.id])
        self._version += 1
        if took_new and self.config.index_body:
            key = self._key[target.id]
            vector = self._embed([self._text(target)])
            self._index.remove_ids(np.array([key], dtype=np.int64))  # type: ignore[arg-type]
            self._index.add_with_ids(vector, np.array([key], dtype=np.int64))
            if self._ivf is not None:
                self._ivf.remove(key)
                self._ivf.add(key, vector[0])
        body_from = "the new skill (longer)" if took_new else f"{target.id} (kept, longer or equal)"
        return AddResult("merged", new.id, target.id, f"{near}; body from {body_from}")

    def add(self, skill: Skill) -> AddResult:
        """Add one skill with validation and near-duplicate handling (see the module docstring for the rules).

        Raises:
            ReadOnlyMemoryError: the memory is read-only.
        """
        self._check_writable(f"add skill {skill.id}")
        screened = self._screen(skill)
        if screened is not None:
            return screened
        return self._place(skill, self._embed([self._text(skill)])[0])

    def add_many(self, skills: Iterable[Skill]) -> list[AddResult]:
        """Add skills in order, embedding the survivors of validation in one batch (same rules as ``add``)."""
        self._check_writable("add skills")
        skills = list(skills)
        results: list[AddResult | None] = [self._screen(skill) for skill in skills]
        todo = [i for i, result in enumerate(results) if result is None]
        vectors = self._embed([self._text(skills[i]) for i in todo]) if todo else np.zeros((0, self.dim), np.float32)
        for row, i in enumerate(todo):
            results[i] = self._place(skills[i], vectors[row])
        return [result for result in results if result is not None]

    def remove(self, skill_id: str) -> None:
        """Remove a skill (``KeyError`` if absent; ``ReadOnlyMemoryError`` if read-only)."""
        self._check_writable(f"remove skill {skill_id}")
        skill = self._skills.pop(skill_id)
        key = self._key.pop(skill_id)
        del self._id_of_key[key]
        self._formats[skill.format] -= 1
        self._names[skill.name] -= 1
        if not self._names[skill.name]:
            del self._names[skill.name]
        self._index.remove_ids(np.array([key], dtype=np.int64))  # type: ignore[arg-type]
        if self._ivf is not None:
            self._ivf.remove(key)
        self._version += 1

    def evict(self, position: int, history: Sequence[TaskOutcome]) -> list[str]:
        """Evict skills beyond ``config.capacity`` in ``config.eviction`` order (`skilltransfer.memory.capacity`),
        logging each with the stream ``position``; returns the evicted ids (none when unbounded or read-only)."""
        if self.read_only:
            return []
        out = []
        for skill, score in victims(list(self), self.config.capacity, self.config.eviction, history):
            self.remove(skill.id)
            self.evictions.append({"skill_id": skill.id, "name": skill.name, "policy": self.config.eviction,
                                   "score": round(score, 6), "position": position, "capacity": self.config.capacity})
            out.append(skill.id)
        return out

    # ----------------------------------------------------------------- retrieval
    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[list[tuple[Skill, float]]]:
        """Top-``k`` skills for each precomputed, normalised query vector (k capped by the memory size)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        k = min(k, len(self))
        if k <= 0:
            return [[] for _ in range(len(vectors))]
        ivf = self._ivf_search()
        scores, keys = ivf.search(vectors, k) if ivf is not None else self._index.search(vectors, k)
        return [[(self._skills[self._id_of_key[int(key)]], float(score))
                 for score, key in zip(row_scores, row_keys, strict=True) if key >= 0]
                for row_scores, row_keys in zip(scores, keys, strict=True)]

    def _ivf_search(self) -> IvfSearch | None:
        """The IVF index when the setting and the size call for it (built now if not yet), else None."""
        if not uses_ivf(self.config.index, len(self)):
            self._ivf = None
            return None
        if self._ivf is None:
            keys = faiss.vector_to_array(self._index.id_map).astype(np.int64)
            vectors = self._index.index.reconstruct_n(0, self._index.ntotal)
            self._ivf = IvfSearch(keys, np.asarray(vectors, dtype=np.float32))
        return self._ivf

    def index_info(self) -> IndexInfo:
        """How retrieval searches this memory now (`skilltransfer.memory.ann`; builds the IVF index if it is due)."""
        ivf = self._ivf_search() if len(self) else None
        return ivf.info(len(self)) if ivf is not None else IndexInfo("flat", True, len(self))

    def retrieve(self, query: str, k: int = 5) -> list[tuple[Skill, float]]:
        """The ``k`` skills whose descriptions are most similar to ``query``, with cosine scores, best first (or as
        ``ranker`` orders them, each with its cosine)."""
        return self.retrieve_many([query], k)[0]

    def retrieve_many(self, queries: list[str], k: int = 5) -> list[list[tuple[Skill, float]]]:
        """Batched ``retrieve``: one embedding call and one index search for all queries."""
        if not queries:
            return []
        if not len(self) or k <= 0:
            return [[] for _ in queries]
        if self.ranker is not None and self.ranker.mode != "dense":
            return self.ranker.rank(self, list(queries), self._embed(list(queries)), k)
        return self.search_vectors(self._embed(list(queries)), k)

    def record_retrieval(self, skill_ids: Iterable[str], success: bool) -> None:
        """Count one retrieval for each skill (once per id) and, if the retrieving task succeeded, one success.

        Raises:
            KeyError: an id is not in memory (nothing is updated then).
        """
        ids = list(dict.fromkeys(skill_ids))
        missing = [skill_id for skill_id in ids if skill_id not in self._skills]
        if missing:
            raise KeyError(f"skills not in memory: {', '.join(missing)}")
        for skill_id in ids:
            usage = self._skills[skill_id].usage
            usage.times_retrieved += 1
            usage.successes_when_retrieved += int(success)

    def filter(self, predicate: Callable[[Skill], bool]) -> SkillMemory:
        """A new memory (same embedder, config, read-only flag, prune log) holding copies of the matching skills."""
        out = SkillMemory(self.embedder, config=self.config)
        for skill in self:
            if predicate(skill):
                out._insert(skill.model_copy(deep=True), self.vector(skill.id))
        out.prune_log = [dict(entry) for entry in self.prune_log]
        out.evictions = [dict(entry) for entry in self.evictions]
        out.read_only = self.read_only
        out.ranker = self.ranker
        return out

    @classmethod
    def frozen(cls, embedder: Embedder, skills: Sequence[Skill], vectors: np.ndarray, *,
               config: MemoryConfig | None = None) -> SkillMemory:
        """A read-only memory of ``skills`` (the same objects, no copy) with their precomputed, normalised vectors
        (one row each; no embedding, no screening: a per-task library of `skilltransfer.memory.near_miss`)."""
        out = cls(embedder, config=config)
        if len(skills):
            rows = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(skills), out.dim)
            out._index.add_with_ids(rows, np.arange(len(skills), dtype=np.int64))
            for key, skill in enumerate(skills):
                out._skills[skill.id], out._key[skill.id], out._id_of_key[key] = skill, key, skill.id
                out._formats[skill.format] += 1
            out._next_key = len(skills)
        out.read_only = True
        return out

    # ----------------------------------------------------------------- persistence
    def manifest(self) -> dict[str, Any]:
        """The manifest saved with the memory."""
        return {"format_version": FORMAT_VERSION, "embedder": str(self.embedder.id), "dim": self.dim,
                "config": self.config.model_dump(), "read_only": self.read_only,
                "counts": {"skills": len(self), "text": self._formats["text"], "code": self._formats["code"],
                           "pruned": len(self.prune_log),
                           **({"evicted": len(self.evictions)} if self.evictions else {})},
                **({"index": info.to_dict()} if not (info := self.index_info()).exact else {})}

    def save(self, path: str | Path) -> Path:
        """Write the memory folder atomically (built in a temp sibling folder, then swapped in by renames).

        Raises:
            InputError: ``path`` exists and is a non-empty folder that is not a saved memory.
        """
        def write(folder: Path) -> None:
            export_jsonl(self, folder / SKILLS_JSONL)
            flat = faiss.IndexFlatIP(self.dim)
            ids, matrix = self.embeddings()
            if ids:
                flat.add(matrix)
            faiss.write_index(flat, str(folder / INDEX_FILE))
            atomic_write_text(folder / PRUNE_LOG, "".join(json.dumps(entry) + "\n" for entry in self.prune_log))
            if self.evictions:
                atomic_write_text(folder / EVICTIONS_FILE,
                                  "".join(json.dumps(entry) + "\n" for entry in self.evictions))
            atomic_write_text(folder / MANIFEST, json.dumps(self.manifest(), indent=2) + "\n")

        return replace_folder(path, write, what="skill memory")

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder, *, read_only: bool | None = None) -> SkillMemory:
        """Load a saved memory folder; the embedder must have the id the memory was built with.

        Args:
            path: the folder written by ``save``.
            embedder: the embedder to query with.
            read_only: override the saved read-only flag.

        Raises:
            InputError: missing folder or manifest, other format version or embedder, corrupt files.
        """
        path = Path(path)
        if not path.is_dir():
            raise InputError("skill memory folder not found", path=path)
        if not (path / MANIFEST).is_file():
            raise InputError(f"not a saved skill memory: {MANIFEST} is missing", path=path)
        try:
            manifest = untrusted.read_json(MANIFEST, root=path)
            config = MemoryConfig.model_validate(manifest["config"])
        except (untrusted.UntrustedFileError, KeyError, TypeError, ValidationError) as exc:
            raise InputError(f"corrupt manifest ({type(exc).__name__}: {exc})", path=path / MANIFEST) from None
        version = manifest.get("format_version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise InputError(f"memory format_version {manifest.get('format_version')!r} is not supported "
                             f"(this version reads {', '.join(map(str, READABLE_VERSIONS))})", path=path)
        if manifest.get("embedder") != str(embedder.id):
            raise InputError(f"memory was built with embedder {manifest.get('embedder')!r} but the given embedder is "
                             f"{embedder.id!r}; load it with the same embedder", path=path)
        skills = [skill for skill, _ in read_jsonl(SKILLS_JSONL, root=path)] if (path / SKILLS_JSONL).is_file() else []
        if not (path / INDEX_FILE).is_file():
            raise InputError(f"{INDEX_FILE} is missing", path=path)
        vectors = read_flat_index(path, len(skills), int(embedder.dim))
        duplicated = [skill_id for skill_id, count in Counter(s.id for s in skills).items() if count > 1]
        if duplicated:
            raise InputError(f"duplicate skill ids in {SKILLS_JSONL}: {', '.join(duplicated[:5])}", path=path)
        saved_read_only = bool(manifest.get("read_only", False))
        memory = cls(embedder, config=config)
        for skill, vector in zip(skills, vectors, strict=True):
            memory._insert(skill, vector)
        if (path / PRUNE_LOG).is_file():
            text = read_text(PRUNE_LOG, what="prune log", root=path)
            memory.prune_log = [parse_json_line(line, path=path / PRUNE_LOG, number=number)
                                for number, line in jsonl_lines(text)]
        if (path / EVICTIONS_FILE).is_file():
            text = read_text(EVICTIONS_FILE, what="eviction log", root=path)
            memory.evictions = [parse_json_line(line, path=path / EVICTIONS_FILE, number=number)
                                for number, line in jsonl_lines(text)]
        memory.read_only = saved_read_only if read_only is None else read_only
        return memory
