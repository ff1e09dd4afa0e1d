"""Which retrieved code skills ran (issue 39 §2): a count of the calls of each loaded skill's functions.

A code skill loaded for the harness (``skilltransfer.sandbox.codecheck.loading_action`` with its skill id) binds each
top-level function it defines in the episode's namespace through the `counter` hook: a ``functools.wraps`` wrapper
that adds one to the skill's count, then calls the function (same arguments, same return value, same exception).
The skill's own namespace keeps the unwrapped functions, so a call one function of the skill makes to another is not
counted: the count is of calls from the episode's code (the agent's actions, or another skill). The runner reads
the counts after each action (`take`) and returns them with the action's result.

The counts live in the agent's process, so code under test can change them (or replace the hook): the record can be
forged. It is only a measurement (nothing of evaluation reads it), `take` reads exact types only (no agent code
runs) and the harness accepts only ids of skills it loaded in the episode, as non-negative ints.

Standard library only: this module runs inside the sandbox worker.
"""

from __future__ import annotations

import functools
import itertools
import types
from collections.abc import Callable
from typing import Any

HOOK = "__skilltransfer_skill_ran__"
"""The namespace name the loading action wraps a skill's functions with."""

MAX_SKILLS = 1000
"""At most this many skills' counts are returned per action."""

MAX_ID_CHARS = 200
MAX_COUNT = 10**9


def counter() -> tuple[Callable[[str, Any], Any], dict[Any, Any]]:
    """A new episode's call counter: the hook the loading action wraps a skill's functions with (bound in the
    namespace as `HOOK`), and the counts it adds to (skill id -> calls; read and cleared with `take`)."""
    counts: dict[Any, Any] = {}

    def hook(skill_id: str, function: Any) -> Any:
        """``function`` wrapped to count its calls under ``skill_id`` (anything but a plain function unchanged)."""
        if type(function) is not types.FunctionType:
            return function

        @functools.wraps(function)
        def counted(*args: Any, **kwargs: Any) -> Any:
            n = counts.get(skill_id)
            counts[skill_id] = n + 1 if type(n) is int else 1
            return function(*args, **kwargs)

        return counted

    return hook, counts


def take(counts: dict[Any, Any]) -> dict[str, int]:
    """The counts since the last take, then cleared (`clean`: exact types only, so no agent code runs)."""
    return clean(counts, clear=True)


def clean(raw: Any, *, allowed: Callable[[str], bool] | None = None, clear: bool = False) -> dict[str, int]:
    """The valid entries of a counts record: a ``dict`` (exact type) of ``str`` ids (at most `MAX_ID_CHARS`, and
    ``allowed`` when given) to ``int`` counts in 1..`MAX_COUNT`; anything else is left out (never an error).
    ``clear`` empties the dict after reading it."""
    if type(raw) is not dict:
        return {}
    out: dict[str, int] = {}
    for key, value in list(itertools.islice(raw.items(), 10 * MAX_SKILLS)):
        if len(out) >= MAX_SKILLS:
            break
        if type(key) is str and len(key) <= MAX_ID_CHARS and type(value) is int and 0 < value <= MAX_COUNT \
                and (allowed is None or allowed(key)):
            out[key] = value
    if clear:
        raw.clear()
    return out
