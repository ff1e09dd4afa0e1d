"""Retrieval modes of a skill memory (issue 55 §3): how the top-k skills for a (sub)task query are chosen.

A stream's ``retrieval`` (`skilltransfer.settings.config.StreamConfig`) picks one; the memory's indexed text is its
``retrieval_text`` (the description, the paper's, or description + body: ``MemoryConfig.index_body``):

* ``dense`` (default): cosine between the query's and the indexed text's embeddings, by the memory's FAISS index
  (`skilltransfer.memory.store.SkillMemory`; unchanged, no `Ranker` is made).
* ``bm25``: lexical BM25 by ``bm25s`` (its ``lucene`` variant, k1 1.5, b 0.75) over the indexed text, tokenised by
  ``bm25s``' tokenizer with its English stop words and PyStemmer's English Snowball stemmer. Only skills that share
  a term with the query are candidates: a query sharing none retrieves nothing.
* ``hybrid``: reciprocal rank fusion of the dense and the BM25 rankings, each taken to depth `FUSION_DEPTH`: a
  skill's fused score is the sum over the rankings that hold it of 1 / (60 + rank), rank counted from 1; ties go
  to the better dense rank, then to memory order.
* ``hierarchical``: category -> skill. The memory's skills are grouped into categories (a `RoutingTree`); at each
  level the entries (categories and skills) are ordered by cosine with the query, a category scoring the cosine of
  its skills' normalised mean embedding (its centroid); the best entry is taken, a category by opening it and
  ordering its entries the same way, until k skills are found. The right skill in a category that loses to another
  comes after all of that category's skills: the routing error the field measures. Categories, first that applies:
  1. the stream's ``organization`` (a ``library organize`` folder: tree, graph or task-tree; its routing nodes);
  2. the library's own folders, when its SKILL.md packages lie in at least two folders below their common parent
     (a benchmark library grouped by task, a published one by category), nested as the folders are;
  3. otherwise (no organisation: a growing memory, a flat folder, a .jsonl): clusters of the indexed-text
     embeddings, k-means (faiss, spherical, seed 0, 20 iterations) into round(sqrt(n)) clusters, recomputed when the
     memory changes. Below 4 skills that is one cluster: the dense order.
  Skills the organisation does not hold (the agent's own beside a library) are entries of the top level.

Every hit's score is its cosine with the query (the indexed text's, as ``dense`` gives it), whatever ranked it, so a
retrieval floor (``agent.retrieval_min_score``, ``agent.library_min_score``) means the same in every mode and the
trajectories' scores compare across modes; the order is the mode's.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, get_args

import numpy as np

from skilltransfer.memory.organization import Organization
from skilltransfer.skill import Skill

RetrievalMode = Literal["dense", "bm25", "hybrid", "hierarchical"]
RETRIEVAL_MODES: tuple[str, ...] = get_args(RetrievalMode)
RetrievalText = Literal["description", "description+body"]
RRF_K = 60
"""The constant of reciprocal rank fusion: a skill at rank r (from 1) adds 1 / (60 + r)."""
FUSION_DEPTH = 100
"""How deep each ranking is taken before fusion (all skills when fewer)."""
CLUSTER_SEED, CLUSTER_ITERATIONS, MIN_CLUSTERED = 0, 20, 4
Hits = list[tuple[Skill, float]]
RouteEntry = tuple[Literal["node", "skill"], int]
"""A routing tree's entry: a node's index, or a skill's row in the corpus."""
T = TypeVar("T")


@dataclass(frozen=True)
class Corpus:
    """What a retrieval mode ranks: the memory's skills in memory order, their indexed texts and unit embeddings."""

    skills: list[Skill]
    texts: list[str]
    vectors: np.ndarray
    """(n, dim) float32 unit rows, one per skill (the FAISS index's vectors)."""

    @cached_property
    def rows(self) -> dict[str, int]:
        """Skill id -> its row."""
        return {skill.id: row for row, skill in enumerate(self.skills)}


