"""Repeated subtask: a planned subtask that is word for word (case and spacing aside) one that already ended
``subtask_done`` is refused once per planner turn with that subtask's history line; the second answer stands. The
1.5B planner, copying the worked example's first subtask, planned "List Tina's events ..." twice and then stopped
without adding the event. Switch: ``agent.refuse_repeated_subtask``."""

from __future__ import annotations

from typing import Any

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, PlanProposal, Refuse, SubtaskOutcome, TaskView
from skilltransfer.agents.replies import normalized_subtask


class RepeatedSubtask(Guard):
    name = "repeated_subtask"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.done: dict[str, str] = {}
        """Subtasks that ended ``subtask_done`` (normalised) -> their history line."""

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        if proposal.kind != "subtask" or proposal.subtask is None or not proposal.refusable:
            return ACCEPT
        line = self.done.get(normalized_subtask(proposal.subtask))
        if line is None:
            return ACCEPT
        prompt = self.prompts.repeated_subtask
        return Refuse(prompt.name, prompt.render(line=line))

    def subtask_ended(self, task: TaskView, outcome: SubtaskOutcome) -> None:
        if outcome.exit_status == "subtask_done" and not outcome.plan.final and outcome.plan.subtask is not None:
            self.done.setdefault(normalized_subtask(outcome.plan.subtask), outcome.line)
