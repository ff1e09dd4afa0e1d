"""Planner copies: a planned subtask in the form of the planner's own history line (``2. <subtask> -> stuck: ...``)
is cut to the subtask, so a subtask planned again is recognised. Switch: ``agent.uncopy_subtasks``."""

from __future__ import annotations

from dataclasses import replace

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, PlanProposal, Rewrite, TaskView
from skilltransfer.agents.replies import uncopied


class PlannerCopies(Guard):
    name = "planner_copies"

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        if proposal.subtask is None:
            return ACCEPT
        text = uncopied(proposal.subtask)
        return Rewrite(replace(proposal, subtask=text), "history_line_form") if text != proposal.subtask else ACCEPT
