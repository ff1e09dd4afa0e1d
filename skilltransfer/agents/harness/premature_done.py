"""Premature done: a planner ``DONE`` before any subtask ran, and (once per task) a planner ``DONE`` after subtasks
ran while nobody has called ``complete_task`` (a planner reaching DONE is never told the task is finished, so a small
model stops one subtask short), are refused with the reason; so is (once per subtask) a ``SUBTASK DONE`` before any
code of the subtask ran without an error (none ran: ``premature_subtask_done``; only failing code ran:
``failed_subtask_done``). Switch: ``agent.refuse_premature_done``."""

from __future__ import annotations

from dataclasses import dataclass

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, PlanProposal, Refuse, RunLike, TaskView
from skilltransfer.agents.harness.text import ran_code
from skilltransfer.log import ActionStep


@dataclass
class _Run:
    refused: bool = False


class PrematureDone(Guard):
    name = "premature_done"

    @property
    def refused_unfinished(self) -> bool:
        """Whether the task's planner already had a DONE refused as unfinished (``complete_task`` not called)."""
        return self.spent("unfinished")

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        if proposal.kind != "done" or not proposal.refusable:
            return ACCEPT
        if not task.history:
            prompt = self.prompts.premature_planner_done
            return Refuse(prompt.name, prompt.render())
        if self.refused_unfinished:
            return ACCEPT
        return self.refuse_once(self.prompts.unfinished_planner_done, "unfinished")

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Decision:
        state = self.run_state(run, _Run)
        if state.refused or ran_code(run.steps):
            return ACCEPT
        prompt = self.prompts.failed_subtask_done if any(s.action for s in run.steps) else \
            self.prompts.premature_subtask_done
        state.refused = True
        return Refuse(prompt.name, prompt.render())
