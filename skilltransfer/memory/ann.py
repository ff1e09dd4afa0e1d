"""Retrieval at library size: an inverted-file index beside a skill memory's exact one.

A `SkillMemory` keeps every vector in an exact inner-product index (``IndexFlatIP``): its answers are exact, and a
query reads every vector, about 35 ms at 100,000 skills of 384 dimensions on a loaded 2-core machine (memory
bandwidth, not arithmetic). From `IVF_MIN_SKILLS` skills on (setting ``memory.index: auto``; ``ivf`` forces it,
``flat`` never), retrieval asks an IVF index (``IndexIVFFlat``) instead: k-means cells over the same vectors, the
query compared with the vectors of its `nprobe` nearest cells only (about 1 ms at 100,000). That trades exactness:
a skill whose cell was not probed is missed. What it trades is measured when the index is built — the recall@5 of
`RECALL_QUERIES` sampled skills' vectors as queries (each skill itself left out) against exact search — and kept in
`IndexInfo` (the memory's manifest and the benchmark print it). Scores of the skills it returns are exact.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import faiss
import numpy as np

IndexKind = Literal["auto", "flat", "ivf"]
IVF_MIN_SKILLS = 20_000
"""``auto``: the exact index below this many skills (a query then costs at most ~7 ms on a loaded 2-core machine),
the IVF index from it on."""
RECALL_QUERIES = 200
"""Sampled skills whose neighbours measure the IVF index's recall when it is built."""
RECALL_K = 5


@dataclass(frozen=True)
class IndexInfo:
    """How a memory's retrieval searches, and what it gives up."""

    kind: Literal["flat", "ivf"]
    exact: bool
    skills: int
    nlist: int | None = None
    """IVF: k-means cells."""
    nprobe: int | None = None
    """IVF: cells searched per query."""
    recall_at_5: float | None = None
    """IVF: the share of the exact top-5 neighbours it returns, over `RECALL_QUERIES` sampled skills."""

    def line(self) -> str:
        if self.exact:
            return f"exact search (flat inner product) over {self.skills:,} skills"
        return (f"IVF index over {self.skills:,} skills ({self.nlist} cells, {self.nprobe} searched per query): "
                f"approximate, recall@5 {self.recall_at_5:.3f} against exact search on {RECALL_QUERIES} sampled "
                "skills")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def uses_ivf(kind: IndexKind, skills: int) -> bool:
    """Whether a memory of ``skills`` skills under setting ``kind`` searches the IVF index."""
    return kind == "ivf" or (kind == "auto" and skills >= IVF_MIN_SKILLS)


class IvfSearch:
    """An ``IndexIVFFlat`` over a memory's vectors, keyed by the memory's own integer keys.

    Args:
        keys: the memory's keys of ``vectors``' rows.
        vectors: their normalised embeddings (n x dim, float32).
        seed: the k-means and the recall sample's seed.
    """

    def __init__(self, keys: np.ndarray, vectors: np.ndarray, *, seed: int = 0) -> None:
        n, dim = vectors.shape
        self.nlist = max(1, min(2 ** round(math.log2(max(1.0, 4 * math.sqrt(n)))), n // 39))
        self.nprobe = min(self.nlist, max(8, self.nlist // 16))
        quantizer = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIVFFlat(quantizer, dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
        self.index.cp.seed = seed
        self.index.cp.max_points_per_centroid = 64  # trains on at most 64 x nlist points: seconds, not minutes
        rng = np.random.default_rng(seed)
        sample = vectors[rng.permutation(n)[:64 * self.nlist]] if n > 64 * self.nlist else vectors
        self.index.train(np.ascontiguousarray(sample))
        self.index.add_with_ids(np.ascontiguousarray(vectors), keys.astype(np.int64))
        self.index.nprobe = self.nprobe
        self.recall = self._recall(keys, vectors, rng)

    def _recall(self, keys: np.ndarray, vectors: np.ndarray, rng: np.random.Generator) -> float:
        """Recall@`RECALL_K` of sampled rows' neighbours (each row itself left out) against exact search."""
        rows = rng.permutation(len(vectors))[:RECALL_QUERIES]
        if len(vectors) <= RECALL_K + 1 or not len(rows):
            return 1.0
        exact = faiss.IndexFlatIP(vectors.shape[1])
        exact.add(np.ascontiguousarray(vectors))
        _, truth = exact.search(vectors[rows], RECALL_K + 1)
        _, found = self.index.search(vectors[rows], RECALL_K + 1)
        hits = total = 0
        for row, true_rows, got in zip(rows, truth, found, strict=True):
            wanted = {int(keys[r]) for r in true_rows if r >= 0 and r != row}
            hits += len(wanted & {int(k) for k in got if k >= 0 and k != keys[row]})
            total += len(wanted)
        return hits / total if total else 1.0

    def add(self, key: int, vector: np.ndarray) -> None:
        self.index.add_with_ids(vector.reshape(1, -1).astype(np.float32), np.array([key], dtype=np.int64))

    def remove(self, key: int) -> None:
        self.index.remove_ids(np.array([key], dtype=np.int64))  # type: ignore[arg-type]

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        scores, keys = self.index.search(vectors, k)
        return scores, keys

    def info(self, skills: int) -> IndexInfo:
        return IndexInfo("ivf", False, skills, self.nlist, self.nprobe, self.recall)
