"""Crowding: how close a library's skills lie to one another, the measure routing errors follow (issue 55 §5).

Every function takes L2-normalised embedding rows (one per skill, as `skilltransfer.memory.embedders` returns them;
`normalized` makes any rows so), so a cosine is a dot product, and works for any embedder. ``score`` embeds each
skill's *description* (what an agent or a router chooses by); the near-miss functions take any corpus.

Definitions, fixed before any outcome was looked at:

* **nearest neighbour** of a skill: the *other* skill of the library with the highest cosine (ties: the lower
  index); a library of one skill has none (index -1, cosine NaN).
* **confusability** of a skill: its nearest neighbour's cosine (arXiv 2601.04748: selection accuracy falls with
  confusability among similar skills, not with size alone).
* **band** ``[low, high]``, by default ``[0.55, 0.75]`` (`DEFAULT_BAND`): the description cosines where a 989-skill
  routing study found routing errors concentrate. A skill is ``crowded`` when its confusability lies in the band
  (both ends included), a ``near-duplicate`` above it, ``clear`` below it (`Band.label`).
* **crowded cluster**: a connected group of two or more skills in which each is linked to another by a cosine at or
  above the band's lower end (single linkage; pairs above the upper end, near-duplicates, link too: they are at
  least as confusable). Clusters are listed largest first (ties: by their first member).
* **near-miss candidates** of a target: the corpus items whose cosine to the target lies in the band, highest first
  (ties: the lower index): distractors that share the right skill's neighbourhood without duplicating it.

API (all exact; rows are scanned in blocks, so 10,000 skills take about a second and little memory):

* `normalized(vectors)`: unit rows.
* `nearest_neighbours(vectors, k=1)`: each row's ``k`` nearest other rows and their cosines.
* `confusability(vectors)`: each row's nearest-neighbour cosine.
* `linked_pairs(vectors, threshold)`: every pair ``i < j`` with cosine >= ``threshold``.
* `crowded_clusters(vectors, band)`: the clusters (`CrowdedCluster`).
* `near_miss_candidates(target, corpus, band, exclude=..., limit=...)`: one target's near misses.
* `near_misses(targets, corpus, band, ...)`: the same for many targets at once.
* `crowding(ids, vectors, band)`: all of it for a library (`CrowdingReport`: one `SkillCrowding` per skill, the
  clusters, counts; ``to_dict`` for JSON).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

CrowdingLabel = Literal["clear", "crowded", "near-duplicate"]
BLOCK_ROWS = 1024
"""Rows of the cosine matrix computed at once (a block of 1,024 x 10,000 float32 cosines is 40 MB)."""


@dataclass(frozen=True)
class Band:
    """A closed interval of cosines (``low <= high``, both in [-1, 1]): where routing errors concentrate."""

    low: float = 0.55
    high: float = 0.75

    def __post_init__(self) -> None:
        if not (-1.0 <= self.low <= self.high <= 1.0):
            raise ValueError(f"a cosine band needs -1 <= low <= high <= 1, got [{self.low}, {self.high}]")

    def contains(self, cosine: float) -> bool:
        """Whether ``cosine`` lies in the band (both ends included)."""
        return self.low <= cosine <= self.high

    def label(self, cosine: float) -> CrowdingLabel:
        """``clear`` below the band, ``crowded`` in it, ``near-duplicate`` above it (NaN, no neighbour: clear)."""
        if not cosine >= self.low:  # NaN too
            return "clear"
        return "crowded" if cosine <= self.high else "near-duplicate"

    def describe(self) -> str:
        """The band in words, e.g. ``0.55-0.75``."""
        return f"{self.low:g}-{self.high:g}"


DEFAULT_BAND = Band()
"""``[0.55, 0.75]``: the description cosines where routing errors concentrated in a 989-skill routing study."""


def normalized(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as float32 rows of unit length (a zero row stays zero)."""
    rows = np.asarray(vectors, dtype=np.float32)
    if rows.ndim != 2:
        raise ValueError(f"expected a 2-d matrix of embedding rows, got shape {rows.shape}")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def _blocks(n: int, block: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, block):
        yield start, min(n, start + block)


