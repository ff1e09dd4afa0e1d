"""Selection as data (issue 55): which skills a task was shown, which it picked, and which were right.

A task's **candidates** are its ``retrieved`` skills (`RetrievedSkill`: each with its ``rank`` in its retrieval and
its cosine ``score``; the skills the harness showed, after any masking). Its **picks** (`SkillPick`) are the skills
the agent chose out of what it was shown, in the order it chose them:

- ``load``: a ``load_skill("name")`` of a skill (agent skills; inline skills shown as cards);
- ``read_file``: a ``read_skill_file("name", path)`` (progressive disclosure; a subagent reading its own skill);
- ``subagent``: a ``run_skill("name", ...)`` of a skill (not of a group);
- ``call``: a code skill's function ran (the sandbox's count, ``ActionStep.skill_calls``, as ``retrieved[].ran``);
- ``followed``: a text skill shown whole (``inline``) whose API calls the task then made in order (following share
  >= `USED_SHARE`, as ``retrieved[].followed``): a skill in full view has no act of loading, so following it is its
  pick.

Each pick carries the rank and score of the retrieval that showed it (the latest one before the pick that listed
it; None for a skill the agent reached otherwise: a whole library's listing, an opened group). The **right skills**
of a task (``TaskRecord.relevant_skills``), where known when it ran: the task's own metadata
(``relevant_skills``: names or ids), else the frozen library's skills induced from that very task (provenance);
``report --labels FILE`` gives them for any run.

`picks_from_steps` derives the picks from a task's typed steps; it reads the log's own step types only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from skilltransfer.log.steps import ActionStep, RetrievalStep, Step

PickKind = Literal["load", "read_file", "subagent", "call", "followed"]
PICK_KINDS: tuple[PickKind, ...] = ("load", "read_file", "subagent", "call", "followed")
_ACTION_KINDS: dict[str, PickKind] = {"load_skill": "load", "read_skill_file": "read_file", "run_skill": "subagent"}


class SkillPick(BaseModel):
    """One skill the agent picked (module docstring)."""

    skill_id: str
    name: str
    kind: PickKind
    rank: int | None = None
    """1-based rank of the skill in the retrieval that showed it; None when no retrieval of the task listed it."""
    score: float | None = None
    """That retrieval's cosine of the skill (None with ``rank``)."""
    step: int | None = None
    """The executor step of the pick (None for ``followed``: a share over the task's steps)."""
    subtask_index: int | None = None


class LibraryDraw(BaseModel):
    """The library one task chose from when a stream grows it per task (``library_size``, docs/selection.md)."""

    size: int
    """Skills in the task's library (its right skills and the near misses drawn for them)."""
    requested: int
    """The ``library_size`` asked for (``size`` is smaller when the pool ran out)."""
    right: int
    """Right skills of the task in it."""
    in_band: int
    """Near misses whose cosine to a right skill lies in the band."""
    nn_cosine: float | None = None
    """Confusability: the largest description cosine between a right skill and another skill of the task's library
    (None without a right skill or another skill)."""


def _shown_at(retrievals: Sequence[tuple[int, RetrievalStep]], position: int,
              skill_id: str) -> tuple[int | None, float | None, int | None]:
    """(rank, score, subtask) of ``skill_id`` in the latest retrieval before ``position`` that listed it, else in any
    retrieval of the task; (None, None, None) when none did."""
    before = [r for r in retrievals if r[0] < position] or list(retrievals)
    for _, step in reversed(before):
        for rank, hit in enumerate(step.skills, start=1):
            if hit.get("id") == skill_id:
                return rank, float(hit.get("score", 0.0)), step.subtask_index
    return None, None, None


def picks_from_steps(steps: Sequence[Step], followed: Sequence[tuple[str, str, float | None]] = (),
                     *, used_share: float = 0.5) -> list[SkillPick]:
    """The task's picks, in the order the agent made them (module docstring).

    Args:
        steps: the task's typed steps, in order (a subagent's steps included).
        followed: (skill id, name, following share) of each retrieved text skill, from ``retrieved``.
        used_share: the share at which a followed skill counts as picked.
    """
    retrievals = [(i, s) for i, s in enumerate(steps) if isinstance(s, RetrievalStep)]
    names = {hit.get("id"): str(hit.get("name", "")) for _, r in retrievals for hit in r.skills}
    out: list[SkillPick] = []
    for position, step in enumerate(steps):
        if not isinstance(step, ActionStep):
            continue
        action = step.skill_action or {}
        kind = _ACTION_KINDS.get(str(action.get("action")))
        skill_id = action.get("skill_id")
        if kind is not None and isinstance(skill_id, str):
            rank, score, _ = _shown_at(retrievals, position, skill_id)
            out.append(SkillPick(skill_id=skill_id, name=str(action.get("target", "")), kind=kind, rank=rank,
                                 score=score, step=step.index, subtask_index=step.subtask_index))
        for called, count in step.skill_calls.items():
            if count >= 1:
                rank, score, _ = _shown_at(retrievals, position, called)
                out.append(SkillPick(skill_id=called, name=names.get(called, called), kind="call", rank=rank,
                                     score=score, step=step.index, subtask_index=step.subtask_index))
    seen: set[str] = set()
    for skill_id, name, share in followed:
        if share is not None and share >= used_share and skill_id not in seen:
            seen.add(skill_id)
            rank, score, subtask = _shown_at(retrievals, len(steps), skill_id)
            out.append(SkillPick(skill_id=skill_id, name=name, kind="followed", rank=rank, score=score,
                                 subtask_index=subtask))
    return out


def first_pick(picks: Sequence[SkillPick]) -> SkillPick | None:
    """The task's first pick (the routing decision the selection metrics judge), None when it picked nothing."""
    return picks[0] if picks else None
