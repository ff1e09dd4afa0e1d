"""User-facing errors: one line, naming the file/line/field, mapped to exit code 2 by the CLI; the one formatter of
pydantic validation errors (`validation_message`); and the two checks every command runs on user paths (read a text
file, check an output path), which turn OS and decoding errors into such lines before anything is written.
"""

from __future__ import annotations

import errno
import os
import stat
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError


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


def key_path(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """A field path as written in a config: ``models.default.params``, ``conditions[1]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "":
            out += f".{part}" if out else str(part)
    return out


def _model_at(model: type[BaseModel] | None, loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The pydantic model a location points into (None when it leads elsewhere)."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif typing.get_origin(annotation) in (dict, list):
            annotation = typing.get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` as ``X``."""
    while typing.get_origin(annotation) in (typing.Union, types.UnionType, typing.Annotated):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if typing.get_origin(annotation) is not typing.Annotated and len(args) != 1:
            return annotation
        annotation = args[0]
    return annotation


def validation_message(exc: ValidationError, *, prefix: str = "", model: type[BaseModel] | None = None,
                       rename: Callable[[tuple[str | int, ...]], tuple[str | int, ...]] | None = None) -> str:
    """The first error of a pydantic validation as one line: ``field '<key path>': <what is wrong>``.

    Unknown keys list the allowed ones (when ``model``, the validated model, is given), a value outside a choice
    lists the choices, broken JSON says where.

    Args:
        exc: the validation error.
        prefix: a key path the error's location is relative to (``models.default``).
        model: the model that was validated.
        rename: maps the error's location to the one to show (a key the user wrote in another form).
    """
    err = exc.errors(include_url=False)[0]
    loc = tuple(err.get("loc", ()))
    kind, message = err.get("type", ""), str(err.get("msg", "invalid"))
    if kind == "json_invalid":
        return f"invalid JSON ({err.get('ctx', {}).get('error', message)})"
    if kind == "extra_forbidden":
        inner = _model_at(model, loc[:-1])
        message = "unknown key" + (f"; allowed: {', '.join(inner.model_fields)}" if inner is not None else "")
    elif kind in ("literal_error", "enum"):
        expected = str(err.get("ctx", {}).get("expected", "")).replace("'", "").replace(" or ", ", ")
        message = f"unknown value {err.get('input')!r}; choose one of: {expected}"
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
    elif kind != "missing" and not isinstance(err.get("input"), dict | list):
        message += f" (got {err.get('input')!r})"
    shown = rename(loc) if rename is not None else loc
    where = key_path([*prefix.split("."), *shown] if prefix else list(shown))
    return f"field {where!r}: {message}" if where else message


def _os_reason(exc: OSError) -> str:
    return "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__


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
