"""What embedding retrieval would do with a library over a task set: per skill, for how many tasks it is the nearest
skill and for how many it is among the top-k retrieved, and its best-matching task.

This is the retrieval a stream runs (`skilltransfer.memory.store.SkillMemory.retrieve`: cosine between the query and
each skill's embedded text, best first, top ``k``), with each task's text as the query (the task-level agent queries
once with the instruction; the subtask-level agent queries with subtask texts, which a task set does not hold).
``min_score`` is the run's ``retrieval_min_score`` floor: hits below it are dropped, so a task may retrieve fewer
than ``k`` skills or none. Ties are broken by library order (the first skill wins), as a flat inner-product index
does for equal scores in practice.

Computed block-wise over tasks (one task block x all skills at a time), so memory stays bounded for large libraries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skilltransfer.metrics.utility import DEFAULT_BLOCK_ELEMS, _row_blocks, _unit_rows

DEFAULT_TOP_K = 5
"""The agent's ``top_k`` default (seed §3.2: the top 5 by description embedding)."""


@dataclass(frozen=True)
class RetrievalCounts:
    """Per-skill retrieval counts over a task set (arrays of length M skills)."""

    nearest: np.ndarray
    """Tasks whose nearest skill (top-1, at or above the floor) this skill is."""
    in_top_k: np.ndarray
    """Tasks whose top ``k`` (at or above the floor) include this skill."""
    best_task: np.ndarray
    """Index of the task this skill matches best (the first of equal cosines)."""
    best_cosine: np.ndarray
    """That task's cosine with the skill (the skill's best match)."""
    k: int
    """The top-k asked for (a task retrieves min(k, M) skills before the floor)."""
    min_score: float | None
    tasks_without_hit: int
    """Tasks that retrieve no skill at all (only possible with a floor)."""


def _top_k_mask(cosines: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of each row's ``k`` largest entries, ties broken by column order (the first wins)."""
    n_cols = cosines.shape[1]
    if k >= n_cols:
        return np.ones_like(cosines, dtype=bool)
    kth = np.partition(cosines, n_cols - k, axis=1)[:, n_cols - k][:, None]  # each row's k-th largest value
    above = cosines > kth
    tied = cosines == kth
    room = k - above.sum(axis=1, keepdims=True)
    return above | (tied & (np.cumsum(tied, axis=1) <= room))


def retrieval_counts(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, k: int = DEFAULT_TOP_K,
                     min_score: float | None = None, block_elems: int = DEFAULT_BLOCK_ELEMS) -> RetrievalCounts:
    """Nearest-skill and top-``k`` counts of each skill over the tasks, and each skill's best-matching task.

    Args:
        skill_vecs: M x d skill embeddings (the text retrieval matches: the description by default).
        task_vecs: N x d task embeddings (the queries).
        k: skills retrieved per task (>= 1).
        min_score: drop hits whose cosine is below this (None: plain top-k, the paper's).
        block_elems: cosines held at once.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    skills = _unit_rows(skill_vecs, "skill_vecs")
    tasks = _unit_rows(task_vecs, "task_vecs")
    if skills.shape[1] != tasks.shape[1]:
        raise ValueError(f"skill dim {skills.shape[1]} != task dim {tasks.shape[1]}")
    m_count, n = len(skills), len(tasks)
    nearest = np.zeros(m_count, dtype=np.int64)
    in_top = np.zeros(m_count, dtype=np.int64)
    best_task = np.zeros(m_count, dtype=np.int64)
    best_cos = np.full(m_count, -np.inf, dtype=np.float64)
    without_hit = 0
    floor = np.float32(min_score) if min_score is not None else None
    for t0, t1 in _row_blocks(n, max(1, block_elems // m_count)):
        cosines = tasks[t0:t1] @ skills.T  # tasks of the block x all skills
        top = _top_k_mask(cosines, k)
        first = cosines.argmax(axis=1)  # the first of equal maxima
        hit_first = np.ones(t1 - t0, dtype=bool)
        if floor is not None:
            top &= cosines >= floor
            hit_first = cosines[np.arange(t1 - t0), first] >= floor
            without_hit += int((~top.any(axis=1)).sum())
        in_top += top.sum(axis=0)
        nearest += np.bincount(first[hit_first], minlength=m_count)
        column_best = cosines.max(axis=0).astype(np.float64)
        better = column_best > best_cos  # strictly: an earlier task keeps a tie
        best_task[better] = t0 + cosines.argmax(axis=0)[better]
        best_cos[better] = column_best[better]
    return RetrievalCounts(nearest=nearest, in_top_k=in_top, best_task=best_task, best_cosine=best_cos, k=k,
                           min_score=min_score, tasks_without_hit=without_hit)
