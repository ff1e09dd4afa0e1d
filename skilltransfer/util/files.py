"""Files as the toolkit writes and reads them: atomic text writes, JSONL lines, JSON documents.

JSONL is split on ``\\n`` only: ``str.splitlines`` also splits on U+2028, U+0085 and other characters that JSON
writers (pydantic among them) leave unescaped inside strings, which would break a line in two.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError


def read_text(path: str | Path, *, what: str = "file", max_bytes: int = untrusted.MAX_BYTES,
              root: str | Path | None = None) -> str:
    """Read a user's text file as UTF-8 through the one reader of untrusted files (`skilltransfer.untrusted`):
    a regular file only (a FIFO or device is refused without blocking), at most ``max_bytes``.

    Args:
        path: the file; with ``root``, relative to it (no link below ``root`` followed, no way out of it).
        what: names the file in errors ("grid spec", "replies file", ...).
        max_bytes: the largest file accepted.
        root: the folder the file must stay inside.

    Raises:
        InputError: naming the file (and line) when it is missing, a folder, not a regular file, too large,
            unreadable, a symlink loop or not UTF-8 (binary files usually are not).
    """
    try:
        data = untrusted.read_bytes(path, root=root, max_bytes=max_bytes)
    except untrusted.UntrustedFileError as exc:
        shown = exc.shown
        if exc.errno == errno.ENOENT:
            raise InputError(f"{what} does not exist", path=shown) from None
        if exc.errno == errno.EISDIR:
            raise InputError(f"{what} is a folder; give a file", path=shown) from None
        if exc.errno == errno.ELOOP and root is None:
            raise InputError(f"cannot read {what} (a symlink loop)", path=shown) from None
        raise InputError(f"cannot read {what}: {exc.reason}", path=shown) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", path=path, line=line) from None


@functools.cache
def new_file_mode() -> int:
    """The mode ``open()`` gives a new file (0o666 less the umask; read from ``/proc/self/status``, never by setting
    the process umask; 0o644 where that cannot be read). ``mkstemp`` makes owner-only files; written files get this
    mode so a team can share a runs folder as it shares any other."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and ``os.replace`` (never half-written); the
    file gets the mode a plain ``open()`` would give it (`new_file_mode`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of each non-blank line of JSONL text, split on ``\\n`` only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line


def iter_jsonl(path: str | Path, *, what: str = "file") -> Iterator[tuple[int, str]]:
    """(line number, line) of each non-blank line of a UTF-8 JSONL file (see `jsonl_lines`).

    Raises:
        InputError: the file is missing, unreadable or not UTF-8 (``what`` names it).
    """
    yield from jsonl_lines(read_text(path, what=what))


def read_json(path: str | Path, *, what: str = "file", root: str | Path | None = None,
              max_bytes: int = untrusted.MAX_BYTES, max_depth: int = untrusted.MAX_DEPTH) -> Any:
    """A UTF-8 JSON document, read through `skilltransfer.untrusted` (a regular file, size-capped; with
    ``root``, inside it without following links) and at most ``max_depth`` containers deep.

    Raises:
        InputError: the file is missing, unreadable, not UTF-8, not JSON or nested too deeply (naming the file and
            line).
    """
    text = read_text(path, what=what, root=root, max_bytes=max_bytes)
    shown = Path(root) / str(path) if root is not None else path
    if untrusted.nesting_exceeds(text, max_depth):  # measured before the parser recurses
        raise InputError(f"{what} nests more than {max_depth} levels deep (not read)", path=shown)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=shown, line=exc.lineno) from None
    except RecursionError:
        value = None
        problem: str | None = f"nests more than {max_depth} levels deep"
    else:
        problem = untrusted.depth_problem(value, max_depth)
    if problem is not None:
        raise InputError(f"{what} {problem} (not read)", path=shown)
    return value


def parse_json_line(line: str, *, path: object, number: int, max_depth: int = untrusted.MAX_DEPTH) -> Any:
    """One JSONL line as a value at most ``max_depth`` containers deep.

    Raises:
        InputError: not JSON or nested too deeply (naming the file and line).
    """
    try:
        return untrusted.parse_json(line, path, max_depth=max_depth)
    except untrusted.UntrustedFileError as exc:
        raise InputError(exc.reason, path=path, line=number) from None
