"""The agents' prompts (``agents/prompts/*.md``), loaded once per agent; templates are `skilltransfer.util.prompts`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skilltransfer.util.prompts import Prompt, PromptSet

AGENT_PROMPTS = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class AgentPrompts(PromptSet):
    """All prompts of the agents, loaded once."""

    DEFAULT_FOLDER: ClassVar[Path] = AGENT_PROMPTS

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
    skills_library: Prompt
    action_load_skill: Prompt
    action_run_skill: Prompt
    action_open_node: Prompt
    subagent_task: Prompt
    subagent_rules: Prompt

