"""The agents' prompts (``agents/prompts/*.md``), loaded once per agent; templates are `skilltransfer.util.prompts`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skilltransfer.util.prompts import Prompt, PromptSet

AGENT_PROMPTS = Path(__file__).resolve().parent / "prompts"
SKILL_EXEC_PROMPTS = ("skills_library", "action_load_skill", "action_run_skill", "action_open_node", "subagent_task",
                      "subagent_rules")
"""The prompts only the skill execution modes use (a default stream leaves them out of its recorded prompt ids, so
run folders written before they existed still resume)."""
DISCLOSURE_PROMPTS = ("disclosure_section", "disclosure_actions", "disclosure_load_skill", "disclosure_read_skill_file")
"""The prompts only progressive disclosure uses (`skilltransfer.agents.disclosure`; recorded only by a stream that
discloses progressively)."""
DISCLOSURE_SECTIONS = {"library": "disclosure_section", "beside": "disclosure_beside_section",
                       "memory": "disclosure_memory_section"}
"""The skills section's prompt under progressive disclosure, per `skilltransfer.agents.disclosure.DisclosureOrigin`:
a library, a library beside the agent's own skills, the agent's own memory (a stream records the one it uses)."""

NO_SUMMARY = "(nothing done yet)"
"""The progress summary before the first subtask."""
NO_HISTORY = "(none yet)"
"""The subtask list of the planner's and the subtask executor's prompts before the first subtask."""


def history_line(number: int, subtask: str, exit_status: str, report: str) -> str:
    """One line of that subtask list: ``<number>. <subtask> -> <exit status>: <report>``."""
    return f"{number}. {subtask} -> {exit_status}: {report}"


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
    failed_subtask_done: Prompt
    premature_planner_done: Prompt
    unfinished_planner_done: Prompt
    repeated_subtask: Prompt
    closing_subtask: Prompt
    early_completion: Prompt
    ungrounded_answer: Prompt
    ungrounded_report: Prompt
    unmade_change: Prompt
    unmade_completion: Prompt
    skills_library: Prompt
    action_load_skill: Prompt
    action_run_skill: Prompt
    action_open_node: Prompt
    subagent_task: Prompt
    subagent_rules: Prompt
    disclosure_section: Prompt
    disclosure_beside_section: Prompt
    disclosure_memory_section: Prompt
    disclosure_actions: Prompt
    disclosure_load_skill: Prompt
    disclosure_read_skill_file: Prompt

