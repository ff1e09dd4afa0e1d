"""What a run's records add up to, counted once for every reader: its transfer events (`transfer_events`, the one
definition ``show``, ``view``, ``report`` and ``export`` count), each task's best retrieval of a skill and the skills
it induced (which the viewer's task and skill pages list), its cost and a coordinated run's totals."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from skilltransfer.log import InducedSkill, RetrievedSkill, TaskRecord
from skilltransfer.memory.distractors import DISTRACTOR_SOURCE

WITHIN_RUN = "within-run"
"""A transfer event of a skill an earlier task of the same run induced."""
LIBRARY = "library"
"""A transfer event of a skill from a frozen library: another run's memory or a library the run was given."""


@dataclass(frozen=True)
class TransferEvent:
    """A task retrieved a skill that an earlier task of the same run induced (``kind`` within-run), or a skill from
    the run's frozen library (``kind`` library); `transfer_events` is the definition."""

    target_position: int
    target_task_id: str
    target_success: bool
    skill_name: str
    source_position: int | None
    """Within-run: the stream position of the task that induced the skill; library: None (the skill came from
    outside this run's stream)."""
    source_task_id: str | None
    """Within-run: the inducing task; library: the task the skill names as its source in the run it was induced in
    (None when it names none, e.g. a hand-written library)."""
    skill_id: str = ""
    score: float = 0.0
    """The retrieval's best score in the target task (its subtasks may retrieve the skill more than once)."""
    kind: str = WITHIN_RUN
    """`WITHIN_RUN` or `LIBRARY`."""
    source: str = ""
    """Library events: the library (`StreamConfig.library_event_source`); within-run events: ""."""


def best_retrievals(hits: Iterable[RetrievedSkill]) -> dict[str, RetrievedSkill]:
    """Skill id -> its best-scoring retrieval among ``hits`` (one task's: its subtasks may retrieve a skill more
    than once), in first-retrieval order; of equal scores, the first."""
    best: dict[str, RetrievedSkill] = {}
    for hit in hits:
        if hit.skill_id not in best or hit.score > best[hit.skill_id].score:
            best[hit.skill_id] = hit
    return best


def induced_skills(record: TaskRecord) -> Iterator[tuple[str, InducedSkill]]:
    """(skill id, induction) for each skill the task put in memory: one it added, or one it merged into (both the
    new skill's id and its target's), in the task's order."""
    for induction in record.induced:
        for induced_id in (induction.skill_id, induction.target_id):
            if induction.status in ("added", "merged") and induced_id is not None:
                yield induced_id, induction


def transfer_events(records: list[TaskRecord], library: str | None = None) -> list[TransferEvent]:
    """The transfer events of a run: the one definition that ``show``, ``view``, ``report`` and ``export`` count
    (docs/metrics.md, "transfer event").

    One event per (task, skill) where the task retrieved

    * a skill that an *earlier* task of the same run induced (added, or merged into; the source is the first such
      task): a **within-run** event; a skill induced and retrieved within one task is none;
    * a skill of the run's frozen library (``library``: its config's `library_event_source`; another run's memory or a
      library it was given), i.e. one no task of this run induced: a **library** event, source the library (and the
      skill's own source task, when it records one). A planted distractor (``distractors``, source
      ``distractor/...``) is none: it is noise added to the library, not a skill anyone induced or curated. Beside
      the run's own growing memory (``library_use: beside``) each retrieved skill records its ``source``: only a
      ``library`` one can be a library event (a skill the task itself induced is none).

    In stream order; a skill retrieved by several subtasks of one task counts once (at its best score). Without
    ``library`` (a growing memory, or an older caller), only within-run events. The outcome of the target task is
    recorded, not required (the paper's Fig. 6: a skill induced earlier is retrieved later).
    """
    induced_by: dict[str, TaskRecord] = {}
    events: list[TransferEvent] = []
    for record in sorted(records, key=lambda r: r.position):
        counted = best_retrievals(
            hit for hit in record.retrieved
            if hit.skill_id in induced_by or (library is not None and hit.source != "memory"
                                              and not (hit.source_task_id or "").startswith(DISTRACTOR_SOURCE)))
        for skill_id, hit in counted.items():
            source = induced_by.get(skill_id)
            if source is not None:
                events.append(TransferEvent(record.position, record.task_id, record.success, hit.name,
                                            source.position, source.task_id, skill_id, hit.score))
            else:
                events.append(TransferEvent(record.position, record.task_id, record.success, hit.name, None,
                                            hit.source_task_id, skill_id, hit.score, LIBRARY, library or ""))
        for induced_id, _ in induced_skills(record):
            induced_by.setdefault(induced_id, record)
    return events


def run_cost(records: Sequence[TaskRecord]) -> float | None:
    """The records' summed ``cost_usd`` (None when none has one: the model had no price)."""
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
    return round(sum(costs), 6) if costs else None


def coordination_totals(records: list[TaskRecord]) -> dict[str, int]:
    """Totals over a coordinated run's tasks: plans written/replayed/fallback, nodes and completed nodes, violated and
    unverified constraints, tasks a plan node submitted (metaskill) and nodes that never ran (empty when no task was
    coordinated)."""
    rows = [r.coordination for r in records if r.coordination is not None]
    if not rows:
        return {}
    return {"tasks": len(rows), "plans_written": sum(c.plan_written for c in rows),
            "plans_replayed": sum(not c.plan_written for c in rows),
            "plan_fallbacks": sum(c.plan_fallback is not None for c in rows), "nodes": sum(c.nodes for c in rows),
            "completed_nodes": sum(c.completed_nodes for c in rows),
            "violated_constraints": sum(c.violated_constraints for c in rows),
            "unverified_constraints": sum(c.unverified_constraints for c in rows),
            "submitted_by_node": sum(c.submitted_by not in (None, "finish", "host") for c in rows),
            "not_run_nodes": sum(c.not_run_nodes for c in rows)}
