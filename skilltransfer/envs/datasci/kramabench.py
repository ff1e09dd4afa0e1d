"""KramaBench's per-answer-type score, re-implemented from the benchmark's own scorer.

Upstream: KramaBench (github.com/mitdbg/Kramabench) at commit ``749634bef9e9d9396bc45a654c1cb7b29f57db9e``
(2026-02-26): ``benchmark/metrics.py``, ``benchmark/evaluator.py``, ``benchmark/fixtures/answer_type_fixtures.json``
and ``evaluate.py`` (whose total score averages ``success``, ``rae_score``, ``f1``, ``f1_approximate`` and
``llm_paraphrase``). The answer reaches each metric as the system returned it (no string cast), so the same rules
apply here to the JSON value the agent passed to ``complete_task``. Every score lies in [0, 1]:

- ``numeric_exact`` and ``string_exact`` (upstream ``success``): a string that reads as a number (after trimming
  and dropping one trailing ``%``: ``"45%"`` is 45) is a number. Two numbers score 1 when equal or, if either is
  a float, when the absolute difference is < 1e-6, the relative difference (to the expected value) < 1e-6, or the
  difference < 1e-4 times the larger magnitude (38.42 vs 38.421 scores 1); an expected 0 needs ``|answer| < 1e-6``.
  Two strings score 1 when equal after ``strip().lower()`` only. A number answering a non-numeric string scores 0;
  otherwise plain equality. ``"1,204"`` is not a number (0 against 1204).
- ``numeric_approximate`` (upstream ``rae_score``): ``1 / (1 + |answer - expected| / |expected|)``; a string answer
  is read by ``str_to_float`` (a trailing ``%`` divides by 100: ``"51.9%"`` is 0.519; nothing is trimmed first, so
  ``" 51.9% "`` is unreadable); anything unreadable, an expected 0, or a non-finite result scores 0 (upstream
  returns NaN for a NaN answer, which its aggregation counts as 0).
- ``list_exact`` (upstream ``f1``): F1 between the answer's items and the expected items, order ignored. A string
  answer is read as JSON, else as a Python literal (``ast.literal_eval``; upstream uses ``eval``), else split on
  commas. An expected string item matches an answer item equal after ``strip().lower()`` of ``str(item)``; an
  expected number matches a number (or numeric string) within relative error 1e-6.
- ``list_approximate`` (upstream ``f1_approximate``): the same F1, except that numeric items match within relative
  error <= 1 %, string items match when :func:`paraphrase` says so, and a string answer that is neither JSON nor a
  Python literal scores 0 (upstream has no comma fallback here).
- ``string_approximate``: upstream asks an LLM judge (gpt-5-mini, "do A and B mean the same thing?") and scores
  its yes/no. Deterministic fallback here, upstream's own ``string_bootstrap`` with the judge replaced by
  :func:`paraphrase`: 1 if :func:`paraphrase` holds, else ROUGE-1 F1 when character BLEU > 0.2, else 0
  (see ``textsim``).

Departures, on purpose: list items are matched **one-to-one** (a maximum matching). Upstream lets one answer item
satisfy several expected items, so an exact copy of an expected list that repeats an item scores below 1
(``[1, 1, 2]`` against itself: 0.8) while the list without the repeat scores 1; the scores agree whenever no answer
item could match two expected items. The LLM judge is replaced as above. Non-list answers to list questions score 0
(upstream raises or iterates characters / dict keys).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from skilltransfer.envs.datasci.textsim import char_bleu, rouge1_f
from skilltransfer.util import pyast

EXACT_RELATIVE = 1e-6
"""Relative (and absolute) difference under which two numbers are equal for ``success`` and ``f1``."""
ROUNDING_RELATIVE = 1e-4
"""``success`` also accepts a difference below this share of the larger magnitude (a rounded answer)."""
APPROX_RELATIVE = 0.01
"""``f1_approximate``: numeric items match within this relative error."""
BLEU_GATE = 0.2
"""``string_bootstrap``: below this character BLEU the partial credit is 0."""


def str_to_float(text: str) -> float:
    """Upstream's number reader: a trailing ``%`` strips every ``%`` and divides by 100; else Python's ``float``."""
    if text.endswith("%"):
        return float(text.strip("%")) / 100
    return float(text)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float)


def _as_number(value: Any) -> Any:
    """``success``'s reading: numbers stay, numeric strings (one trailing ``%`` dropped) become floats."""
    if isinstance(value, str):
        text = value.strip()
        text = text[:-1].strip() if text.endswith("%") else text
        try:
            return str_to_float(text)
        except ValueError:
            return value
    return value


def _numbers_equal(got: float, want: float) -> float:
    if got == want:
        return 1.0
    if not (isinstance(got, float) or isinstance(want, float)):
        return 0.0
    if want == 0:
        return float(abs(got) < EXACT_RELATIVE)
    try:
        diff = abs(got - want)
        return float(diff / abs(want) < EXACT_RELATIVE or diff < EXACT_RELATIVE
                     or diff < max(abs(got), abs(want)) * ROUNDING_RELATIVE)
    except OverflowError:
        return 0.0


