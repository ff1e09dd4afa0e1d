"""Skill library import/export: Agent Skills folders (SKILL.md packages), JSONL files, and saved memory folders.

A SKILL.md package is a folder holding ``SKILL.md``: YAML front matter between ``---`` lines with ``name`` and
``description`` (required) and the toolkit's fields under ``metadata`` as ``skilltransfer.*`` entries, or at the top
level in the toolkit's older dialect (`skilltransfer.memory.agentskills`); the contracts ``inputs`` / ``outputs`` may
be text or a list of strings (a bulleted list). Other front-matter keys are kept in ``Skill.extra``. The markdown
after the front matter is the body; a code skill's body may be wrapped in one fenced ``python`` block. The package
folder's other files are the skill's package (`skilltransfer.memory.package.read_package`: every file hashed into
``Skill.package``, the text of those that fit ``library_resource_bytes`` loaded into ``Skill.resources``). A JSONL
library has one Skill object per line (``name``, ``description``, ``body`` required; ``format``, ``inputs``,
``outputs``, ``resources``, ``package`` and the other Skill fields optional).

`read_library` reads any library and reports, one line each, the skills of a folder that could not be read (they
are left out, never silently) and what of each package the agent is not shown: the commands that look at or convert
a library (``library show|export|organize|prune``) go on without those skills, saying so. `load_library` refuses a
library with an unreadable skill, in one line naming each: the commands that measure (``run``, ``grid``, ``score``)
run only on the library as it is. Export to an Agent Skills folder
is `skilltransfer.memory.export`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.memory.agentskills import MAX_SKILL_FILE_BYTES, read_metadata, split_skill_md
from skilltransfer.memory.layout import LibraryLayout, SkillSpot, find_skills
from skilltransfer.memory.package import (
    DEFAULT_RESOURCE_BYTES,
    MAX_SKIPPED_SHOWN,
    left_out_summary,
    not_in_package_summary,
    read_package,
    write_package,
)
from skilltransfer.skill import INSTRUCTION_FILE, Skill, resource_name_problem, with_name
from skilltransfer.util.files import atomic_write_text, jsonl_lines, read_text

SKILL_FILE = INSTRUCTION_FILE
MANIFEST = "manifest.json"
SKILLS_JSONL = "skills.jsonl"
_CONTRACTS = ("inputs", "outputs")
MAX_JSONL_BYTES = 256 << 20
"""The largest JSONL library read."""
MAX_LIBRARY_ENTRIES = 200_000
"""A library folder is searched for SKILL.md files through at most this many entries."""
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
    """Parse a JSONL skill file (read through `skilltransfer.untrusted`: a regular file of at most
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


def parse_skill_md(path: str | Path, *, root: str | Path | None = None,
                   resource_bytes: int = DEFAULT_RESOURCE_BYTES, lenient: bool = False,
                   shown: str | Path | None = None) -> Skill:
    """Parse one SKILL.md file (front matter + markdown body) and its package folder into a Skill.

    Read through `skilltransfer.untrusted`: a regular file of at most ``MAX_SKILL_FILE_BYTES``; the front
    matter is YAML without anchors/aliases, at most ``untrusted.MAX_DEPTH`` deep. With ``root``, ``path`` is relative
    to it and no link below it is followed (a library folder's packages). The folder's other files are read by
    `skilltransfer.memory.package.read_package` (``resource_bytes``: the text budget).

    With ``lenient``, a file the format refuses is read as a model would have meant it (`lenient_split`): front
    matter after a line of text (``[SKILL]``), front matter without ``---`` fences (the ``name:`` /
    ``description:`` lines at the top, up to the first blank line), or values YAML refuses (a plain value holding
    ``: ``) read as text. The skill records how in ``extra["lenient_read"]``.

    Args:
        shown: the file's path in messages (default ``root/path``).

    Raises:
        InputError: one line naming the file (and line) and what is wrong.
    """
    shown_path = Path(shown) if shown is not None else Path(root) / path if root is not None else Path(path)
    try:
        raw = untrusted.read_bytes(path, root=root, max_bytes=MAX_SKILL_FILE_BYTES, shown=shown_path)
        text = untrusted.decode_utf8(raw, shown_path)
    except untrusted.UntrustedFileError as exc:
        raise InputError(str(exc)) from None
    folder = Path(root) / Path(path).parent if root is not None else Path(path).parent
    how = ""
    try:
        front, body = _strict_split(text, shown_path)
    except InputError:
        if not lenient:
            raise
        loose = lenient_split(text)
        if loose is None:
            raise
        front, body, how = _lenient_front(loose, shown_path)
    for field in ("name", "description"):
        value = front.get(field)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"front matter lacks a non-empty string {field!r}", path=shown_path, line=2)
    fields, extra, problems = read_metadata(front)
    if problems:
        raise InputError(problems[0], path=shown_path, line=2)
    if how:
        extra[LENIENT_KEY] = how
    if fields.get("format", "text") == "code":
        fenced = _FENCE.match(body.strip())
        if fenced and "\n```" not in fenced.group(1):
            body = fenced.group(1)
    data: dict[str, Any] = {"name": front["name"], "description": front["description"], **fields}
    for key in _CONTRACTS:
        if key in data:
            data[key] = _contract_text(data[key], key, shown_path)
    data["body"] = body
    data["package"], data["resources"] = read_package(folder, text, raw, resource_bytes=resource_bytes)
    data["extra"] = extra
    try:
        return Skill.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"front matter {_validation_message(exc)}", path=shown_path, line=2) from None


