"""The skills a run retrieved from, for the tables that score them (``utility_effects``): a run's own memory, a
frozen library (saved in the run's ``memory/`` as the stream used it), or a library beside its own memory
(``library_use: beside``: not saved with the run, so read again from ``config.library`` the way the stream read
it, with its snapshot, filter and planted distractors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skilltransfer.errors import InputError
from skilltransfer.memory.distractors import distractor_skills
from skilltransfer.memory.library import read_library
from skilltransfer.memory.snapshots import snapshot_library
from skilltransfer.report.runs import RunLog
from skilltransfer.skill import Skill


@dataclass
class RunLibrary:
    """The skills of a group of runs that can be scored, and why some could not be read."""

    skills: dict[str, Skill] = field(default_factory=dict)
    """By id, the runs' libraries and memories together."""
    why: list[str] = field(default_factory=list)
    """One phrase per library that could not be read again (``library /x not found ...``)."""


def _beside_library(run: RunLog) -> list[Skill]:
    """A ``library_use: beside`` run's library as its stream read it.

    Raises:
        InputError: the library (``config.library``) can no longer be read.
    """
    config = run.log.config
    assert config.library is not None
    path = Path(config.library)
    if not path.exists():
        raise InputError(f"library {config.library} (the run's config.library) not found from {Path.cwd()}: run "
                         "the report from the folder the run started in")
    if config.library_snapshot is not None:
        skills = snapshot_library(path, config.library_snapshot)
    else:
        skills = read_library(path, resource_bytes=config.library_resource_bytes).skills
    if config.library_filter is not None and run.log.library_utility is not None:
        kept = set(run.log.library_utility.kept)
        skills = [skill for skill in skills if skill.id in kept]
    return skills + (distractor_skills(config.distractors) if config.distractors else [])


def group_library(members: list[RunLog]) -> RunLibrary:
    """The skills the runs ``members`` retrieved from: each run's saved memory (its own skills, or the frozen
    library it ran with) and, beside its own memory, the library read again from its settings."""
    out = RunLibrary()
    for run in members:
        out.skills.update(run.skills)
        if run.reads_library and not run.frozen_library:
            try:
                out.skills.update({skill.id: skill for skill in _beside_library(run)})
            except InputError as exc:
                reason = str(exc)
                if reason not in out.why:
                    out.why.append(reason)
    return out
