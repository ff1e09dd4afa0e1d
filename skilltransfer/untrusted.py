"""The security boundary: the one reader of files the toolkit did not write itself in this process (skill
libraries, run folders given to ``show``/``judge``/``report``/resume, task folders, saved indexes, files an agent
could have touched). Folder trees someone else may have made are walked by its companion, `skilltransfer.util.trees`.

What every read guarantees:

* regular files only: a FIFO, socket or device is refused without blocking (opened ``O_NONBLOCK``, then ``fstat``);
* a size cap (``max_bytes``), checked before and while reading;
* with a ``root``: the path is relative and stays inside it (no absolute path, no ``..``), and no symbolic link below
  the root is followed (each component opened with ``O_NOFOLLOW`` relative to its parent's descriptor, so a link
  swapped in meanwhile is not followed either); the root itself is the caller's (it may be a link);
* bounded parsing: JSON and YAML at most ``max_depth`` containers deep; YAML without anchors and aliases (no
  "billion laughs"), only the safe tags;
* every problem raises `UntrustedFileError` (an ``OSError``) with a one-line ``path: reason``, which a command turns
  into one ``error:`` line and exit 2 (``skilltransfer.util.files.read_text`` does) and an evaluation into a failed
  check.

Standard library and PyYAML only; it imports nothing of the package, so every part may use it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

MAX_BYTES = 64 << 20
"""Default cap on one file's size."""

MAX_DEPTH = 64
"""Default cap on how deeply JSON/YAML containers may nest."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UntrustedFileError(OSError):
    """A file the toolkit will not read or parse (missing, a link, not a regular file, too large, too deep...).

    ``str()`` is one line, ``path: reason``; ``reason`` alone is kept in ``.reason``.
    """

    def __init__(self, path: object, reason: str, code: int | None = None) -> None:
        self.shown = str(path)
        self.reason = reason.replace("\n", " ")
        super().__init__(f"{self.shown}: {self.reason}")
        self.errno = code  # the OS error behind it, if any (ENOENT, EISDIR, ELOOP...)

    def __str__(self) -> str:
        return f"{self.shown}: {self.reason}"


def describe(mode: int) -> str:
    """What a file mode is, in words ("a FIFO", "a symbolic link", ...)."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def parts_inside(relative: str | Path | PurePosixPath, shown: object = None, *, folder: bool = False) -> list[str]:
    """The components of a path that must stay inside its root (relative, no ``..``, no NUL).

    Args:
        relative: the path as written (e.g. a ``trajectory`` field of a results line).
        shown: how to name it in errors (default ``relative``).
        folder: the root itself (``""`` or ``"."``) is allowed.

    Raises:
        UntrustedFileError: an absolute path, a ``..`` component or a NUL character.
    """
    raw = str(relative)
    path = PurePosixPath(raw)
    parts = [part for part in path.parts if part not in ("", ".")]
    if path.is_absolute() or "\x00" in raw or ".." in parts or (not parts and not folder):
        raise UntrustedFileError(shown if shown is not None else raw, "not a path inside its folder (refused)")
    return parts


def _stat_at(name: str, dir_fd: int) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return 0


