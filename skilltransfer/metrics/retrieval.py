"""What embedding retrieval would do with a library over a task set: per skill, for how many tasks it is the nearest
skill and for how many it is among the top-k retrieved, and its best-matching task.

This is the retrieval a stream runs (`skilltransfer.memory.store.SkillMemory.retrieve`: cosine between the query and
each skill's embedded text, best first, top ``k``), with each task's text as the query (the task-level agent queries
once with the instruction; the subtask-level agent queries with subtask texts, which a task set does not hold).
``min_score`` is the run's ``retrieval_min_score`` floor: hits below it are dropped, so a task may retrieve fewer
than ``k`` skills or none. Ties go to the skill earlier in the library; a skill's best task is the first of equal
cosines.

`RetrievalAccumulator` takes the skill x task cosines one tile at a time, skill blocks in library order (the tiles
of `skilltransfer.metrics.utility.best_match_and_abstractness`, so ``score`` computes each cosine once), keeping each
task's running top k: memory stays bounded by one tile plus N x k for 100,000 skills x 10,000 tasks.
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
    room = k - above.sum(axis=1)
    crowded = np.flatnonzero(tied.sum(axis=1) > room)  # rows with more ties at the k-th value than places left
    if len(crowded):  # keep the first ones (a cumulative count only for those rows)
        tied[crowded] &= np.cumsum(tied[crowded], axis=1) <= room[crowded, None]
    return above | tied


class RetrievalAccumulator:
    """Retrieval counts from skill x task cosine tiles (see the module docstring).

    Tiles must come with their skill blocks in library order (all tiles of skills ``s0..`` before any of a later
    block), as `best_match_and_abstractness` gives them; within a skill block, task blocks in order.
    """

    def __init__(self, n_skills: int, n_tasks: int, *, k: int = DEFAULT_TOP_K, min_score: float | None = None) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.n_skills, self.n_tasks, self.k, self.min_score = n_skills, n_tasks, k, min_score
        self.top_values = np.full((n_tasks, k), -np.inf, dtype=np.float32)
        """Each task's running top k cosines, best first (ties: earlier skill first)."""
        self.top_skills = np.full((n_tasks, k), -1, dtype=np.int64)
        self.best_cosine = np.full(n_skills, -np.inf, dtype=np.float64)
        self.best_task = np.zeros(n_skills, dtype=np.int64)

    def add(self, s0: int, t0: int, cosines: np.ndarray) -> None:
        """Take the tile of skills ``s0..`` x tasks ``t0..`` (read, not kept)."""
        n_block, n_tasks = cosines.shape
        rows = slice(s0, s0 + n_block)
        tile_best = cosines.max(axis=1).astype(np.float64)
        better = tile_best > self.best_cosine[rows]  # strictly: an earlier task keeps a tie
        self.best_task[rows] = np.where(better, t0 + cosines.argmax(axis=1), self.best_task[rows])
        self.best_cosine[rows] = np.where(better, tile_best, self.best_cosine[rows])
        tasks = slice(t0, t0 + n_tasks)
        floor = self.top_values[tasks, -1]  # each task's k-th best so far: a skill below it cannot enter
        if np.isfinite(floor).all():
            entering = cosines >= floor[None, :]
            if np.count_nonzero(entering) <= max(4 * n_tasks * self.k, cosines.size // 16):
                skill_index, task_index = np.nonzero(entering)
                self._merge_few(t0, n_tasks, task_index, s0 + skill_index, cosines[skill_index, task_index])
                return
        by_task = cosines.T  # tasks x skills of the block
        kk = min(self.k, n_block)
        mask = _top_k_mask(by_task, kk)  # exactly kk per task: the block's best, earlier skills winning ties
        task_rows, skill_columns = (index.reshape(n_tasks, kk) for index in np.nonzero(mask))  # row-major: per
        values = by_task[task_rows, skill_columns]  # task, its skills in library order
        merged_values = np.concatenate([self.top_values[tasks], values], axis=1)
        merged_skills = np.concatenate([self.top_skills[tasks], s0 + skill_columns], axis=1)
        order = np.argsort(-merged_values, axis=1, kind="stable")[:, :self.k]  # ties: the running (earlier) first
        self.top_values[tasks] = np.take_along_axis(merged_values, order, axis=1)
        self.top_skills[tasks] = np.take_along_axis(merged_skills, order, axis=1)

    def _merge_few(self, t0: int, n_tasks: int, task_index: np.ndarray, skill_index: np.ndarray,
                   values: np.ndarray) -> None:
        """Merge a few (task, skill, cosine) entries into the running top k of tasks ``t0..t0+n_tasks``: one sort
        by (task, -cosine, skill), then each task's first k (every task holds k already)."""
        tasks = slice(t0, t0 + n_tasks)
        all_tasks = np.concatenate([np.repeat(np.arange(n_tasks), self.k), task_index])
        all_values = np.concatenate([self.top_values[tasks].ravel(), values])
        all_skills = np.concatenate([self.top_skills[tasks].ravel(), skill_index])
        order = np.lexsort((all_skills, -all_values, all_tasks))
        sorted_tasks = all_tasks[order]
        rank = np.arange(len(order)) - np.searchsorted(sorted_tasks, np.arange(n_tasks))[sorted_tasks]
        keep = order[rank < self.k]  # task by task, k each
        self.top_values[tasks] = all_values[keep].reshape(n_tasks, self.k)
        self.top_skills[tasks] = all_skills[keep].reshape(n_tasks, self.k)

    def counts(self) -> RetrievalCounts:
        """The counts over every task taken so far."""
        hit = self.top_skills >= 0
        if self.min_score is not None:
            hit &= self.top_values >= np.float32(self.min_score)
        in_top = np.bincount(self.top_skills[hit], minlength=self.n_skills)
        first = hit[:, 0]
        nearest = np.bincount(self.top_skills[first, 0], minlength=self.n_skills)
        return RetrievalCounts(nearest=nearest, in_top_k=in_top, best_task=self.best_task.copy(),
                               best_cosine=self.best_cosine.copy(), k=self.k, min_score=self.min_score,
                               tasks_without_hit=int((~hit.any(axis=1)).sum()))


def retrieval_counts(skill_vecs: np.ndarray, task_vecs: np.ndarray, *, k: int = DEFAULT_TOP_K,
                     min_score: float | None = None, block_elems: int = DEFAULT_BLOCK_ELEMS) -> RetrievalCounts:
    """Nearest-skill and top-``k`` counts of each skill over the tasks, and each skill's best-matching task, in a pass
    of its own (``score`` takes them from the utility pass's tiles instead).

    Args:
        skill_vecs: M x d skill embeddings (the text retrieval matches: the description by default).
        task_vecs: N x d task embeddings (the queries).
        k: skills retrieved per task (>= 1).
        min_score: drop hits whose cosine is below this (None: plain top-k, the paper's).
        block_elems: cosines held at once.
    """
    skills = _unit_rows(skill_vecs, "skill_vecs")
    tasks = _unit_rows(task_vecs, "task_vecs")
    if skills.shape[1] != tasks.shape[1]:
        raise ValueError(f"skill dim {skills.shape[1]} != task dim {tasks.shape[1]}")
    accumulator = RetrievalAccumulator(len(skills), len(tasks), k=k, min_score=min_score)
    task_block = min(len(tasks), block_elems)
    for s0, s1 in _row_blocks(len(skills), max(1, block_elems // task_block)):
        for t0, t1 in _row_blocks(len(tasks), task_block):
            accumulator.add(s0, t0, skills[s0:s1] @ tasks[t0:t1].T)
    return accumulator.counts()