def success(answer: Any, expected: Any) -> float:
    """``numeric_exact`` / ``string_exact``: 1.0 or 0.0."""
    got, want = _as_number(answer), _as_number(expected)
    if _is_number(got) and _is_number(want):
        return _numbers_equal(got, want)
    if isinstance(expected, str) and isinstance(answer, str):
        return float(answer.strip().lower() == expected.strip().lower())
    if isinstance(expected, str) and _is_number(answer):
        return 0.0
    return float(answer == expected)


def rae_score(answer: Any, expected: Any) -> float:
    """``numeric_approximate``: ``1 / (1 + relative absolute error)``."""
    try:
        got = str_to_float(answer) if isinstance(answer, str) else answer
        want = str_to_float(expected) if isinstance(expected, str) else expected
        score = 1 / (1 + abs(got - want) / abs(want))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return 0.0
    return float(score) if isinstance(score, float | int) and math.isfinite(score) else 0.0


def paraphrase(answer: str, expected: str) -> bool:
    """Deterministic stand-in for upstream's LLM paraphrase judge: the same words in the same order, ignoring case,
    punctuation and spacing. It never says yes to different words, so it is stricter than the judge."""
    return re.findall(r"\w+", answer.casefold()) == re.findall(r"\w+", expected.casefold())


def string_approximate(answer: Any, expected: Any) -> float:
    """``string_approximate``: upstream's ``string_bootstrap`` with :func:`paraphrase` as the judge."""
    got, want = str(answer), str(expected)
    if paraphrase(got, want):
        return 1.0
    return rouge1_f(got, want) if char_bleu(got, want) > BLEU_GATE else 0.0


def _read_list(answer: Any, *, comma_fallback: bool) -> list[Any] | None:
    if isinstance(answer, str):
        text = answer
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            try:
                answer = pyast.literal_eval(text.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                if not comma_fallback:
                    return None
                answer = [item.strip() for item in text.split(",") if item.strip()]
    if isinstance(answer, list | tuple | set | frozenset):
        return list(answer)
    return None


def _number_of(item: Any) -> float | None:
    if _is_number(item):
        return float(item)
    if isinstance(item, str):
        try:
            return str_to_float(item)
        except ValueError:
            return None
    return None


def _exact_item(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return want.strip().lower() == str(got).strip().lower()
    if _is_number(want):
        number = _number_of(got)
        return number is not None and abs(number - want) / max(abs(want), 1e-12) < EXACT_RELATIVE
    return bool(got == want)


def _approximate_item(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return paraphrase(str(got), want)
    if _is_number(want):
        number = _number_of(got)
        return number is not None and abs(number - want) / max(abs(want), 1e-12) <= APPROX_RELATIVE
    return bool(got == want)


def max_matching(expected: list[Any], answer: list[Any], match: Callable[[Any, Any], bool]) -> int:
    """Size of a maximum one-to-one matching between expected and answer items (Kuhn's augmenting paths)."""
    options = [[j for j, got in enumerate(answer) if match(got, want)] for want in expected]
    owner: dict[int, int] = {}
    for start in range(len(expected)):
        parent: dict[int, tuple[int, int | None]] = {}  # answer index -> (expected index, previous answer index)
        stack: list[tuple[int, int | None]] = [(start, None)]
        free: int | None = None
        while stack and free is None:
            i, via = stack.pop()
            for j in options[i]:
                if j in parent:
                    continue
                parent[j] = (i, via)
                if j not in owner:
                    free = j
                    break
                stack.append((owner[j], j))
        while free is not None:  # flip the augmenting path
            i, via = parent[free]
            owner[free] = i
            free = via
    return len(owner)


def _f1(answer: Any, expected: Any, match: Callable[[Any, Any], bool], *, comma_fallback: bool) -> float:
    want = _read_list(expected, comma_fallback=False)
    got = _read_list(answer, comma_fallback=comma_fallback)
    if want is None or got is None:
        return 0.0
    if not want:
        return float(not got)
    matched = max_matching(want, got, match)
    return 2 * matched / (len(want) + len(got)) if matched else 0.0


def list_f1(answer: Any, expected: Any) -> float:
    """``list_exact``: F1 over items, order ignored, items matched one-to-one."""
    if isinstance(answer, str) and isinstance(expected, str):
        return float(answer.strip().lower() == expected.strip().lower())
    return _f1(answer, expected, _exact_item, comma_fallback=True)


def list_f1_approximate(answer: Any, expected: Any) -> float:
    """``list_approximate``: F1 with 1 % numeric tolerance and :func:`paraphrase` for strings."""
    return _f1(answer, expected, _approximate_item, comma_fallback=False)


METRICS: dict[str, Callable[[Any, Any], float]] = {
    "numeric_exact": success,
    "string_exact": success,
    "numeric_approximate": rae_score,
    "list_exact": list_f1,
    "list_approximate": list_f1_approximate,
    "string_approximate": string_approximate,
}
"""Answer type -> KramaBench score in [0, 1]."""
