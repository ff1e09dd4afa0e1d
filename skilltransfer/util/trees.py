"""Folder trees that someone else may have made (an agent's workspace, a task folder, a skill library), walked
without following links, at any depth and width.

One iterative walker (`walk`) underlies every operation: it enters each folder with ``O_NOFOLLOW`` relative to its
parent's descriptor and acts on entries through that descriptor, so a path longer than ``PATH_MAX`` (a chain of
thousands of folders) is no problem, no link is ever followed, and no recursion limit is reached. It keeps at most
``MAX_OPEN`` descriptors open; deeper, it re-enters a folder through ``..`` and checks that it is the same folder
(device and inode), stopping with `TreeChanged` if the tree was moved meanwhile.

Operations: `usage` (allocated bytes, entries), `remove_tree`, `chown_tree`, `copy_tree` (folders and regular files
only, size- and entry-capped), `files` (the regular files below a folder, for loaders).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_OPEN = 64
"""Folder descriptors a walk keeps open at once (deeper folders are re-entered through ``..``)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class TreeChanged(OSError):
    """A folder was moved while the walk was inside it (re-entering through ``..`` found another folder)."""


_Chain = tuple[Any, str] | None
"""A path below the root as (the parent's chain, name): shared by siblings, so deep trees cost linear memory."""


def _components(chain: _Chain) -> list[str]:
    parts = []
    while chain is not None:
        chain, name = chain
        parts.append(name)
    return parts[::-1]


@dataclass
class _Frame:
    fd: int
    key: tuple[int, int]
    names: list[tuple[str, bool]]
    chain: _Chain
    index: int = 0


@dataclass(frozen=True)
class Entry:
    """One entry met by `walk`: ``name`` inside the folder open as ``dir_fd`` (valid only until the next step)."""

    dir_fd: int
    name: str
    chain: _Chain
    is_dir: bool
    leaving: bool = False
    """For a folder: False when met (before its content), True after its content."""

    @property
    def parts(self) -> list[str]:
        """Its path below the root, as components (the path may exceed ``PATH_MAX``: use it only for messages)."""
        return _components(self.chain)

    @property
    def path(self) -> str:
        return "/".join(self.parts)


@dataclass
class WalkLimits:
    """Caps of one walk: it stops (``truncated``) after ``max_entries`` entries."""

    max_entries: int | None = None
    entries: int = 0
    truncated: bool = False
    errors: list[str] = field(default_factory=list)


