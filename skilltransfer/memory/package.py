"""Skill packages on disk: reading a package folder (the manifest of its files and the text the agent may be
shown), and writing a package into a folder that an agent may have tampered with.

Reading (`read_package`, used by ``load_library``). A package is every regular file under the folder, hidden ones
(``assets/.env.example``) included, except its ``SKILL.md``, version-control and cache folders (``.git``,
``__pycache__``, ``node_modules``: `skilltransfer.memory.layout.skip_reason`) and sub-folders holding their own
``SKILL.md`` (nested packages, loaded as skills of their own). Symbolic links are never followed. Each file is hashed
(SHA-256) into the skill's `Package` manifest with its permission bits, from which an export copies it byte for byte
and with its mode; what is not part of the package (links, FIFOs and other special files, version-control and cache
folders, names a manifest cannot hold, files past ``MAX_PACKAGE_FILE_BYTES``, ``MAX_PACKAGE_BYTES`` or
``MAX_PACKAGE_FILES``) is listed in ``Package.left_out``, one entry per path with its reason.

The text the agent may be shown (``Skill.resources``) is chosen from the package's UTF-8 text files within a
budget, ``resource_bytes`` (the setting ``library_resource_bytes``, default ``DEFAULT_RESOURCE_BYTES`` = 1 MiB), at
most ``MAX_RESOURCES`` files and ``MAX_RESOURCE_BYTES`` per file, in this priority (`load_order`):

1. the files ``SKILL.md`` names (a link or a path in its text, or a file name unique in the package), in the order
   of first mention;
2. then documents (``.md``, ``.txt``, ``.rst``, ...), then scripts (``scripts/`` and code files), then any other
   text; within each, shallower paths first, then smaller files, then by path.

Files are taken in that order while they fit; one that does not is left out and the next ones are still tried.
Every file left out says why in its manifest entry (``PackageFile.note``).

Writing (``write_package``, for episode workspaces): the target folder is made afresh below a trusted base folder;
every folder on the way is entered with ``O_NOFOLLOW`` relative to its parent's descriptor, and anything that is not
a real folder there (a link, a file, a FIFO) is removed, never followed, so nothing is written outside the base.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import os
import re
import stat
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from skilltransfer import untrusted
from skilltransfer.memory.layout import shown_path, skip_reason
from skilltransfer.skill import (
    INSTRUCTION_FILE,
    MAX_RESOURCE_BYTES,
    MAX_RESOURCES,
    MAX_RESOURCES_BYTES,
    Package,
    PackageFile,
    resource_name_problem,
)
from skilltransfer.util.trees import Entry, WalkLimits, remove_tree, walk

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
DEFAULT_RESOURCE_BYTES = MAX_RESOURCES_BYTES
"""Default of the setting ``library_resource_bytes``: the most bytes of text loaded from one package (1 MiB)."""
MAX_PACKAGE_FILES = 2000
"""The most files one package holds; reading a folder stops after this many (a SKILL.md atop a big tree)."""
MAX_EXAMINED = MAX_PACKAGE_FILES
"""Former name of `MAX_PACKAGE_FILES`."""
MAX_PACKAGE_FILE_BYTES = 256 << 20
"""The largest file a package holds (bigger ones are left out, not read)."""
MAX_PACKAGE_BYTES = 1 << 30
"""The most bytes one package holds in all."""
MAX_PACKAGE_PATH = 1024
"""The longest relative path (characters) a package file may have."""
MAX_SKIPPED_SHOWN = 20
"""At most this many left-out files are named in one line; the rest are counted."""
DOCUMENT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst", ".adoc", ".org"})
"""Text files of the second priority class: documents an agent reads."""
CODE_SUFFIXES = frozenset({".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".r", ".sql", ".ps1",
                           ".bat", ".lua", ".go", ".java", ".rs", ".c", ".h", ".cpp", ".php"})
"""Text files of the third priority class (with everything under ``scripts/``): code an agent runs."""
LINKED = "a symbolic link, not followed"
_PATH_CHAR = r"[\w./-]"


class PackageWriteError(OSError):
    """A skill package could not be written where asked (the folder changed under the writer, permissions...)."""


def package_path_problem(name: str) -> str | None:
    """Why ``name`` (a relative path found below a package folder) cannot be listed in a package manifest: not
    UTF-8, a control character, or longer than ``MAX_PACKAGE_PATH``. (The text the agent sees is further limited to
    names that pass `skilltransfer.skill.resource_name_problem`.)"""
    if any(0xD800 <= ord(char) <= 0xDFFF for char in name):
        return "a name that is not UTF-8"
    if any(unicodedata.category(char) == "Cc" for char in name):
        return "a name with a control character"
    if len(name) > MAX_PACKAGE_PATH:
        return f"a path longer than {MAX_PACKAGE_PATH} characters"
    return None


@dataclass
class _Found:
    """A package file met by the walk: its manifest entry and whether it is UTF-8 text within the per-file cap."""

    file: PackageFile
    text: bool


def _hash_open(entry: Entry, size: int) -> tuple[str, bool]:
    """(SHA-256, is UTF-8 text) of the file ``entry``, opened without following a link; the text test is made only
    for files within ``MAX_RESOURCE_BYTES``.

    Raises:
        OSError: it cannot be opened or read, is no longer a regular file, or changed size while read.
    """
    fd = os.open(entry.name, _READ_FLAGS, dir_fd=entry.dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        digest = hashlib.sha256()
        decoder = codecs.getincrementaldecoder("utf-8")() if size <= MAX_RESOURCE_BYTES else None
        total = 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > size:
                raise OSError("grew while read")
            digest.update(chunk)
            if decoder is not None:
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError:
                    decoder = None
        if total != size:
            raise OSError("shrank while read")
        if decoder is not None:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                decoder = None
        return digest.hexdigest(), decoder is not None
    finally:
        os.close(fd)


def _is_nested_package(entry: Entry) -> bool:
    try:
        inner = os.open(entry.name, _DIR_FLAGS, dir_fd=entry.dir_fd)
    except OSError:
        return False
    try:
        os.stat(INSTRUCTION_FILE, dir_fd=inner, follow_symlinks=False)
    except OSError:
        return False
    finally:
        os.close(inner)
    return True


def _walk_package(folder: Path) -> tuple[list[_Found], list[str]]:
    """The package files below ``folder`` (hashed) and the entries left out of it, with reasons."""
    found: list[_Found] = []
    left: list[str] = []
    total = 0
    limits = WalkLimits(max_entries=MAX_PACKAGE_FILES * 4)

    def prune(entry: Entry) -> bool:
        reason = skip_reason(entry.name)
        if reason is not None:
            left.append(f"{shown_path(entry.path)}/ ({reason}, not part of the package)")
            return True
        return _is_nested_package(entry)  # a skill of its own

    for entry in walk(folder, limits, prune=prune):
        rel = entry.path
        if entry.is_dir or rel == INSTRUCTION_FILE:
            continue
        reason = _not_a_package_file(entry, rel)
        if reason is None and len(found) >= MAX_PACKAGE_FILES:  # checked per file: one huge folder stops too
            reason = f"past the {MAX_PACKAGE_FILES}-file limit of one package, not read"
        if reason is None:
            info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
            size = info.st_size
            if total + size > MAX_PACKAGE_BYTES:
                reason = f"over the {MAX_PACKAGE_BYTES}-byte limit of one package, not read"
            else:
                try:
                    digest, text = _hash_open(entry, size)
                except OSError as exc:
                    reason = f"unreadable: {exc.strerror or exc}"
                else:
                    total += size
                    found.append(_Found(PackageFile(path=rel, size=size, sha256=digest,
                                                    mode=stat.S_IMODE(info.st_mode) & 0o777), text))
        if reason is not None:
            left.append(f"{shown_path(rel)}{'/' if reason == LINKED and _links_to_folder(entry) else ''} ({reason})")
    if limits.truncated:
        left.append(f"the rest of the folder (not read: stopped after {limits.max_entries} entries)")
    return found, left


def _links_to_folder(entry: Entry) -> bool:
    try:
        return stat.S_ISDIR(os.stat(entry.name, dir_fd=entry.dir_fd).st_mode)  # only looked at, never read
    except OSError:
        return False


def _not_a_package_file(entry: Entry, rel: str) -> str | None:
    """Why the entry cannot be a package file, judged before reading it (None: hash it)."""
    try:
        info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"
    if stat.S_ISLNK(info.st_mode):
        return LINKED
    if not stat.S_ISREG(info.st_mode):
        return f"{untrusted.describe(info.st_mode)}, not read"
    problem = package_path_problem(rel)
    if problem is not None:
        return problem
    if info.st_size > MAX_PACKAGE_FILE_BYTES:
        return f"{info.st_size} bytes, over the {MAX_PACKAGE_FILE_BYTES}-byte limit of a package file, not read"
    return None


def mentions(instruction: str, paths: Sequence[str]) -> dict[str, int]:
    """The package files ``SKILL.md`` names: path -> offset of its first mention in ``instruction``.

    A file is named by its relative path (as a link target or in the text, optionally after ``./``) standing on
    its own (not part of a longer path), or by its file name (with a suffix) when no other file of the package has
    that name.
    """
    found: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    for path in paths:
        names.setdefault(PurePosixPath(path).name, []).append(path)
    for path in paths:
        candidates = [path]
        base = PurePosixPath(path).name
        if base != path and "." in base.strip(".") and len(names[base]) == 1:
            candidates.append(base)
        spots = [m.start() for text in candidates for m in re.finditer(
            rf"(?<!{_PATH_CHAR}){re.escape(text)}(?![\w/-]|\.\w)", instruction.replace("./", "  "))]
        if spots:
            found[path] = min(spots)
    return found


def _priority_class(path: str) -> int:
    pure = PurePosixPath(path)
    suffix = pure.suffix.lower()
    if suffix in DOCUMENT_SUFFIXES:
        return 1
    if pure.parts[0] == "scripts" or suffix in CODE_SUFFIXES:
        return 2
    return 3


def load_order(files: Sequence[PackageFile], instruction: str) -> list[PackageFile]:
    """The package's files in the order their text is loaded for the agent (see the module docstring)."""
    named = mentions(instruction, [item.path for item in files])

    def key(item: PackageFile) -> tuple[int, int, int, int, str]:
        if item.path in named:
            return (0, named[item.path], 0, 0, item.path)
        return (_priority_class(item.path), item.path.count("/"), item.size, 0, item.path)

    return sorted(files, key=key)


