"""Growth under a budget (issue 39 §5): a skill memory capped at ``MemoryConfig.capacity`` skills.

After each task (its induction done, its record written) the stream evicts skills until the memory holds at most
``capacity``; which ones is the ``eviction`` policy's order, each computed from the stream's own history so far
(the committed tasks plus the current one), so a resumed run makes the same choices:

- ``fifo``: the oldest first (the memory's insertion order).
- ``lru``: the least recently used first: a skill's recency is the last stream position whose task retrieved it,
  or the position it was induced at (``provenance.stream_position``) when later; ties in insertion order.
- ``utility``: the lowest usage utility first: the Laplace-smoothed success rate when retrieved,
  ``(successes_when_retrieved + 1) / (times_retrieved + 2)`` (a never-retrieved skill scores 0.5); ties in
  insertion order. Cheap and online; it is correlational (a skill retrieved by hard tasks scores low).
- ``effect``: the lowest estimated causal effect on success first, from the stream's masking draws
  (``mask_rate`` > 0): the Hajek (inverse-propensity-weighted) difference of mean success when shown and when
  withheld (`skilltransfer.metrics.effects`, point estimate only, no interval). A skill without an estimable effect
  (no shown or no withheld draw yet) counts as 0 (neutral); ties in insertion order, so with no estimable effect at
  all the order is ``fifo``.

Every eviction is logged (skill, policy, the policy's score, stream position) in the memory's ``evictions`` list,
saved with the memory as ``evictions.jsonl`` and so committed with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from skilltransfer.skill import Skill

Eviction = Literal["fifo", "lru", "utility", "effect"]
EVICTIONS_FILE = "evictions.jsonl"


@dataclass(frozen=True)
class TaskOutcome:
    """What the eviction policies read of one task of the stream."""

    position: int
    success: bool
    retrieved: tuple[str, ...] = ()
    draws: tuple[tuple[str, float, bool], ...] = field(default=())
    """Masking draws: (skill id, propensity of being shown, shown)."""


def usage_utility(skill: Skill) -> float:
    """``(successes_when_retrieved + 1) / (times_retrieved + 2)``."""
    return (skill.usage.successes_when_retrieved + 1) / (skill.usage.times_retrieved + 2)


def online_effects(history: Sequence[TaskOutcome]) -> dict[str, float]:
    """Each skill's Hajek effect on success from the draws so far (skills with a shown and a withheld draw only)."""
    sums: dict[str, list[float]] = {}  # skill -> [shown weighted y, shown weight, withheld weighted y, withheld weight]
    for task in history:
        y = float(task.success)
        for skill_id, pi, shown in task.draws:
            if not 0.0 < pi < 1.0:
                continue
            row = sums.setdefault(skill_id, [0.0, 0.0, 0.0, 0.0])
            w = 1.0 / pi if shown else 1.0 / (1.0 - pi)
            i = 0 if shown else 2
            row[i] += w * y
            row[i + 1] += w
    return {s: r[0] / r[1] - r[2] / r[3] for s, r in sums.items() if r[1] > 0 and r[3] > 0}


def eviction_scores(skills: Sequence[Skill], policy: Eviction, history: Sequence[TaskOutcome]) -> list[float]:
    """The policy's score of each skill (lower is evicted first; ties in the given, insertion, order)."""
    if policy == "fifo":
        return [float(i) for i in range(len(skills))]
    if policy == "utility":
        return [usage_utility(s) for s in skills]
    if policy == "effect":
        effects = online_effects(history)
        return [effects.get(s.id, 0.0) for s in skills]
    last: dict[str, int] = {}
    for task in history:
        for skill_id in task.retrieved:
            last[skill_id] = max(last.get(skill_id, -1), task.position)
    born = [s.provenance.stream_position if s.provenance.stream_position is not None else -1 for s in skills]
    return [float(max(last.get(s.id, -1), b)) for s, b in zip(skills, born, strict=True)]


def victims(skills: Sequence[Skill], capacity: int | None, policy: Eviction,
            history: Sequence[TaskOutcome]) -> list[tuple[Skill, float]]:
    """The skills to evict to bring ``skills`` (in insertion order) down to ``capacity``, with their scores."""
    if capacity is None or len(skills) <= capacity:
        return []
    scores = eviction_scores(skills, policy, history)
    order = sorted(range(len(skills)), key=lambda i: (scores[i], i))
    return [(skills[i], scores[i]) for i in order[:len(skills) - capacity]]
