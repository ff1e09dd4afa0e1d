"""Small readers of a trajectory that several guards share (no policy of their own)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from skilltransfer.log import ActionStep

_ASKS_COMPLETION = re.compile(r"complete_task|\bsubmit|\b(?:complete|finish|end) the task", re.IGNORECASE)


def outputs_of(steps: Sequence[ActionStep]) -> list[str]:
    """The observations of ``steps`` that sent code (a reply without code has no output)."""
    return [s.observation for s in steps if s.action is not None]


def ran_code(steps: Sequence[ActionStep]) -> list[str]:
    """The code of ``steps`` that ran without an error (refused replies never ran)."""
    return [s.action for s in steps if s.action is not None and not s.error and s.refused is None]


def asks_completion(subtask: str) -> bool:
    """Whether a subtask's text asks for ``complete_task``, a submission or the end of the task."""
    return _ASKS_COMPLETION.search(subtask) is not None
