"""Selection metrics (issue 55, docs/selection.md): did retrieval rank a right skill high, and did the agent pick one?

Per task with known right skills R (`TaskSelection`):

- **Hit@k**: a right skill is among the first k candidates shown (a skill's rank is its best over the task's
  retrievals: at subtask level several retrievals pool); **MRR**: 1 / the rank of the first right skill (0 if none was
  shown); **NDCG@10**: DCG of the first 10 candidates with gain 1 for a right skill, over the ideal DCG of
  min(|R|, 10) right skills.
- **Pick accuracy**: the task's first pick is a right skill (a task that picked nothing counts as not right);
  **trigger rate**: the task picked any skill; **picks**: skills picked per task.
- Per skill s (`skill_triggers`): **trigger precision** = tasks that picked s and for which s is right / tasks that
  picked s; **recall** = the same / tasks for which s is right.

Every figure carries a 95 % percentile bootstrap CI over tasks (10,000 resamples for task means, per-skill ratios with
a task's picks kept together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from skilltransfer.metrics.stats import bootstrap_ci, ratio_bootstrap_ci

TASK_METRICS = ("hit1", "hit5", "mrr", "ndcg10", "pick_accuracy", "trigger_rate", "picks")
"""The per-task figures `selection_summary` averages, in table order."""


@dataclass(frozen=True)
class TaskSelection:
    """One task's candidates, picks and right skills (and what the size study reads)."""

    task_id: str
    ranking: tuple[str, ...]
    """Candidate skill ids, best first (each at its best rank over the task's retrievals)."""
    picks: tuple[str, ...]
    """Picked skill ids, in the order picked (repeats kept)."""
    relevant: frozenset[str]
    """The right skills' ids (non-empty for a labelled task)."""
    success: float = 0.0
    """The task's outcome (success, or the report's metric)."""
    size: float | None = None
    """The library size the task chose from (the size study)."""
    nn_cosine: float | None = None
    """The right skill's nearest-neighbour description cosine in that library (confusability)."""
    names: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    """Skill id -> name, for tables."""

    @property
    def pick_right(self) -> bool:
        return bool(self.picks) and self.picks[0] in self.relevant


def _rank_of_first_right(task: TaskSelection) -> int | None:
    return next((rank for rank, skill_id in enumerate(task.ranking, start=1) if skill_id in task.relevant), None)


def ndcg(ranking: Sequence[str], relevant: frozenset[str], k: int = 10) -> float:
    """NDCG@k with binary gains (module docstring); 0 without a right skill."""
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank, skill_id in enumerate(ranking[:k], start=1) if skill_id in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return dcg / ideal


def task_scores(task: TaskSelection) -> dict[str, float]:
    """The per-task figures of `TASK_METRICS` (module docstring)."""
    first = _rank_of_first_right(task)
    return {"hit1": float(first is not None and first <= 1), "hit5": float(first is not None and first <= 5),
            "mrr": 1.0 / first if first is not None else 0.0, "ndcg10": ndcg(task.ranking, task.relevant),
            "pick_accuracy": float(task.pick_right), "trigger_rate": float(bool(task.picks)),
            "picks": float(len(dict.fromkeys(task.picks)))}


def selection_summary(tasks: Sequence[TaskSelection], *, seed: int = 0,
                      resamples: int = 10000) -> dict[str, tuple[float, float, float]]:
    """Each of `TASK_METRICS` over ``tasks`` as (mean, low, high) with a task-bootstrap 95 % CI.

    Raises:
        ValueError: no task.
    """
    if not tasks:
        raise ValueError("selection_summary needs at least one labelled task")
    rows = [task_scores(task) for task in tasks]
    return {name: bootstrap_ci([row[name] for row in rows], n_resamples=resamples, seed=seed)
            for name in TASK_METRICS}


@dataclass(frozen=True)
class SkillTriggers:
    """One skill's trigger precision and recall over a group's labelled tasks (`skill_triggers`)."""

    skill_id: str
    name: str
    right_for: int
    """Tasks for which it is right."""
    picked: int
    """Tasks that picked it."""
    picked_right: int
    """Tasks that picked it and for which it is right."""
    precision: tuple[float, float, float] | None
    """(value, low, high); None when no task picked it."""
    recall: tuple[float, float, float] | None
    """(value, low, high); None when it is right for no task."""

    @property
    def f1(self) -> float | None:
        if self.precision is None or self.recall is None or self.precision[0] + self.recall[0] == 0:
            return None
        p, r = self.precision[0], self.recall[0]
        return 2 * p * r / (p + r)


def skill_triggers(tasks: Sequence[TaskSelection], *, seed: int = 0, resamples: int = 2000) -> list[SkillTriggers]:
    """Per skill that was picked or is right for some task: trigger precision and recall with task-bootstrap CIs."""
    skills = sorted({s for t in tasks for s in (*t.picks, *t.relevant)})
    names: dict[str, str] = {}
    for task in tasks:
        names.update(task.names)
    out = []
    for skill_id in skills:
        picked = np.array([skill_id in t.picks for t in tasks], dtype=float)
        right = np.array([skill_id in t.relevant for t in tasks], dtype=float)
        both = picked * right
        precision = recall = None
        if picked.sum() > 0:
            keep = picked > 0
            precision = ratio_bootstrap_ci(both[keep].tolist(), picked[keep].tolist(), n_resamples=resamples, seed=seed)
        if right.sum() > 0:
            keep = right > 0
            recall = ratio_bootstrap_ci(both[keep].tolist(), right[keep].tolist(), n_resamples=resamples, seed=seed)
        out.append(SkillTriggers(skill_id, names.get(skill_id, skill_id), int(right.sum()), int(picked.sum()),
                                 int(both.sum()), precision, recall))
    return out
