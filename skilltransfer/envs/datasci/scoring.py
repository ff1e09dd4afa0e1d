"""KramaBench-style deterministic answer scoring by answer type.

- ``numeric_exact``: the answer parses to a number (``"1,204"``, ``" 12 "``, ``12.0`` all parse) equal to the
  expected one after rounding both to 6 decimals. Reward 1 or 0.
- ``numeric_approximate``: relative error ``e = |answer - expected| / max(|expected|, 1e-9)``. Success when
  ``e <= tolerance`` (per task, default 1%); reward 1.0 on success, else ``max(0, 1 - e)`` (partial credit that
  falls linearly with the relative error, in the spirit of KramaBench's relative-error score).
- ``string_exact``: equal after case folding, trimming, collapsing inner whitespace and dropping surrounding quotes.
- ``list_exact``: the answer is a list (or a comma/newline separated string); each item is normalised like
  ``string_exact`` (numbers like ``numeric_exact``). Success only on an exact match: the same sequence for ordered
  tasks, the same set for unordered ones. Partial credit otherwise: set F1 for unordered tasks; for ordered tasks
  ``(F1 + positional accuracy) / 2``, positional accuracy being the share of positions holding the expected item;
  a non-exact list never scores above 0.99 (e.g. the right items with one repeated).

A missing answer (``None``) always scores 0.
"""

from __future__ import annotations

import math
import re
from typing import Any

from skilltransfer.protocols import Check, Score

ANSWER_TYPES = ("numeric_exact", "numeric_approximate", "string_exact", "list_exact")
DEFAULT_TOLERANCE = 0.01


def parse_number(value: Any) -> float | None:
    """A float from a number or numeric string (commas, spaces, a trailing % allowed); None if it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, list | tuple) and len(value) == 1:
        return parse_number(value[0])
    text = str(value).strip().strip("'\"").replace(",", "").replace(" ", "").rstrip("%")
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def normalise_text(value: Any) -> str:
    """Case-folded, trimmed, whitespace-collapsed text; numbers in a canonical form."""
    number = parse_number(value) if not isinstance(value, str) or re.fullmatch(r"\s*[-+\d.,]+\s*", value) else None
    if number is not None:
        return f"{round(number, 6):g}"
    text = str(value).strip().strip("'\"").strip()
    return re.sub(r"\s+", " ", text).casefold()


def _as_items(value: Any) -> list[str]:
    if isinstance(value, str):
        text = value.strip().strip("[]")
        items: list[Any] = [part for part in re.split(r"[,\n;]", text) if part.strip()]
    elif isinstance(value, list | tuple | set):
        items = sorted(value, key=str) if isinstance(value, set) else list(value)
    else:
        items = [value]
    return [normalise_text(item) for item in items]


def _f1(got: list[str], expected: list[str]) -> float:
    got_set, exp_set = set(got), set(expected)
    common = len(got_set & exp_set)
    if not common:
        return 0.0
    precision, recall = common / len(got_set), common / len(exp_set)
    return 2 * precision * recall / (precision + recall)


def score_answer(answer: Any, expected: Any, answer_type: str, *, ordered: bool = False,
                 tolerance: float = DEFAULT_TOLERANCE) -> Score:
    """Score ``answer`` against ``expected`` (see the module docs for each answer type)."""
    if answer_type not in ANSWER_TYPES:
        raise ValueError(f"unknown answer type {answer_type!r}; expected one of {', '.join(ANSWER_TYPES)}")
    if answer is None:
        return Score(0.0, False, (Check("an answer was given to complete_task", False, "answer is None"),))
    requirement = f"answer matches ({answer_type})"
    if answer_type == "numeric_exact":
        got = parse_number(answer)
        ok = got is not None and round(got, 6) == round(float(expected), 6)
        return Score(float(ok), ok, (Check(requirement, ok, f"got {answer!r}"),))
    if answer_type == "numeric_approximate":
        got = parse_number(answer)
        if got is None:
            return Score(0.0, False, (Check(requirement, False, f"not a number: {answer!r}"),))
        error = abs(got - float(expected)) / max(abs(float(expected)), 1e-9)
        ok = error <= tolerance
        reward = 1.0 if ok else max(0.0, 1.0 - error)
        return Score(reward, ok, (Check(requirement, ok, f"got {got!r}, relative error {error:.4g}"),))
    if answer_type == "string_exact":
        ok = normalise_text(answer) == normalise_text(expected)
        return Score(float(ok), ok, (Check(requirement, ok, f"got {answer!r}"),))
    got_items, exp_items = _as_items(answer), _as_items(expected)
    ok = got_items == exp_items if ordered else set(got_items) == set(exp_items) and len(got_items) == len(
        set(got_items))
    if ok:
        reward = 1.0
    elif ordered:
        positional = sum(g == e for g, e in zip(got_items, exp_items, strict=False)) / max(len(got_items),
                                                                                            len(exp_items))
        reward = (_f1(got_items, exp_items) + positional) / 2
    else:
        reward = _f1(got_items, exp_items)
    detail = f"got {got_items}, {'ordered' if ordered else 'any order'}"
    return Score(min(reward, 1.0 if ok else 0.99), ok, (Check(requirement, ok, detail),))
