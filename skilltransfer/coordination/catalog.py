"""The skill packages a plan may name: a name -> `Skill` map, and their sections in the prompts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.skill import Skill


def skill_catalog(skills: Iterable[Skill] | Mapping[str, Skill] | None) -> dict[str, Skill]:
    """Skill name -> skill; two skills with one name are refused (a plan names packages by name).

    Raises:
        InputError: a repeated name (both ids named).
    """
    if skills is None:
        return {}
    if isinstance(skills, Mapping):
        return dict(skills)
    out: dict[str, Skill] = {}
    for skill in skills:
        if skill.name in out and out[skill.name].id != skill.id:
            raise InputError(f"two skill packages are named {skill.name!r} ({out[skill.name].id}, {skill.id}); a plan "
                             "names packages by name")
        out[skill.name] = skill
    return out


def load_code_skills(episode: Any, skills: Sequence[Skill]) -> dict[str, str | None]:
    """Define the code skills among ``skills`` in the episode's namespace (later ones win a name clash).

    Returns:
        Skill id -> the load error (None when it loaded), for code skills only.
    """
    errors: dict[str, str | None] = {}
    for skill in skills:
        if skill.format == "code":
            observation = episode.load_code(skill.body)
            errors[skill.id] = observation.output if observation.error else None
    return errors
