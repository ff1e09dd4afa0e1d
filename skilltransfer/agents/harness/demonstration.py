"""Demonstration turns: the worked example at the end of an env's docs (`agents.harness.worked_example`) is
replayed to the executor as earlier chat turns before the task instead of prose in the system prompt (context fitting
keeps them verbatim); the planner never sees it. A subtask executor is shown it as a subtask when
``agent.subtask_example`` is on: the k-th subtask of a task that may not complete the task sees the example plan's
k-th subtask, the turns up to its ``Report:`` line and the reply ``SUBTASK DONE: <report>``
(`Demonstration.as_subtask`); one that asks for ``complete_task`` sees the whole example in the subtask format.
Switch: ``agent.demonstration`` (``turns``; ``inline`` is off)."""

from __future__ import annotations

from skilltransfer.agents.harness.base import Guard, Opening, PlannerOpening, RunContext, TaskView
from skilltransfer.agents.harness.text import asks_completion
from skilltransfer.agents.harness.worked_example import plan_subtasks, split_demonstration, split_plan_example
from skilltransfer.agents.prompts import NO_HISTORY, NO_SUMMARY, history_line


class DemonstrationTurns(Guard):
    name = "demonstration"

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        docs, demo = split_demonstration(opening.docs)
        if demo is None:
            return opening
        opening.docs = docs
        may_complete = not context.subtask or asks_completion(context.subtask)
        if context.subtask_mode and not context.subagent and self.config.subtask_example:
            summary, history, subtask = NO_SUMMARY, NO_HISTORY, demo.task
            if demo.reports and not may_complete:
                plan = split_plan_example(context.episode.docs().strip())[1]
                k, planned = demo.segment(context.subtask_index or 0), plan_subtasks(plan)
                if k < len(planned):
                    subtask = planned[k]
                    earlier = [report for _, report in demo.reports[:k]]
                    summary = "\n".join(f"- {report}" for report in earlier) or NO_SUMMARY
                    history = "\n".join(history_line(i, planned[i - 1], "subtask_done", report)
                                         for i, report in enumerate(earlier, start=1)) or NO_HISTORY
                else:
                    k = 0  # no plan line for it: the example's first subtask, under the example task
                demo = demo.as_subtask(k)
            elif not may_complete:
                demo = demo.as_subtask()
            task = self.prompts.executor_subtask.render(instruction=demo.task, summary=summary, history=history,
                                                        subtask=subtask, skills="")
        else:
            task = self.prompts.executor_task.render(instruction=demo.task, skills="")
        opening.turns = demo.messages(task, lambda output: self.prompts.observation.render(output=output))
        return opening

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.docs = split_demonstration(opening.docs)[0]
        return opening
