"""Seed expansion by a degree-corrected random walk over the skill graph (seeded, Monte Carlo, local).

From each seed unit, ``walks_per_seed`` walks run over the graph's edges taken in both directions (a child leads to
its parents, so a matching primitive can surface the procedure it belongs to). Before each step a walk stops with
probability ``restart`` (a random walk with restart), and it takes at most ``max_steps`` steps. A step from unit u
moves to neighbour v with probability proportional to deg(v)^-``degree_exponent`` (deg = parents + children): the
degree correction. A plain walk (exponent 0) is drawn into hubs (a primitive shared by many skills) and scattered from
there over every skill that shares it; with the correction a hub is entered about as often as a unit with one
neighbour, so the mass stays near the seed. Every visit adds the seed's weight (its cosine with the query, floored at
0) divided by ``walks_per_seed``; the ``expand_k`` non-seed units with the most weight (ties: graph order) are the
expansion. The random generator is seeded from ``seed`` and the seed units' ids, so a query's expansion is
reproducible. Cost: at most seeds x walks_per_seed x max_steps steps, independent of the graph's size.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections import defaultdict
from itertools import accumulate

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.lens.graph import SkillGraph


class WalkConfig(BaseModel):
    """Parameters of the degree-corrected random walk (documented in the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    walks_per_seed: int = Field(default=64, ge=1)
    """Walks started from each seed unit."""
    max_steps: int = Field(default=3, ge=1)
    """Most steps of one walk."""
    restart: float = Field(default=0.25, ge=0.0, lt=1.0)
    """Probability that a walk stops (returns to its seed) before each step."""
    degree_exponent: float = Field(default=1.0, ge=0.0)
    """beta: a step moves to neighbour v with probability proportional to deg(v)^-beta (0: a plain walk)."""
    expand_k: int = Field(default=5, ge=0)
    """Units added beyond the seeds."""
    seed: int = 0
    """Seed of the walk's random generator (combined with the seed units' ids)."""


def walk_scores(graph: SkillGraph, seeds: list[tuple[str, float]], config: WalkConfig) -> dict[str, float]:
    """Visit weight of every unit the walks reached (seeds included when a walk came back to them).

    Args:
        graph: the skill graph.
        seeds: (unit id, cosine with the query) pairs.
        config: the walk's parameters.
    """
    rng = random.Random(f"{config.seed}:" + "|".join(uid for uid, _ in seeds))
    steps: dict[str, tuple[list[str], list[float]]] = {}
    visits: dict[str, float] = defaultdict(float)
    for start, score in seeds:
        weight = max(score, 0.0) / config.walks_per_seed
        for _ in range(config.walks_per_seed):
            current = start
            for _ in range(config.max_steps):
                if rng.random() < config.restart:
                    break
                if current not in steps:
                    neighbours = graph.children(current) + graph.parents(current)
                    cumulative = list(accumulate(graph.degree(v) ** -config.degree_exponent for v in neighbours))
                    steps[current] = (neighbours, cumulative)
                neighbours, cumulative = steps[current]
                if not neighbours:
                    break
                pick = bisect_right(cumulative, rng.random() * cumulative[-1])
                current = neighbours[min(pick, len(neighbours) - 1)]
                visits[current] += weight
    return dict(visits)


def expand(graph: SkillGraph, seeds: list[tuple[str, float]], config: WalkConfig) -> list[tuple[str, float]]:
    """The ``expand_k`` non-seed units the walks weighted most, best first (ties: graph order)."""
    if config.expand_k == 0 or not seeds:
        return []
    seed_ids = {uid for uid, _ in seeds}
    order = graph.order()
    scored = [(uid, weight) for uid, weight in walk_scores(graph, seeds, config).items()
              if uid not in seed_ids and weight > 0]
    scored.sort(key=lambda item: (-item[1], order[item[0]]))
    return scored[:config.expand_k]
