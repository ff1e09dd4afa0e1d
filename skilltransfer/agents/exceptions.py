"""Control flow of the agent loops: exceptions that carry the message the loop acts on (mini-swe-agent style)."""

from __future__ import annotations

from typing import Any


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


class ContextExceeded(AgentSignal):
    """A prompt cannot fit the model's context window, even after fitting, or the endpoint refused it as too long.

    ``fit`` is the fitting log of the attempt (None when the endpoint refused a prompt the fitter let through).
    """

    def __init__(self, message: str, *, fit: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.fit = fit


class Ended(AgentSignal):
    """A guard ended the run (`skilltransfer.agents.harness.base.End`) with ``exit_status`` (``stuck``)."""

    def __init__(self, message: str, *, exit_status: str) -> None:
        super().__init__(message)
        self.exit_status = exit_status
