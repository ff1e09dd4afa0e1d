"""Reading files the agent could have touched, defensively, on the harness side (evaluators, checks): the
workspace face of the one reader of untrusted files, `skilltransfer.untrusted`.

Every path is taken relative to a root folder and opened one component at a time with ``O_NOFOLLOW`` relative to
its parent's descriptor, so no symbolic link is followed anywhere on the way (nor can a link swapped in meanwhile
be). Only regular files are read (a FIFO, socket or device is refused without blocking), up to a size cap. Every
problem raises :class:`UnsafeFileError` with a one-line reason that a check can report as its detail.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import zipfile
from pathlib import Path, PurePosixPath

from skilltransfer import untrusted

MAX_FILE_BYTES = 64 << 20
"""The largest workspace file an evaluator reads."""

MAX_UNZIPPED_BYTES = 512 << 20
"""The largest total an Office file (a zip: .xlsx, .docx) may expand to before an evaluator parses it."""

MAX_LISTING = 10_000
"""The most entries an evaluator lists in one folder."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


UnsafeFileError = untrusted.UntrustedFileError
"""A workspace file that the harness will not read (missing, a link, not a regular file, too large...)."""


def _parts(relative: str | PurePosixPath, *, folder: bool = False) -> list[str]:
    """The path's components; ``folder``: the root itself ("." or "") is allowed."""
    return untrusted.parts_inside(relative, folder=folder)


def _open_parent(root: Path, parts: list[str], shown: str) -> int:
    """A descriptor of the folder holding ``parts[-1]``, reached without following links."""
    return untrusted.open_folder(root, "/".join(parts[:-1]), shown)


def kind(root: Path, relative: str | PurePosixPath) -> str | None:
    """What is at ``root/relative`` without following links: "file", "folder", "other", "link" (the path or a folder
    on it is a symbolic link) or None (nothing there)."""
    parts = _parts(relative)
    try:
        fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for index, part in enumerate(parts):
            mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                return "link"
            if index == len(parts) - 1:
                break
            if not stat.S_ISDIR(mode):
                return None  # a file where a folder should be
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError:
        return None
    finally:
        os.close(fd)
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "other"


def read_bytes(root: Path, relative: str | PurePosixPath, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The content of the regular file ``root/relative`` (see module docs); UnsafeFileError otherwise."""
    return untrusted.read_bytes(relative, root=root, max_bytes=max_bytes, shown=relative)


def list_files(root: Path, relative: str | PurePosixPath, suffix: str = "",
               max_entries: int = MAX_LISTING) -> list[str]:
    """Names of the regular files (no links) in the folder ``root/relative``, sorted; [] when it is not a folder."""
    parts = _parts(relative, folder=True)
    try:
        parent = _open_parent(Path(root), [*parts, "."], str(relative))
    except UnsafeFileError:
        return []
    names = []
    try:
        with os.scandir(parent) as entries:
            for count, entry in enumerate(entries):
                if count >= max_entries:
                    raise UnsafeFileError(relative, f"holds more than {max_entries} entries (not read)")
                if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
                    names.append(entry.name)
    finally:
        with contextlib.suppress(OSError):
            os.close(parent)
    return sorted(names)


def list_folders(root: Path, relative: str | PurePosixPath, max_entries: int = MAX_LISTING) -> list[str]:
    """Names of the sub-folders (no links) of ``root/relative``, sorted; [] when it is not a folder."""
    parts = _parts(relative, folder=True)
    try:
        parent = _open_parent(Path(root), [*parts, "."], str(relative))
    except UnsafeFileError:
        return []
    try:
        with os.scandir(parent) as entries:
            found = []
            for count, entry in enumerate(entries):
                if count >= max_entries:
                    raise UnsafeFileError(relative, f"holds more than {max_entries} entries (not read)")
                if entry.is_dir(follow_symlinks=False):
                    found.append(entry.name)
            return sorted(found)
    finally:
        with contextlib.suppress(OSError):
            os.close(parent)


def check_zip(data: bytes, shown: str, max_total: int = MAX_UNZIPPED_BYTES) -> io.BytesIO:
    """``data`` as a stream, after checking that the zip it holds expands to at most ``max_total`` bytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile as exc:
        raise UnsafeFileError(shown, f"not a valid Office file ({exc})") from None
    if total > max_total:
        raise UnsafeFileError(shown, f"expands to {total} bytes, over the {max_total}-byte limit (not read)")
    return io.BytesIO(data)
