"""Retrieval floor: embedding retrieval leaves out top-k hits whose cosine with the query is below
``retrieval_min_score`` (`RetrievalStep.below_min_score` counts them): an unrelated skill (another app's procedure,
which a small model follows anyway) never fills an empty slot of the top-k. Routed retrieval is left alone. Switch:
``agent.retrieval_min_score`` (-1 is off: the paper's plain top-5)."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, Rewrite
from skilltransfer.protocols import Retrieval


class RetrievalFloor(Guard):
    name = "retrieval_floor"

    def retrieved(self, query: str, got: Retrieval) -> Decision:
        floor = self.config.retrieval_min_score if self.config.retrieval_min_score is not None else -1.0
        kept = [(skill, score) for skill, score in got.hits if score >= floor]
        if len(kept) == len(got.hits):
            return ACCEPT
        removed = tuple(skill.id for skill, score in got.hits if score < floor)
        return Rewrite(Retrieval(kept), "below_min_score", removed)