def read_package(folder: str | Path, instruction: str, instruction_bytes: bytes, *,
                 resource_bytes: int = DEFAULT_RESOURCE_BYTES) -> tuple[Package, dict[str, str]]:
    """The package in ``folder``: its manifest and the text loaded for the agent (see the module docstring).

    The folder is walked with `skilltransfer.util.trees.walk` (any depth, no link followed); every file is opened
    relative to its folder's descriptor without following a link, and the text loaded is read again through
    `skilltransfer.untrusted` and checked against the hash taken on the walk.

    Args:
        folder: the package folder (its ``SKILL.md`` already read).
        instruction: the ``SKILL.md`` text (where the files it names are looked for).
        instruction_bytes: the ``SKILL.md`` bytes (hashed into the manifest).
        resource_bytes: the most bytes of text loaded (at most ``MAX_RESOURCES_BYTES``).

    Returns:
        (the `Package`, resources: relative path -> text of the files loaded).
    """
    folder = Path(folder).absolute()
    found, left = _walk_package(folder)
    budget = min(max(resource_bytes, 0), MAX_RESOURCES_BYTES)
    text_files = {item.file.path for item in found if item.text}
    notes: dict[str, str] = {}
    resources: dict[str, str] = {}
    total = 0
    for item in load_order([item.file for item in found], instruction):
        if item.size > MAX_RESOURCE_BYTES:
            notes[item.path] = f"over the {MAX_RESOURCE_BYTES}-byte limit of one text file"
        elif item.path not in text_files:
            notes[item.path] = "binary, not UTF-8 text"
        elif resource_name_problem(item.path) is not None:
            notes[item.path] = "a name an agent's resource cannot have"
        elif len(resources) >= MAX_RESOURCES:
            notes[item.path] = f"over the limit of {MAX_RESOURCES} text files"
        elif total + item.size > budget:
            notes[item.path] = f"over the {budget}-byte text budget, library_resource_bytes"
        else:
            try:
                data = untrusted.read_bytes(item.path, root=folder, max_bytes=item.size)
            except untrusted.UntrustedFileError as exc:
                notes[item.path] = f"changed while read: {exc.reason}"
                continue
            if hashlib.sha256(data).hexdigest() != item.sha256:
                notes[item.path] = "changed while read"
                continue
            resources[item.path] = data.decode("utf-8")
            total += item.size
    files = sorted((item.file.model_copy(update={"loaded": item.file.path in resources,
                                                 "note": notes.get(item.file.path, "")}) for item in found),
                   key=lambda item: item.path)
    try:
        instruction_mode: int | None = stat.S_IMODE(os.stat(folder / INSTRUCTION_FILE, follow_symlinks=False).st_mode)
    except OSError:
        instruction_mode = None
    package = Package(folder=str(folder), instruction_sha256=hashlib.sha256(instruction_bytes).hexdigest(),
                      instruction_mode=None if instruction_mode is None else instruction_mode & 0o777,
                      files=files, left_out=left)
    return package, resources


