"""Prompt templates kept in markdown files, for any role: each carries an id (``name@sha256[:8]``) for the logs.

Templates use ``{{name}}`` placeholders (so code braces in prompts need no escaping). This module sits on the floor
(it imports only `skilltransfer.errors`), so every layer with prompts can use it without importing the agents.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.errors import InputError

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class PromptTemplate:
    """A prompt template and its id (file stem plus a hash of its text)."""

    name: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.name}@{hashlib.sha256(self.text.encode()).hexdigest()[:8]}"

    def render(self, **values: object) -> str:
        """Fill every ``{{name}}`` in one pass (a value's own braces are never re-read).

        Raises:
            KeyError: a placeholder has no value (a broken template).
        """

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in values:
                raise KeyError(f"prompt {self.name!r} needs a value for {{{{{key}}}}}")
            return str(values[key])

        return _PLACEHOLDER.sub(fill, self.text)


def read_template(name: str, default_folder: Path, folder: str | Path | None = None) -> PromptTemplate:
    """Read ``<folder>/<name>.md``, falling back to ``<default_folder>/<name>.md``.

    Args:
        name: the template's file stem.
        default_folder: the packaged templates.
        folder: a user folder of replacements (files it lacks come from ``default_folder``).

    Raises:
        InputError: neither folder has the template.
    """
    for base in ([Path(folder)] if folder else []) + [default_folder]:
        path = base / f"{name}.md"
        if path.is_file():
            return PromptTemplate(name, path.read_text(encoding="utf-8").strip() + "\n")
    raise InputError(f"prompt file {name}.md not found", path=folder or default_folder)
