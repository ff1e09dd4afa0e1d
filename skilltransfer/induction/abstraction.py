"""Enforce the induction prompt's first abstraction rule for the names a goal states.

The rule ("drop instance-specific values ... write placeholders instead") is in the prompt; a small model still
writes skills such as "Retrieve Olga Nguyen's phone number" (embedded 1.5B model, apps starter stream), and the next
task, about another contact, then searched for Olga Nguyen. `mask_names` replaces every multi-word proper name of
the goal (runs of 2+ capitalised words, e.g. "Olga Nguyen", "Team Sync"), and each of its words on its own, with
``<name>``. A model that follows the rule is unaffected. Switch: ``InductionConfig.mask_instance_names``.
"""

from __future__ import annotations

import re

PLACEHOLDER = "<name>"
_NAME_RUN = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b")


def instance_names(goal: str) -> list[str]:
    """The multi-word proper names of ``goal``, longest first; a run of 3+ capitalised words that starts a sentence
    loses its first word (a verb: "Call Olga Nguyen")."""
    names: set[str] = set()
    for match in _NAME_RUN.finditer(goal):
        words = match.group(0).split(" ")
        before = goal[: match.start()].rstrip()
        if (not before or before[-1] in ".!?:") and len(words) > 2:
            words = words[1:]  # "Call Olga Nguyen ..." starts a sentence with a verb
        names.add(" ".join(words))
    return sorted(names, key=lambda n: (-len(n), n))


def mask_names(text: str, names: list[str]) -> str:
    """``text`` with each name, then each of its words (3+ letters), replaced by `PLACEHOLDER` (whole words only)."""
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}\b", PLACEHOLDER, text)
    for word in sorted({w for name in names for w in re.split(r"[ -]", name) if len(w) >= 3}, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(word)}\b", PLACEHOLDER, text)
    return text
