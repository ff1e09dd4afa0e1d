"""Where the skills of a library folder are: every ``SKILL.md`` below it, hidden folders included, and below links
that stay inside it.

Published libraries differ in layout: anthropics/skills keeps one folder per skill at its top, openai/skills keeps
its skills in hidden folders (``skills/.curated/``, ``.experimental/``, ``.system/``), K-Dense-AI's are 134 folders
in one, benchmark libraries group them in task folders (``<task>/<skill>/SKILL.md``, names repeating across tasks),
and a library assembled from several checkouts is a folder of links. `find_skills` walks the folder with
`skilltransfer.util.trees.walk` (any depth; the walk itself follows no link):

* every folder is looked in, hidden ones too, except version-control and cache folders (`skip_reason`: ``.git``,
  ``node_modules``, ``__pycache__``, ...), each of which is named;
* a link to a folder whose target (resolved) lies inside the library root is followed: what is below the target is
  read as if it stood at the link's place (a skill reached both through a link and at its own place is read once, at
  its place); a link that leads out of the root or nowhere is named and not followed (a link out of a downloaded
  library is how it would read a user's own files);
* a ``SKILL.md`` that is not a regular file (a link, a FIFO) is named, not read.

Links and skipped folders inside a skill's folder are the package reader's to name
(`skilltransfer.memory.package`), not the library's.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from skilltransfer.skill import INSTRUCTION_FILE
from skilltransfer.untrusted import describe
from skilltransfer.util.trees import Entry, WalkLimits, walk

VCS_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", "_darcs", "CVS"})
"""Version-control folders: never looked in for skills, never part of a package."""
CACHE_FOLDERS = frozenset({"__pycache__", "node_modules", ".venv", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
                           ".ruff_cache", ".ipynb_checkpoints"})
"""Cache and environment folders: never looked in for skills, never part of a package."""
MAX_LINKS_FOLLOWED = 1000
"""The most folder links one library read follows."""


def shown_path(path: str | Path) -> str:
    """A path as text that can be printed and stored: bytes of a name that are not UTF-8 (held as surrogates) shown
    as ``\\xNN`` escapes."""
    text = str(path)
    if not any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        return text
    return os.fsencode(text).decode("utf-8", "backslashreplace")


def skip_reason(name: str) -> str | None:
    """Why a folder of this name is not looked in (None: it is)."""
    if name in VCS_FOLDERS:
        return "version control"
    if name in CACHE_FOLDERS:
        return "a cache folder"
    return None


@dataclass(frozen=True)
class SkillSpot:
    """One ``SKILL.md`` found: where it stands in the library and where it is read from."""

    where: str
    """The skill folder's path below the library root as reached (through a link: the link's path), POSIX; ``""``
    for the root itself."""
    base: Path
    """The folder the ``SKILL.md`` is read below (no link below it is followed): the library root, or the resolved
    target of the link it was reached through."""
    relative: str
    """The ``SKILL.md``'s path below ``base``."""
    through: str | None = None
    """The link (its path below the library root) it was reached through, if any."""


@dataclass
class LibraryLayout:
    """What `find_skills` found in a library folder, and what it did not look in or follow."""

    root: Path
    spots: list[SkillSpot] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """``path: reason (skill not read)`` for each ``SKILL.md`` that is not a regular file."""
    not_followed: list[str] = field(default_factory=list)
    """``path: a link to T, ... (not followed)`` for each folder link not followed."""
    followed: list[str] = field(default_factory=list)
    """``path: a link to T inside the library, N skills read through it`` for each folder link followed."""
    skipped: list[str] = field(default_factory=list)
    """``path/ (reason)`` for each version-control or cache folder not looked in."""
    truncated: str | None = None
    """Why the walk stopped early, if it did."""

    def hidden(self) -> dict[str, int]:
        """Hidden folder (its path below the root, the first hidden one on each skill's way) -> skills read below it."""
        counts: dict[str, int] = {}
        for spot in self.spots:
            parts = PurePosixPath(spot.where).parts
            for index, part in enumerate(parts):
                if part.startswith("."):
                    key = "/".join(parts[: index + 1])
                    counts[key] = counts.get(key, 0) + 1
                    break
        return counts


