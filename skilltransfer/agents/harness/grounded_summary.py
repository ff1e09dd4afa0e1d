"""Grounded summary: of the summarizer's reply, each line that was not in the previous summary and holds a number no
output of the task (nor its instruction) shows, or claims a change no code of the task made, is left out of the
running summary (logged in ``SummaryStep.dropped``); a reply left empty keeps the previous summary. Switch:
``agent.ground_summary``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, Rewrite, SummaryView
from skilltransfer.agents.harness.grounding import ungrounded_lines
from skilltransfer.agents.harness.text import outputs_of, ran_code


class GroundedSummary(Guard):
    name = "grounded_summary"

    def summary(self, view: SummaryView, text: str) -> Decision:
        if not text:
            return ACCEPT
        kept, dropped = ungrounded_lines(text, view.previous, [view.instruction, *outputs_of(view.actions)],
                                         ran_code(view.actions))
        return Rewrite(kept, "ungrounded_lines", tuple(dropped)) if dropped or kept != text else ACCEPT