def _strict_split(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md as the format has it.

    Raises:
        InputError: no front matter, not closed, not YAML, not a mapping.
    """
    split = split_skill_md(text)
    if split is None:
        if not text.replace("\r\n", "\n").split("\n")[0].strip() == "---":
            raise InputError("no YAML front matter (the file must start with a '---' line)", path=path, line=1)
        raise InputError("front matter is not closed by a '---' line", path=path, line=1)
    lines, end = split
    front = _parse_front("\n".join(lines[1:end]), path)
    return front, "\n".join(lines[end + 1:]).strip("\n")


def _parse_front(text: str, path: Path) -> dict[str, Any]:
    try:
        front = untrusted.parse_yaml(text, path, first_line=2)
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"{exc.reason.replace('invalid YAML', 'invalid YAML front matter', 1)}",
                         path=exc.shown) from None
    if not isinstance(front, dict):
        raise InputError("front matter must be a YAML mapping with name and description", path=path, line=2)
    return front


LENIENT_KEY = "lenient_read"
"""The ``Skill.extra`` key recording how a skill was read leniently."""
_KEY_LINE = re.compile(r"[A-Za-z_][\w.-]*:(?:[ \t]|$)")
_PLAIN_VALUE = re.compile(r"([A-Za-z_][\w.-]*):[ \t]+(?![\"'|>&*!%@`\[{#])(.*\S)[ \t]*")


@dataclass
class LenientSplit:
    """A SKILL.md the format refuses, as `lenient_split` reads it."""

    front: list[str]
    """The front-matter lines."""
    body: list[str]
    how: str
    """What was lenient ("" when only the values need reading as text)."""


def lenient_split(text: str) -> LenientSplit | None:
    """The front matter and body of a model-written SKILL.md the format refuses, or None when it has none either:
    front matter after at most two lines of text (``[SKILL]`` then ``---``), front matter opened by ``---`` but not
    closed, or no opening fence (the ``key: value`` lines at the top, up to the first blank line; a ``---`` line
    right after them is taken as the closing fence)."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    fence = next((i for i in range(start, min(start + 3, len(lines))) if lines[i].strip() == "---"), None)
    opened = fence is not None and not any(_KEY_LINE.match(line) for line in lines[start:fence])
    if fence is not None and opened:
        close = next((i for i in range(fence + 1, len(lines)) if lines[i].strip() == "---"), None)
        if close is not None:
            if fence == 0:
                return LenientSplit(lines[1:close], lines[close + 1:], "")
            skipped = fence - start
            return LenientSplit(lines[fence + 1:close], lines[close + 1:],
                                f"front matter after {skipped} line{'s' if skipped > 1 else ''} of text")
        start = fence + 1
    end = start
    while end < len(lines) and lines[end].strip() and lines[end].strip() != "---" and (
            _KEY_LINE.match(lines[end]) or (end > start and lines[end][:1] in " \t")):
        end += 1
    if end == start:
        return None
    after = end + 1 if end < len(lines) and lines[end].strip() == "---" else end
    how = "front matter not closed by a '---' line" if opened else "front matter without an opening '---' line"
    return LenientSplit(lines[start:end], lines[after:], how)


def _lenient_front(split: LenientSplit, path: Path) -> tuple[dict[str, Any], str, str]:
    """(front matter, body, how it was read) of a lenient split: the lines as YAML, else with the top-level plain
    values YAML misreads (holding ``: `` or `` #``) read as text, else with every top-level plain value read as text.

    Raises:
        InputError: the lines are no mapping even so.
    """
    how = split.how
    body = "\n".join(split.body).strip("\n")
    try:
        return _parse_front("\n".join(split.front), path), body, how
    except InputError as exc:
        first = exc
    for quote_all in (False, True):
        quoted = [_quoted(line, quote_all) for line in split.front]
        if quoted == split.front:
            continue
        try:
            front = _parse_front("\n".join(quoted), path)
        except InputError:
            continue
        keys = [line.split(":", 1)[0] for line, was in zip(quoted, split.front, strict=True) if line != was]
        text = f"values YAML refuses read as text ({', '.join(keys)})"
        return front, body, f"{how}; {text}" if how else text
    raise first


def _quoted(line: str, quote_all: bool) -> str:
    """A top-level ``key: value`` line with its plain value double-quoted (as text) when it holds ``: `` or `` #``
    (or always, with ``quote_all``); other lines as they are."""
    match = _PLAIN_VALUE.fullmatch(line)
    if match is None or not (quote_all or ": " in match.group(2) or " #" in match.group(2)):
        return line
    return f"{match.group(1)}: " + json.dumps(match.group(2), ensure_ascii=False)


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


@dataclass
class LibraryRead:
    """A library as read: its skills, one line per skill of a folder that could not be read, and what the folder's
    layout led to (folders and links looked in or not, names given to skills that share one)."""

    source: Path
    skills: list[Skill]
    unreadable: list[str] = dataclasses.field(default_factory=list)
    """``path: reason (skill not read)`` for each SKILL.md left out."""
    layout: LibraryLayout | None = None
    """A folder's layout (`skilltransfer.memory.layout.find_skills`); None for other libraries."""
    renamed: list[str] = dataclasses.field(default_factory=list)
    """One line per name several skills of the folder share (each read under its folder's path)."""

    def left_out(self) -> list[str]:
        """One line per skill that has files the agent is not shown, or entries outside its package
        (`skilltransfer.memory.package.left_out_summary`)."""
        return [f"{skill.name}: {line}" for skill in self.skills if skill.package is not None
                and (line := left_out_summary(skill.package)) is not None]

    def not_kept(self) -> list[str]:
        """One line per skill whose folder has entries that are not part of its package (an export does not copy
        them): what and why, in the words of `left_out`."""
        return [f"{skill.name}: {line}" for skill in self.skills if skill.package is not None
                and (line := not_in_package_summary(skill.package)) is not None]

    def lenient(self) -> list[str]:
        """One line per way skills were read only by the lenient reading (``Skill.extra["lenient_read"]``), naming
        them."""
        groups: dict[str, list[str]] = {}
        for skill in self.skills:
            if LENIENT_KEY in skill.extra:
                groups.setdefault(skill.extra[LENIENT_KEY], []).append(skill.name)
        return [f"{how} ({len(names)} skill{'s' if len(names) > 1 else ''}): {', '.join(names[:MAX_SKIPPED_SHOWN])}"
                + (f" and {len(names) - MAX_SKIPPED_SHOWN} more" if len(names) > MAX_SKIPPED_SHOWN else "")
                for how, names in groups.items()]

    def read_lines(self) -> list[str]:
        """What the read looked in and what it did not: the summary (skills read, in hidden folders, through links),
        then one line per link not followed, folder not looked in, name shared, skill read leniently."""
        files = len(self.skills) + len(self.unreadable)
        layout = self.layout
        if layout is None:
            return [f"read: {len(self.skills)} skills from {self.source}"]
        head = f"read: {len(self.skills)} skills of {files} {SKILL_FILE} files in {self.source}"
        hidden = layout.hidden()
        if hidden:
            head += (f"; {sum(hidden.values())} in hidden folders (" +
                     ", ".join(f"{name} {count}" for name, count in sorted(hidden.items())) + ")")
        through = sum(1 for spot in layout.spots if spot.through is not None)
        if through:
            head += f"; {through} through links"
        lines = [head, *(f"link followed: {line}" for line in layout.followed)]
        lines += [f"not read: {line}" for line in layout.not_followed]
        if layout.skipped:
            shown = ", ".join(layout.skipped[:MAX_SKIPPED_SHOWN])
            more = f" and {len(layout.skipped) - MAX_SKIPPED_SHOWN} more" if len(layout.skipped) > MAX_SKIPPED_SHOWN \
                else ""
            lines.append(f"not looked in: {shown}{more}")
        if layout.truncated:
            lines.append(f"not read: {layout.truncated}")
        lines += [f"renamed: {line}" for line in self.renamed]
        lines += [f"read leniently: {line}" for line in self.lenient()]
        return lines

    def layout_lines(self) -> list[str]:
        """`read_lines` when the folder is more than a plain folder of skills (hidden folders, links, folders not
        looked in, shared names, lenient reads); none otherwise."""
        lines = self.read_lines()
        layout = self.layout
        plain = len(lines) == 1 and (layout is None or not (layout.hidden() or layout.followed))
        return [] if plain else lines

    def notes(self) -> list[str]:
        """Every line a command prints about the read: the skills not read, what the layout led to
        (`layout_lines`), then what each package leaves out."""
        return [*self.unreadable, *self.layout_lines(), *self.left_out()]

    def all_read(self) -> LibraryRead:
        """This read, when every skill of the library could be read.

        Raises:
            InputError: one line naming each skill that could not be read (the first five, then how many more).
        """
        if not self.unreadable:
            return self
        shown = "; ".join(self.unreadable[:5])
        more = f"; and {len(self.unreadable) - 5} more" if len(self.unreadable) > 5 else ""
        if len(self.unreadable) == 1:
            raise InputError(f"{shown} (fix or remove it; library export writes the readable skills)")
        raise InputError(f"{len(self.unreadable)} skills could not be read: {shown}{more} (fix or remove them; "
                         "library export writes the readable skills)")


def read_library(path: str | Path, *, resource_bytes: int = DEFAULT_RESOURCE_BYTES,
                 lenient: bool = False) -> LibraryRead:
    """Read skills from a folder of SKILL.md packages (any depth and layout: `skilltransfer.memory.layout`), a
    ``.jsonl`` file, a single ``SKILL.md``, or a saved memory folder.

    A saved memory folder (one with ``manifest.json``) is read from its ``skills.jsonl`` without the embedder, as the
    memory holds it: skills that share a name are kept (a memory tells skills apart by id; two tasks may give one name
    to two different procedures). In a folder of packages, a ``SKILL.md`` that cannot be read (a link, a FIFO, bad
    front matter, too large...) is left out with one line in ``unreadable``; the others are read. Skills of one name
    in several folders are all read, each named by its folder's path below the library (`LibraryRead.renamed`).

    Args:
        path: the library.
        resource_bytes: the most bytes of text loaded from each package for the agent (``library_resource_bytes``).
        lenient: also read model-written SKILL.md files the format refuses (`parse_skill_md`), each recorded in
            ``Skill.extra["lenient_read"]`` (the setting ``library_front_matter: lenient``).

    Raises:
        InputError: missing path, a library with no skill that could be read (naming the first problem), a malformed
            JSONL or memory folder (naming file and line), duplicate ids or names in a JSONL file.
    """
    path = Path(path)
    if not path.exists():
        where = "" if path.is_absolute() else (
            f" (a relative path is read from the working directory, {Path.cwd()}: run from the folder it is relative"
            " to, or give the library's full path)")
        raise InputError(f"skill library not found{where}", path=path)
    if path.is_dir():
        if (path / MANIFEST).is_file():
            skills_file = path / SKILLS_JSONL
            if not skills_file.is_file():
                raise InputError(f"memory folder has {MANIFEST} but no {SKILLS_JSONL}", path=path)
            return LibraryRead(path, _check_unique(read_jsonl(SKILLS_JSONL, root=path), path, names_too=False))
        return _read_folder(path, resource_bytes=resource_bytes, lenient=lenient)
    if path.name == SKILL_FILE:
        return LibraryRead(path, [parse_skill_md(path, resource_bytes=resource_bytes, lenient=lenient)])
    if path.suffix == ".jsonl":
        return LibraryRead(path, _check_unique(read_jsonl(path), path))
    raise InputError("unsupported library: give a folder of SKILL.md packages, a .jsonl file or a memory folder",
                     path=path)


def _read_folder(path: Path, *, resource_bytes: int, lenient: bool) -> LibraryRead:
    """A folder of SKILL.md packages (see `read_library`)."""
    layout = find_skills(path, max_entries=MAX_LIBRARY_ENTRIES)
    unreadable = list(layout.refused)
    if not layout.spots and not unreadable:
        hint = f" ({SKILLS_JSONL} without {MANIFEST}: not a saved memory)" if (path / SKILLS_JSONL).exists() else ""
        links = f"; not read: {'; '.join(layout.not_followed[:5])}" if layout.not_followed else ""
        raise InputError(f"library is empty: no {SKILL_FILE} files found{hint}{links}", path=path)
    entries: list[tuple[Skill, SkillSpot]] = []
    first: InputError | None = None
    for spot in layout.spots:
        try:
            skill = parse_skill_md(spot.relative, root=spot.base, resource_bytes=resource_bytes, lenient=lenient,
                                   shown=path / spot.where / SKILL_FILE)
        except InputError as exc:
            first = first or exc
            unreadable.append(f"{exc} (skill not read)")
        else:
            entries.append((skill, spot))
    if not entries:
        if first is not None and len(unreadable) == 1:
            raise first
        raise InputError(f"no skill could be read ({len(unreadable)} {SKILL_FILE} files; the first: "
                         f"{unreadable[0]})", path=path)
    skills, renamed, refused = _distinct(entries, path)
    return LibraryRead(path, skills, [*unreadable, *refused], layout=layout, renamed=renamed)


def _distinct(entries: list[tuple[Skill, SkillSpot]], root: Path) -> tuple[list[Skill], list[str], list[str]]:
    """The skills of a folder with distinct names and ids: skills that share a name are each named by their folder's
    path below the library (a stable name: neither the order the skills are found in nor skills of other names change
    it); a skill whose id (its own ``skilltransfer.id``) another skill has already is not read.

    Returns:
        (the skills, one line per name given to several skills, one line per skill not read).
    """
    by_name: dict[str, list[int]] = {}
    for index, (skill, _) in enumerate(entries):
        by_name.setdefault(skill.name, []).append(index)
    skills: list[Skill] = []
    renamed: list[str] = []
    for name, indexes in by_name.items():
        if len(indexes) > 1:
            folders = [entries[index][1].where or "." for index in indexes]
            renamed.append(f"{name}: the name of {len(indexes)} skills, each read as its folder's path: "
                           f"{', '.join(folders)}")
    refused: list[str] = []
    ids: dict[str, str] = {}
    names: dict[str, str] = {}
    for skill, spot in entries:
        shown = str(root / spot.where / SKILL_FILE)
        if len(by_name[skill.name]) > 1 and spot.where:
            skill = with_name(skill, spot.where)
        if skill.id in ids or skill.name in names:
            what = f"id {skill.id!r}" if skill.id in ids else f"name {skill.name!r}"
            refused.append(f"{shown}: duplicate skill {what}, read from {ids.get(skill.id) or names[skill.name]} "
                           "(skill not read)")
            continue
        ids[skill.id] = names[skill.name] = shown
        skills.append(skill)
    return skills, renamed, refused


def load_library(path: str | Path, *, resource_bytes: int = DEFAULT_RESOURCE_BYTES) -> list[Skill]:
    """The skills of a library (`read_library`), refusing one in which a skill could not be read.

    Raises:
        InputError: see `read_library`; a skill of the folder could not be read (the first, and how many).
    """
    return read_library(path, resource_bytes=resource_bytes).all_read().skills


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
    """The SKILL.md of the package copy an agent reads in its workspace (`materialize_skill`): the toolkit's
    older dialect, its fields at the top level (front matter + body; code bodies in a python fence). Exports write
    the Agent Skills format instead (`skilltransfer.memory.export`)."""
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
    """Write each skill as an Agent Skill into ``folder`` (new or empty): ``folder/<format name>/SKILL.md`` plus
    its files (`skilltransfer.memory.export.write_agent_skills`; for a whole export at once, atomically, use
    `skilltransfer.memory.export.export_library`).

    Returns:
        The written SKILL.md paths.
    """
    from skilltransfer.memory.export import write_agent_skills

    folder = Path(folder)
    return [folder / item.folder / SKILL_FILE for item in write_agent_skills(list(skills), folder)]


def package_dirname(name: str) -> str:
    """The folder name of a skill's package: the skill name itself when it is a plain file name
    (letters, digits, ``._-``, at most 64 characters), else its slug."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name) and ".." not in name:
        return name
    return _slug(name)


MAX_PLACED_BYTES = 64 << 20
"""The most bytes of a skill's package files (beyond its text resources) copied into an agent's workspace."""


@dataclass
class PlacedSkill:
    """A skill's package as placed in an agent's workspace (`place_skill`)."""

    folder: Path
    more: list[str] = dataclasses.field(default_factory=list)
    """Package files placed beyond the text resources (binary files, text over the text budget)."""
    left_out: list[str] = dataclasses.field(default_factory=list)
    """``path (reason)`` for each package file not placed."""


def workspace_files(skill: Skill) -> tuple[dict[str, str | bytes], dict[str, int], list[str], list[str]]:
    """What of a skill goes into an agent's workspace: ``SKILL.md`` and its text resources, and the other files of
    its package (binary, over the text budget) copied byte for byte from the folder it was read from when they still
    have their manifest's hash, within ``MAX_PLACED_BYTES``; each with the mode it had in the library.

    Returns:
        (relative path -> text or bytes, relative path -> mode, the package files placed beyond the resources,
        ``path (reason)`` for each package file not placed).
    """
    files: dict[str, str | bytes] = dict(package_files(skill))
    package = skill.package
    if package is None:
        return files, {}, [], []
    modes = {item.path: item.mode for item in package.files if item.mode is not None}
    more: list[str] = []
    left: list[str] = []
    total = 0
    for item in package.files:
        if item.path in files:
            continue
        reason = resource_name_problem(item.path) and "a name an agent's file cannot have"
        if reason is None and total + item.size > MAX_PLACED_BYTES:
            reason = f"over the {MAX_PLACED_BYTES >> 20} MiB of package files a workspace copy holds"
        if reason is None:
            try:
                data = untrusted.read_bytes(item.path, root=package.folder, max_bytes=item.size)
            except untrusted.UntrustedFileError as exc:
                reason = f"changed since the library was read: {exc.reason}"
            else:
                if hashlib.sha256(data).hexdigest() != item.sha256:
                    reason = "changed since the library was read"
                else:
                    files[item.path] = data
                    more.append(item.path)
                    total += item.size
        if reason is not None:
            left.append(f"{item.path} ({reason})")
    return files, modes, more, left


def place_skill(skill: Skill, base: str | Path, folder: str = "skills", *, dirname: str | None = None
                ) -> PlacedSkill:
    """Write a skill's package into ``base/folder/<dirname>/``, made afresh, without following any link below
    ``base`` (`skilltransfer.memory.package.write_package`): for a package placed in an episode workspace the agent
    can write to. The files are `workspace_files`: the text resources, and the package's other files byte for byte,
    each with its mode (a script the library ships executable stays executable).

    Args:
        skill: the skill.
        base: a trusted, existing folder (the workspace).
        folder: the folder below ``base`` that holds packages.
        dirname: the package folder's name (default `package_dirname` of the skill's name).

    Raises:
        PackageWriteError: the package could not be written (one-line reason).
    """
    files, modes, more, left = workspace_files(skill)
    target = write_package(Path(base), [folder, dirname or package_dirname(skill.name)], files, modes)
    return PlacedSkill(target, more, left)


def materialize_skill(skill: Skill, base: str | Path, folder: str = "skills", *, dirname: str | None = None) -> Path:
    """The folder `place_skill` writes the skill's package into.

    Raises:
        PackageWriteError: the package could not be written (one-line reason).
    """
    return place_skill(skill, base, folder, dirname=dirname).folder
