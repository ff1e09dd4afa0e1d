"""Whether a trajectory followed a retrieved text skill (issue 39 §2): the share of the skill's API calls, in order,
that the trajectory made after retrieving it.

A skill's calls are the ``apis.<app>.<function>(`` names in its body, in order of first mention (a repeated name
counts once). The trajectory's calls are the same names in the code it ran after the retrieval, in order. The
following share is the length of their longest common subsequence divided by the number of the skill's calls: 1 when
the trajectory called every API the skill names in the skill's order (other calls in between are allowed), 0 when it
called none of them. A skill that names no API call has no share (None): following cannot be told from its text.
A skill is **used** when its share is at least `skilltransfer.log.USED_SHARE` (the record's ``used``).

Assumptions: the skill's procedure is its API calls (true of the envs' workflow notes, which name ``apis.*``
functions); a call the agent makes without having read the skill counts too (a task whose only route is that API
is "following" by necessity): compare with the same share for skills retrieved but not shown (masking) to see it.
Code skills are not measured here: whether their function ran is the sandbox's record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

API_CALL = re.compile(r"\b(apis(?:\s*\.\s*[A-Za-z_]\w*)+)\s*\(")


def api_calls(text: str) -> list[str]:
    """The ``apis.*`` calls named in ``text``, in order (whitespace around dots removed)."""
    return [re.sub(r"\s+", "", m.group(1)) for m in API_CALL.finditer(text)]


def skill_calls(body: str) -> list[str]:
    """A skill's calls: each distinct name once, in order of first mention."""
    return list(dict.fromkeys(api_calls(body)))


def following_share(skill: Sequence[str], trajectory: Sequence[str]) -> float | None:
    """LCS(skill, trajectory) / len(skill); None when the skill names no call."""
    if not skill:
        return None
    previous = [0] * (len(trajectory) + 1)
    for name in skill:
        row = [0]
        for j, call in enumerate(trajectory, start=1):
            row.append(previous[j - 1] + 1 if name == call else max(previous[j], row[j - 1]))
        previous = row
    return previous[-1] / len(skill)
