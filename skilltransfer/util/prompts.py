"""Prompt templates kept in markdown files; each rendered prompt carries an id (``name@sha256[:8]``) for the logs.

Templates use ``{{name}}`` placeholders (so code braces in prompts need no escaping).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from skilltransfer import untrusted
from skilltransfer.errors import InputError

MAX_PROMPT_BYTES = 1 << 20
"""The largest prompt file read from a user's prompt folder."""

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
    if folder:  # the user's folder (a spec's prompt_dir): inside it, no link followed, a regular file, size-capped
        try:
            text = untrusted.read_text(f"{name}.md", root=folder, max_bytes=MAX_PROMPT_BYTES)
        except untrusted.UntrustedFileError as exc:
            if exc.errno != errno.ENOENT:
                raise InputError(f"prompt file {exc.reason}", path=Path(folder) / f"{name}.md") from None
        else:
            return Prompt(name, text.strip() + "\n")
    path = default_folder / f"{name}.md"
    if path.is_file():
        return Prompt(name, path.read_text(encoding="utf-8").strip() + "\n")
    raise InputError(f"prompt file {name}.md not found", path=folder or default_folder)


class PromptSet:
    """Base of a frozen dataclass whose fields are all `Prompt`s, one file per field name in ``DEFAULT_FOLDER``."""

    DEFAULT_FOLDER: ClassVar[Path]

    @classmethod
    def load(cls, folder: str | Path | None = None) -> Self:
        """Load every prompt from ``folder`` (missing files fall back to the packaged ones in ``DEFAULT_FOLDER``)."""
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # subclasses are dataclasses
        return cls(**{f.name: load_prompt(f.name, folder, default_folder=cls.DEFAULT_FOLDER) for f in fields})

    def ids(self) -> dict[str, str]:
        """Prompt name -> prompt id (``name@sha256[:8]``), for the run config."""
        return {f.name: getattr(self, f.name).id for f in dataclasses.fields(self)}  # type: ignore[arg-type]
