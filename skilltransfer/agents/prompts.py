"""The agents' prompts (``agents/prompts/*.md``), loaded once per agent; templates are `skilltransfer.util.prompts`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.util.prompts import Prompt, load_prompt

AGENT_PROMPTS = Path(__file__).resolve().parent / "prompts"


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
        return cls(**{f.name: load_prompt(f.name, folder, default_folder=AGENT_PROMPTS)
                      for f in dataclasses.fields(cls)})

    def ids(self) -> dict[str, str]:
        """Prompt name -> prompt id, for the run config."""
        return {f.name: getattr(self, f.name).id for f in dataclasses.fields(self)}
