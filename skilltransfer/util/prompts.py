"""Prompt templates kept in markdown files; each rendered prompt carries an id (``name@sha256[:8]``) for the logs.

Templates use ``{{name}}`` placeholders (so code braces in prompts need no escaping).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.errors import InputError

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class Prompt:
    """A prompt template and its id (file stem plus a hash of its text)."""

    name: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.name}@{hashlib.sha256(self.text.encode()).hexdigest()[:8]}"

    def render(self, **values: object) -> str:
        """Fill every ``{{name}}``; a placeholder without a value is an error (a broken template)."""

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in values:
                raise KeyError(f"prompt {self.name!r} needs a value for {{{{{key}}}}}")
            return str(values[key])

        return _PLACEHOLDER.sub(fill, self.text)


def load_prompt(name: str, folder: str | Path | None, *, default_folder: Path) -> Prompt:
    """Read ``<folder>/<name>.md``, falling back to ``<default_folder>/<name>.md`` (the packaged prompt).

    Raises:
        InputError: neither folder has the prompt.
    """
    for base in ([Path(folder)] if folder else []) + [default_folder]:
        path = base / f"{name}.md"
        if path.is_file():
            return Prompt(name, path.read_text(encoding="utf-8").strip() + "\n")
    raise InputError(f"prompt file {name}.md not found", path=folder or default_folder)
