"""Subtask history for the planner: the paper's planner reads the goal and the running summary only; this guard
adds the list of earlier subtasks with each one's exit status and report (``<n>. <subtask> -> <status>: <report>``,
`skilltransfer.agents.prompts.history_line`), which a small model needs to see what it already asked for (it
otherwise re-plans finished subtasks). Switch: ``agent.subtask_history``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import Guard, PlannerOpening, TaskView
from skilltransfer.agents.prompts import NO_HISTORY


class SubtaskHistory(Guard):
    name = "subtask_history"

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.history = f"{opening.history}\n# Subtasks so far\n{chr(10).join(task.history) or NO_HISTORY}\n"
        return opening
