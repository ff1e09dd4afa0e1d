"""Export of any library as an Agent Skills folder: one folder per skill, named by the format's name rule, holding a
``SKILL.md`` that passes the reference validator and the skill's files (`skilltransfer.memory.agentskills`).

* A skill read from a package folder (``Skill.package``) keeps its files: each is copied byte for byte from the
  folder it was read from, at the same relative path, after checking that it still has the size and SHA-256 of the
  manifest (a file that changed, vanished or became a link stops the export, naming it). Its ``SKILL.md`` is kept as
  the library had it, body untouched, the front matter changed only by additions under ``metadata``:
  ``skilltransfer.id``, and the toolkit's entries for what the skill gained since it was read (usage counts, a
  measured effect; not the defaults ``text``/``task``, which the file did not state) — unless the skill differs
  from its file (then it is written like any other skill) or its front matter uses the toolkit's older dialect
  (then it is converted). A kept front matter the validator refuses on its own account (a name or description the
  library gave it) is kept as it is and reported (`ExportedSkill.problems`).
* Any other skill (induced, from JSONL or a memory) is written from its fields: the front matter of
  `skilltransfer.memory.agentskills.front_matter`, the body (a code skill's in a ``python`` fence), and its
  resources as files.

Writing never leaves the target: it is made fresh, every folder below it is entered without following a link and
every file is created exclusively (``O_EXCL | O_NOFOLLOW``). `export_library` writes into a temp sibling folder and
renames it into place at the end, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.memory.agentskills import (
    MAX_SKILL_FILE_BYTES,
    OLD_KEYS,
    PREFIX,
    dump_front_matter,
    folder_names,
    format_problems,
    front_matter,
    is_format_name,
    read_metadata,
    split_skill_md,
    toolkit_metadata,
)
from skilltransfer.skill import INSTRUCTION_FILE, Package, Skill
from skilltransfer.util.trees import remove_tree

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_SPEC_EXTRA = ("license", "compatibility", "allowed-tools", "metadata")
_FENCE = re.compile(r"\A```(?:python|py)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


@dataclass
class ExportedSkill:
    """What the export did with one skill."""

    name: str
    """The skill's (toolkit) name."""
    folder: str
    """Its folder in the export (the format's name)."""
    kept: bool
    """Its ``SKILL.md`` is the library's, front matter only added to under ``metadata``."""
    copied: int = 0
    """Files copied byte for byte from its package folder."""
    written: int = 0
    """Resource files written from the skill's text (skills without a package folder)."""
    problems: list[str] = field(default_factory=list)
    """What the reference validator refuses in a kept front matter (the library's own name or description)."""


@dataclass
class ExportReport:
    """An export: where, and one `ExportedSkill` per skill."""

    out: Path
    skills: list[ExportedSkill]

    def lines(self) -> list[str]:
        """One line per skill whose kept front matter the validator refuses."""
        return [f"{item.folder}: kept as the library has it, which the format refuses: {'; '.join(item.problems)}"
                for item in self.skills if item.problems]


class PackageChanged(InputError):
    """A package file is no longer what the library held when read (changed, gone, a link now)."""


def _code_body(body: str) -> str:
    return f"```python\n{body.strip(chr(10))}\n```"


def render_agent_skill(skill: Skill, folder: str) -> str:
    """The ``SKILL.md`` the toolkit writes for ``skill`` in the folder ``folder``: front matter, blank line, body."""
    body = _code_body(skill.body) if skill.format == "code" else skill.body.strip("\n")
    return f"---\n{dump_front_matter(front_matter(skill, folder))}---\n\n{body}\n"


