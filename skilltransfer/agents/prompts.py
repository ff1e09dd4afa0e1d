"""Prompt templates kept in markdown files; each rendered prompt carries an id (``name@sha256[:8]``) for the logs.

Templates use ``{{name}}`` placeholders (so code braces in prompts need no escaping).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.errors import InputError

AGENT_PROMPTS = Path(__file__).resolve().parent / "prompts"
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


def load_prompt(name: str, folder: str | Path | None = None, *, default_folder: Path = AGENT_PROMPTS) -> Prompt:
    """Read ``<folder>/<name>.md`` (falling back to the packaged prompt when ``folder`` lacks it).

    Raises:
        InputError: neither the given folder nor the package has the prompt.
    """
    for base in ([Path(folder)] if folder else []) + [default_folder]:
        path = base / f"{name}.md"
        if path.is_file():
            return Prompt(name, path.read_text(encoding="utf-8").strip() + "\n")
    raise InputError(f"prompt file {name}.md not found", path=folder or default_folder)


@dataclass(frozen=True)
class AgentPrompts:
    """All prompts of the agents, loaded once."""

    executor_system: Prompt
    executor_subtask_rules: Prompt
    executor_task: Prompt
    executor_subtask: Prompt
    skills_section: Prompt
    format_error: Prompt
    observation: Prompt
    planner: Prompt
    planner_user: Prompt
    planner_format_error: Prompt
    summarizer: Prompt
    summarizer_user: Prompt
    premature_subtask_done: Prompt
    premature_planner_done: Prompt

    @classmethod
    def load(cls, folder: str | Path | None = None) -> AgentPrompts:
        """Load every agent prompt from ``folder`` (missing files fall back to the packaged ones)."""
        import dataclasses

        return cls(**{f.name: load_prompt(f.name, folder) for f in dataclasses.fields(cls)})

    def ids(self) -> dict[str, str]:
        """Prompt name -> prompt id, for the run config."""
        import dataclasses

        return {f.name: getattr(self, f.name).id for f in dataclasses.fields(self)}
