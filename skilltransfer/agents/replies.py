"""Reading the model's replies: the one module the loop (executor, planner) and the guards both import.

An executor reply is a short thought and one ```python block (`parse_action`), or a ``SUBTASK DONE: <report>`` line
in subtask mode (`SUBTASK_DONE`); a planner reply is ``SUBTASK: <text>`` or ``DONE`` (`parse_plan`).
"""

from __future__ import annotations

import re

SUBTASK_DONE_OBSERVATION = "(subtask marked done)"
"""The observation of an accepted ``SUBTASK DONE`` step (a worked example's done turn shows the same)."""
CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_OPEN_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*)\Z", re.DOTALL | re.IGNORECASE)
SUBTASK_DONE = re.compile(r"^[ \t>*#]*SUBTASK[ _]DONE\b[ \t]*:?[ \t]*(.*)", re.MULTILINE | re.IGNORECASE | re.DOTALL)


def parse_action(reply: str, *, complete: bool = True) -> tuple[str, str | None, int]:
    """Split a reply into (thought, code of the first python block or None, number of code blocks).

    A final ```python block without its closing fence counts as code when the reply ended normally (a stop sequence
    cut the fence off), not when the token limit cut it (``complete=False``: the code is probably unfinished).
    """
    blocks = list(CODE_BLOCK.finditer(reply))
    if blocks:
        return reply[: blocks[0].start()].strip(), blocks[0].group(1), len(blocks)
    opened = _OPEN_BLOCK.search(reply) if complete else None
    if opened is None or not opened.group(1).strip():
        return reply.strip(), None, 0
    return reply[: opened.start()].strip(), opened.group(1), 1


_PLAN = re.compile(r"^[ \t>*#_-]*(?:(SUBTASK)[ \t*_]*:[ \t*_]*(.*)|(DONE)\b.*)$", re.MULTILINE | re.IGNORECASE)


def parse_plan(reply: str) -> tuple[str, str | None] | None:
    """The planner's decision: ("subtask", text), ("done", None), or None when the reply has neither form.

    The first ``SUBTASK: ...`` or ``DONE`` line wins; a ``SUBTASK:`` with an empty rest takes the next non-empty line.
    """
    match = _PLAN.search(reply)
    if match is None:
        return None
    if match.group(3):
        return "done", None
    text = match.group(2).strip()
    if not text:
        rest = [line.strip() for line in reply[match.end():].splitlines() if line.strip()]
        if not rest:
            return None
        text = rest[0]
    return "subtask", text


_COPIED_OUTCOME = re.compile(r"\s+->\s+(?:subtask_done|stuck|limits_exceeded|context_exceeded|submitted)\b.*\Z",
                             re.DOTALL)
_NUMBERED = re.compile(r"^\d+\.\s+")


def uncopied(subtask: str) -> str:
    """``subtask`` without the history-line form a planner imitates: a leading ``<n>. `` and a trailing
    ``-> <exit status>: <result>`` (``"<n>. <subtask> -> <status>: <result>"`` is how the planner's history reads)."""
    text = _COPIED_OUTCOME.sub("", subtask)
    return _NUMBERED.sub("", text) if text != subtask else text


def normalized_subtask(subtask: str) -> str:
    """A subtask's text compared case- and whitespace-insensitively."""
    return " ".join(subtask.lower().split())
