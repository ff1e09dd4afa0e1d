"""The coordination prompts (``skilltransfer/coordination/prompts/*.md``), each with its logged id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from skilltransfer.util.prompts import Prompt, PromptSet

COORDINATION_PROMPTS = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class CoordinationPrompts(PromptSet):
    """The planner's, the host interfaces' and the runtime's prompts, loaded once."""

    DEFAULT_FOLDER: ClassVar[Path] = COORDINATION_PROMPTS

    plan_writer: Prompt
    plan_writer_user: Prompt
    plan_writer_retry: Prompt
    skill_packages: Prompt
    nl_sop: Prompt
    prompt_graph: Prompt
    node: Prompt
    node_inputs: Prompt
    node_skill: Prompt
    finish: Prompt

