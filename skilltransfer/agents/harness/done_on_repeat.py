"""Done forms: at subtask level, a ``SUBTASK DONE`` line inside a code fence is the done reply, not Python (it ran as
Python: SyntaxError 3x until stuck); a reply that says ``SUBTASK DONE`` and re-sends code the subtask already ran
without an error ends the subtask with that report, without running the code again. Switch:
``agent.done_on_repeat``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, End, Guard, Rewrite, RunLike
from skilltransfer.agents.replies import CODE_BLOCK, SUBTASK_DONE
from skilltransfer.log import ActionStep


class DoneOnRepeat(Guard):
    name = "done_on_repeat"

    def code_form(self, run: RunLike, step: ActionStep, code: str) -> Decision:
        if run.context.subtask_mode and SUBTASK_DONE.match(code.strip()):
            return Rewrite(None, "done_line_in_code")
        return ACCEPT

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        if not run.context.subtask_mode:
            return ACCEPT
        done = SUBTASK_DONE.search(CODE_BLOCK.sub("", reply))
        if done is None:
            return ACCEPT
        same = " ".join(code.split())
        earlier = next((s for s in run.steps[:-1] if s.action is not None and not s.error and s.skill_action is None
                        and " ".join(s.action.split()) == same), None)
        if earlier is None:
            return ACCEPT
        report = done.group(1).strip().split("\n\n")[0].strip()
        return End("subtask_done", "done_with_repeated_code", report or earlier.observation.strip() or "(no report)",
                   observation=f"(subtask marked done: the code repeats step {earlier.index + 1}, which already ran; "
                               "it was not run again)")
