"""Export of any library as an Agent Skills folder: one folder per skill, named by the format's name rule, holding a
``SKILL.md`` that passes the reference validator and the skill's files (`skilltransfer.memory.agentskills`).

* A skill read from a package folder (``Skill.package``) keeps its files: each is copied byte for byte from the
  folder it was read from, at the same relative path and with the permission bits it had (an executable script stays
  executable), after checking that it still has the size and SHA-256 of the manifest (a file that changed, vanished
  or became a link stops the export, naming it); what its folder holds that is not part of the package (links, FIFOs,
  version-control folders, files past the caps) is named by `skilltransfer.memory.package.not_in_package_summary`.
  Its ``SKILL.md`` keeps its body byte for byte. Its front matter is kept as the library had it, changed only by
  additions under ``metadata``: ``skilltransfer.id``, and the toolkit's entries for what the skill gained since it
  was read (usage counts, a measured effect; not the defaults ``text``/``task``, which the file did not state) —
  when the reference validator takes the result (`skilltransfer.memory.agentskills.skill_md_problems`). Otherwise
  (a flow-style YAML list, a description over 1,024 characters, a key the format does not allow, a name that is not
  the folder's, a skill renamed on reading because its name repeats) the front matter is written anew from the
  skill's fields, as for any other skill, and the export names the skill with the validator's reasons
  (`ExportedSkill.rewritten`). A skill that differs from its file (its body, description, contracts) or uses the
  toolkit's older dialect is written like any other skill.
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
    front_matter,
    is_format_name,
    read_metadata,
    skill_md_problems,
    split_skill_md,
    toolkit_metadata,
)
from skilltransfer.skill import INSTRUCTION_FILE, Package, Skill, with_name
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
    rewritten: list[str] = field(default_factory=list)
    """Why the library's front matter was written anew (the validator's reasons; its body kept byte for byte)."""
    copied: int = 0
    """Files copied byte for byte from its package folder."""
    written: int = 0
    """Resource files written from the skill's text (skills without a package folder)."""
    problems: list[str] = field(default_factory=list)
    """What the reference validator refuses in the ``SKILL.md`` written (none, by the rules above)."""


@dataclass
class ExportReport:
    """An export: where, and one `ExportedSkill` per skill."""

    out: Path
    skills: list[ExportedSkill]

    def lines(self) -> list[str]:
        """One line per skill whose front matter was written anew for the validator (its reasons), and per skill the
        validator refuses as written."""
        lines = [f"{item.folder}: front matter written anew, the library's is refused by the format: "
                 f"{'; '.join(item.rewritten)} (body kept byte for byte)" for item in self.skills if item.rewritten]
        return lines + [f"{item.folder}: refused by the format: {'; '.join(item.problems)}" for item in self.skills
                        if item.problems]


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
    raw: str
    """The file as the library has it."""
    renamed: bool = False
    """The skill was renamed on reading (its name repeats in the library): the front matter is to be written anew."""

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
    if source is not None and source.name != skill.name:
        source = with_name(source, skill.name)
        if all(getattr(source, key) == getattr(skill, key) for key in _COMPARED):
            return KeptSkillMd(raw, front, raw, renamed=True)
        return None
    if source is None or any(getattr(source, key) != getattr(skill, key) for key in _COMPARED):
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
        return KeptSkillMd(raw, front, raw)
    merged = {**front, "metadata": {**(meta if isinstance(meta, dict) else {}), **additions}}
    return KeptSkillMd(_with_additions(raw, front, additions) or _redumped(raw, merged), merged, raw)


_COMPARED = ("id", "name", "description", "body", "format", "inputs", "outputs")


def _pieces(raw: str) -> tuple[list[str], int, str]:
    """A SKILL.md's lines with their ends, the index of the line closing its front matter, and its line end."""
    pieces = re.split(r"(?<=\n)", raw)
    close = next(i for i in range(1, len(pieces)) if pieces[i].strip() == "---")
    return pieces, close, "\r\n" if pieces[0].endswith("\r\n") else "\n"


def rewritten_skill_md(raw: str, skill: Skill, folder: str) -> str:
    """``raw`` (a SKILL.md with front matter) with its front matter written anew from ``skill``'s fields for the
    folder ``folder`` (`skilltransfer.memory.agentskills.front_matter`), the body byte for byte."""
    return _redumped(raw, front_matter(skill, folder))


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
        if item is not None and not item.renamed and is_format_name(item.name) and item.name not in taken:
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
            text = kept.text
            refused = skill_md_problems(text, name)
            if refused or kept.renamed:  # the reasons as the library's own file has them (its line numbers)
                report.rewritten = skill_md_problems(kept.raw, name) or refused or [
                    f"the skill is read as {skill.name!r} (its name repeats in the library)"]
                text = rewritten_skill_md(kept.raw, skill, name)
        else:
            text = render_agent_skill(skill, name)
        writer.write(f"{name}/{INSTRUCTION_FILE}", text.encode("utf-8"), mode)
        report.problems = skill_md_problems(text, name)
        copied: set[str] = set()
        if skill.package is not None:
            for item in skill.package.files:
                data = _read_source(skill.package, item.path, item.size, item.sha256,
                                    f"skill {skill.name!r}, file {item.path!r}")
                writer.write(f"{name}/{item.path}", data, item.mode)
                copied.add(item.path)
        for path, resource in skill.resources.items():
            if path not in copied:
                writer.write(f"{name}/{path}", resource.encode("utf-8"))
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
