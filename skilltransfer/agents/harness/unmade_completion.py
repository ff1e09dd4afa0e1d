"""Unmade completion: a ``complete_task`` while the task's instruction asks for a change (its first change verb:
"change", "forward", "remove", "add" ...; `agents.harness.grounding.requested_change`) and neither that code nor
any code of the task that ran without an error called a function named for one is refused once per task, without
running it; the refusal names the functions that were called. Switch: ``agent.refuse_unmade_completion``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, RunLike
from skilltransfer.agents.harness.grounding import called_listing, calls_complete_task, makes_change, requested_change
from skilltransfer.agents.harness.text import ran_code
from skilltransfer.log import ActionStep


class UnmadeCompletion(Guard):
    name = "unmade_completion"

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        if self.spent() or not calls_complete_task(code):
            return ACCEPT
        verb = requested_change(run.context.episode.task.instruction)
        codes = [*ran_code(run.context.earlier), *ran_code(run.steps[:-1]), code]
        if verb is None or makes_change(codes):
            return ACCEPT
        return self.refuse_once(self.prompts.unmade_completion, verb=verb,
                                called=called_listing(codes, frozenset({"print", "complete_task"})))