def _read_source(package: Package, relative: str, size: int | None, sha256: str, what: str) -> bytes:
    """The bytes of a package file from the folder it was read from, checked against the manifest."""
    shown = Path(package.folder) / relative
    try:
        data = untrusted.read_bytes(relative, root=package.folder,
                                    max_bytes=size if size is not None else MAX_SKILL_FILE_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise PackageChanged(f"{what}: {exc.reason}; the library changed since it was read (read it again)",
                             path=shown) from None
    if (size is not None and len(data) != size) or hashlib.sha256(data).hexdigest() != sha256:
        raise PackageChanged(f"{what}: its content changed since the library was read (read it again)", path=shown)
    return data


def _source_skill(skill: Skill, front: dict[str, Any], lines: list[str], end: int) -> Skill | None:
    """The skill its own SKILL.md gives (with ``skill``'s package), or None when it cannot be built."""
    fields, extra, problems = read_metadata(front)
    if problems:
        return None
    body = "\n".join(lines[end + 1:]).strip("\n")
    if fields.get("format", "text") == "code":
        fenced = _FENCE.match(body.strip())
        if fenced and "\n```" not in fenced.group(1):
            body = fenced.group(1)
    try:
        return Skill.model_validate({"name": front.get("name"), "description": front.get("description"), **fields,
                                     "body": body, "extra": extra, "package": skill.package,
                                     "resources": skill.resources})
    except ValueError:
        return None


def _with_additions(raw: str, front: dict[str, Any], additions: dict[str, str]) -> str | None:
    """``raw`` (a SKILL.md) with ``additions`` under ``metadata``, the rest of the file byte for byte: appended to
    a block ``metadata:`` mapping, or as a new ``metadata`` key at the end of the front matter; None when the front
    matter would then not read back as ``front`` plus the additions."""
    pieces, close, newline = _pieces(raw)
    meta = front.get("metadata")
    expected = {**front, "metadata": {**(meta if isinstance(meta, dict) else {}), **additions}}
    if meta is None:
        block = dump_front_matter({"metadata": additions})
        insert_at = close
    elif isinstance(meta, dict) and meta:
        at = next((i for i in range(1, close) if re.fullmatch(r"metadata:[ \t]*\r?\n?", pieces[i])), None)
        nxt = next((i for i in range(at + 1, close) if pieces[i].strip()), None) if at is not None else None
        if at is None or nxt is None:
            return None
        indent = pieces[nxt][: len(pieces[nxt]) - len(pieces[nxt].lstrip(" "))]
        if not indent:
            return None
        block = "".join(f"{indent}{line}\n" for line in dump_front_matter(additions).splitlines())
        insert_at = at + 1
    else:
        return None
    text = "".join([*pieces[:insert_at], block.replace("\n", newline), *pieces[insert_at:]])
    split = split_skill_md(text)
    if split is None or split[1] != close + block.count("\n"):
        return None
    try:
        parsed = untrusted.parse_yaml("\n".join(split[0][1:split[1]]), "SKILL.md")
    except untrusted.UntrustedFileError:
        return None
    return text if parsed == expected else None


@dataclass
class KeptSkillMd:
    """The library's own SKILL.md of a skill, with the toolkit's additions under ``metadata``."""

    text: str
    front: dict[str, Any]
    """Its front matter, parsed."""

    @property
    def name(self) -> str:
        return str(self.front.get("name"))


def kept_skill_md(skill: Skill) -> KeptSkillMd | None:
    """The library's own ``SKILL.md`` of ``skill`` with the toolkit's missing entries added under ``metadata``; None
    when the skill is to be written from its fields instead (no package, the older dialect, or the skill differs
    from its file).

    Raises:
        PackageChanged: the file changed since it was read.
    """
    package = skill.package
    if package is None:
        return None
    data = _read_source(package, INSTRUCTION_FILE, None, package.instruction_sha256, f"skill {skill.name!r}")
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    split = split_skill_md(raw)
    if split is None:
        return None
    lines, end = split
    try:
        front = untrusted.parse_yaml("\n".join(lines[1:end]), "SKILL.md")
    except untrusted.UntrustedFileError:
        return None
    if not isinstance(front, dict) or any(key in front for key in OLD_KEYS):
        return None
    source = _source_skill(skill, front, lines, end)
    if source is None or any(getattr(source, key) != getattr(skill, key) for key in
                             ("id", "name", "description", "body", "format", "inputs", "outputs")):
        return None
    if any(source.extra.get(key) != skill.extra.get(key) for key in _SPEC_EXTRA):
        return None
    name, description = str(front["name"]), str(front["description"])
    had = toolkit_metadata(source, name=name, description=description)
    now = toolkit_metadata(skill, name=name, description=description)
    if any(now.get(key) != value for key, value in had.items()):
        return None  # a field the file gives has another value now: not an addition
    meta = front.get("metadata")
    present = {str(key) for key in meta} if isinstance(meta, dict) else set()
    additions = {key: value for key, value in now.items()  # the id, and what the skill gained since it was read
                 if key not in present and (key == f"{PREFIX}id" or had.get(key) != value)}
    if not additions:
        return KeptSkillMd(raw, front)
    merged = {**front, "metadata": {**(meta if isinstance(meta, dict) else {}), **additions}}
    return KeptSkillMd(_with_additions(raw, front, additions) or _redumped(raw, merged), merged)


def _pieces(raw: str) -> tuple[list[str], int, str]:
    """A SKILL.md's lines with their ends, the index of the line closing its front matter, and its line end."""
    pieces = re.split(r"(?<=\n)", raw)
    close = next(i for i in range(1, len(pieces)) if pieces[i].strip() == "---")
    return pieces, close, "\r\n" if pieces[0].endswith("\r\n") else "\n"


def _redumped(raw: str, front: dict[str, Any]) -> str:
    """``raw`` with its front matter written anew as ``front`` (comments and layout of the old one lost), the body
    byte for byte."""
    pieces, close, newline = _pieces(raw)
    return "".join([pieces[0], dump_front_matter(front).replace("\n", newline), *pieces[close:]])


class _Writer:
    """Creates folders and files below one folder the export made, never following a link."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def make_new(self, name: str) -> None:
        """Make the folder ``name`` right below the root; it must not exist."""
        fd = untrusted.open_folder(self.root)
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
        except FileExistsError:
            raise InputError("exists already; export into a new folder", path=self.root / name) from None
        finally:
            os.close(fd)

    def write(self, relative: str, data: bytes, mode: int | None = None) -> None:
        """Create the file ``relative`` holding ``data``, with the permission bits ``mode`` (default ``0o644``)."""
        parts = untrusted.parts_inside(relative, self.root / relative)
        fd = untrusted.make_folder(self.root, "/".join(parts[:-1]))
        try:
            out = os.open(parts[-1], _NEW_FILE_FLAGS, 0o600, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            os.fchmod(out, 0o644 if mode is None else mode & 0o777)  # not the umask's: the library's mode
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)


def _folders(skills: Sequence[Skill], kept: Sequence[KeptSkillMd | None]) -> list[str]:
    """Each skill's folder: a kept SKILL.md's own name when it is valid (first come), else the name rule."""
    chosen: list[str | None] = [None] * len(skills)
    taken: set[str] = set()
    for index, item in enumerate(kept):
        if item is not None and is_format_name(item.name) and item.name not in taken:
            chosen[index] = item.name
            taken.add(item.name)
    rest = iter(folder_names([s.name for s, c in zip(skills, chosen, strict=True) if c is None], taken=taken))
    return [name if name is not None else next(rest) for name in chosen]


def write_agent_skills(skills: Sequence[Skill], folder: str | Path) -> list[ExportedSkill]:
    """Write ``skills`` as Agent Skills into ``folder`` (made if missing), one new sub-folder each.

    Raises:
        InputError: a skill's sub-folder exists already. PackageChanged: a package file changed since its library was
            read.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    writer = _Writer(folder)
    out = []
    kept_files = [kept_skill_md(skill) for skill in skills]
    for skill, kept, name in zip(skills, kept_files, _folders(skills, kept_files), strict=True):
        writer.make_new(name)
        report = ExportedSkill(skill.name, name, kept is not None)
        mode = skill.package.instruction_mode if skill.package is not None else None
        if kept is not None:
            writer.write(f"{name}/{INSTRUCTION_FILE}", kept.text.encode("utf-8"), mode)
            report.problems = format_problems(kept.front, name)
        else:
            writer.write(f"{name}/{INSTRUCTION_FILE}", render_agent_skill(skill, name).encode("utf-8"), mode)
        copied: set[str] = set()
        if skill.package is not None:
            for item in skill.package.files:
                data = _read_source(skill.package, item.path, item.size, item.sha256,
                                    f"skill {skill.name!r}, file {item.path!r}")
                writer.write(f"{name}/{item.path}", data, item.mode)
                copied.add(item.path)
        for path, text in skill.resources.items():
            if path not in copied:
                writer.write(f"{name}/{path}", text.encode("utf-8"))
                report.written += 1
        report.copied = len(copied)
        out.append(report)
    return out


def export_library(skills: Iterable[Skill], out: str | Path) -> ExportReport:
    """Export ``skills`` as an Agent Skills folder ``out`` (new, or an empty folder), atomically: written into a
    temp sibling folder, renamed into place at the end; on any failure nothing is left.

    Raises:
        InputError: ``out`` exists and is not an empty folder, or is a link. PackageChanged: see `write_agent_skills`.
    """
    out = Path(out).expanduser()
    if out.is_symlink():
        raise InputError("--out is a symbolic link; give a new folder", path=out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("--out exists and is not an empty folder; give a new folder", path=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    os.mkdir(tmp, 0o755)
    try:
        written = write_agent_skills(list(skills), tmp)
        if out.exists():
            out.rmdir()
        os.rename(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_tree(tmp)
        raise
    return ExportReport(out, written)
