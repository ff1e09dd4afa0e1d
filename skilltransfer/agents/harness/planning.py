"""Guards on what the planner reads and plans next: its earlier subtasks (hook ``planner_opening``), the running
summary it reads (``summary``), and a subtask it proposes (``plan_proposed``, ``subtask_ended``). A small planner
cannot tell from a thin summary what it already asked for: it re-plans finished subtasks, copies its own history
lines back, and trusts a summary line that no output shows. (Its ``DONE`` is `completion`'s; a subtask planned again
after it ended stuck, `observations`'.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from skilltransfer.agents.harness.base import (
    ACCEPT,
    Decision,
    Guard,
    PlannerOpening,
    PlanProposal,
    Refuse,
    Rewrite,
    SubtaskOutcome,
    SummaryView,
    TaskView,
)
from skilltransfer.agents.harness.grounding import outputs_of, ran_code, ungrounded_lines
from skilltransfer.agents.prompts import NO_HISTORY
from skilltransfer.agents.replies import normalized_subtask, uncopied


class SubtaskHistory(Guard):
    """Subtask history for the planner: the paper's planner reads the goal and the running summary only; this guard
    adds the list of earlier subtasks with each one's exit status and report (``<n>. <subtask> -> <status>:
    <report>``, `skilltransfer.agents.prompts.history_line`), which a small model needs to see what it already asked
    for (it otherwise re-plans finished subtasks). Switch: ``agent.subtask_history``."""

    name = "subtask_history"

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.history = f"{opening.history}\n# Subtasks so far\n{chr(10).join(task.history) or NO_HISTORY}\n"
        return opening


class PlannerCopies(Guard):
    """Planner copies: a planned subtask in the form of the planner's own history line (``2. <subtask> -> stuck:
    ...``) is cut to the subtask, so a subtask planned again is recognised. Switch: ``agent.uncopy_subtasks``."""

    name = "planner_copies"

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        if proposal.subtask is None:
            return ACCEPT
        text = uncopied(proposal.subtask)
        return Rewrite(replace(proposal, subtask=text), "history_line_form") if text != proposal.subtask else ACCEPT


class RepeatedSubtask(Guard):
    """Repeated subtask: a planned subtask that is word for word (case and spacing aside) one that already ended
    ``subtask_done`` is refused once per planner turn with that subtask's history line; the second answer stands. The
    1.5B planner, copying the worked example's first subtask, planned "List Tina's events ..." twice and then stopped
    without adding the event. Switch: ``agent.refuse_repeated_subtask``."""

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


class GroundedSummary(Guard):
    """Grounded summary: of the summarizer's reply, each line that was not in the previous summary and holds a number
    no output of the task (nor its instruction) shows, or claims a change no code of the task made, is left out of
    the running summary (logged in ``SummaryStep.dropped``); a reply left empty keeps the previous summary. Switch:
    ``agent.ground_summary``."""

    name = "grounded_summary"

    def summary(self, view: SummaryView, text: str) -> Decision:
        if not text:
            return ACCEPT
        kept, dropped = ungrounded_lines(text, view.previous, [view.instruction, *outputs_of(view.actions)],
                                         ran_code(view.actions))
        return Rewrite(kept, "ungrounded_lines", tuple(dropped)) if dropped or kept != text else ACCEPT
