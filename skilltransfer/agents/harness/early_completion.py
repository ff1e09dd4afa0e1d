"""Early completion: at subtask level, code that calls ``complete_task`` in a subtask whose text asks for neither
``complete_task``, a submission nor the end of the task is refused once per task, without running it; the refusal
quotes the subtask (``prompts/early_completion.md``). A small executor copies the worked example's closing
``complete_task()`` into the first subtask. Switch: ``agent.refuse_early_completion``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, RunLike
from skilltransfer.agents.harness.grounding import calls_complete_task
from skilltransfer.agents.harness.text import asks_completion
from skilltransfer.log import ActionStep


class EarlyCompletion(Guard):
    name = "early_completion"

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        context = run.context
        if not context.subtask or context.subagent or self.spent() or asks_completion(context.subtask):
            return ACCEPT
        if not calls_complete_task(code):
            return ACCEPT
        return self.refuse_once(self.prompts.early_completion, subtask=context.subtask.strip())
