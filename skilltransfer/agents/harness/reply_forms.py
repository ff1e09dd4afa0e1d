"""Guards on the form of a model's reply before it is acted on: where generation stops and what a model writes on
after its code (hooks ``sampling``, ``reply``), and a ``SUBTASK DONE`` written as code or sent with code that already
ran (``code_form``, ``code_proposed``). A small model invents the observation after its code block, writes its report
before the code ran, and puts the done line in a code fence."""

from __future__ import annotations

import re
from typing import Any

from skilltransfer.agents.harness.base import ACCEPT, Decision, End, Guard, Rewrite, RunLike
from skilltransfer.agents.replies import CODE_BLOCK, SUBTASK_DONE
from skilltransfer.log import ActionStep

SUMMARY_STOP = "\n#"
"""Where a summary ends: a summary is bullet points, and a heading after them is the model writing on into an
invented next prompt (``## Subtask just executed`` ...)."""
_INVENTED = re.compile(r"^[ \t>*#]*Observation\b", re.MULTILINE | re.IGNORECASE)


def trim_reply(reply: str) -> str:
    """The reply without what a model invents after its first code block: an ``Observation:`` it did not get, or a
    ``SUBTASK DONE`` report written before the code ran (and everything after either)."""
    block = CODE_BLOCK.search(reply)
    if block is None:
        return reply
    cuts = [m.start() for m in (_INVENTED.search(reply, block.end()), SUBTASK_DONE.search(reply, block.end())) if m]
    return reply[: min(cuts)].rstrip() if cuts else reply


class StopSequence(Guard):
    """Stop sequence: the executor's generation stops at a line starting ``Observation:``; text the model still invents
    after its first code block from such a line on, or a ``SUBTASK DONE`` report written after the code block, before
    its output, is cut from the reply before it enters the context (the step log keeps the raw reply); the summarizer
    stops at a heading line (it wrote on into an invented ``## Subtask just executed``). Switch: ``agent.stop`` (the
    executor's stop strings; ``[]`` is off)."""

    name = "stop_sequence"

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        if role == "executor":
            params.setdefault("stop", list(self.config.stop or ()))
        elif role == "summarizer":
            params.setdefault("stop", [SUMMARY_STOP])
        return params

    def reply(self, role: str, text: str, run: RunLike | None) -> str:
        if role == "executor":
            return trim_reply(text)
        if role == "summarizer":
            return text.split(SUMMARY_STOP, 1)[0] if not text.startswith("#") else ""
        return text


class DoneOnRepeat(Guard):
    """Done forms: at subtask level, a ``SUBTASK DONE`` line inside a code fence is the done reply, not Python (it ran
    as Python: SyntaxError 3x until stuck); a reply that says ``SUBTASK DONE`` and re-sends code the subtask already ran
    without an error ends the subtask with that report, without running the code again. Switch:
    ``agent.done_on_repeat``."""

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