class RankingCache:
    """Indexes built from a memory's corpus, each rebuilt when the memory's version changes (thread-safe: a grid's
    tasks retrieve from one memory in parallel)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[str, tuple[Hashable, Any]] = {}

    def get(self, key: str, version: Hashable, build: Callable[[], T]) -> T:
        """The value built under ``key`` for ``version``, building it (once) when missing or stale."""
        with self._lock:
            held = self._built.get(key)
            if held is None or held[0] != version:
                held = (version, build())
                self._built[key] = held
            value: T = held[1]
            return value


class RankedStore(Protocol):
    """What a `Ranker` reads of a memory (`SkillMemory`, `JointMemory`)."""

    ranking_cache: RankingCache

    @property
    def ranking_version(self) -> Hashable: ...

    def ranking_corpus(self) -> Corpus: ...

    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[Hits]: ...


# ------------------------------------------------------------------------------------------------ lexical
class LexicalIndex:
    """BM25 over texts by ``bm25s`` (see the module docstring for the tokenisation and parameters)."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s
        import Stemmer
        from bm25s.tokenization import Tokenizer

        self._tokenizer = Tokenizer(stemmer=Stemmer.Stemmer("english"), stopwords="en")
        ids = self._tokenizer.tokenize(list(texts), update_vocab=True, show_progress=False, return_as="ids")
        self._bm25 = bm25s.BM25()
        self._bm25.index(ids, show_progress=False)
        self._lock = threading.Lock()  # the tokenizer caches what it has seen, even without adding to its vocabulary
        self.size = len(texts)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every text for ``query`` (0 for texts sharing no term with it)."""
        with self._lock:  # only stems the texts hold; none (not an empty token) when the query shares none
            ids = self._tokenizer.tokenize([query], update_vocab=False, show_progress=False, return_as="ids",
                                           allow_empty=False)[0]
        if not ids or not self.size:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(ids), dtype=np.float32)

    def top(self, query: str, n: int) -> list[tuple[int, float]]:
        """The ``n`` best (row, score) with a positive score, best first (ties: the lower row)."""
        scores = self.scores(query)
        rows = np.flatnonzero(scores > 0)
        if n <= 0:
            return []
        if len(rows) > n:  # keep every row tying with the n-th best, then order exactly
            kth = np.partition(scores[rows], len(rows) - n)[len(rows) - n]
            rows = rows[scores[rows] >= kth]
        order = rows[np.lexsort((rows, -scores[rows]))][:n]
        return [(int(row), float(scores[row])) for row in order]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Each item's fused score: the sum over the rankings holding it of 1 / (k + rank), rank from 1."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


# ------------------------------------------------------------------------------------------------ hierarchical
@dataclass
class RoutingTree:
    """Categories over a corpus: each node's entries (child nodes and skill rows) and its centroid."""

    source: str
    """Where the categories came from (``organization (tree, built by llm)``, ``folders``, ``clusters``)."""
    top: list[RouteEntry]
    children: list[list[RouteEntry]]
    """Per node: its entries."""
    centroids: np.ndarray
    """(nodes, dim): the normalised mean embedding of the skills below each node."""
    names: list[str] = field(default_factory=list)

    def route(self, vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
        """The first ``k`` skill rows in routing order for the unit ``query`` (module docstring); only the skills of
        the levels opened are scored."""
        node_cos = self.centroids @ query if len(self.centroids) else np.zeros(0, dtype=np.float32)
        out: list[int] = []
        seen: set[int] = set()

        def visit(entries: list[RouteEntry]) -> None:
            skills = [index for kind, index in entries if kind == "skill"]
            skill_cos = dict(zip(skills, (vectors[skills] @ query).tolist(), strict=True)) if skills else {}
            scores = [float(node_cos[index]) if kind == "node" else skill_cos[index] for kind, index in entries]
            order = sorted(range(len(entries)), key=lambda i: (-scores[i], i))
            for i in order:
                if len(out) >= k:
                    return
                kind, index = entries[i]
                if kind == "node":
                    visit(self.children[index])
                elif index not in seen:
                    seen.add(index)
                    out.append(index)

        visit(self.top)
        return out


def _unit(rows: np.ndarray) -> np.ndarray:
    mean = rows.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def _tree(source: str, names: list[str], node_children: list[list[str]], node_skills: list[list[int]],
          top_nodes: list[str], top_skills: list[int], vectors: np.ndarray) -> RoutingTree:
    """A `RoutingTree` from named nodes (children by name, skills by row); nodes holding no skill are dropped and
    skills no node reaches join the top level."""
    index = {name: i for i, name in enumerate(names)}
    below: dict[int, set[int]] = {}

    def members(i: int, path: frozenset[int] = frozenset()) -> set[int]:
        if i not in below:
            rows = set(node_skills[i])
            for child in node_children[i]:
                j = index[child]
                if j not in path:  # an organisation is validated acyclic; a guard all the same
                    rows |= members(j, path | {i})
            below[i] = rows
        return below[i]

    live = [i for i in range(len(names)) if members(i)]
    renumber = {old: new for new, old in enumerate(live)}
    children: list[list[RouteEntry]] = [
        [*(("node", renumber[index[c]]) for c in node_children[i] if index[c] in renumber),
         *(("skill", row) for row in node_skills[i])] for i in live]
    top: list[RouteEntry] = [("node", renumber[index[n]]) for n in top_nodes if index[n] in renumber]
    top += [("skill", row) for row in top_skills]
    reached = set(top_skills).union(*(below[i] for i in live)) if live else set(top_skills)
    top += [("skill", row) for row in range(len(vectors)) if row not in reached]
    centroids = (np.stack([_unit(vectors[sorted(below[i])]) for i in live]) if live
                 else np.zeros((0, vectors.shape[1]), dtype=np.float32))
    return RoutingTree(source, top, children, centroids, [names[i] for i in live])


def organization_tree(organization: Organization, corpus: Corpus) -> RoutingTree:
    """The routing nodes of an organisation over the corpus's skills (skills it names that the corpus lacks are left
    out; corpus skills it does not name join the top level)."""
    rows = corpus.rows
    names = [node.name for node in organization.nodes]
    method = organization.built_by.get("method", "?")
    return _tree(f"organization ({organization.kind}, built by {method})", names,
                 [list(node.children) for node in organization.nodes],
                 [[rows[i] for i in node.skills if i in rows] for node in organization.nodes],
                 list(organization.roots), [rows[i] for i in organization.root_skills if i in rows], corpus.vectors)


def folder_categories(skills: Sequence[Skill]) -> dict[int, tuple[str, ...]] | None:
    """Each packaged skill's folder path (below the common parent of the packages' folders), by row; None unless
    the packages lie in at least two such folders."""
    parents = {row: Path(skill.package.folder).parent for row, skill in enumerate(skills)
               if skill.package is not None and skill.package.folder}
    if len(parents) < 2:
        return None
    root = Path(os.path.commonpath([str(p) for p in parents.values()]))
    paths = {row: parent.relative_to(root).parts for row, parent in parents.items()}
    return paths if len({path for path in paths.values() if path}) >= 2 else None


def folder_tree(paths: dict[int, tuple[str, ...]], corpus: Corpus) -> RoutingTree:
    """Nested categories from folder paths (`folder_categories`): one node per folder, as the folders nest."""
    names: list[str] = []
    children: list[list[str]] = []
    skills: list[list[int]] = []
    index: dict[tuple[str, ...], int] = {}
    top_nodes: list[str] = []
    for row, path in sorted(paths.items()):
        for depth in range(1, len(path) + 1):
            prefix = path[:depth]
            if prefix not in index:
                index[prefix] = len(names)
                names.append("/".join(prefix))
                children.append([])
                skills.append([])
                if depth == 1:
                    top_nodes.append(names[-1])
                else:
                    children[index[prefix[:-1]]].append(names[-1])
        if path:
            skills[index[path]].append(row)
    top_skills = [row for row, path in sorted(paths.items()) if not path]
    return _tree(f"folders ({len(names)})", names, children, skills, top_nodes, top_skills, corpus.vectors)


def cluster_tree(corpus: Corpus) -> RoutingTree:
    """Clusters of the corpus's embeddings (module docstring: k-means into round(sqrt(n)) clusters)."""
    n = len(corpus.skills)
    count = max(1, round(math.sqrt(n))) if n >= MIN_CLUSTERED else 1
    if count == 1:
        return _tree("clusters (1)", [], [], [], [], list(range(n)), corpus.vectors)
    import faiss

    vectors = np.ascontiguousarray(corpus.vectors, dtype=np.float32)
    kmeans = faiss.Kmeans(vectors.shape[1], count, niter=CLUSTER_ITERATIONS, seed=CLUSTER_SEED, spherical=True,
                          min_points_per_centroid=1, max_points_per_centroid=1 << 30, verbose=False)
    kmeans.train(vectors)
    _, assigned = kmeans.index.search(vectors, 1)
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(assigned[:, 0]):
        groups.setdefault(int(label), []).append(row)
    ordered = [groups[label] for label in sorted(groups, key=lambda g: groups[g][0])]
    names = [f"cluster {i + 1}" for i in range(len(ordered))]
    return _tree(f"clusters ({len(ordered)})", names, [[] for _ in ordered], ordered, names, [], corpus.vectors)


# ------------------------------------------------------------------------------------------------ the ranker
class Ranker:
    """Ranks a memory's skills by a non-dense retrieval mode (module docstring).

    Args:
        mode: ``bm25``, ``hybrid`` or ``hierarchical`` (``dense`` is the memory's own search).
        organization: the categories of ``hierarchical`` (None: the library's folders, else clusters).
    """

    def __init__(self, mode: RetrievalMode, organization: Organization | None = None) -> None:
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}; choose one of {', '.join(RETRIEVAL_MODES)}")
        self.mode = mode
        self.organization = organization
        self._trees: weakref.WeakKeyDictionary[Any, tuple[Hashable, RoutingTree]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def rank(self, store: RankedStore, queries: Sequence[str], vectors: np.ndarray, k: int) -> list[Hits]:
        """The top ``k`` of ``store`` for each query (``vectors``: their unit embeddings), best first."""
        cache, version = store.ranking_cache, store.ranking_version
        corpus = cache.get("corpus", version, store.ranking_corpus)
        n = len(corpus.skills)
        k = min(k, n)
        if k <= 0:
            return [[] for _ in queries]
        if self.mode == "dense":
            return store.search_vectors(vectors, k)
        out: list[Hits] = []
        if self.mode == "hierarchical":
            with self._lock:  # this ranker's categories of this store, for its version
                held = self._trees.get(store)
                if held is None or held[0] != version:
                    held = (version, self.routing_tree(corpus))
                    self._trees[store] = held
            tree = held[1]
            if not tree.children:  # one category: the dense order, as the memory's own search gives it
                return store.search_vectors(vectors, k)
            for vector in vectors:
                out.append([(corpus.skills[r], float(corpus.vectors[r] @ vector)) for r in
                            tree.route(corpus.vectors, vector, k)])
            return out
        lexical = cache.get("bm25", version, lambda: LexicalIndex(corpus.texts))
        depth = min(n, max(k, FUSION_DEPTH))
        dense = store.search_vectors(vectors, depth) if self.mode == "hybrid" else [[] for _ in queries]
        rows = corpus.rows
        for query, vector, dense_hits in zip(queries, vectors, dense, strict=True):
            words = [row for row, _ in lexical.top(query, k if self.mode == "bm25" else depth)]
            if self.mode == "bm25":
                out.append([(corpus.skills[r], float(corpus.vectors[r] @ vector)) for r in words])
                continue
            dense_ids = [skill.id for skill, _ in dense_hits]
            fused = reciprocal_rank_fusion([dense_ids, [corpus.skills[r].id for r in words]])
            dense_rank = {skill_id: rank for rank, skill_id in enumerate(dense_ids)}
            chosen = sorted(fused, key=lambda i: (-fused[i], dense_rank.get(i, n), rows[i]))[:k]
            cosine = {skill.id: score for skill, score in dense_hits}
            out.append([(corpus.skills[rows[i]], cosine.get(i, float(corpus.vectors[rows[i]] @ vector)))
                        for i in chosen])
        return out

    def routing_tree(self, corpus: Corpus) -> RoutingTree:
        """The categories of ``hierarchical`` over ``corpus`` (the module docstring's order of sources)."""
        if self.organization is not None:
            return organization_tree(self.organization, corpus)
        paths = folder_categories(corpus.skills)
        return folder_tree(paths, corpus) if paths is not None else cluster_tree(corpus)

    def describe(self, skills: Sequence[Skill] | None, *, memory: str = "a growing memory") -> str:
        """What this ranker does over ``skills`` (a frozen library; None: ``memory``, skills not known yet), in one
        line (``run`` and ``grid`` print it at start)."""
        if self.mode == "bm25":
            return "bm25 (bm25s, English stop words and stemming) over the indexed text"
        if self.mode == "hybrid":
            return f"hybrid: reciprocal rank fusion (1 / ({RRF_K} + rank)) of dense and bm25, each to depth " \
                   f"{FUSION_DEPTH}"
        if self.mode != "hierarchical":
            return self.mode
        if self.organization is not None:
            org = self.organization
            return (f"hierarchical over the organization ({org.kind}, {len(org.nodes)} routing nodes, built by "
                    f"{org.built_by.get('method', '?')})")
        if skills is None:
            return (f"hierarchical: {memory} has no organisation, so its skills are clustered by embedding (k-means "
                    "into round(sqrt(n)) clusters, recomputed as the memory changes)")
        paths = folder_categories(skills)
        if paths is not None:
            folders = {path[:depth] for path in paths.values() for depth in range(1, len(path) + 1)}
            return f"hierarchical over the library's folders ({len(folders)} categories of {len(skills)} skills)"
        n = len(skills)
        count = max(1, round(math.sqrt(n))) if n >= MIN_CLUSTERED else 1
        return ("hierarchical: the library has no organisation (no organization given, its skills in one folder), so "
                f"its {n} skills are clustered by embedding (k-means into round(sqrt(n)) = {count} clusters)")
