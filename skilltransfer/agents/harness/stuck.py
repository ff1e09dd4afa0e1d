"""Stuck detection over one executor run: cheap comparisons of normalised actions and observations.

Small models fall into loops: the same failing code sent again and again, two failing actions alternating, or
replies without any code. The patterns (after OpenHands' stuck detector), checked after every step on the steps of
the current executor run only:

* ``repeated_error``: the last 3 actions are the same code and each raised the same error;
* ``repeated_action``: the last 4 actions are the same code with the same observation;
* ``alternation``: the last 6 steps alternate between two replies (A B A B A B, a reply without code counting as
  one) with the same observations;
* ``cycle``: the last 6 steps repeat a cycle of three different replies (A B C A B C) with the same observations;
* ``no_action``: the last 3 replies had no code block at all.

Code is compared as its tokens without comments and layout; observations after dropping an earlier stuck hint,
collapsing whitespace and masking memory addresses, timings and random hex ids (an access token from a fresh
login: an A-B loop of "log in wrongly", "log in rightly" gets a new token each time). The executor answers the
first detection with a hint appended to the observation and ends the (sub)task (exit status ``stuck``) when the very
next step repeats the hinted step (`repeats`: the model ignored the hint) or a pattern shows again after the hint.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from skilltransfer.log import ActionStep

_HINT = re.compile(r"\n\(stuck: .*\)\Z", re.DOTALL)
_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+\.\d+ ?s\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{12,}\b", re.IGNORECASE)

HINTS: dict[str, str] = {
    "repeated_error": "You have run the same code {n} times and it failed the same way each time; running it again "
                      "will fail again. Read the error message above, then change the code (another API, other "
                      "arguments, or look up the documentation).",
    "repeated_action": "You have run the same code {n} times with the same result. Use what it printed and move on to "
                       "the next step, or finish.",
    "alternation": "You are alternating between the same two actions and neither works. Stop, reread the task and the "
                   "errors, and try a different approach.",
    "cycle": "You are repeating the same three actions in a cycle and they do not get you further. Stop, reread the "
             "task and the errors, and try a different approach.",
    "no_action": "Your last {n} replies had no ```python code block, so nothing ran. Reply with a short thought and "
                 "exactly one ```python code block.",
}
"""The hint shown to the model for each pattern (``{n}`` is the run length)."""


@dataclass(frozen=True)
class Stuck:
    """A detected loop: the pattern's name, how many steps it spans, and the hint for the model."""

    pattern: str
    length: int

    @property
    def hint(self) -> str:
        return HINTS[self.pattern].format(n=self.length)


def normalise_code(code: str | None) -> str:
    """Code as its tokens without comments and layout ('' for a reply without code; collapsed whitespace for code
    that does not tokenize)."""
    if code is None:
        return ""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(code.split())
    return " ".join(tokens)


def normalise_observation(text: str) -> str:
    """An observation without a stuck hint, whitespace collapsed and volatile parts (addresses, timings, hex ids of 12+
    characters with letters and digits) masked."""
    return " ".join(_VOLATILE.sub("#", _HINT.sub("", text)).split())


def _same(steps: Sequence[ActionStep]) -> bool:
    codes = {normalise_code(s.action) for s in steps}
    observations = {normalise_observation(s.observation) for s in steps}
    return len(codes) == 1 and len(observations) == 1


def repeats(step: ActionStep, earlier: ActionStep) -> bool:
    """Whether ``step`` sent the same code (or again no code) as ``earlier`` and got the same observation."""
    return _same([step, earlier])


def detect(steps: Sequence[ActionStep]) -> Stuck | None:
    """The first pattern the tail of ``steps`` matches (see the module docs), or None."""
    if len(steps) >= 3 and all(s.action is None for s in steps[-3:]):
        return Stuck("no_action", 3)
    if len(steps) >= 3 and all(s.action is not None and s.error for s in steps[-3:]) and _same(steps[-3:]):
        return Stuck("repeated_error", 3)
    if len(steps) >= 4 and all(s.action is not None for s in steps[-4:]) and _same(steps[-4:]):
        return Stuck("repeated_action", 4)
    if len(steps) >= 6:
        evens, odds = steps[-6::2], steps[-5::2]
        if _same(evens) and _same(odds) and normalise_code(evens[0].action) != normalise_code(odds[0].action):
            return Stuck("alternation", 6)
        thirds = [steps[-6 + k::3] for k in range(3)]
        if all(_same(third) for third in thirds) and len({normalise_code(t[0].action) for t in thirds}) == 3:
            return Stuck("cycle", 6)
    return None
