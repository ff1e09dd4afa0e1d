"""Enforce the induction prompt's first abstraction rule for the names a goal states.

The rule ("drop instance-specific values ... write placeholders instead") is in the prompt; a small model still
writes skills such as "Retrieve Olga Nguyen's phone number" (embedded 1.5B model, apps starter stream), and the next
task, about another contact, then searched for Olga Nguyen. `mask_names` replaces every multi-word proper name of
the goal (runs of 2+ capitalised words, e.g. "Olga Nguyen", "Team Sync"), and each of its words on its own, with
``<name>``, and each file path of the goal (``data/astronomy``), also where it starts a longer path
(``data/astronomy/planets.csv`` -> ``<path>/planets.csv``), with ``<path>``: a datasci skill induced on astronomy
made the next task, on biomedical data, open ``data/astronomy/planets.csv``. `instance_values` finds the task's
other values — its quoted phrases, the strings its trajectory shows quoted that it states as words ("keyboard", a
cell of the sheet), its stand-alone numbers of 3+ digits that the trajectory uses (2090) — and `mask_values` replaces
them, quoted or bare, with ``<value>``: the 1.5B inducer named a skill ``update_revenue_for_keyboard`` with
``.index('keyboard')`` in its body, and the next two excel tasks, about other rows, looked up 'keyboard'. A model that
follows the rule is unaffected. Switch: ``InductionConfig.mask_instance_names``.
"""

from __future__ import annotations

import re

PLACEHOLDER = "<name>"
PATH_PLACEHOLDER = "<path>"
VALUE_PLACEHOLDER = "<value>"
_NAME_RUN = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)+\b")
_PATH = re.compile(r"(?<![\w/.-])[\w.-]+(?:/[\w.-]+)+")
_QUOTED = re.compile(r"'([^'\n]{2,80})'|\"([^\"\n]{2,80})\"")
_ALONE_NUMBER = r"(?<![\w.:/-]){}(?![\w:/-]|\.\d)"
"""A number standing alone: not part of a word, date, time, path or decimal."""
_ALONE_WORDS = r"(?<![\w']){}(?![\w'])"
"""A phrase as whole words (not inside a word or a possessive)."""
_NUMBER = re.compile(_ALONE_NUMBER.format(r"\d{3,}"))


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


def instance_values(task: str, trajectory: str, docs: str) -> list[str]:
    """The values of ``task`` that a skill should not carry, longest first: each quoted phrase of ``task``; each
    string that ``trajectory`` shows quoted (a cell, a subject, an argument) and ``task`` states as whole words; each
    stand-alone number of 3+ digits of ``task`` that ``trajectory`` also shows. A phrase that is a word of ``docs``
    (a field name such as 'subject') is no instance value, nor is a path or a multi-word proper name
    (`instance_paths`, `instance_names` cover those)."""
    def quoted(text: str) -> set[str]:
        return {(m.group(1) or m.group(2)).strip() for m in _QUOTED.finditer(text)}

    documented = {w.lower() for w in re.findall(r"[A-Za-z_]+", docs)}
    values = {v for v in quoted(task) | {q for q in quoted(trajectory) if _alone(q).search(task)}
              if any(c.isalpha() for c in v) and "/" not in v and v.lower() not in documented}
    values -= set(instance_names(task))
    values |= {n for n in _NUMBER.findall(task) if _alone(n).search(trajectory)}
    return sorted(values, key=lambda v: (-len(v), v))


def _alone(value: str) -> re.Pattern[str]:
    """``value`` standing alone: a number as `_ALONE_NUMBER`, anything else as `_ALONE_WORDS`."""
    return re.compile((_ALONE_NUMBER if value.isdigit() else _ALONE_WORDS).format(re.escape(value)))


def mask_values(text: str, values: list[str], *, identifier: bool = False) -> str:
    """``text`` with each of ``values``, quoted (the quotes too) or as whole words, replaced by `VALUE_PLACEHOLDER`;
    with ``identifier`` (a skill's name) also each whole segment of a snake_case or hyphenated name, in any case
    (``update_revenue_for_keyboard`` -> ``update_<value>_for_<value>``)."""
    for value in sorted(values, key=len, reverse=True):
        escaped = re.escape(value)
        text = _alone(value).sub(VALUE_PLACEHOLDER, re.sub(rf"'{escaped}'|\"{escaped}\"", VALUE_PLACEHOLDER, text))
        if identifier:
            segment = escaped.replace("\\ ", "_")
            text = re.sub(rf"(?<![A-Za-z0-9]){segment}(?![A-Za-z0-9])", VALUE_PLACEHOLDER, text, flags=re.IGNORECASE)
    return text
