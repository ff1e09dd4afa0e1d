"""Closing subtask: a planner ``DONE`` that stands (after the unfinished-DONE refusal, when that guard is on) while
nobody has called ``complete_task`` is followed by one harness-planned subtask (``prompts/closing_subtask.md``) that
asks the executor to make a change the goal asks for and the progress does not show, or compute an answer the
progress does not give, and then submit; it retrieves skills by the instruction and the task ends after it
(``PlanStep.decision = "closing"``). Switch: ``agent.close_unfinished``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, Rewrite, TaskView
from skilltransfer.agents.harness.premature_done import PrematureDone
from skilltransfer.log import PlanStep


class ClosingSubtask(Guard):
    name = "closing_subtask"

    def completion(self, task: TaskView, plan: PlanStep) -> Decision:
        if not task.history:
            return ACCEPT
        refusing = [peer for peer in self.peers if isinstance(peer, PrematureDone)]
        if any(not peer.refused_unfinished for peer in refusing):
            return ACCEPT  # the unfinished-DONE refusal has not had its turn: the DONE ends the task
        prompt = self.prompts.closing_subtask
        return Rewrite(PlanStep(plan.subtask_index, "closing", prompt.render().strip(), "", prompt.id, final=True,
                                query="instruction"), "closing_subtask")
