"""Enforce the induction prompt's first abstraction rule for the names a goal states.

The rule ("drop instance-specific values ... write placeholders instead") is in the prompt; a small model still
writes skills such as "Retrieve Olga Nguyen's phone number" (embedded 1.5B model, apps starter stream), and the next
task, about another contact, then searched for Olga Nguyen. `mask_names` replaces every multi-word proper name of
the goal (runs of 2+ capitalised words, e.g. "Olga Nguyen", "Team Sync"), and each of its words on its own, with
``<name>``, and each file path of the goal (``data/astronomy``), also where it starts a longer path
(``data/astronomy/planets.csv`` -> ``<path>/planets.csv``), with ``<path>``: a datasci skill induced on astronomy
made the next task, on biomedical data, open ``data/astronomy/planets.csv``. A model that follows the rule is
unaffected. Switch: ``InductionConfig.mask_instance_names``.
"""

from __future__ import annotations

import re

PLACEHOLDER = "<name>"
PATH_PLACEHOLDER = "<path>"
_NAME_RUN = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b")
_PATH = re.compile(r"(?<![\w/.-])[\w.-]+(?:/[\w.-]+)+")


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


def instance_paths(goal: str) -> list[str]:
    """The file paths of ``goal`` (a token with a ``/``: ``data/astronomy``, ``data/crime/README.md``), longest
    first; a sentence's full stop is not part of a path."""
    return sorted({m.group(0).rstrip(".") for m in _PATH.finditer(goal)}, key=lambda p: (-len(p), p))


def mask_names(text: str, names: list[str]) -> str:
    """``text`` with each path (a name holding ``/``) replaced by `PATH_PLACEHOLDER`, also as the start of a longer
    path; then each other name, then each of its words (3+ letters), by `PLACEHOLDER` (whole words only)."""
    paths = sorted((n for n in names if "/" in n), key=len, reverse=True)
    names = [n for n in names if "/" not in n]
    for path in paths:
        text = re.sub(rf"(?<![\w/.-]){re.escape(path)}(?![\w-]|\.\w)", PATH_PLACEHOLDER, text)
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}\b", PLACEHOLDER, text)
    for word in sorted({w for name in names for w in re.split(r"[ -]", name) if len(w) >= 3}, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(word)}\b", PLACEHOLDER, text)
    return text
