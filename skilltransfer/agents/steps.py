"""Typed trajectory steps (each with ``to_dict()``) and per-call model accounting.

A trajectory is a flat, ordered list of steps: ``RetrievalStep`` (skills read from memory), ``PlanStep`` (the planner's
decision), ``ActionStep`` (one ReAct step: model reply, code, observation), ``SummaryStep`` (the running summary after
a subtask) and ``InductionStep`` (the skill written to memory after a (sub)task).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.protocols import ChatModel, Completion, Message


@dataclass
class ModelCall:
    """One model call's accounting."""

    role: str
    """Which part of the agent called: "executor", "planner", "summarizer" or "induction"."""
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    usage_source: str = "server"

    @property
    def dependency(self) -> int:
        """P*C + C(C+1)/2: the attention work of generating C tokens on top of a P-token prompt."""
        p, c = self.prompt_tokens, self.completion_tokens
        return p * c + c * (c + 1) // 2

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "dependency": self.dependency}


@dataclass
class CallLog:
    """Every model call made while solving one task (all roles), in order."""

    calls: list[ModelCall] = field(default_factory=list)

    def complete(self, model: ChatModel, messages: list[Message], role: str, **params: Any) -> Completion:
        """Call the model and record the call's tokens and latency."""
        completion = model.complete(messages, **params)
        self.calls.append(ModelCall(role, int(completion.prompt_tokens), int(completion.completion_tokens),
                                    float(completion.latency_s), completion.usage_source))
        return completion

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def dependency(self) -> int:
        return sum(c.dependency for c in self.calls)

    @property
    def peak_context(self) -> int:
        """The largest single prompt (tokens)."""
        return max((c.prompt_tokens for c in self.calls), default=0)


@dataclass
class _Step:
    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **dataclasses.asdict(self)}


@dataclass
class RetrievalStep(_Step):
    """Skills retrieved for a task (``subtask_index`` None) or a subtask, with how code skills loaded."""

    query: str
    query_kind: str
    """"instruction" or "subtask"."""
    subtask_index: int | None
    skills: list[dict[str, Any]] = field(default_factory=list)
    """Per skill: id, name, format, score, source_task_id, source_position, load_error (code skills)."""


@dataclass
class PlanStep(_Step):
    """The planner's decision: the next subtask, or done."""

    subtask_index: int
    decision: str
    """"subtask", "done" or "format_error"."""
    subtask: str | None
    reply: str
    prompt_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ActionStep(_Step):
    """One ReAct step: the model reply, the code it ran (None on a format error) and the observation."""

    index: int
    """Position in the task's executor budget (0-based, shared across subtasks)."""
    subtask_index: int | None
    reply: str
    thought: str
    action: str | None
    observation: str
    error: bool = False
    format_error: bool = False
    done: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


@dataclass
class SummaryStep(_Step):
    """The running summary after a subtask."""

    subtask_index: int
    summary: str
    prompt_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class InductionStep(_Step):
    """One induction attempt and what the memory did with the skill."""

    subtask_index: int | None
    prompt_id: str
    status: str
    """"added", "merged", "dropped", "pruned" (memory's AddResult.action) or "unparseable"."""
    skill_id: str | None = None
    skill_name: str | None = None
    target_id: str | None = None
    reason: str = ""
    reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


Step = RetrievalStep | PlanStep | ActionStep | SummaryStep | InductionStep


def render_actions(steps: list[ActionStep], max_observation_chars: int = 2000) -> str:
    """A (sub-)trajectory as readable text: each step's thought, code and (cut) observation."""
    from skilltransfer.envs.base import truncate

    if not steps:
        return "(no actions)"
    parts = []
    for number, step in enumerate(steps, start=1):
        head = f"## Step {number}"
        thought = f"Thought: {step.thought.strip()}\n" if step.thought.strip() else ""
        if step.action is None:
            action = "Action: (none: format error)\n" if step.format_error else f"Reply: {step.reply.strip()}\n"
        else:
            action = f"Action:\n```python\n{step.action.strip()}\n```\n"
        observation = truncate(step.observation.strip(), max_observation_chars)
        parts.append(f"{head}\n{thought}{action}Observation:\n{observation}\n")
    return "\n".join(parts)
