"""Example plans: an env's docs may end with the subtasks a planner would send for its worked example's task
(``## Example plan (another task): ...``, `agents.harness.worked_example.split_plan_example`); the planner shows
it after the docs, the executor never sees it. Switch: ``agent.example_plan``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import Guard, Opening, PlannerOpening, RunContext, TaskView
from skilltransfer.agents.harness.worked_example import split_plan_example


class ExamplePlan(Guard):
    name = "example_plan"

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        opening.docs = split_plan_example(opening.docs)[0]
        return opening

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.docs, plan = split_plan_example(opening.docs)
        if plan:
            opening.example = f"\n{plan}\n"
        return opening
