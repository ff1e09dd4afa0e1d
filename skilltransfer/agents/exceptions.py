"""Control flow of the agent loops: exceptions that carry the message the loop acts on (mini-swe-agent style)."""

from __future__ import annotations


class AgentSignal(Exception):
    """Base of the loop's control-flow exceptions; ``message`` is what the loop records or shows the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FormatError(AgentSignal):
    """The model's reply had no runnable action; ``message`` is the observation telling it the expected format."""


class Submitted(AgentSignal):
    """The (sub)task is finished: the agent called ``complete_task`` (scope "task") or declared the subtask done."""

    def __init__(self, message: str, *, scope: str = "task") -> None:
        super().__init__(message)
        self.scope = scope


class LimitsExceeded(AgentSignal):
    """A step or subtask budget ran out."""
