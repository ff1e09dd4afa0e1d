"""What the loop hands the guards (`skilltransfer.agents.harness`): the executor run's context (`RunContext`), the
executor's opening, a parsed plan, and the views of the task, a subtask's end, a summary and a trajectory to induce
from. The loop's own types: they import nothing from the harness."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skilltransfer.log import ActionStep, PlanStep
from skilltransfer.protocols import Episode, Message

if TYPE_CHECKING:
    from skilltransfer.agents.skill_actions import SkillActions

@dataclass
class RunContext:
    """One executor run (the whole task, one subtask, or a subagent): `Executor.run`'s one argument.

    Args:
        episode: the running task.
        task_message: the first user message (goal, summary, skills; a subagent: its seed message).
        budget: most steps this run may take (format errors count).
        first_index: index of this run's first step in the task's shared budget.
        subtask_index: the subtask being executed (None at task level).
        subtask_mode: ``SUBTASK DONE: ...`` ends the run.
        subtask: the subtask's text ('' at task level and for a subagent).
        actions: the skill actions offered in this context (None: none).
        window: the context window (0: the main agent; k: the task's k-th subagent).
        earlier: the task's action steps before this run (what earlier subtasks printed and ran).
        deadline: a subagent's wall-clock end (``time.monotonic()``), checked before each step; None: none.
    """

    episode: Episode
    task_message: str
    budget: int
    first_index: int = 0
    subtask_index: int | None = None
    subtask_mode: bool = False
    subtask: str = ""
    actions: SkillActions | None = None
    window: int = 0
    earlier: Sequence[ActionStep] = ()
    deadline: float | None = None

    @property
    def subagent(self) -> bool:
        return self.window > 0


@dataclass
class Opening:
    """The start of an executor's context before it is rendered: the docs that go into the system prompt and the
    turns (a worked example) shown before the task message, which is appended to the last of them."""

    docs: str
    turns: list[Message] = field(default_factory=list)


@dataclass
class PlannerOpening:
    """The planner's prompt parts before they are rendered: the docs of its system prompt, the example shown after
    them, and what its user message shows of the earlier subtasks beyond the running summary (the paper's planner:
    nothing)."""

    docs: str
    example: str = ""
    history: str = ""


@dataclass(frozen=True)
class PlanProposal:
    """A parsed planner reply: ("subtask", text) or ("done", None); ``refusable`` is False once a reply of this
    planner call was refused (the next answer stands)."""

    kind: str
    subtask: str | None
    refusable: bool = True


@dataclass(frozen=True)
class TaskView:
    """The task as the planner-side hooks see it."""

    instruction: str
    docs: str
    history: Sequence[str]
    """The subtask list so far, one ``history_line`` per subtask."""
    index: int
    """The planner turn (0-based)."""


@dataclass(frozen=True)
class SubtaskOutcome:
    """A finished subtask: its plan step, exit status and history line."""

    plan: PlanStep
    exit_status: str
    line: str


@dataclass(frozen=True)
class SummaryView:
    """A summarizer reply being checked: the task's instruction, the previous summary and the task's steps so far."""

    instruction: str
    previous: str
    actions: Sequence[ActionStep]


@dataclass(frozen=True)
class InductionView:
    """A finished (sub-)trajectory about to be induced from, or the skill induced from it."""

    goal: str
    actions: Sequence[ActionStep]
    docs: str


class RunLike(Protocol):
    """What a guard may read of an executor run (`skilltransfer.agents.executor.ExecutorRun`)."""

    context: RunContext
    steps: list[ActionStep]
    messages: list[Message]
    head: int
    guard_state: dict[str, Any]
