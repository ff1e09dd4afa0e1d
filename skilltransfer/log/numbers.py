"""The numbers a run folder holds, checked where the log reads them: a run folder may be anyone's, and one number out
of range (``prompt_tokens: 10**400``, a ``NaN`` latency, an infinite reward) would end a report in an
``OverflowError`` or turn every mean it enters into nonsense.

`number_problem` walks a parsed JSON value and names the first number that is not finite or out of range, by its
field path (``retrieved[0].score``); `check_numbers` makes that one `InputError` naming the file and line. The log's
readers (`skilltransfer.log.folder`) call it on every ``results.jsonl`` line, ``config.json`` and trajectory before
validating them; the records' own types add the ranges of their fields (counts at least 0, shares within [0, 1]).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError

MAX_INT = 2**63 - 1
"""The largest integer magnitude a run folder may hold (what a 64-bit column of a table holds)."""
MAX_REAL = 1e15
"""The largest magnitude of a non-integer number (far above any latency, cost, score or reward; sums of many stay
finite)."""
MAX_COUNT = 10**15
"""The largest count a record may hold (tokens, steps, calls: a quadrillion)."""


def _shown(value: int | float) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} digits)"


def number_problem(value: Any, skip: frozenset[tuple[str, ...]] = frozenset()) -> str | None:
    """What is wrong with the first number in ``value`` (a parsed JSON value) that is not finite or out of range
    (`MAX_INT`, `MAX_REAL`), naming its field; None when every number is fine. ``skip``: key paths whose values are
    not the toolkit's numbers (an agent's output) and are not walked. Iterative: any depth."""
    stack: list[tuple[Any, tuple[str, ...], str]] = [(value, (), "")]
    while stack:
        item, keys, where = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_INT:
                return f"field {where or '(top)'}: {_shown(item)} is out of range (at most {MAX_INT:.3g} in size)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"field {where or '(top)'}: {item!r} is not a finite number"
            if abs(item) > MAX_REAL:
                return f"field {where or '(top)'}: {_shown(item)} is out of range (at most {MAX_REAL:g} in size)"
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                path = (*keys, str(key))
                if path not in skip:
                    stack.append((child, path, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, list | tuple):
            for index in reversed(range(len(item))):
                stack.append((item[index], keys, f"{where}[{index}]"))
    return None


def check_numbers(value: Any, path: str | Path, line: int | None = None,
                  skip: frozenset[tuple[str, ...]] = frozenset()) -> Any:
    """``value`` when every number in it is fine (`number_problem`).

    Raises:
        InputError: naming the file (``path``), the line and the field.
    """
    problem = number_problem(value, skip)
    if problem is not None:
        raise InputError(f"{problem} (a run folder holds no such number; was it edited?)", path=path, line=line)
    return value
