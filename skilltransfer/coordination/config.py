"""Settings of the coordination interfaces and the plan writer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Interface = Literal["nl-sop", "prompt-graph", "metaskill"]
INTERFACES: tuple[str, ...] = ("nl-sop", "prompt-graph", "metaskill")
"""The coordination interfaces: the plan as a numbered procedure, as a graph in the prompt, or run by the runtime."""


class CoordinationConfig(BaseModel):
    """How a frozen plan is carried out (the executor's own settings are an ``AgentConfig``)."""

    model_config = ConfigDict(extra="forbid")

    max_parallel: int = Field(default=2, ge=1)
    """metaskill: K, the most ready nodes dispatched at once (their model calls overlap; env actions of the episode
    are serialised by a lock)."""
    step_limit: int = Field(default=50, ge=1)
    """Executor steps for the whole task: the host agent's budget (nl-sop, prompt-graph); for metaskill the budget
    all node attempts and the finishing step share."""
    node_step_limit: int = Field(default=15, ge=1)
    """metaskill: most executor steps of one node attempt (taken from what is left of ``step_limit``)."""
    retries: int = Field(default=1, ge=0)
    """The retry policy of every interface alike: how often a failed unit is retried in a fresh context told why the
    last one ended, within the task's step budget: a metaskill node attempt (then its dependents are skipped), the
    host's context under nl-sop and prompt-graph (a run that ended without submitting)."""
    finish_step_limit: int = Field(default=5, ge=1)
    """metaskill: most steps of the finishing context that calls ``complete_task`` after the last node."""
    max_binding_chars: int = Field(default=4000, ge=100)
    """A bound output longer than this is cut (head kept, the cut said) before it enters a node's prompt."""
    prompt_dir: str | None = None
    """A folder of replacement coordination prompts (same file names as ``skilltransfer/coordination/prompts``)."""


class PlanWriterConfig(BaseModel):
    """Settings of the plan writer (the planner role that writes a task's plan once)."""

    model_config = ConfigDict(extra="forbid")

    retries: int = Field(default=2, ge=0)
    """Re-asks after a reply that does not parse or does not validate (the problems are shown); then the fallback."""
    max_nodes: int = Field(default=8, ge=1)
    """Most nodes a plan may have."""
    max_tokens: int | None = Field(default=768, ge=64)
    """Completion budget of one planner call; None: no cap (a stream under the ``paper`` harness that does not set
    it)."""
    max_skill_chars: int = Field(default=200, ge=20)
    """Each offered skill package is shown as its name and its description cut to this many characters."""
    prompt_dir: str | None = None
    """A folder of replacement coordination prompts."""
