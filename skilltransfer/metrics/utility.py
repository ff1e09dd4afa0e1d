"""Skill utility (seed §6.1): specificity x abstractness, from skill and task-instruction embeddings alone.

With ``c_j`` the cosine between a skill and the j-th of N task instructions (all rows L2-normalised):

* ``specificity`` ("pairs", the paper's definition and the default): the fraction of unordered task pairs
  (i < k) with ``cos(t_i, t_k) <= max_j c_j``. Exact over all N(N-1)/2 pairs while that is at most ``max_pairs``
  (default 10^7); above that, a seeded uniform sample (with replacement) of ``max_pairs`` pairs.
* ``specificity`` ("nearest", an alternative): the fraction of tasks i with ``max_j c_j >= max_{k != i} cos(t_i, t_k)``,
  i.e. the skill's best match beats that task's nearest other task. Under "pairs", a skill unrelated to every task
  still scores high when the tasks are mutually dissimilar (and its flat, low relevance also gives high abstractness),
  so an irrelevant skill can get a high utility; "nearest" compares it with how close tasks are to each other.
* ``specificity`` ("knn", k-nearest-neighbour): the fraction of tasks i with ``max_j c_j >= rho_i``, where
  ``rho_i`` is the cosine between t_i and its k-th most similar other task, ``k = min(N - 1, ceil(sqrt(N)))``
  (:func:`knn_k`). "nearest" is k = 1: benchmark task sets hold groups of near-duplicate instances (one template,
  several values), so every task's nearest neighbour is a near-copy and few skills reach it (mass ties at 0);
  the sqrt(N)-th neighbour steps out of such groups while staying local (k -> inf, k / N -> 0, the usual k-NN
  density rule), so in-domain skills spread over (0, 1] and an unrelated skill still scores near 0.
* ``off_domain``: under every mode, a skill is flagged off-domain when its best match is below the 5th percentile of
  the task set's own ``rho_i`` (:data:`OFF_DOMAIN_QUANTILE`), i.e. when its "knn" specificity is below 0.05: it is
  less related to its closest task than 95 % of the tasks are to their k-th nearest task.
* ``relevance``: the "knn" utility (knn specificity x abstractness) under every mode: the ranking ``score`` shows
  first (with skills inside the embedder's null last, `skilltransfer.metrics.scoring`). With MiniLM and planted
  off-domain skills it ranks them last where "pairs" ranks them first (docs/metrics.md).
* ``abstractness = exp(H(softmax(c / tau))) / N`` with natural-log entropy H (the perplexity of the skill's relevance
  distribution over tasks, divided by N), in (0, 1]; 1 when the skill is equally similar to every task.
  ``tau`` defaults to 0.1 (:data:`DEFAULT_TAU`).
* ``utility = specificity * abstractness``; ``best_match = max_j c_j`` is reported alongside.

Everything is vectorised and block-wise: skill x task cosines are produced one (skill block x task block) tile at a
time with a streaming log-sum-exp, so memory stays bounded for 100,000 skills x 10,000 tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

SpecificityMode = Literal["pairs", "nearest", "knn"]
SPECIFICITY_MODES: tuple[str, ...] = ("pairs", "nearest", "knn")
OFF_DOMAIN_QUANTILE = 0.05
"""A skill whose best match is below this quantile of the tasks' k-th-neighbour cosines is flagged off-domain."""
DEFAULT_TAU = 0.1
"""Softmax temperature of abstractness (cosines are divided by it before the softmax)."""
DEFAULT_MAX_PAIRS = 10**7
"""Above this many task pairs, pair-based specificity uses a seeded uniform sample of this many pairs."""
DEFAULT_BLOCK_ELEMS = 1 << 23
"""Cosines held at once per tile (8M float32 = 32 MiB; a few such buffers are alive at a time)."""


def _unit_rows(vectors: np.ndarray, name: str) -> np.ndarray:
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{name} has an all-zero row")
    if np.allclose(norms, 1.0, atol=1e-4):
        return np.ascontiguousarray(matrix)
    return np.ascontiguousarray(matrix / norms)


@dataclass(frozen=True)
class TaskReference:
    """The sorted task-side cosines that a skill's best match is compared with.

    Attributes:
        mode: "pairs" (pair cosines, i < k), "nearest" (each task's cosine to its nearest other task) or "knn" (each
            task's cosine to its k-th nearest other task).
        values: sorted ascending float32.
        n_tasks: N.
        n_pairs_total: N(N-1)/2.
        sampled: True when ``values`` is a sample of the pairs rather than all of them.
        seed: the sampling seed (recorded even when unused).
        k: the neighbour rank of "nearest" (1) and "knn"; 0 for "pairs".
    """

    mode: str
    values: np.ndarray
    n_tasks: int
    n_pairs_total: int
    sampled: bool
    seed: int
    k: int = 0

    def specificity(self, best_match: np.ndarray) -> np.ndarray:
        """Share of reference values <= each best match (ties count as covered), via one searchsorted."""
        best = np.asarray(best_match, dtype=np.float32)
        return np.searchsorted(self.values, best, side="right").astype(np.float64) / len(self.values)

    def quantile_floor(self, q: float) -> float:
        """The smallest reference value v with ``specificity(v) >= q``: best matches below it have a share < q."""
        if not 0 < q <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {q}")
        return float(self.values[max(0, math.ceil(q * len(self.values) - 1e-9) - 1)])


