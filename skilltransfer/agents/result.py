"""What an agent produces for one task (`AgentResult`) and reports while it works (`AgentEvent`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from skilltransfer.agents.steps import CallLog
from skilltransfer.log import ActionStep, InductionStep, RetrievalStep, Step
from skilltransfer.protocols import Message


@dataclass
class AgentResult:
    """Everything one task produced: typed steps, model calls, executor contexts and the exit status."""

    task_id: str
    steps: list[Step] = field(default_factory=list)
    calls: CallLog = field(default_factory=CallLog)
    contexts: list[list[Message]] = field(default_factory=list)
    """The final message list of each executor run (one per subtask)."""
    exit_status: str = ""
    """"submitted", "planner_done", "planner_format_error", "subtask_limit", "limits_exceeded", "stuck" or
    "context_exceeded"."""
    latency_s: float = 0.0
    pending: list[ActionStep] = field(default_factory=list)
    """Steps of the executor run in progress (moved to ``steps`` when it ends)."""

    def steps_so_far(self) -> list[Step]:
        """All steps, including those of the executor run in progress (for writing a partial trajectory)."""
        return [*self.steps, *self.pending]

    @property
    def actions(self) -> list[ActionStep]:
        return [s for s in self.steps if isinstance(s, ActionStep)]

    @property
    def n_subtasks(self) -> int:
        return len({s.subtask_index for s in self.actions}) if self.actions else 0

    @property
    def retrievals(self) -> list[RetrievalStep]:
        return [s for s in self.steps if isinstance(s, RetrievalStep)]

    @property
    def inductions(self) -> list[InductionStep]:
        return [s for s in self.steps if isinstance(s, InductionStep)]


@dataclass(frozen=True)
class AgentEvent:
    """Something the agent started or finished (see `Agent`'s ``on_event``)."""

    kind: str
    """"task_start", "subtask_start", "step_start", "step_end", "call_start", "call_end" or "task_end"."""
    task_id: str
    result: AgentResult
    """The task's result so far (live: later events see it grow)."""
    subtask_index: int | None = None
    """The subtask in progress (None at task level or before the first subtask)."""
    step_index: int | None = None
    """step_start/step_end: the executor step (0-based, in the task's shared budget)."""
    step_limit: int = 0
    role: str | None = None
    """call_start/call_end: which role called the model."""
    tokens: int = 0
    """call_end: prompt + completion tokens of the call."""
