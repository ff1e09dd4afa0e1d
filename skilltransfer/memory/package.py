"""Skill packages on disk: reading a package folder's resource files, and writing a package into a folder that an
agent may have tampered with.

Reading (``read_resources``, used by ``load_library``): every regular file under the package folder except its
``SKILL.md``, hidden entries (names starting with ``.``), ``__pycache__`` and sub-folders holding their own
``SKILL.md`` (nested packages, loaded as skills of their own). Symbolic links are never followed. Files a skill
cannot carry (not UTF-8 text, over the size caps of `skilltransfer.memory.skill`, an unsafe name) are skipped and
reported, so a public skill collection with fonts or images still loads.

Writing (``write_package``, for episode workspaces): the target folder is made afresh below a trusted base folder;
every folder on the way is entered with ``O_NOFOLLOW`` relative to its parent's descriptor, and anything that is not
a real folder there (a link, a file, a FIFO) is removed, never followed, so nothing is written outside the base.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from skilltransfer.skill import (
    INSTRUCTION_FILE,
    MAX_RESOURCE_BYTES,
    MAX_RESOURCES,
    MAX_RESOURCES_BYTES,
    resource_name_problem,
)
from skilltransfer.util import untrusted
from skilltransfer.util.trees import Entry, WalkLimits, remove_tree, walk

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
_SKIPPED_SILENTLY = ("__pycache__",)
MAX_EXAMINED = 10 * MAX_RESOURCES
"""Reading a package folder stops after this many files (a SKILL.md placed at the top of a big tree)."""
MAX_SKIPPED_SHOWN = 20
"""At most this many left-out files are named; the rest are counted."""


class PackageWriteError(OSError):
    """A skill package could not be written where asked (the folder changed under the writer, permissions...)."""


def _skip_name(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_SILENTLY


def read_resources(folder: Path) -> tuple[dict[str, str], list[str]]:
    """The resource files of the package in ``folder`` (see the module docstring for which files count).

    The folder is walked with `skilltransfer.util.trees.walk` (any depth, no link followed) and each file read
    through `skilltransfer.util.untrusted` relative to ``folder`` (a regular file under the size caps, read without
    following a link, even one swapped in meanwhile).

    Returns:
        (resources: relative POSIX path -> text, skipped: ``"path (reason)"`` for each file left out).
    """
    resources: dict[str, str] = {}
    skipped: list[str] = []
    total = examined = 0
    truncated = False

    def prune(entry: Entry) -> bool:
        if _skip_name(entry.name):
            return True
        try:  # a folder with its own SKILL.md is a package of its own
            inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=entry.dir_fd)
        except OSError:
            return False
        try:
            os.stat(INSTRUCTION_FILE, dir_fd=inner, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(inner)
        return True

    for entry in walk(folder, WalkLimits(max_entries=MAX_EXAMINED * 4), prune=prune):
        rel = entry.path
        if entry.is_dir or _skip_name(entry.name) or rel == INSTRUCTION_FILE:
            continue
        if examined >= MAX_EXAMINED:  # checked per file: one huge folder stops too
            truncated = True
            break
        examined += 1
        reason = _unreadable(entry, rel, len(resources), total)
        if reason == LINKED and _links_to_folder(entry):
            rel += "/"
        if reason is None:
            try:
                text = untrusted.read_bytes(rel, root=folder, max_bytes=MAX_RESOURCE_BYTES).decode("utf-8")
            except UnicodeDecodeError:
                reason = "not UTF-8 text"
            except untrusted.UntrustedFileError as exc:
                reason = exc.reason
            else:
                resources[rel] = text
                total += len(text.encode("utf-8"))
        if reason is not None:
            skipped.append(f"{rel} ({reason})")
    if len(skipped) > MAX_SKIPPED_SHOWN:
        skipped = [*skipped[:MAX_SKIPPED_SHOWN], f"and {len(skipped) - MAX_SKIPPED_SHOWN} more"]
    if truncated:
        skipped.append(f"the rest of the folder (not read: stopped after {MAX_EXAMINED} files)")
    return resources, skipped


LINKED = "a symbolic link, not followed"


def _links_to_folder(entry: Entry) -> bool:
    try:
        return stat.S_ISDIR(os.stat(entry.name, dir_fd=entry.dir_fd).st_mode)  # only looked at, never read
    except OSError:
        return False


def _unreadable(entry: Entry, rel: str, count: int, total: int) -> str | None:
    """Why the file ``entry`` cannot be a resource, judged before reading it (None: read it)."""
    try:
        info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"
    if stat.S_ISLNK(info.st_mode):
        return LINKED
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    problem = resource_name_problem(rel)
    if problem is not None:
        return problem
    if info.st_size > MAX_RESOURCE_BYTES:
        return f"{info.st_size} bytes, over the {MAX_RESOURCE_BYTES}-byte limit"
    if count >= MAX_RESOURCES:
        return f"over the limit of {MAX_RESOURCES} resource files"
    if total + info.st_size > MAX_RESOURCES_BYTES:
        return f"over the {MAX_RESOURCES_BYTES}-byte limit of all resources"
    return None


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


def write_package(base: Path, folder: Sequence[str], files: Mapping[str, str]) -> Path:
    """Write ``files`` (relative path -> text) into the fresh folder ``base/folder[0]/.../folder[-1]``.

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
            fd = os.open(parts[-1], _NEW_FILE_FLAGS, 0o644, dir_fd=where)
            try:
                data = memoryview(text.encode("utf-8"))
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