def nearest_neighbours(vectors: np.ndarray, k: int = 1, *, block: int = BLOCK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` nearest *other* rows by cosine, best first (ties: the lower index).

    Args:
        vectors: (n, dim) unit rows.
        k: neighbours per row (capped at n - 1).
        block: rows compared at once.

    Returns:
        (indices, cosines), each of shape (n, min(k, n - 1)); indices are row numbers of ``vectors``.
    """
    rows = np.asarray(vectors, dtype=np.float32)
    n = len(rows)
    k = max(0, min(k, n - 1))
    indices = np.zeros((n, k), dtype=np.int64)
    cosines = np.zeros((n, k), dtype=np.float32)
    if k == 0:
        return indices, cosines
    for start, stop in _blocks(n, block):
        sims = rows[start:stop] @ rows.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # a row is not its own neighbour
        if k == 1:  # argmax takes the first of equal values: the lower index
            best = np.argmax(sims, axis=1)
            indices[start:stop, 0] = best
            cosines[start:stop, 0] = sims[np.arange(stop - start), best]
            continue
        # the k best by (-cosine, index): a stable sort keeps the lower index first on ties
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < n - 1 else np.tile(np.arange(n), (stop - start, 1))
        for r in range(stop - start):
            candidates = part[r]
            values = sims[r, candidates]
            if k < n - 1:  # argpartition may cut a tie at the k-th value: take every row that ties with it
                kth = values.min()
                candidates = np.flatnonzero(sims[r] >= kth)
                values = sims[r, candidates]
            order = np.lexsort((candidates, -values))[:k]
            indices[start + r] = candidates[order]
            cosines[start + r] = values[order]
    return indices, cosines


def confusability(vectors: np.ndarray, *, block: int = BLOCK_ROWS) -> np.ndarray:
    """Each row's nearest-neighbour cosine (NaN for a library of one skill): the confusability of each skill."""
    _, cosines = nearest_neighbours(vectors, 1, block=block)
    if cosines.shape[1] == 0:
        return np.full(len(cosines), np.nan, dtype=np.float32)
    return cosines[:, 0]


@dataclass(frozen=True)
class _Scan:
    """One pass over a library's cosines: each row's nearest other row and every linked pair."""

    nearest: np.ndarray
    """Per row, its nearest other row (ties: the lower index), as `nearest_neighbours` with k = 1."""
    nearest_cosine: np.ndarray
    first: np.ndarray
    """The linked pairs (i, j, cosine) with i < j, in (i, j) order: `linked_pairs` as arrays."""
    second: np.ndarray
    cosine: np.ndarray


def _scan(vectors: np.ndarray, threshold: float, block: int) -> _Scan:
    """Each block of the cosine matrix computed once for both the nearest neighbours and the links at ``threshold``."""
    rows = np.asarray(vectors, dtype=np.float32)
    n = len(rows)
    nearest = np.zeros(n, dtype=np.int64)
    nearest_cosine = np.zeros(n, dtype=np.float32)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start, stop in _blocks(n, block):
        sims = rows[start:stop] @ rows.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # a row is not its own neighbour
        best = np.argmax(sims, axis=1)  # the first of equal values: the lower index
        nearest[start:stop] = best
        nearest_cosine[start:stop] = sims[np.arange(stop - start), best]
        r, c = np.nonzero(sims >= threshold)
        upper = start + r < c
        r, c = r[upper], c[upper]
        found.append((start + r, c, sims[r, c]))
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return _Scan(nearest, nearest_cosine, empty, empty, np.zeros(0, dtype=np.float32))
    first, second, cosines = (np.concatenate(part) for part in zip(*found, strict=True))
    return _Scan(nearest, nearest_cosine, first.astype(np.int64), second.astype(np.int64), cosines)


def linked_pairs(vectors: np.ndarray, threshold: float, *,
                 block: int = BLOCK_ROWS) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, cosine)`` with ``i < j`` and cosine >= ``threshold``, in (i, j) order."""
    scan = _scan(vectors, threshold, block)
    return list(zip(scan.first.tolist(), scan.second.tolist(), scan.cosine.astype(np.float64).tolist(), strict=True))


@dataclass(frozen=True)
class CrowdedCluster:
    """A crowded cluster (module docstring): its members (row numbers, ascending) and how tightly they sit."""

    members: list[int]
    links: int
    """Pairs inside it with cosine >= the band's lower end."""
    near_duplicate_links: int
    """Of those, the pairs above the band's upper end."""
    max_cosine: float
    """The highest cosine between two members."""


def crowded_clusters(vectors: np.ndarray, band: Band = DEFAULT_BAND, *,
                     pairs: Sequence[tuple[int, int, float]] | None = None) -> list[CrowdedCluster]:
    """The crowded clusters of a library (module docstring), largest first (ties: by first member).

    Args:
        vectors: (n, dim) unit rows.
        band: its lower end links two skills; pairs above its upper end are counted as near-duplicate links.
        pairs: `linked_pairs` at ``band.low``, when already computed.
    """
    n = len(vectors)
    if pairs is None:
        scan = _scan(vectors, band.low, BLOCK_ROWS)
        i, j, cosines = scan.first, scan.second, scan.cosine
    else:
        listed = list(pairs)
        i = np.array([p[0] for p in listed], dtype=np.int64)
        j = np.array([p[1] for p in listed], dtype=np.int64)
        cosines = np.array([p[2] for p in listed], dtype=np.float64)
    return _clusters(n, i, j, cosines.astype(np.float64), band)


def _clusters(n: int, i: np.ndarray, j: np.ndarray, cosines: np.ndarray, band: Band) -> list[CrowdedCluster]:
    """`crowded_clusters` over linked pairs given as arrays (``cosines`` as float64)."""
    if n == 0 or not len(i):
        return []
    graph = coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    sizes = np.bincount(labels, minlength=count)
    pair_labels = labels[i]
    links = np.bincount(pair_labels, minlength=count)
    near = np.bincount(pair_labels, weights=(cosines > band.high).astype(np.float64), minlength=count)
    highest = np.full(count, -np.inf)
    np.maximum.at(highest, pair_labels, cosines)
    rows_by_label = np.argsort(labels, kind="stable")  # each cluster's rows, ascending
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    clusters = [CrowdedCluster(members=rows_by_label[bounds[label]:bounds[label + 1]].tolist(),
                               links=int(links[label]), near_duplicate_links=int(near[label]),
                               max_cosine=round(float(highest[label]), 6))
                for label in np.flatnonzero(sizes > 1)]
    return sorted(clusters, key=lambda c: (-len(c.members), c.members[0]))


def near_miss_candidates(target: np.ndarray, corpus: np.ndarray, band: Band = DEFAULT_BAND, *,
                         exclude: Iterable[int] = (), limit: int | None = None) -> list[tuple[int, float]]:
    """The corpus rows whose cosine to ``target`` lies in ``band``, highest first (ties: the lower index).

    Args:
        target: one unit row (the right skill's description embedding).
        corpus: (m, dim) unit rows (e.g. a public library's descriptions).
        band: the cosine band of a near miss.
        exclude: corpus rows never returned (the target itself, skills already in the library).
        limit: the most returned (None: all).
    """
    sims = np.asarray(corpus, dtype=np.float32) @ np.asarray(target, dtype=np.float32).reshape(-1)
    keep = np.flatnonzero((sims >= band.low) & (sims <= band.high))
    excluded = set(exclude)
    keep = np.array([row for row in keep if int(row) not in excluded], dtype=np.int64)
    if not len(keep):
        return []
    order = np.lexsort((keep, -sims[keep]))
    chosen = keep[order][:limit] if limit is not None else keep[order]
    return [(int(row), float(sims[row])) for row in chosen]


def near_misses(targets: np.ndarray, corpus: np.ndarray, band: Band = DEFAULT_BAND, *,
                exclude: Iterable[int] = (), limit: int | None = None) -> list[list[tuple[int, float]]]:
    """`near_miss_candidates` for each row of ``targets`` (the same ``exclude`` and ``limit`` for each)."""
    excluded = list(exclude)
    return [near_miss_candidates(row, corpus, band, exclude=excluded, limit=limit)
            for row in np.asarray(targets, dtype=np.float32)]


@dataclass(frozen=True)
class SkillCrowding:
    """One skill's crowding: its nearest neighbour, their cosine (its confusability), its label and cluster."""

    id: str
    neighbour_id: str | None
    """None: the library has no other skill."""
    cosine: float | None
    label: CrowdingLabel
    cluster: int | None = None
    """Its crowded cluster's number in `CrowdingReport.clusters` (0 = the largest); None: in none."""


@dataclass
class CrowdingReport:
    """A library's crowding (see the module docstring): per skill, the clusters, and counts."""

    band: Band
    skills: list[SkillCrowding]
    """In the order of the ids given."""
    clusters: list[list[str]]
    """Each crowded cluster's member ids, largest cluster first."""
    cluster_stats: list[CrowdedCluster] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many skills are clear, crowded and near-duplicates, and how many sit in a crowded cluster."""
        labels = [row.label for row in self.skills]
        return {"clear": labels.count("clear"), "crowded": labels.count("crowded"),
                "near_duplicate": labels.count("near-duplicate"),
                "in_clusters": sum(len(members) for members in self.clusters), "clusters": len(self.clusters)}

    def rule(self) -> str:
        """The definitions in one sentence (recorded beside the numbers)."""
        return (f"each skill's nearest other skill by description cosine; crowded when that cosine lies in "
                f"[{self.band.low:g}, {self.band.high:g}] (where routing errors concentrate), near-duplicate above, "
                f"clear below; a crowded cluster links skills whose cosine is >= {self.band.low:g} (single linkage)")

    def to_dict(self) -> dict[str, Any]:
        """The band, rule, counts and clusters (the per-skill rows stay with their skills)."""
        return {"band": [self.band.low, self.band.high], "rule": self.rule(), **self.counts(),
                "cluster_members": self.clusters,
                "cluster_stats": [{k: v for k, v in asdict(c).items() if k != "members"} for c in self.cluster_stats]}


def crowding(ids: Sequence[str], vectors: np.ndarray, band: Band = DEFAULT_BAND, *,
             block: int = BLOCK_ROWS) -> CrowdingReport:
    """The crowding of a library: each skill's nearest neighbour and label, and the crowded clusters.

    Args:
        ids: one id per row (returned as the rows' names).
        vectors: (n, dim) unit rows, e.g. the description embeddings.
        band: the crowded band (default `DEFAULT_BAND`).
    """
    if len(ids) != len(vectors):
        raise ValueError(f"{len(ids)} ids for {len(vectors)} embedding rows")
    scan = _scan(vectors, band.low, block)
    clusters = _clusters(len(vectors), scan.first, scan.second, scan.cosine.astype(np.float64), band)
    member_of = {row: number for number, cluster in enumerate(clusters) for row in cluster.members}
    rows = []
    has = len(ids) > 1  # a library of one skill: no neighbour
    for i, skill_id in enumerate(ids):
        cosine = round(float(scan.nearest_cosine[i]), 6) if has else None
        rows.append(SkillCrowding(id=skill_id, neighbour_id=ids[int(scan.nearest[i])] if has else None,
                                  cosine=cosine, label=band.label(cosine if cosine is not None else float("nan")),
                                  cluster=member_of.get(i)))
    return CrowdingReport(band=band, skills=rows, clusters=[[ids[m] for m in c.members] for c in clusters],
                          cluster_stats=clusters)
