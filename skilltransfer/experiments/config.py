"""The settings of one stream run (`StreamConfig`) and the conditions it can run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.agents.config import AgentLevel
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import PromptVariant
from skilltransfer.skill import SkillFormat

CONDITIONS: dict[str, tuple[AgentLevel, SkillFormat | None]] = {
    "task": ("task", None), "task+text": ("task", "text"), "task+code": ("task", "code"),
    "subtask": ("subtask", None), "subtask+text": ("subtask", "text"), "subtask+code": ("subtask", "code"),
}
"""Condition name -> (induction level, skill format; None = no memory), seed §4."""
LibraryFilter = Literal["top", "bottom"]


def parse_condition(name: str) -> tuple[AgentLevel, SkillFormat | None]:
    """(level, format) of a named condition; unknown names raise an ``InputError`` listing the choices."""
    key = name.strip().lower()
    if key not in CONDITIONS:
        raise InputError(f"unknown condition {name!r}; choose one of: {', '.join(CONDITIONS)}")
    return CONDITIONS[key]


class StreamConfig(BaseModel):
    """One stream run: the condition, where to log, and the agent/induction/memory settings."""

    model_config = ConfigDict(extra="forbid")

    run: str
    """Run name: the log folder is ``<runs_dir>/<run>``; rerunning with the same name resumes."""
    runs_dir: str = "runs"
    """Parent folder of run folders."""
    condition: str = "task"
    """One of task, task+text, task+code, subtask, subtask+text, subtask+code."""
    agent: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``AgentConfig`` fields (the level comes from the condition)."""
    induction_variant: PromptVariant = "full"
    """Induction prompt variant: full, no_demo or no_rules."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``MemoryConfig`` fields (dedup threshold, code validation, ...)."""
    library: str | None = None
    """A frozen library to retrieve from instead of a growing memory: another run's memory folder, a SKILL.md folder
    or a .jsonl file. Induction is off; near-duplicates are kept as they are; usage counts start from zero."""
    library_filter: LibraryFilter | None = None
    """Keep only the top or bottom half of the library by utility (``skilltransfer.metrics.score_library`` against
    this stream's task instructions with the run's embedder): skills ranked by utility (ties by id), the top half is
    the first ceil(n/2) (so it holds the median skill when n is odd), the bottom half the rest."""
    env: str = ""
    """Environment name and arguments, recorded for reproduction (the runner is given the env object)."""
    model: str = ""
    """Model spec, recorded for reproduction."""
    embedder: str = ""
    """Embedder spec, recorded for reproduction."""

    @property
    def path(self) -> Path:
        return Path(self.runs_dir) / self.run
