"""User-facing errors: one line, naming the file/line/field, mapped to exit code 2 by the CLI; and the two checks
every command runs on user paths (read a text file, check an output path), which turn OS and decoding errors into
such lines before anything is written.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class InputError(Exception):
    """Bad user input (a path, a file's content, a flag). The message is one line and says what to fix."""

    exit_code = 2

    def __init__(self, message: str, *, path: object | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            where += ": "
        super().__init__(f"{where}{message}".replace("\n", " "))


def _os_reason(exc: OSError) -> str:
    return "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__


def read_text(path: str | Path, *, what: str = "file") -> str:
    """Read a user's text file as UTF-8.

    Args:
        path: the file.
        what: names the file in errors ("grid spec", "replies file", ...).

    Raises:
        InputError: naming the file (and line) when it is missing, a folder, unreadable, a symlink loop or not
            UTF-8 (binary files usually are not).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} does not exist", path=path) from None
    except IsADirectoryError:
        raise InputError(f"{what} is a folder; give a file", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read {what} ({_os_reason(exc)})", path=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", path=path, line=line) from None


def check_output_path(path: str | Path, *, flag: str, folder: bool = True) -> Path:
    """Refuse an output path that cannot be created or written, before anything is written.

    A folder output must be an existing folder or not exist yet; a file output must not be a folder. Either way
    the nearest existing ancestor must be a writable folder, and no symlink on the way may loop or dangle.

    Args:
        path: the output path.
        flag: the option that set it (``--out``), named in errors.
        folder: whether the output is a folder (else a file).

    Returns:
        ``path`` as a `Path`.

    Raises:
        InputError: naming the path and what is wrong with it.
    """
    path = Path(path).expanduser()
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        if folder and path.is_symlink():
            raise InputError(f"{flag}: a symlink to nothing; give a folder", path=path) from None
        _check_ancestors(path, flag)
        return path
    except OSError as exc:
        raise InputError(f"{flag}: unusable path ({_os_reason(exc)})", path=path) from None
    if folder and not stat.S_ISDIR(mode):
        raise InputError(f"{flag}: exists and is not a folder", path=path)
    if not folder and stat.S_ISDIR(mode):
        raise InputError(f"{flag}: is a folder; give a file name", path=path)
    if not os.access(path if folder else path.parent, os.W_OK | os.X_OK):
        raise InputError(f"{flag}: not writable (permission denied)", path=path)
    return path


def _check_ancestors(path: Path, flag: str) -> None:
    """The nearest existing ancestor of a path still to be created must be a writable folder."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            if parent.is_symlink():
                raise InputError(f"{flag}: {parent} is a symlink to nothing", path=path) from None
            continue
        except OSError as exc:
            raise InputError(f"{flag}: {parent} is unusable ({_os_reason(exc)})", path=path) from None
        if not stat.S_ISDIR(mode):
            raise InputError(f"{flag}: {parent} is a file, not a folder", path=path)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InputError(f"{flag}: cannot create it in {parent} (permission denied)", path=path)
        return
