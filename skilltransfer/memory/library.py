"""Skill library import/export: Anthropic-style SKILL.md packages, JSONL files, and saved memory folders.

A SKILL.md package is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines with ``name`` and
``description`` (required), optionally ``format`` (``text``/``code``), ``level``, ``id``, ``provenance``, ``usage``,
and the contracts ``inputs`` / ``outputs`` (text, or a list of strings read as a bulleted list); any other keys are
kept in ``Skill.extra``. The markdown after the front matter is the body; a code skill's body may be wrapped in one
fenced ``python`` block (export writes it that way). The package folder's other files are the skill's resources
(`skilltransfer.memory.package.read_resources`; files left out are listed in ``extra["resources_skipped"]``). A JSONL
library has one Skill object per line (``name``, ``description``, ``body`` required; ``format``, ``inputs``,
``outputs``, ``resources`` and the other Skill fields optional).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from skilltransfer.errors import InputError
from skilltransfer.memory.package import read_resources, write_package
from skilltransfer.skill import INSTRUCTION_FILE, Skill
from skilltransfer.util import untrusted
from skilltransfer.util.files import atomic_write_text, jsonl_lines, read_text
from skilltransfer.util.trees import files

SKILL_FILE = INSTRUCTION_FILE
MANIFEST = "manifest.json"
SKILLS_JSONL = "skills.jsonl"
_FRONT_KEYS = ("id", "name", "description", "format", "level", "provenance", "usage", "inputs", "outputs")
_CONTRACTS = ("inputs", "outputs")
MAX_SKILL_FILE_BYTES = 1 << 20
"""The largest SKILL.md read (front matter and body)."""
MAX_JSONL_BYTES = 256 << 20
"""The largest JSONL library read."""
MAX_LIBRARY_ENTRIES = 200_000
"""A library folder is searched for SKILL.md files through at most this many entries."""
SKIPPED_KEY = "resources_skipped"
"""``Skill.extra`` key listing the files of a package folder that were not imported as resources (with reasons)."""
_FENCE = re.compile(r"\A```(?:python|py)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


def check_replaceable(path: str | Path, *, what: str) -> Path:
    """Refuse to replace anything but a folder saved before (one with ``manifest.json``) or an empty folder.

    Raises:
        InputError: ``path`` is a file or a non-empty folder without ``manifest.json``.
    """
    path = Path(path)
    if path.exists() and not (path / MANIFEST).is_file() and (not path.is_dir() or any(path.iterdir())):
        raise InputError(f"refusing to overwrite: not a saved {what} (no {MANIFEST})", path=path)
    return path


def replace_folder(path: str | Path, write: Callable[[Path], None], *, what: str) -> Path:
    """Write a saved folder atomically: ``write`` fills a temp sibling folder, which is then swapped in by renames.

    Args:
        path: the folder to (re)write; an existing one must hold ``manifest.json`` (a folder saved before) or be empty.
        write: fills the folder it is given.
        what: names the kind of folder in the refusal ("skill memory", "skill graph").

    Raises:
        InputError: ``path`` exists and is a file or a non-empty folder without ``manifest.json``.
    """
    path = check_replaceable(path, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = path.parent / f".{path.name}.tmp-{tag}"
    old = path.parent / f".{path.name}.old-{tag}"
    tmp.mkdir()
    try:
        write(tmp)
        if path.exists():
            os.rename(path, old)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


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


def read_jsonl(path: str | Path, *, root: str | Path | None = None) -> list[tuple[Skill, str]]:
    """Parse a JSONL skill file (read through `skilltransfer.util.untrusted`: a regular file of at most
    ``MAX_JSONL_BYTES``, each line at most ``untrusted.MAX_DEPTH`` deep; with ``root``, ``path`` is relative to it
    and no link below it is followed).

    Returns:
        (skill, "file:line") pairs, in file order.
    """
    shown = Path(root) / path if root is not None else Path(path)
    out = []
    text = read_text(path, what="skill library", root=root, max_bytes=MAX_JSONL_BYTES)
    for number, raw in jsonl_lines(text):  # not splitlines: U+2028 etc. are data
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"broken JSON line: {exc.msg} (column {exc.colno})", path=shown, line=number) from None
        except RecursionError:
            problem: str | None = f"nests more than {untrusted.MAX_DEPTH} levels deep"
        else:
            problem = untrusted.depth_problem(data)
        if problem is not None:
            raise InputError(f"not accepted: {problem}", path=shown, line=number)
        out.append((_skill_from_dict(data, shown, number), f"{shown}:{number}"))
    return out


def parse_skill_md(path: str | Path, *, root: str | Path | None = None) -> Skill:
    """Parse one SKILL.md file (front matter + markdown body) into a Skill.

    Read through `skilltransfer.util.untrusted`: a regular file of at most ``MAX_SKILL_FILE_BYTES``; the front
    matter is YAML without anchors/aliases, at most ``untrusted.MAX_DEPTH`` deep. With ``root``, ``path`` is relative
    to it and no link below it is followed (a library folder's packages).
    """
    shown = Path(root) / path if root is not None else Path(path)
    text = read_text(path, what=SKILL_FILE, root=root, max_bytes=MAX_SKILL_FILE_BYTES)
    path = shown
    lines = text.replace("\r\n", "\n").split("\n")
    if not lines or lines[0].strip() != "---":
        raise InputError("no YAML front matter (the file must start with a '---' line)", path=path, line=1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise InputError("front matter is not closed by a '---' line", path=path, line=1)
    try:
        front = untrusted.parse_yaml("\n".join(lines[1:end]), path, first_line=2)
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"{exc.reason.replace('invalid YAML', 'invalid YAML front matter', 1)}",
                         path=exc.shown) from None
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
    for key in _CONTRACTS:
        if key in data:
            data[key] = _contract_text(data[key], key, path)
    data["body"] = body
    data["resources"], skipped = read_resources(path.parent)
    data["extra"] = {str(key): value if isinstance(value, str) else json.dumps(value, default=str)
                     for key, value in front.items() if key not in _FRONT_KEYS}
    if skipped:
        data["extra"][SKIPPED_KEY] = "; ".join(skipped)
    try:
        return Skill.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"front matter {_validation_message(exc)}", path=path, line=2) from None


def _contract_text(value: Any, key: str, path: Path) -> str:
    """A contract from front matter: text as is, a list of strings as a bulleted list."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(f"- {item}" for item in value)
    raise InputError(f"front matter {key!r} must be text or a list of strings", path=path, line=2)


def _check_unique(entries: list[tuple[Skill, str]], source: Path, *, names_too: bool = True) -> list[Skill]:
    if not entries:
        raise InputError("library is empty (no skills found)", path=source)
    names: dict[str, str] = {}
    ids: dict[str, str] = {}
    for skill, where in entries:
        if skill.id in ids:
            raise InputError(f"duplicate skill id {skill.id!r} in {ids[skill.id]} and {where}")
        if names_too and skill.name in names:
            raise InputError(f"duplicate skill name {skill.name!r} in {names[skill.name]} and {where}")
        ids[skill.id] = names[skill.name] = where
    return [skill for skill, _ in entries]


def load_library(path: str | Path) -> list[Skill]:
    """Load skills from a folder of SKILL.md packages (recursive), a ``.jsonl`` file, or a saved memory folder.

    A saved memory folder (one with ``manifest.json``) is read from its ``skills.jsonl`` without the embedder, as the
    memory holds it: skills that share a name are kept (a memory tells skills apart by id; two tasks may give one name
    to two different procedures).

    Raises:
        InputError: missing path, empty library, malformed file (naming file and line), duplicate ids, or duplicate
            names outside a saved memory.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("skill library not found", path=path)
    if path.is_dir():
        if (path / MANIFEST).is_file():
            skills_file = path / SKILLS_JSONL
            if not skills_file.is_file():
                raise InputError(f"memory folder has {MANIFEST} but no {SKILLS_JSONL}", path=path)
            return _check_unique(read_jsonl(SKILLS_JSONL, root=path), path, names_too=False)
        found, left = files(path, max_entries=MAX_LIBRARY_ENTRIES)  # no link followed, any depth
        refused = [item for item in left if item.split(" (", 1)[0].rsplit("/", 1)[-1] == SKILL_FILE]
        if refused:
            raise InputError(f"{refused[0]}: a {SKILL_FILE} must be a regular file", path=path)
        packages = [name for name in found if name.rsplit("/", 1)[-1] == SKILL_FILE]
        if not packages:
            hint = f" ({SKILLS_JSONL} without {MANIFEST}: not a saved memory)" if (path / SKILLS_JSONL).exists() else ""
            raise InputError(f"library is empty: no {SKILL_FILE} files found{hint}", path=path)
        return _check_unique([(parse_skill_md(name, root=path), str(path / name)) for name in packages], path)
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
    for key in _CONTRACTS:
        if getattr(skill, key):
            front[key] = getattr(skill, key)
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


def package_files(skill: Skill) -> dict[str, str]:
    """The files of a skill's package: ``SKILL.md`` and the resources (relative path -> text)."""
    return {SKILL_FILE: render_skill_md(skill), **skill.resources}


def export_skill_md(skills: Iterable[Skill], folder: str | Path) -> list[Path]:
    """Write each skill as ``folder/<slug of name>/SKILL.md`` plus its resource files (atomic per file; slugs made
    unique; files already in a package folder are left in place).

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
        for name, text in package_files(skill).items():
            atomic_write_text(folder / slug / name, text)
        written.append(folder / slug / SKILL_FILE)
    return written


def package_dirname(name: str) -> str:
    """The folder name of a skill's package: the skill name itself when it is a plain file name
    (letters, digits, ``._-``, at most 64 characters), else its slug."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name) and ".." not in name:
        return name
    return _slug(name)


def materialize_skill(skill: Skill, base: str | Path, folder: str = "skills", *, dirname: str | None = None) -> Path:
    """Write a skill's package (SKILL.md and resources) into ``base/folder/<dirname>/``, made afresh, without
    following any link below ``base`` (`skilltransfer.memory.package.write_package`): for a package placed in an
    episode workspace the agent can write to.

    Args:
        skill: the skill.
        base: a trusted, existing folder (the workspace).
        folder: the folder below ``base`` that holds packages.
        dirname: the package folder's name (default `package_dirname` of the skill's name).

    Returns:
        The package folder.

    Raises:
        PackageWriteError: the package could not be written (one-line reason).
    """
    return write_package(Path(base), [folder, dirname or package_dirname(skill.name)], package_files(skill))