def _open_dir(name: str, dir_fd: int | None, *, fix: bool) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        if not fix:
            raise
        # the folder's owner (an agent with our uid) took our access away: we own it, so give it back; the mode
        # change follows a link only if one was swapped in between, and the O_NOFOLLOW open below then refuses it
        os.chmod(name, 0o700, dir_fd=dir_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    if fix:
        with contextlib.suppress(OSError):
            mode = os.fstat(fd).st_mode
            if mode & 0o700 != 0o700:  # readable but not searchable: its entries could not be examined
                os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    return fd


def _listing(fd: int, limits: WalkLimits) -> list[tuple[str, bool]]:
    names: list[tuple[str, bool]] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if limits.max_entries is not None and limits.entries + len(names) >= limits.max_entries:
                limits.truncated = True
                break
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            names.append((entry.name, is_dir))
    return names


def walk(root: str | Path, limits: WalkLimits | None = None, *, fix_permissions: bool = False,
         leaving: bool = False, prune: Callable[[Entry], bool] | None = None,
         dir_fd: int | None = None) -> Iterator[Entry]:
    """Every entry below ``root`` (not ``root`` itself), folders before their content and, with ``leaving``, again
    after it. Links are reported as non-folders and never followed. An entry that vanishes meanwhile is skipped; a
    folder that cannot be entered is skipped and noted in ``limits.errors``.

    Args:
        root: the folder (trusted: it may itself be a link the caller chose).
        limits: entry cap and the walk's counters; None for no cap.
        fix_permissions: restore owner access to folders that refuse to be entered (the harness owns them).
        leaving: also yield each folder after its content (``Entry.leaving``), e.g. to remove it; every folder met
            is left once, also one that could not be entered.
        prune: ``prune(entry)`` True for a folder: do not enter it.
        dir_fd: ``root`` is a name in the folder open as ``dir_fd`` (then it is not followed if a link).

    Raises:
        OSError: ``root`` cannot be opened. TreeChanged: the tree was moved while walked deeper than ``MAX_OPEN``.
    """
    limits = limits if limits is not None else WalkLimits()
    fd = os.open(root, _DIR_FLAGS if dir_fd is not None else _DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=dir_fd)
    info = os.fstat(fd)
    stack = [_Frame(fd, (info.st_dev, info.st_ino), [], None)]
    try:
        stack[0].names = _listing(fd, limits)
        while stack:
            top = stack[-1]
            if top.index >= len(top.names):
                stack.pop()
                if stack:
                    parent = stack[-1]
                    if parent.fd < 0:  # re-enter the parent through ".." and check it is the same folder
                        parent.fd = os.open("..", _DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=top.fd)
                        seen = os.fstat(parent.fd)
                        if (seen.st_dev, seen.st_ino) != parent.key:
                            os.close(top.fd)
                            raise TreeChanged(f"{'/'.join(_components(parent.chain)) or '.'} was moved during the walk")
                    os.close(top.fd)
                    if leaving and top.chain is not None:
                        yield Entry(parent.fd, top.chain[1], top.chain, True, leaving=True)
                else:
                    os.close(top.fd)
                continue
            name, is_dir = top.names[top.index]
            top.index += 1
            limits.entries += 1
            chain = (top.chain, name)
            entry = Entry(top.fd, name, chain, is_dir)
            yield entry
            if not is_dir:
                continue
            try:
                if prune is not None and prune(entry):
                    raise FileNotFoundError
                child = _open_dir(name, top.fd, fix=fix_permissions)
            except OSError as exc:
                if not isinstance(exc, FileNotFoundError):
                    limits.errors.append(f"{entry.path}: {exc.strerror or type(exc).__name__}")
                if leaving:
                    yield Entry(top.fd, name, chain, True, leaving=True)
                continue
            seen = os.fstat(child)
            frame = _Frame(child, (seen.st_dev, seen.st_ino), [], chain)
            try:
                frame.names = _listing(child, limits)
            except OSError as exc:
                limits.errors.append(f"{entry.path}: {exc.strerror or type(exc).__name__}")
            stack.append(frame)
            if len(stack) > MAX_OPEN:
                far = stack[-MAX_OPEN - 1]
                if far.fd >= 0 and len(stack) - MAX_OPEN - 1 > 0:  # the root stays open
                    os.close(far.fd)
                    far.fd = -1
    finally:
        for frame in stack:
            if frame.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(frame.fd)


@dataclass(frozen=True)
class Usage:
    """Allocated bytes and entries below some folders (hard links counted once)."""

    bytes: int
    entries: int
    truncated: bool = False
    """True when counting stopped at the entry cap."""

    @property
    def mib(self) -> float:
        return self.bytes / (1 << 20)


def usage(folders: list[Path], max_entries: int | None = None, *, fix_permissions: bool = True) -> Usage:
    """Allocated bytes (``st_blocks``) and entries below ``folders``, without following links, at any depth.

    A folder that changes under the walk is counted as far as it was walked (the caller measures again later).
    """
    seen: set[tuple[int, int]] = set()
    total = 0
    limits = WalkLimits(max_entries=max_entries)
    for folder in folders:
        try:
            for entry in walk(folder, limits, fix_permissions=fix_permissions):
                try:
                    info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key not in seen:
                    seen.add(key)
                    total += max(info.st_blocks * 512, 0)
        except OSError:
            continue
        if limits.truncated:
            break
    return Usage(total, limits.entries + (1 if limits.truncated else 0), limits.truncated)


def remove_tree(path: str | Path, *, dir_fd: int | None = None) -> None:
    """Remove a folder and everything below it (any depth, links removed not followed, permissions restored); a
    link or file at ``path`` is removed itself. Missing: nothing to do. What cannot be removed is left.

    Args:
        path: the folder; with ``dir_fd``, a name in the folder open as ``dir_fd``.
        dir_fd: see ``path``.
    """
    try:
        info = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(path, dir_fd=dir_fd)
        return
    for _ in range(3):  # a tree changed under the walk is walked again
        try:
            for entry in walk(path, fix_permissions=True, leaving=True, dir_fd=dir_fd):
                with contextlib.suppress(OSError):
                    if entry.leaving:
                        os.rmdir(entry.name, dir_fd=entry.dir_fd)
                    elif not entry.is_dir:
                        os.unlink(entry.name, dir_fd=entry.dir_fd)
        except FileNotFoundError:
            return
        except OSError:
            continue
        break
    with contextlib.suppress(OSError):
        os.rmdir(path, dir_fd=dir_fd)


def chown_tree(root: str | Path, uid: int, gid: int) -> None:
    """Give ``root`` and everything below it to ``uid``/``gid`` (links themselves, never their targets)."""
    os.chown(root, uid, gid)
    with contextlib.suppress(OSError):
        for entry in walk(root, fix_permissions=True):
            with contextlib.suppress(OSError):
                os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)


