"""Stuck detection (`agents.harness.stuck`): after each step, a loop pattern over the run's steps gets a hint
appended to the observation; after the hint the executor samples at ``stuck_temperature``; the very next step
repeating the hinted one, or a pattern again later, ends the (sub)task with exit status ``stuck``; a subtask the
planner plans again, word for word, after it ended ``stuck`` ends the task. Switch: ``agent.stuck_detection``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skilltransfer.agents.harness.base import (
    ACCEPT,
    Decision,
    End,
    Guard,
    Rewrite,
    RunLike,
    SubtaskOutcome,
    TaskView,
)
from skilltransfer.agents.harness.stuck import detect, repeats
from skilltransfer.agents.replies import normalized_subtask
from skilltransfer.log import ActionStep, PlanStep


@dataclass
class _Run:
    hinted_at: int | None = None
    """Index (in the run's steps) of the step whose observation carried the hint."""


class StuckDetection(Guard):
    name = "stuck_detection"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.stuck_subtasks: set[str] = set()

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        hinted = run is not None and role == "executor" and self.run_state(run, _Run).hinted_at is not None
        if hinted and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature  # a greedy model repeats itself after a hint
        return params

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Decision:
        state = self.run_state(run, _Run)
        since = 0 if state.hinted_at is None else state.hinted_at
        hinted = run.steps[since] if state.hinted_at is not None else None
        if hinted is not None and since == len(run.steps) - 2 and repeats(step, hinted):
            pattern = _pattern(hinted)
            return End("stuck", pattern, f"stuck: {pattern} again right after the hint (the step repeats the "
                                         "hinted one)")
        stuck = detect(run.steps[since:])
        if stuck is None:
            return ACCEPT
        if state.hinted_at is not None:
            return End("stuck", stuck.pattern, f"stuck: {stuck.pattern} after a hint (the last {stuck.length} steps "
                                               "repeat)")
        state.hinted_at = len(run.steps) - 1
        return Rewrite(f"{step.observation}\n(stuck: {stuck.hint})", stuck.pattern)

    def subtask_planned(self, task: TaskView, plan: PlanStep) -> Decision:
        if plan.subtask is not None and normalized_subtask(plan.subtask) in self.stuck_subtasks:
            return End("stuck", "replanned_stuck_subtask", "the planner planned again, word for word, a subtask "
                                                           "that ended stuck")
        return ACCEPT

    def subtask_ended(self, task: TaskView, outcome: SubtaskOutcome) -> None:
        if outcome.exit_status == "stuck" and outcome.plan.subtask is not None:
            self.stuck_subtasks.add(normalized_subtask(outcome.plan.subtask))


def _pattern(step: ActionStep) -> str:
    return step.stuck or "stuck"
