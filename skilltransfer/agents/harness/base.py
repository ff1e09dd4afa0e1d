"""The harness seam: typed decisions, the `Guard` base with its hook points, and `Harness`, which calls a task's
guards in order at each hook and records every decision that is not an accept on the step it concerns.

A guard is a policy (a `Guard` subclass in the module of this package named for the hooks it serves, e.g.
``skilltransfer.agents.harness.completion``) with its own per-task state: one instance per task (the executor's
per-run state lives in ``ExecutorRun.guard_state`` under the guard's name). The agent loops
(`skilltransfer.agents.agent`, ``executor``, ``roles``) only call `Harness` hooks; they name no guard.
A hook returns one of the decisions below (inspect_ai's approvers return an ``Approval`` the same way):

* `Accept` (`ACCEPT`): nothing to do;
* `Refuse`: the reply is not acted on; ``message`` is what the model is told instead (the loop asks again);
* `Rewrite`: the value at the hook (an observation, a subtask, a reply, a summary, a plan) is replaced;
* `End`: the (sub)task ends now with ``exit_status`` (``stuck``, ``subtask_done``).

At a decision hook `Harness` asks the guards in order: a `Rewrite` replaces the value and the next guard sees the new
one; the first `Refuse` or `End` stops the round. Each non-accept decision becomes a `GuardRecord` on the step
(``ActionStep.guards``, ``PlanStep.guards``, ``SummaryStep.guards``, ``InductionStep.guards``), so a reader sees
which guard did what and why; nobody scans those records to steer the loop (a guard keeps what it needs to know in
its own state).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from skilltransfer.agents.decisions import ACCEPT, Accept, Decision, End, Refuse, Rewrite, guard_record
from skilltransfer.agents.views import (
    InductionView,
    Opening,
    PlannerOpening,
    PlanProposal,
    RunContext,
    RunLike,
    SubtaskOutcome,
    SummaryView,
    TaskView,
)
from skilltransfer.log import ActionStep, GuardRecord, PlanStep

if TYPE_CHECKING:
    from skilltransfer.agents.config import AgentConfig
    from skilltransfer.agents.prompts import AgentPrompts
    from skilltransfer.protocols import Retrieval
    from skilltransfer.skill import Skill
    from skilltransfer.util.prompts import Prompt

T = TypeVar("T")
S = TypeVar("S")
__all__ = [
    "ACCEPT", "Accept", "Decision", "End", "Guard", "GuardRecord", "Harness", "InductionView", "Opening", "Outcome",
    "PlannerOpening", "PlanProposal", "Refuse", "Rewrite", "RunContext", "RunLike", "SubtaskOutcome", "SummaryView",
    "TaskView",
]


# --------------------------------------------------------------------------------------------- the guard base
class Guard:
    """A harness feature: a policy called at named hook points, each returning a decision (or a value for the
    shaping hooks). Subclasses override the hooks they use; the defaults accept and change nothing.

    Args:
        config: the agent's resolved settings (a guard reads its own parameters there).
        prompts: the agent prompts (refusal texts).
    """

    name: ClassVar[str] = ""

    def __init__(self, config: AgentConfig, prompts: AgentPrompts) -> None:
        self.config = config
        self.prompts = prompts
        self.peers: Sequence[Guard] = ()
        """The task's guards (this one included), for a guard whose policy follows another's state."""
        self._spent: set[str] = set()

    def spent(self, what: str = "refusal") -> bool:
        """Whether this guard's once-per-task ``what`` has been used (see `refuse_once`)."""
        return what in self._spent

    def refuse_once(self, prompt: Prompt, what: str = "refusal", **values: object) -> Refuse:
        """A refusal with ``prompt`` (rendered with ``values``), marking ``what`` spent for the rest of the task."""
        self._spent.add(what)
        return Refuse(prompt.name, prompt.render(**values))

    def run_state(self, run: RunLike, factory: Callable[[], S]) -> S:
        """This guard's state for one executor run (created by ``factory`` on first use)."""
        state: S = run.guard_state.setdefault(self.name, factory())
        return state

    # shaping hooks (called on every call/run; return the value, changed or not)
    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        """The sampling parameters of a ``role`` call (``run``: the executor run, None for other roles)."""
        return params

    def reply(self, role: str, text: str, run: RunLike | None) -> str:
        """A ``role`` model reply as it is used: the executor's as it enters the context (the step log keeps the raw
        one), the summarizer's before it is checked (``run``: the executor run, None for other roles)."""
        return text

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        """The executor's opening (docs of the system prompt, turns before the task message)."""
        return opening

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        """The planner's prompt parts (docs, the example after them, the earlier subtasks shown)."""
        return opening

    # decision hooks
    def code_form(self, run: RunLike, step: ActionStep, code: str) -> Decision:
        """A reply's code block before it is acted on: `Rewrite` to None when it is not code."""
        return ACCEPT

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        """Code about to run in the episode: `Refuse` (not run), `End` (the run ends without running it)."""
        return ACCEPT

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Decision:
        """A ``SUBTASK DONE`` report: `Refuse` or accept."""
        return ACCEPT

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Decision:
        """A step and its observation (``ran``: code ran in the episode): `Rewrite` the observation, or `End`."""
        return ACCEPT

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        """A planner reply: `Rewrite` the proposal, `Refuse` it (asked again), or accept."""
        return ACCEPT

    def completion(self, task: TaskView, plan: PlanStep) -> Decision:
        """A planner ``DONE`` that stands: `Rewrite` to a plan step to run instead, or accept (the task ends)."""
        return ACCEPT

    def subtask_planned(self, task: TaskView, plan: PlanStep) -> Decision:
        """A subtask about to run: `End` the task, or accept."""
        return ACCEPT

    def subtask_ended(self, task: TaskView, outcome: SubtaskOutcome) -> None:
        """A subtask ended (observe only)."""

    def summary(self, view: SummaryView, text: str) -> Decision:
        """A summarizer reply: `Rewrite` it, or accept."""
        return ACCEPT

    def retrieved(self, query: str, got: Retrieval) -> Decision:
        """Skills retrieved by embedding for ``query``: `Rewrite` the retrieval, or accept."""
        return ACCEPT

    def induction_due(self, view: InductionView) -> Decision:
        """Before inducing from a trajectory: `Refuse` to skip it, or accept."""
        return ACCEPT

    def skill_induced(self, view: InductionView, skill: Skill) -> Decision:
        """An induced skill before it is stored: `Refuse` (not stored), `Rewrite`, or accept."""
        return ACCEPT


