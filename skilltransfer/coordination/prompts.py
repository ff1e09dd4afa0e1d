"""The coordination prompts (``skilltransfer/coordination/prompts/*.md``), each with its logged id."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.util.prompts import Prompt, load_prompt

COORDINATION_PROMPTS = Path(__file__).resolve().parent / "prompts"


@dataclass(frozen=True)
class CoordinationPrompts:
    """The planner's, the host interfaces' and the runtime's prompts, loaded once."""

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

    @classmethod
    def load(cls, folder: str | Path | None = None) -> CoordinationPrompts:
        """Load every prompt from ``folder`` (missing files fall back to the packaged ones)."""
        return cls(**{f.name: load_prompt(f.name, folder, default_folder=COORDINATION_PROMPTS)
                      for f in dataclasses.fields(cls)})

    def ids(self) -> dict[str, str]:
        """Prompt name -> prompt id (``name@sha256[:8]``)."""
        return {f.name: getattr(self, f.name).id for f in dataclasses.fields(self)}
