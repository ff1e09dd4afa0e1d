"""Example plans: an env's docs may end with the subtasks a planner would send for its worked example's task
(``## Example plan (another task): ...``, `agents.harness.worked_example.split_plan_example`); the planner shows
it after the docs, the executor never sees it. Switch: ``agent.example_plan``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import Guard, Opening, RunContext
from skilltransfer.agents.harness.worked_example import split_plan_example


class ExamplePlan(Guard):
    name = "example_plan"

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        opening.docs = split_plan_example(opening.docs)[0]
        return opening

    def planner_docs(self, docs: str, example: str) -> tuple[str, str]:
        docs, plan = split_plan_example(docs)
        return docs, f"\n{plan}\n" if plan else example