@dataclass
class _Walked:
    """One folder walked: the SKILL.md files, the folder links and the skipped folders met."""

    spots: list[tuple[str, str]] = field(default_factory=list)
    """(skill folder below the walked folder, SKILL.md below it)."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _walk_one(base: Path, limits: WalkLimits) -> _Walked:
    found = _Walked()

    def prune(entry: Entry) -> bool:
        reason = skip_reason(entry.name)
        if reason is not None:
            found.skipped.append((entry.path, reason))
        return reason is not None

    for entry in walk(base, limits, prune=prune):
        if entry.is_dir:
            continue
        try:
            mode = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if entry.name == INSTRUCTION_FILE:
            parent = "/".join(entry.parts[:-1])
            if stat.S_ISREG(mode):
                found.spots.append((parent, entry.path))
            else:
                found.refused.append((entry.path, describe(mode)))
        elif stat.S_ISLNK(mode):
            found.links.append(entry.path)
    return found


def _inside_a_skill(path: str, skill_folders: set[str]) -> bool:
    """Whether ``path`` (below the root) lies inside a skill folder found (its package names it)."""
    parts = PurePosixPath(path).parts
    return any("/".join(parts[:index]) in skill_folders for index in range(len(parts)))


def _join(prefix: str, path: str) -> str:
    return f"{prefix}/{path}" if prefix and path else prefix or path


def find_skills(root: str | Path, *, max_entries: int) -> LibraryLayout:
    """Every ``SKILL.md`` below the library folder ``root`` (see the module docstring), sorted by where it stands.

    Args:
        root: the library folder (trusted: it may itself be a link the user gave).
        max_entries: the most entries looked at in all (the walk stops there, saying so).

    Raises:
        OSError: ``root`` cannot be opened.
    """
    root = Path(root)
    real_root = Path(os.path.realpath(root))
    layout = LibraryLayout(root)
    limits = WalkLimits(max_entries=max_entries)
    by_real: dict[Path, SkillSpot] = {}
    walked: set[Path] = {real_root}
    queue: list[tuple[Path, str, str | None, str]] = [(root, "", None, "")]
    followed = 0
    while queue:
        base, prefix, through, named = queue.pop(0)
        real_base = real_root if through is None else base
        found = _walk_one(base, limits)
        new: list[SkillSpot] = []
        for folder, relative in found.spots:
            where = _join(prefix, folder)
            if shown_path(where) != where:
                layout.refused.append(f"{shown_path(root / where)}/{INSTRUCTION_FILE}: a folder name that is not "
                                      "UTF-8 (skill not read)")
                continue
            spot = SkillSpot(where, base, relative, through)
            real = real_base / folder
            if real not in by_real:
                by_real[real] = spot
                new.append(spot)
        layout.spots.extend(new)
        layout.refused.extend(f"{shown_path(root / _join(prefix, path))}: a {INSTRUCTION_FILE} must be a regular "
                              f"file, this is {kind} (skill not read)" for path, kind in found.refused)
        folders = {spot.where for spot in layout.spots}
        layout.skipped.extend(f"{shown_path(_join(prefix, path))}/ ({reason})" for path, reason in found.skipped
                              if not _inside_a_skill(_join(prefix, path), folders))
        if through is not None:
            again = f" ({len(found.spots)} read at their own place)" if found.spots and not new else ""
            layout.followed.append(f"{shown_path(through)}: a link to {named} inside the library, {len(new)} skills "
                                   f"read through it{again}")
        for link in found.links:
            where = _join(prefix, link)
            shown = shown_path(where)
            if _inside_a_skill(where, folders):
                continue  # a skill's package names its own links
            kind, target, real = _link_target(base / link, real_root, walked)
            if kind == "follow" and followed >= MAX_LINKS_FOLLOWED:
                layout.not_followed.append(f"{shown}: a link to {shown_path(target)} (not followed: more than "
                                           f"{MAX_LINKS_FOLLOWED} links in the library)")
            elif kind == "follow":
                followed += 1
                walked.add(real)
                queue.append((real, where, where, shown_path(target)))
            elif kind == "seen":
                layout.followed.append(f"{shown}: a link to {shown_path(target)} inside the library, a folder "
                                       "already looked in")
            elif kind != "file":
                layout.not_followed.append(f"{shown}: a link to {shown_path(target)}, {kind} (not followed)")
    if limits.truncated:
        layout.truncated = f"the rest of {root} (more than {max_entries} entries, not looked at)"
    layout.spots.sort(key=lambda spot: spot.where)
    return layout


def _link_target(link: Path, real_root: Path, walked: set[Path]) -> tuple[str, str, Path]:
    """(what to do with a link, the target it names, its resolved target): ``follow`` (a folder inside the library
    not looked in yet), ``seen`` (one looked in already), ``file`` (not a folder: no skill folder, nothing to say),
    or why it is not followed."""
    try:
        target = os.readlink(link)
    except OSError:
        return "file", "", link
    try:
        real = Path(os.path.realpath(link, strict=True))
        is_dir = real.is_dir()
    except OSError:
        return "which does not exist", target, link
    if not is_dir:
        return "file", target, real
    if not real.is_relative_to(real_root):
        return "out of the library", target, real
    return ("seen" if real in walked else "follow"), target, real