def open_folder(root: str | Path, relative: str | PurePosixPath = "", shown: object = None) -> int:
    """A descriptor of the folder ``root/relative``, reached without following a link below ``root``.

    Raises:
        UntrustedFileError: missing, not a folder, or a link on the way.
    """
    parts = parts_inside(relative, shown, folder=True)
    shown = shown if shown is not None else (Path(root) / str(relative) if parts else root)
    try:
        fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        raise UntrustedFileError(shown, "no such folder") from None
    except OSError as exc:
        raise UntrustedFileError(shown, f"cannot open the folder ({exc.strerror or type(exc).__name__})") from None
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise UntrustedFileError(shown, "no such folder") from None
            except OSError as exc:
                mode = _stat_at(part, fd)
                what = describe(mode) if mode else exc.strerror or type(exc).__name__
                raise UntrustedFileError(shown, f"the folder {part!r} on its path is {what} (not followed)") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | Path | PurePosixPath, *, root: str | Path | None = None,
                 max_bytes: int = MAX_BYTES, shown: object = None) -> tuple[int, int]:
    """Open a regular file for reading: ``(descriptor, size)``; see the module docstring for what is refused.

    Args:
        path: the file; with ``root``, a path relative to it.
        root: the folder the file must stay inside (no link below it followed); None: ``path`` as given (a link the
            user gave is followed, but the file it leads to must still be a regular file).
        max_bytes: the largest size accepted.
        shown: how to name the file in errors (default: the path, joined to ``root``).
    """
    shown = shown if shown is not None else _shown(path, root)
    if root is None:
        parent, name = -1, str(path)
        flags = _FILE_FLAGS
    else:
        parts = parts_inside(path, shown)
        parent = open_folder(root, "/".join(parts[:-1]), shown)
        name = parts[-1]
        flags = _FILE_FLAGS | os.O_NOFOLLOW
    try:
        try:
            fd = os.open(name, flags, dir_fd=parent if parent >= 0 else None)
        except FileNotFoundError:
            raise UntrustedFileError(shown, "no such file", errno.ENOENT) from None
        except IsADirectoryError:
            raise UntrustedFileError(shown, "is a folder, not a file", errno.EISDIR) from None
        except OSError as exc:
            mode = _stat_at(name, parent) if parent >= 0 else 0
            what = f"is {describe(mode)}" if mode else f"cannot be read ({exc.strerror or type(exc).__name__})"
            raise UntrustedFileError(shown, f"{what} (not read)", exc.errno) from None
    finally:
        if parent >= 0:
            os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            code = errno.EISDIR if stat.S_ISDIR(info.st_mode) else None
            raise UntrustedFileError(shown, f"is {describe(info.st_mode)}, not a regular file (not read)", code)
        if info.st_size > max_bytes:
            raise UntrustedFileError(shown, f"is {info.st_size} bytes, over the {max_bytes}-byte limit (not read)")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def _shown(path: object, root: str | Path | None) -> object:
    return Path(root) / str(path) if root is not None else path


def read_bytes(path: str | Path | PurePosixPath, *, root: str | Path | None = None,
               max_bytes: int = MAX_BYTES, shown: object = None) -> bytes:
    """The content of a regular file, at most ``max_bytes`` (see `open_regular`)."""
    shown = shown if shown is not None else _shown(path, root)
    fd, _ = open_regular(path, root=root, max_bytes=max_bytes, shown=shown)
    try:
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > max_bytes:
                raise UntrustedFileError(shown, f"grew past the {max_bytes}-byte limit while read (not read)")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        if isinstance(exc, UntrustedFileError):
            raise
        raise UntrustedFileError(shown, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)


