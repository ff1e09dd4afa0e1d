"""User-facing errors: one line, naming the file/line/field, mapped to exit code 2 by the CLI."""

from __future__ import annotations


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
