"""Randomised masking of retrieved skills (issue 39 §1): the design that makes a skill's effect on a task estimable.

`MaskedRetriever` is a `SkillRetriever` over a skill memory. For each query it takes the top-k candidates by
description (those at or above the retrieval floor, when one is set) and withholds each candidate independently with
probability ``mask_rate`` p. The prompt gets **fewer skills**, not the next candidates: the shown set is the top-k
minus the withheld ones, in rank order. So "shown" against "withheld" contrasts a skill with its absence while every
other candidate keeps its own independent coin; back-filling would pair each withheld skill with a replacement whose
identity depends on the draw.

The coin is drawn once per (task, skill): a uniform from a hash of ``(seed, task key, skill id)``, withheld when below
p. A skill retrieved again by a later subtask of the same task gets the same decision, so a task's exposure to a
skill is one Bernoulli(1 - p) draw whatever the number of retrievals, and the draw is reproducible on resume. Each
retrieval's log (``Retrieval.log``, recorded in the trajectory's retrieval step) lists every candidate with its rank,
score, the propensity of being shown (1 - p) and whether it was shown.

With ``drawn`` only some candidates are masked (a library beside the agent's own memory, `skilltransfer.memory.joint`:
the library's skills): the others are always shown and logged with propensity 1, which carries no contrast (the
effect estimator leaves such draws out), so effects are estimated for the drawn skills only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from skilltransfer.protocols import ChatModel, Retrieval, SkillStore
from skilltransfer.skill import Skill

MASK_LOG_KIND = "mask"
"""``Retrieval.log["kind"]`` of a masked retrieval (lens routing logs have no ``kind``)."""


def coin(seed: int, task_key: str, skill_id: str) -> float:
    """A uniform in [0, 1) fixed by (seed, task, skill): the same on every retrieval of the task and on resume."""
    digest = hashlib.sha256(f"{seed}\x1f{task_key}\x1f{skill_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


class MaskedRetriever:
    """Top-k retrieval from ``memory`` with each candidate withheld with probability ``mask_rate`` (module docstring).

    Args:
        memory: the skill memory retrieved from.
        mask_rate: p, the probability of withholding a candidate (0 shows every candidate: the draws are still logged).
        seed: the draws' seed (with the task key and skill id).
        min_score: ``retrieve``'s floor: candidates whose cosine is below it are not candidates (None: no floor). An
            agent calls ``mask`` after its harness's own retrieval floor instead (`RetrievalMask`).
        drawn: which candidates are masked (None: all); the others are always shown, logged with propensity 1.
    """

    def __init__(self, memory: SkillStore, mask_rate: float, *, seed: int = 0, min_score: float | None = None,
                 drawn: Callable[[Skill], bool] | None = None) -> None:
        if not 0.0 <= mask_rate < 1.0:
            raise ValueError(f"mask_rate must be in [0, 1), got {mask_rate}")
        self.memory = memory
        self.mask_rate = mask_rate
        self.seed = seed
        self.min_score = min_score
        self.drawn = drawn
        self.task_key = ""
        """The task whose retrievals follow (the stream sets it before each task)."""

    def retrieve(self, query: str, k: int, models: Callable[[str], ChatModel]) -> Retrieval:
        """The shown candidates, best first; the log lists every candidate with its draw."""
        hits = self.memory.retrieve(query, k=k)
        floor = self.min_score if self.min_score is not None else -1.0
        got = self.mask(Retrieval([(s, score) for s, score in hits if score >= floor]))
        below = sum(score < floor for _, score in hits)
        if below and got.log is not None:
            got.log["below_min_score"] = below
        return got

    def mask(self, got: Retrieval) -> Retrieval:
        """Draw each of ``got``'s hits (the candidates, best first): the shown ones, and a log of every draw."""
        shown: list[tuple[Skill, float]] = []
        rows: list[dict[str, Any]] = []
        for rank, (skill, score) in enumerate(got.hits):
            draws = self.drawn is None or self.drawn(skill)
            is_shown = not draws or coin(self.seed, self.task_key, skill.id) >= self.mask_rate
            rows.append({"id": skill.id, "name": skill.name, "rank": rank, "score": round(score, 6),
                         "propensity": round(1.0 - self.mask_rate, 12) if draws else 1.0, "shown": is_shown})
            if is_shown:
                shown.append((skill, score))
        log: dict[str, Any] = {"kind": MASK_LOG_KIND, "mask_rate": self.mask_rate, "seed": self.seed,
                               "candidates": rows}
        return Retrieval(shown, log=log)