def decode_utf8(data: bytes, shown: object) -> str:
    """``data`` as UTF-8 text; UntrustedFileError naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UntrustedFileError(f"{shown}:{line}", f"not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def read_text(path: str | Path | PurePosixPath, *, root: str | Path | None = None, max_bytes: int = MAX_BYTES) -> str:
    """A regular UTF-8 text file, at most ``max_bytes`` (see `open_regular`)."""
    data = read_bytes(path, root=root, max_bytes=max_bytes)
    return decode_utf8(data, _shown(path, root))


def depth_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a parsed value nests too deeply (lists/dicts more than ``max_depth`` levels), else None; iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > max_depth:
            return f"nests more than {max_depth} levels deep"
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return None


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def nesting_exceeds(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """Whether JSON text surely opens more than ``max_depth`` containers inside one another, found before any parser
    recurses: strings left out, then empty pairs of brackets removed ``max_depth`` times (each round removes one or
    two levels, in C). What remains nests deeper than ``max_depth`` (or does not close); what empties nests at most
    twice as deep, which the parser takes without recursing far and `depth_problem` then measures."""
    if text.count("[") + text.count("{") <= max_depth:  # too few containers to nest that deep
        return False
    brackets = _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text))
    for _ in range(max_depth):
        if not brackets:
            return False
        brackets = brackets.replace("[]", "").replace("{}", "")
    return any(c in brackets for c in "[{")


def parse_json(text: str | bytes, shown: object = "JSON", *, max_depth: int = MAX_DEPTH) -> Any:
    """JSON text as Python values, at most ``max_depth`` containers deep (checked before the parser recurses).

    Raises:
        UntrustedFileError: not JSON (naming the line), or nested too deeply (any depth: no ``RecursionError``).
    """
    if isinstance(text, bytes | bytearray):  # as json.loads reads bytes: UTF-8 (a BOM allowed), -16 or -32
        try:
            text = bytes(text).decode(json.detect_encoding(text))
        except UnicodeDecodeError as exc:
            raise UntrustedFileError(shown, f"not JSON (not {exc.encoding} text: byte 0x{text[exc.start]:02x})") \
                from None
    if nesting_exceeds(text, max_depth):
        raise UntrustedFileError(shown, f"not accepted: nests more than {max_depth} levels deep")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UntrustedFileError(f"{shown}:{exc.lineno}", f"not JSON ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise UntrustedFileError(shown, f"not accepted: nests more than {max_depth} levels deep") from None
    except (ValueError, MemoryError) as exc:  # huge numbers
        raise UntrustedFileError(shown, f"not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    problem = depth_problem(value, max_depth)
    if problem is not None:
        raise UntrustedFileError(shown, f"not accepted: {problem}")
    return value


def read_json(path: str | Path | PurePosixPath, *, root: str | Path | None = None, max_bytes: int = MAX_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """A regular JSON file (see `open_regular` and `parse_json`)."""
    return parse_json(read_text(path, root=root, max_bytes=max_bytes), _shown(path, root), max_depth=max_depth)


def jsonl_values(text: str, shown: object = "JSONL", *,
                 max_depth: int = MAX_DEPTH) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of JSONL text (split on ``\\n`` only; see `parse_json`)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, parse_json(line, f"{shown}:{number}", max_depth=max_depth)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without anchors and aliases, at most ``max_depth`` collections deep."""

    max_depth = MAX_DEPTH
    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        problem = None
        if isinstance(event, yaml.AliasEvent):
            problem = "aliases (*name) are not accepted"
        elif getattr(event, "anchor", None) is not None:
            problem = "anchors (&name) are not accepted"
        collection = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if collection:
            self._depth += 1
            if self._depth > self.max_depth:
                problem = f"nests more than {self.max_depth} levels deep"
        if problem is not None:
            raise yaml.composer.ComposerError(None, None, problem, event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if collection:
                self._depth -= 1


def parse_yaml(text: str, shown: object = "YAML", *, max_depth: int = MAX_DEPTH, first_line: int = 1) -> Any:
    """YAML text as Python values: safe tags only, no anchors or aliases, at most ``max_depth`` collections deep.

    Args:
        text: the YAML document.
        shown: how to name it in errors.
        max_depth: the deepest nesting accepted.
        first_line: the file line ``text`` starts on (for front matter inside a file).

    Raises:
        UntrustedFileError: invalid YAML or a refused construct, naming the line.
    """
    loader = _NoAliasLoader(text)
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + first_line if mark is not None else first_line
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UntrustedFileError(f"{shown}:{line}", f"invalid YAML: {problem}") from None
    except RecursionError:
        raise UntrustedFileError(shown, f"invalid YAML: nests more than {max_depth} levels deep") from None
    finally:
        loader.dispose()


# --------------------------------------------------------------------------------------------- writing below a root
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def make_folder(root: str | Path, relative: str | PurePosixPath = "", shown: object = None) -> int:
    """A descriptor of the folder ``root/relative``, made where missing, without following a link below ``root``.

    Raises:
        UntrustedFileError: a component below ``root`` is a link or not a folder.
    """
    parts = parts_inside(relative, shown, folder=True)
    fd = open_folder(root, "", shown if shown is not None else root)
    try:
        for index, part in enumerate(parts):
            with_part = shown if shown is not None else Path(root, *parts[: index + 1])
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise UntrustedFileError(with_part, f"cannot make the folder ({exc.strerror})") from None
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                mode = _stat_at(part, fd)
                what = describe(mode) if mode else exc.strerror or type(exc).__name__
                raise UntrustedFileError(with_part, f"is {what}, not a folder (not written through)") from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _regular_for_writing(fd: int, shown: object) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UntrustedFileError(shown, f"is {describe(info.st_mode)}, not a regular file (not written)")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_atomic(root: str | Path, relative: str | PurePosixPath, data: bytes | str, *, mode: int = 0o644) -> None:
    """Replace ``root/relative`` with ``data`` atomically (a temp file beside it, then a rename), never writing
    through a link below ``root``: folders on the way are opened without following links (made where missing), the
    temp file is made exclusively, and the rename replaces a link at the target itself, not what it points to.

    Raises:
        UntrustedFileError: a link or non-folder on the way (nothing is written).
    """
    shown = Path(root) / str(relative)
    parts = parts_inside(relative, shown)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    parent = make_folder(root, "/".join(parts[:-1]), shown)
    name = parts[-1]
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    try:
        fd = os.open(tmp, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, mode, dir_fd=parent)
        try:
            os.fchmod(fd, mode)
            _write_all(fd, payload)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    except UntrustedFileError:
        raise
    except OSError as exc:
        raise UntrustedFileError(shown, f"cannot be written ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(parent)


def append(root: str | Path, relative: str | PurePosixPath, data: bytes, *, mode: int = 0o644) -> None:
    """Append ``data`` to the regular file ``root/relative`` (made if missing), never through a link below ``root``.

    Raises:
        UntrustedFileError: the file or a folder on the way is a link, or the file is not a regular file.
    """
    shown = Path(root) / str(relative)
    parts = parts_inside(relative, shown)
    parent = make_folder(root, "/".join(parts[:-1]), shown)
    try:
        try:
            fd = os.open(parts[-1], _WRITE_FLAGS | os.O_APPEND | os.O_CREAT, mode, dir_fd=parent)
        except OSError as exc:
            mode_now = _stat_at(parts[-1], parent)
            what = f"is {describe(mode_now)}" if mode_now else f"cannot be written ({exc.strerror})"
            raise UntrustedFileError(shown, f"{what} (not written)") from None
    finally:
        os.close(parent)
    _regular_for_writing(fd, shown)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def cut_partial_line(root: str | Path, relative: str | PurePosixPath, *, max_bytes: int = MAX_BYTES) -> None:
    """Cut a partial last line (bytes after the last ``\\n``) off the regular file ``root/relative``, if it exists;
    the file is opened without following a link and read and cut through the same descriptor.

    Raises:
        UntrustedFileError: a link or not a regular file, or over ``max_bytes``.
    """
    shown = Path(root) / str(relative)
    parts = parts_inside(relative, shown)
    parent = open_folder(root, "/".join(parts[:-1]), shown)
    try:
        try:
            fd = os.open(parts[-1], os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=parent)
        except FileNotFoundError:
            return
        except OSError as exc:
            mode_now = _stat_at(parts[-1], parent)
            what = f"is {describe(mode_now)}" if mode_now else f"cannot be opened ({exc.strerror})"
            raise UntrustedFileError(shown, f"{what} (not written)") from None
    finally:
        os.close(parent)
    _regular_for_writing(fd, shown)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise UntrustedFileError(shown, f"is {size} bytes, over the {max_bytes}-byte limit (not read)")
        end = size  # read backwards from the end, a chunk at a time, to the last newline
        while end > 0:
            start = max(0, end - (1 << 20))
            found = os.pread(fd, end - start, start).rfind(b"\n")
            if found >= 0:
                end = start + found + 1
                break
            end = start
        if end != size:
            os.ftruncate(fd, end)
    finally:
        os.close(fd)