_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})
"""A path's line breaks and tabs written as escapes, so a summary stays one line."""


def _named(paths: list[str], limit: int) -> str:
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(path.translate(_LINE_BREAKS) for path in paths[:limit]) + more


def not_in_package_summary(package: Package, limit: int = MAX_SKIPPED_SHOWN) -> str | None:
    """The part of `left_out_summary` naming what is not part of the package at all (what an export does not
    copy); None when nothing is."""
    if not package.left_out:
        return None
    return f"not part of the package ({len(package.left_out)}): {_named(package.left_out, limit)}"


def left_out_summary(package: Package, limit: int = MAX_SKIPPED_SHOWN) -> str | None:
    """One line naming what of a package the agent is not shown (files whose text was not loaded, grouped by why)
    and what is not part of the package at all; None when nothing was left out. At most ``limit`` paths are named
    per group, the rest counted."""
    parts = []
    missing = package.not_loaded()
    if missing:
        groups: dict[str, list[str]] = {}
        for item in missing:
            groups.setdefault(item.note, []).append(item.path)
        reasons = "; ".join(f"{note} ({len(paths)}): {_named(paths, limit)}" for note, paths in groups.items())
        parts.append(f"{len(missing)} of {len(package.files)} files not loaded as text for the agent (the package "
                     f"keeps them): {reasons}")
    outside = not_in_package_summary(package, limit)
    if outside is not None:
        parts.append(outside)
    return "; ".join(parts) or None


