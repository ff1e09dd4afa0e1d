"""Skill library import/export: Anthropic-style SKILL.md packages, JSONL files, and saved memory folders.

A SKILL.md package is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines with ``name`` and
``description`` (required), optionally ``format`` (``text``/``code``), ``level``, ``id``, ``provenance``, ``usage``;
any other keys are kept in ``Skill.extra``. The markdown after the front matter is the body; a code skill's body may
be wrapped in one fenced ``python`` block (export writes it that way). A JSONL library has one Skill object per line
(``name``, ``description``, ``body`` required; ``format`` and the other Skill fields optional).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from skilltransfer.errors import InputError, read_text
from skilltransfer.skill import Skill
from skilltransfer.util.files import atomic_write_text, iter_jsonl

SKILL_FILE = "SKILL.md"
MANIFEST = "manifest.json"
SKILLS_JSONL = "skills.jsonl"
_FRONT_KEYS = ("id", "name", "description", "format", "level", "provenance", "usage")
_FENCE = re.compile(r"\A```(?:python|py)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def _validation_message(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(part) for part in err["loc"]) or "skill"
    return f"field {field!r}: {err['msg']}"


def _skill_from_dict(data: Any, path: Path, line: int | None) -> Skill:
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object, got {type(data).__name__}", path=path, line=line)
    for field in ("name", "description", "body"):
        if not isinstance(data.get(field), str) or (field != "body" and not data[field].strip()):
            raise InputError(f"missing or empty string field {field!r}", path=path, line=line)
    try:
        return Skill.model_validate(data)
    except ValidationError as exc:
        raise InputError(_validation_message(exc), path=path, line=line) from None


def read_jsonl(path: str | Path) -> list[tuple[Skill, str]]:
    """Parse a JSONL skill file.

    Returns:
        (skill, "file:line") pairs, in file order.
    """
    path = Path(path)
    out = []
    for number, raw in iter_jsonl(path):  # not splitlines: U+2028 etc. are data
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"broken JSON line: {exc.msg} (column {exc.colno})", path=path, line=number) from None
        out.append((_skill_from_dict(data, path, number), f"{path}:{number}"))
    return out


def parse_skill_md(path: str | Path) -> Skill:
    """Parse one SKILL.md file (front matter + markdown body) into a Skill."""
    path = Path(path)
    lines = read_text(path).replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise InputError("no YAML front matter (the file must start with a '---' line)", path=path, line=1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise InputError("front matter is not closed by a '---' line", path=path, line=1)
    try:
        front = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"invalid YAML front matter: {problem}", path=path, line=line) from None
    if not isinstance(front, dict):
        raise InputError("front matter must be a YAML mapping with name and description", path=path, line=2)
    for field in ("name", "description"):
        value = front.get(field)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"front matter lacks a non-empty string {field!r}", path=path, line=2)
    body = "\n".join(lines[end + 1:]).strip("\n")
    fmt = front.get("format", "text")
    if fmt == "code":
        fenced = _FENCE.match(body.strip())
        if fenced and "\n```" not in fenced.group(1):
            body = fenced.group(1)
    data: dict[str, Any] = {key: front[key] for key in _FRONT_KEYS if key in front}
    data["body"] = body
    data["extra"] = {str(key): value if isinstance(value, str) else json.dumps(value, default=str)
                     for key, value in front.items() if key not in _FRONT_KEYS}
    try:
        return Skill.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"front matter {_validation_message(exc)}", path=path, line=2) from None


def _check_unique(entries: list[tuple[Skill, str]], source: Path) -> list[Skill]:
    if not entries:
        raise InputError("library is empty (no skills found)", path=source)
    names: dict[str, str] = {}
    ids: dict[str, str] = {}
    for skill, where in entries:
        if skill.id in ids:
            raise InputError(f"duplicate skill id {skill.id!r} in {ids[skill.id]} and {where}")
        if skill.name in names:
            raise InputError(f"duplicate skill name {skill.name!r} in {names[skill.name]} and {where}")
        ids[skill.id] = names[skill.name] = where
    return [skill for skill, _ in entries]


def load_library(path: str | Path) -> list[Skill]:
    """Load skills from a folder of SKILL.md packages (recursive), a ``.jsonl`` file, or a saved memory folder.

    A saved memory folder (one with ``manifest.json``) is read from its ``skills.jsonl`` without the embedder.

    Raises:
        InputError: missing path, empty library, malformed file (naming file and line), duplicate ids or names.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("skill library not found", path=path)
    if path.is_dir():
        if (path / MANIFEST).is_file():
            skills_file = path / SKILLS_JSONL
            if not skills_file.is_file():
                raise InputError(f"memory folder has {MANIFEST} but no {SKILLS_JSONL}", path=path)
            return _check_unique(read_jsonl(skills_file), path)
        files = sorted(path.rglob(SKILL_FILE))
        if not files:
            hint = f" ({SKILLS_JSONL} without {MANIFEST}: not a saved memory)" if (path / SKILLS_JSONL).exists() else ""
            raise InputError(f"library is empty: no {SKILL_FILE} files found{hint}", path=path)
        return _check_unique([(parse_skill_md(file), str(file)) for file in files], path)
    if path.name == SKILL_FILE:
        return [parse_skill_md(path)]
    if path.suffix == ".jsonl":
        return _check_unique(read_jsonl(path), path)
    raise InputError("unsupported library: give a folder of SKILL.md packages, a .jsonl file or a memory folder",
                     path=path)


def skill_to_json(skill: Skill) -> str:
    """One compact JSON line for a skill (all fields)."""
    return json.dumps(skill.model_dump(mode="json"), ensure_ascii=False)


def export_jsonl(skills: Iterable[Skill], path: str | Path) -> Path:
    """Write skills as JSONL (one full Skill object per line), atomically."""
    path = Path(path)
    atomic_write_text(path, "".join(skill_to_json(skill) + "\n" for skill in skills))
    return path


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64] or "skill"


def render_skill_md(skill: Skill) -> str:
    """A SKILL.md document for one skill (front matter + body; code bodies in a python fence)."""
    front: dict[str, Any] = {"name": skill.name, "description": skill.description, "format": skill.format,
                             "level": skill.level, "id": skill.id}
    provenance = skill.provenance.model_dump(exclude_defaults=True)
    usage = skill.usage.model_dump(exclude_defaults=True)
    if provenance:
        front["provenance"] = provenance
    if usage:
        front["usage"] = usage
    for key, value in skill.extra.items():
        if key not in front:
            front[key] = value
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=10_000)
    if yaml.safe_load(head) != front:  # PyYAML mangles some line-break characters (e.g. U+0085) unless escaped
        head = yaml.safe_dump(front, sort_keys=False, allow_unicode=False, width=10_000)
    body = skill.body.strip("\n")
    if skill.format == "code":
        body = f"```python\n{body}\n```"
    return f"---\n{head}---\n\n{body}\n"


def export_skill_md(skills: Iterable[Skill], folder: str | Path) -> list[Path]:
    """Write each skill as ``folder/<slug of name>/SKILL.md`` (atomic per file; slugs made unique).

    Returns:
        The written SKILL.md paths.
    """
    folder = Path(folder)
    used: set[str] = set()
    written = []
    for skill in skills:
        slug = base = _slug(skill.name)
        counter = 2
        while slug in used:
            slug = f"{base}-{counter}"
            counter += 1
        used.add(slug)
        target = folder / slug / SKILL_FILE
        atomic_write_text(target, render_skill_md(skill))
        written.append(target)
    return written