def files(root: str | Path, *, max_entries: int = 100_000, skip: Callable[[Entry], bool] | None = None
          ) -> tuple[list[str], list[str]]:
    """The regular files below ``root`` as relative POSIX paths (sorted), and what was left out with reasons
    (links, FIFOs, devices, sockets; the rest of a tree past ``max_entries``). ``skip(entry)`` leaves an entry out
    silently (a folder: with its content)."""
    found: list[str] = []
    left: list[str] = []
    limits = WalkLimits(max_entries=max_entries)
    for entry in walk(root, limits, prune=skip):
        if entry.is_dir or (skip is not None and skip(entry)):
            continue
        try:
            mode = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            found.append(entry.path)
        else:
            left.append(f"{entry.path} ({_describe(mode)}, not read)")
    if limits.truncated:
        left.append(f"the rest of {root} (more than {max_entries} entries, not read)")
    return sorted(found), left


def _describe(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def copy_tree(source: str | Path, target: str | Path, *, max_bytes: int = 1 << 30, max_entries: int = 100_000,
              mode_mask: int = 0o777) -> list[str]:
    """Copy the folders and regular files below ``source`` into the folder ``target`` (made if absent); links,
    FIFOs, devices and sockets are left out (never followed), as is everything past the caps.

    Args:
        source: the folder to copy (trusted root; nothing below it is followed).
        target: where to copy it (a fresh folder of the caller's).
        max_bytes: the most bytes copied in all.
        max_entries: the most entries examined.
        mode_mask: permission bits kept from the source.

    Returns:
        What was left out, each ``"relative/path (reason)"``.
    """
    Path(target).mkdir(parents=True, exist_ok=True)
    left: list[str] = []
    limits = WalkLimits(max_entries=max_entries)
    total = 0
    targets = [os.open(target, _DIR_FLAGS & ~os.O_NOFOLLOW)]
    try:
        for entry in walk(source, limits, leaving=True):
            if entry.leaving:
                done = targets.pop()
                if done >= 0:
                    os.close(done)
                continue
            if entry.is_dir:  # made here, entered below (or -1: its content is left out with it)
                made = -1
                if targets[-1] >= 0:
                    try:
                        info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                        os.mkdir(entry.name, 0o700, dir_fd=targets[-1])
                        made = os.open(entry.name, _DIR_FLAGS, dir_fd=targets[-1])
                        with contextlib.suppress(OSError):
                            os.fchmod(made, (info.st_mode & mode_mask) | 0o700)
                    except OSError as exc:
                        left.append(f"{entry.path}/ (not copied: {exc.strerror or type(exc).__name__})")
                targets.append(made)
                continue
            if targets[-1] < 0:
                continue
            try:
                info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                left.append(f"{entry.path} ({_describe(info.st_mode)}, not copied)")
                continue
            if total + info.st_size > max_bytes:
                left.append(f"{entry.path} (over the {max_bytes:,}-byte limit of the copy, not copied)")
                continue
            total += _copy_file(entry, targets[-1], info.st_mode & mode_mask, max_bytes - total)
    finally:
        for fd in targets:
            with contextlib.suppress(OSError):
                os.close(fd)
    if limits.truncated:
        left.append(f"the rest of {source} (more than {max_entries} entries, not copied)")
    return left


def _copy_file(entry: Entry, target_dir: int, mode: int, budget: int) -> int:
    src = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=entry.dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return 0
        dst = os.open(entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      mode | 0o600, dir_fd=target_dir)
        copied = 0
        try:
            while copied < budget and (chunk := os.read(src, min(1 << 20, budget - copied))):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
                copied += len(chunk)
        finally:
            os.close(dst)
        return copied
    finally:
        os.close(src)


def find(root: str | Path, match: Callable[[str], bool], *, max_entries: int = 1_000_000) -> list[Path]:
    """The entries below ``root`` whose name satisfies ``match`` (any kind: the caller reads them through
    `skilltransfer.untrusted`), sorted; found by `walk`, so at any depth (a chain of thousands of folders an
    agent left in its workspace) without recursion and without following links, and at most ``max_entries`` entries
    looked at. An entry whose path is too long to use is left out."""
    found: list[Path] = []
    limits = WalkLimits(max_entries=max_entries)
    with contextlib.suppress(OSError):
        for entry in walk(root, limits):
            if not entry.leaving and match(entry.name):
                path = Path(root, *entry.parts)
                if len(os.fsencode(str(path))) < 4000:  # PATH_MAX: a longer path could not be opened by name
                    found.append(path)
    return sorted(found)