def _row_blocks(n: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(n, start + size)) for start in range(0, n, size)]


def _exact_pair_cosines(tasks: np.ndarray, block: int) -> np.ndarray:
    n = len(tasks)
    out = np.empty(n * (n - 1) // 2, dtype=np.float32)
    pos = 0
    for start, end in _row_blocks(n, block):
        gram = tasks[start:end] @ tasks[start:].T  # rows i in block, columns k >= start
        rows = np.arange(start, end)[:, None]
        cols = np.arange(start, n)[None, :]
        upper = gram[cols > rows]  # row-major: all (i, k > i) of this block, in order
        out[pos:pos + len(upper)] = upper
        pos += len(upper)
    return out


def _sample_pairs(n: int, n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform unordered pairs (lo < hi), with replacement: uniform ordered pair i != k, then sorted."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n, size=n_samples, dtype=np.int64)
    second = rng.integers(0, n - 1, size=n_samples, dtype=np.int64)
    second += second >= first
    return np.minimum(first, second), np.maximum(first, second)


def _sampled_pair_cosines(tasks: np.ndarray, lo: np.ndarray, hi: np.ndarray, block: int, method: str) -> np.ndarray:
    out = np.empty(len(lo), dtype=np.float32)
    if method == "gather":  # cost ~ n_samples * dim; used when N is so large that the Gram matrix would cost more
        for start, end in _row_blocks(len(lo), 1 << 15):
            out[start:end] = np.einsum("ij,ij->i", tasks[lo[start:end]], tasks[hi[start:end]])
        return out
    order = np.argsort(lo, kind="stable")
    lo_sorted = lo[order]
    for start, end in _row_blocks(len(tasks), block):
        a, b = np.searchsorted(lo_sorted, [start, end])
        if a == b:
            continue
        gram = tasks[start:end] @ tasks.T
        picked = order[a:b]
        out[picked] = gram[lo[picked] - start, hi[picked]]
    return out


def knn_k(n_tasks: int) -> int:
    """The neighbour rank of "knn" specificity: ``min(N - 1, ceil(sqrt(N)))`` (at least 1)."""
    return max(1, min(n_tasks - 1, math.ceil(math.sqrt(n_tasks))))


def _kth_other_cosines(tasks: np.ndarray, k: int, block: int) -> np.ndarray:
    """Each task's cosine to its k-th most similar other task (k = 1: its nearest other task)."""
    n = len(tasks)
    out = np.empty(n, dtype=np.float32)
    for start, end in _row_blocks(n, block):
        gram = tasks[start:end] @ tasks.T
        gram[np.arange(end - start), np.arange(start, end)] = -np.inf
        out[start:end] = gram.max(axis=1) if k == 1 else np.partition(gram, n - k, axis=1)[:, n - k]
    return out


def task_reference(task_vecs: np.ndarray, *, mode: str = "pairs", max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0,
                   block_elems: int = DEFAULT_BLOCK_ELEMS) -> TaskReference:
    """Compute (once per task set) the sorted task-side cosines that specificity compares against.

    Args:
        task_vecs: N x d task-instruction embeddings (N >= 2).
        mode: "pairs" (paper), "nearest" or "knn".
        max_pairs: above this many pairs, sample this many pairs uniformly (seeded, with replacement).
        seed: sampling seed.
        block_elems: Gram-matrix entries held at once.
    """
    if mode not in SPECIFICITY_MODES:
        raise ValueError(f"unknown specificity mode {mode!r}; choose one of {', '.join(SPECIFICITY_MODES)}")
    tasks = _unit_rows(task_vecs, "task_vecs")
    n = len(tasks)
    if n < 2:
        raise ValueError("specificity needs at least 2 tasks")
    n_pairs = n * (n - 1) // 2
    block = max(1, block_elems // n)
    sampled = False
    k = {"pairs": 0, "nearest": 1, "knn": knn_k(n)}[mode]
    if k:
        values = _kth_other_cosines(tasks, k, block)
    elif n_pairs <= max_pairs:
        values = _exact_pair_cosines(tasks, block)
    else:
        sampled = True
        lo, hi = _sample_pairs(n, max_pairs, seed)
        method = "gram" if n * n <= 32 * max_pairs else "gather"
        values = _sampled_pair_cosines(tasks, lo, hi, block, method)
    values.sort()
    return TaskReference(mode=mode, values=values, n_tasks=n, n_pairs_total=n_pairs, sampled=sampled, seed=seed,
                         k=k)


def best_match_and_abstractness(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, tau: float = DEFAULT_TAU,
                                skill_block: int | None = None, task_block: int | None = None,
                                block_elems: int = DEFAULT_BLOCK_ELEMS,
                                on_tile: Callable[[int, int, np.ndarray], None] | None = None,
                                ) -> tuple[np.ndarray, np.ndarray]:
    """One streaming pass over skill x task cosine tiles: each skill's best-match cosine and its abstractness.

    The entropy uses a running log-sum-exp: per skill we keep the running max m of z = c / tau,
    A = sum exp(z - m) and C = sum exp(z - m) (z - m), rescaled when m grows; then H = log A - C / A.

    Args:
        skill_vecs: M x d skill embeddings.
        task_vecs: N x d task embeddings.
        tau: softmax temperature (> 0).
        skill_block: skills per tile (default from ``block_elems``).
        task_block: tasks per tile (default: all tasks, if they fit in ``block_elems``).
        block_elems: tile size budget when the block sizes are not given.
        on_tile: called with (first skill, first task, cosines) for every tile, skill blocks in order, before the
            tile is reused (`skilltransfer.metrics.retrieval.RetrievalAccumulator` counts retrieval from them).

    Returns:
        (best_match, abstractness), float64 arrays of length M.
    """
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    skills = _unit_rows(skill_vecs, "skill_vecs")
    tasks = _unit_rows(task_vecs, "task_vecs")
    if skills.shape[1] != tasks.shape[1]:
        raise ValueError(f"skill dim {skills.shape[1]} != task dim {tasks.shape[1]}")
    m_count, n = len(skills), len(tasks)
    task_block = task_block or min(n, block_elems)
    skill_block = skill_block or max(1, block_elems // task_block)
    best = np.full(m_count, -np.inf)
    run_max = np.full(m_count, -np.inf)
    acc_a = np.zeros(m_count)
    acc_c = np.zeros(m_count)
    inv_tau = np.float32(1.0 / tau)
    for s0, s1 in _row_blocks(m_count, skill_block):
        for t0, t1 in _row_blocks(n, task_block):
            z = skills[s0:s1] @ tasks[t0:t1].T
            if on_tile is not None:
                on_tile(s0, t0, z)
            tile_max = z.max(axis=1).astype(np.float64)
            best[s0:s1] = np.maximum(best[s0:s1], tile_max)
            z *= inv_tau
            tile_max /= tau
            # the shift is stored as float32 so that the one applied to z below is exactly the one kept
            new_max = np.maximum(run_max[s0:s1], tile_max).astype(np.float32).astype(np.float64)
            old_a = acc_a[s0:s1]
            has_prev = old_a > 0  # False on the first task tile
            shift = np.where(has_prev, run_max[s0:s1] - new_max, 0.0)
            scale = np.where(has_prev, np.exp(shift), 0.0)
            old_c = scale * (acc_c[s0:s1] + old_a * shift)
            z -= new_max.astype(np.float32)[:, None]  # z - m <= 0 (up to rounding)
            weights = np.exp(z)
            acc_a[s0:s1] = old_a * scale + weights.sum(axis=1, dtype=np.float64)
            acc_c[s0:s1] = old_c + np.einsum("ij,ij->i", weights, z, dtype=np.float64)
            run_max[s0:s1] = new_max
    entropy = np.log(acc_a) - acc_c / acc_a
    abstract = np.minimum(np.exp(entropy) / n, 1.0)
    return best, abstract


@dataclass(frozen=True)
class UtilityScores:
    """Per-skill utility components (arrays of length M) and the settings that produced them."""

    specificity: np.ndarray
    abstractness: np.ndarray
    utility: np.ndarray
    best_match: np.ndarray
    tau: float
    specificity_mode: str
    n_tasks: int
    n_reference: int
    """How many pair (or nearest-task) cosines specificity was measured against."""
    sampled: bool
    seed: int
    off_domain: np.ndarray
    """True where the best match is below :attr:`off_domain_threshold` (see the module docstring)."""
    off_domain_threshold: float
    """The 5th percentile of the tasks' k-th-neighbour cosines (k = :attr:`knn_k`)."""
    knn_k: int
    relevance: np.ndarray
    """The "knn" utility (knn specificity x abstractness), whatever the mode (see the module docstring)."""


def utility_scores(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, tau: float = DEFAULT_TAU,
                   specificity_mode: str = "pairs", max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0,
                   reference: TaskReference | None = None, domain_reference: TaskReference | None = None,
                   skill_block: int | None = None, task_block: int | None = None,
                   block_elems: int = DEFAULT_BLOCK_ELEMS,
                   on_tile: Callable[[int, int, np.ndarray], None] | None = None) -> UtilityScores:
    """Specificity, abstractness, utility, best-match cosine and off-domain flag of every skill against one task set.

    Args:
        skill_vecs: M x d skill embeddings (rows are normalised if they are not unit length).
        task_vecs: N x d task-instruction embeddings, N >= 2.
        tau: abstractness temperature.
        specificity_mode: "pairs" (paper, default), "nearest" or "knn".
        max_pairs: exact pair enumeration up to this many pairs, else a seeded sample of this size.
        seed: pair-sampling seed.
        reference: a precomputed :func:`task_reference` for these tasks and this mode (reused across libraries).
        domain_reference: a precomputed "knn" :func:`task_reference` for the off-domain flag (computed when absent;
            the same object as ``reference`` under "knn").
        skill_block: skills per tile; task_block: tasks per tile; block_elems: tile budget otherwise.
        on_tile: sees every skill x task cosine tile (`best_match_and_abstractness`).
    """
    if reference is None:
        reference = task_reference(task_vecs, mode=specificity_mode, max_pairs=max_pairs, seed=seed,
                                   block_elems=block_elems)
    elif reference.mode != specificity_mode or reference.n_tasks != len(task_vecs):
        raise ValueError("reference was computed for another mode or task set")
    if domain_reference is None:
        domain_reference = reference if reference.mode == "knn" else task_reference(
            task_vecs, mode="knn", block_elems=block_elems)
    elif domain_reference.mode != "knn" or domain_reference.n_tasks != len(task_vecs):
        raise ValueError("domain_reference must be a 'knn' reference for the same task set")
    best, abstract = best_match_and_abstractness(skill_vecs, task_vecs, tau=tau, skill_block=skill_block,
                                                 task_block=task_block, block_elems=block_elems, on_tile=on_tile)
    spec = reference.specificity(best.astype(np.float32))
    threshold = domain_reference.quantile_floor(OFF_DOMAIN_QUANTILE)
    return UtilityScores(specificity=spec, abstractness=abstract, utility=spec * abstract, best_match=best,
                         tau=float(tau), specificity_mode=specificity_mode, n_tasks=reference.n_tasks,
                         n_reference=len(reference.values), sampled=reference.sampled, seed=reference.seed,
                         off_domain=best.astype(np.float32) < np.float32(threshold),
                         off_domain_threshold=threshold, knn_k=domain_reference.k,
                         relevance=domain_reference.specificity(best.astype(np.float32)) * abstract)


NULL_QUANTILE = 0.95
"""A skill whose best match is at or below this quantile of the null texts' best matches lies inside the null."""


def null_threshold(null_vecs: np.ndarray, task_vecs: np.ndarray, *, quantile: float = NULL_QUANTILE) -> float:
    """The embedder's null for a task set: the ``quantile`` of the best matches (max cosine over the tasks) of
    off-topic texts (`skilltransfer.metrics.null_texts`). A skill at or below it is as related to the tasks as text
    about something else is: off-domain in absolute terms, whatever the rest of its library looks like."""
    best = best_match(null_vecs, task_vecs)
    return float(np.quantile(best, quantile))


def specificity(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, specificity_mode: str = "pairs",
                max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0,
                block_elems: int = DEFAULT_BLOCK_ELEMS) -> np.ndarray:
    """Specificity of each skill (see the module docstring for the three modes)."""
    reference = task_reference(task_vecs, mode=specificity_mode, max_pairs=max_pairs, seed=seed,
                               block_elems=block_elems)
    best, _ = best_match_and_abstractness(skill_vecs, task_vecs, block_elems=block_elems)
    return reference.specificity(best.astype(np.float32))


def abstractness(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, tau: float = DEFAULT_TAU,
                 block_elems: int = DEFAULT_BLOCK_ELEMS) -> np.ndarray:
    """``exp(H(softmax(c / tau))) / N`` of each skill, in (0, 1]."""
    return best_match_and_abstractness(skill_vecs, task_vecs, tau=tau, block_elems=block_elems)[1]


def best_match(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, block_elems: int = DEFAULT_BLOCK_ELEMS) -> np.ndarray:
    """``max_j c_j`` of each skill."""
    return best_match_and_abstractness(skill_vecs, task_vecs, block_elems=block_elems)[0]


def utility(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, tau: float = DEFAULT_TAU, specificity_mode: str = "pairs",
            max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = 0) -> np.ndarray:
    """``specificity * abstractness`` of each skill; :func:`utility_scores` returns the components too."""
    return utility_scores(skill_vecs, task_vecs, tau=tau, specificity_mode=specificity_mode, max_pairs=max_pairs,
                          seed=seed).utility
