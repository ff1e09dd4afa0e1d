"""Stop sequence: the executor's generation stops at a line starting ``Observation:``; text the model still invents
after its first code block from such a line on, or a ``SUBTASK DONE`` report written after the code block, before
its output, is cut from the reply before it enters the context (the step log keeps the raw reply); the summarizer
stops at a heading line (it wrote on into an invented ``## Subtask just executed``). Switch: ``agent.stop`` (the
executor's stop strings; ``[]`` is off)."""

from __future__ import annotations

import re
from typing import Any

from skilltransfer.agents.harness.base import Guard, RunLike
from skilltransfer.agents.replies import CODE_BLOCK, SUBTASK_DONE

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