# --------------------------------------------------------------------------------------------- the dispatcher
@dataclass
class Outcome(Generic[T]):
    """What a decision hook round gave: the value after rewrites, the records, and the `Refuse`/`End` that stopped
    it (None when every guard accepted or rewrote)."""

    value: T
    records: list[GuardRecord] = field(default_factory=list)
    stop: Refuse | End | None = None


class Harness:
    """A task's guards, in order. Build one per task with `skilltransfer.agents.harness.make_harness`."""

    def __init__(self, guards: Sequence[Guard] = ()) -> None:
        self.guards = list(guards)

    @property
    def names(self) -> list[str]:
        return [guard.name for guard in self.guards]

    def _round(self, hook: str, value: T, ask: Callable[[Guard, T], Decision]) -> Outcome[T]:
        out = Outcome(value)
        for guard in self.guards:
            decision = ask(guard, out.value)
            if isinstance(decision, Accept):
                continue
            out.records.append(guard_record(guard.name, hook, decision))
            if isinstance(decision, Rewrite):
                out.value = decision.value
                continue
            out.stop = decision
            break
        return out

    # shaping
    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None = None) -> dict[str, Any]:
        for guard in self.guards:
            params = guard.sampling(role, params, run)
        return params

    def reply(self, role: str, text: str, run: RunLike | None = None) -> str:
        for guard in self.guards:
            text = guard.reply(role, text, run)
        return text

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        for guard in self.guards:
            opening = guard.opening(context, opening)
        return opening

    def planner_opening(self, task: TaskView) -> PlannerOpening:
        opening = PlannerOpening(task.docs)
        for guard in self.guards:
            opening = guard.planner_opening(task, opening)
        return opening

    # decisions
    def code_form(self, run: RunLike, step: ActionStep, code: str) -> Outcome[str | None]:
        def ask(guard: Guard, value: str | None) -> Decision:
            return guard.code_form(run, step, value) if value is not None else ACCEPT
        return self._round("code_form", code, ask)

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Outcome[str]:
        return self._round("code_proposed", code, lambda guard, value: guard.code_proposed(run, step, value, reply))

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Outcome[str]:
        return self._round("subtask_report", report, lambda guard, value: guard.subtask_report(run, step, value))

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Outcome[str]:
        def ask(guard: Guard, value: str) -> Decision:
            step.observation = value
            return guard.step_observed(run, step, ran=ran)
        out = self._round("step_observed", step.observation, ask)
        step.observation = out.value
        return out

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Outcome[PlanProposal]:
        return self._round("plan_proposed", proposal, lambda guard, value: guard.plan_proposed(task, value))

    def completion(self, task: TaskView, plan: PlanStep) -> Outcome[PlanStep]:
        return self._round("completion", plan, lambda guard, value: guard.completion(task, value))

    def subtask_planned(self, task: TaskView, plan: PlanStep) -> Outcome[PlanStep]:
        return self._round("subtask_planned", plan, lambda guard, value: guard.subtask_planned(task, value))

    def subtask_ended(self, task: TaskView, outcome: SubtaskOutcome) -> None:
        for guard in self.guards:
            guard.subtask_ended(task, outcome)

    def summary(self, view: SummaryView, text: str) -> Outcome[str]:
        return self._round("summary", text, lambda guard, value: guard.summary(view, value))

    def retrieved(self, query: str, got: Retrieval) -> Outcome[Retrieval]:
        return self._round("retrieved", got, lambda guard, value: guard.retrieved(query, value))

    def induction_due(self, view: InductionView) -> Outcome[InductionView]:
        return self._round("induction_due", view, lambda guard, value: guard.induction_due(value))

    def skill_induced(self, view: InductionView, skill: Skill) -> Outcome[Skill]:
        return self._round("skill_induced", skill, lambda guard, value: guard.skill_induced(view, value))
