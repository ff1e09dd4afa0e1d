"""Scoring of datasci answers: KramaBench's score as the reward, and the project's success rule on top of it.

The reward is KramaBench's own per-answer-type score in [0, 1] (see ``kramabench`` for the rules and the upstream
commit they follow). KramaBench reports those scores, not pass/fail; the paper reports task success, so success is a
separate, configurable rule: **success iff score >= the threshold of the task's answer type**. Defaults
(``DEFAULT_THRESHOLDS``): 1.0 for every type (an exact answer, every list item and nothing else, the same words),
except ``numeric_approximate``: ``1 / (1 + 0.01)``, i.e. a relative error of at most 1 %. A missing answer (``None``)
and an answer whose JSON exceeds ``MAX_ANSWER_CHARS`` score 0 (the second is a harness guard upstream lacks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.envs.datasci.kramabench import METRICS
from skilltransfer.errors import InputError
from skilltransfer.protocols import Check, Score

ANSWER_TYPES = tuple(METRICS)
NUMERIC_TOLERANCE = 0.01
"""Default success rule for ``numeric_approximate``: relative error at most 1 %."""
DEFAULT_THRESHOLDS: dict[str, float] = {kind: 1.0 for kind in ANSWER_TYPES} | {
    "numeric_approximate": 1 / (1 + NUMERIC_TOLERANCE)}
MAX_ANSWER_CHARS = 1_000_000


@dataclass(frozen=True)
class SuccessRule:
    """Success iff the KramaBench score reaches the threshold of the answer type."""

    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    """Answer type -> minimal score for success, in (0, 1]; types left out keep their default."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.thresholds) - set(ANSWER_TYPES))
        if unknown:
            raise InputError(f"success_thresholds: unknown answer type {unknown[0]!r}; expected one of "
                             f"{', '.join(ANSWER_TYPES)}")
        for kind, value in self.thresholds.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
                raise InputError(f"success_thresholds.{kind}: {value!r} is not a number in (0, 1]")
        object.__setattr__(self, "thresholds", DEFAULT_THRESHOLDS | {k: float(v) for k, v in self.thresholds.items()})

    def threshold(self, answer_type: str) -> float:
        """The minimal score for success on ``answer_type``."""
        return self.thresholds[answer_type]


DEFAULT_RULE = SuccessRule()


def score_answer(answer: Any, expected: Any, answer_type: str, *, rule: SuccessRule = DEFAULT_RULE) -> Score:
    """Score ``answer`` against ``expected``: reward = KramaBench score, success per ``rule``.

    Raises:
        ValueError: unknown ``answer_type``.
    """
    if answer_type not in METRICS:
        raise ValueError(f"unknown answer type {answer_type!r}; expected one of {', '.join(ANSWER_TYPES)}")
    if answer is None:
        return Score(0.0, False, (Check("an answer was given to complete_task", False, "answer is None"),))
    size = len(json.dumps(answer, default=str))
    if size > MAX_ANSWER_CHARS:
        return Score(0.0, False, (Check("the answer is at most 1,000,000 characters of JSON", False,
                                        f"{size} characters"),))
    value = METRICS[answer_type](answer, expected)
    threshold = rule.threshold(answer_type)
    ok = value >= threshold
    detail = f"got {_clip(answer)}; KramaBench {answer_type} score {value:.4g}, success needs >= {threshold:.4g}"
    return Score(value, ok, (Check(f"answer matches ({answer_type})", ok, detail),))


def _clip(answer: Any, limit: int = 200) -> str:
    text = repr(answer)
    return text if len(text) <= limit else text[:limit] + "…"
