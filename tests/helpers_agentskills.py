"""Checks shared by the tests of what the toolkit writes as Agent Skills: every folder passes the reference validator
(``skills-ref``, the package behind ``agentskills validate``)."""

from __future__ import annotations

from pathlib import Path

from skills_ref import validate


def skill_folders(library: Path) -> list[Path]:
    """The folders holding a SKILL.md below ``library``."""
    return sorted(path.parent for path in library.rglob("SKILL.md"))


def assert_valid_agent_skills(library: Path, *, expected: int | None = None) -> list[Path]:
    """Every skill folder below ``library`` passes the reference validator (and there are ``expected`` of them)."""
    folders = skill_folders(library)
    assert folders, f"no SKILL.md below {library}"
    if expected is not None:
        assert len(folders) == expected
    problems = {str(folder): errors for folder in folders if (errors := validate(folder))}
    assert not problems, problems
    return folders