def _discard(parent: int, name: str, info: os.stat_result) -> None:
    """Remove ``name`` in the folder ``parent`` without following links (a folder is renamed aside, then removed)."""
    if stat.S_ISDIR(info.st_mode):
        aside = f".{name[:40]}.old-{uuid.uuid4().hex[:8]}"
        os.rename(name, aside, src_dir_fd=parent, dst_dir_fd=parent)
        remove_tree(aside, dir_fd=parent)  # fd-based, any depth: never follows a link inside
    else:
        os.unlink(name, dir_fd=parent)


def _enter(parent: int, name: str, *, fresh: bool) -> int:
    """A descriptor of the real folder ``name`` in ``parent``, made if absent; anything else there is removed first
    (everything, when ``fresh``)."""
    try:
        info: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None and (fresh or not stat.S_ISDIR(info.st_mode)):
        _discard(parent, name, info)
        info = None
    if info is None:
        os.mkdir(name, 0o755, dir_fd=parent)
    return os.open(name, _DIR_FLAGS, dir_fd=parent)


def write_package(base: Path, folder: Sequence[str], files: Mapping[str, str | bytes],
                  modes: Mapping[str, int] | None = None) -> Path:
    """Write ``files`` (relative path -> text or bytes) into the fresh folder ``base/folder[0]/.../folder[-1]``,
    each with its permission bits from ``modes`` (default ``0o644``).

    ``base`` is trusted (made by the harness); the folders below it may have been changed by an agent: the folders
    on the way are kept when they are real folders, and the last one is replaced whole. No link is followed.

    Args:
        base: an existing folder (e.g. an episode workspace).
        folder: the components of the package folder below ``base`` (e.g. ``["skills", "find_contact"]``); each a
            plain name.
        files: the package's files; each name must pass `resource_name_problem` or be ``SKILL.md``.

    Returns:
        The package folder's path.

    Raises:
        PackageWriteError: a bad name, or the folder could not be written (e.g. it changed while being written).
    """
    for part in folder:
        if part in ("", ".", "..") or "/" in part or "\x00" in part:
            raise PackageWriteError(f"package folder component {part!r} is not a plain name")
    if not folder:
        raise PackageWriteError("no package folder given")
    for name in files:
        if name != INSTRUCTION_FILE and resource_name_problem(name) is not None:
            raise PackageWriteError(resource_name_problem(name))
    target = Path(base).joinpath(*folder)
    opened: list[int] = []
    try:
        opened.append(os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for index, part in enumerate(folder):
            opened.append(_enter(opened[-1], part, fresh=index == len(folder) - 1))
        package = opened[-1]
        for name, text in files.items():
            parts = name.split("/")
            where = package
            for part in parts[:-1]:
                where = _enter(where, part, fresh=False)
                opened.append(where)
            fd = os.open(parts[-1], _NEW_FILE_FLAGS, 0o600, dir_fd=where)
            try:
                os.fchmod(fd, (modes or {}).get(name, 0o644) & 0o777)
                data = memoryview(text.encode("utf-8") if isinstance(text, str) else text)
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
    except OSError as exc:
        raise PackageWriteError(f"cannot write skill package {target}: {exc.strerror or exc}") from None
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
    return target
