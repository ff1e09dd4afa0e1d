"""The typed steps of a trajectory (each with ``to_dict()``, as ``trajectories/<task>.json`` logs them), the
harness's records on them (`GuardRecord`) and the accounting of one model call (`ModelCall`).

A trajectory is a flat, ordered list of steps: ``RetrievalStep`` (skills read from memory), ``PlanStep`` (the planner's
decision), ``ActionStep`` (one ReAct step: model reply, code, observation), ``SummaryStep`` (the running summary after
a subtask) and ``InductionStep`` (the skill written to memory after a (sub)task). The agents make them
(`skilltransfer.agents`); `skilltransfer.log.trajectory_io` reads them back. A trajectory another agent wrote (ATIF,
`skilltransfer.log.atif_import`) also holds ``MessageStep``: a user or system message that is no model reply.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.protocols import Message


@dataclass(frozen=True)
class GuardRecord:
    """A non-accept decision as the step records it."""

    guard: str
    hook: str
    kind: str
    """"refuse", "rewrite" or "end"."""
    reason: str
    message: str = ""
    """What the model was told (refuse), the (sub)task's result (end); '' for a rewrite."""
    exit_status: str | None = None
    """The exit status of an end."""
    removed: tuple[str, ...] = ()
    """What a rewrite left out (summary lines, skill ids), if it says."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guard": self.guard, "hook": self.hook, "kind": self.kind, "reason": self.reason}
        if self.message:
            out["message"] = self.message
        if self.exit_status is not None:
            out["exit_status"] = self.exit_status
        if self.removed:
            out["removed"] = list(self.removed)
        return out


@dataclass
class ModelCall:
    """One model call's accounting."""

    role: str
    """Which part of the agent called: "executor", "planner", "summarizer" or "induction"."""
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    usage_source: str = "server"
    context_fit: dict[str, Any] | None = None
    """What context fitting did to the prompt (see `skilltransfer.agents.context.ContextFit`); None when the model's
    window is unknown."""
    error: str | None = None
    """Why the call was not answered ("context_exceeded: ..."); its token counts are then 0."""
    window: int = 0
    """The context window the call belongs to: 0 the main agent, k the task's k-th subagent (``run_skill``)."""
    messages: list[Message] | None = field(default=None, repr=False)
    """The messages sent (after context fitting; for a prompt that could not fit, the messages before fitting)."""
    reply: str | None = field(default=None, repr=False)
    """The model's raw reply (None when the call was not answered), its reasoning split off."""
    finish_reason: str | None = None
    """Why generation ended: "stop", or "length" for a reply cut by the completion cap."""
    reasoning: str | None = field(default=None, repr=False)
    """A reasoning model's reasoning before the reply (`skilltransfer.llm.reasoning`): logged, never sent back."""
    reasoning_tokens: int = 0
    """Completion tokens spent reasoning (part of ``completion_tokens``)."""

    @property
    def dependency(self) -> int:
        """P*C + C(C+1)/2: the attention work of generating C tokens on top of a P-token prompt."""
        p, c = self.prompt_tokens, self.completion_tokens
        return p * c + c * (c + 1) // 2

    def to_dict(self) -> dict[str, Any]:
        """The accounting as logged, without ``messages`` and ``reply`` (the run log stores those once by content:
        `skilltransfer.log.PromptStore`)."""
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in ("messages", "reply", "reasoning")}
        return {**data, "dependency": self.dependency}


@dataclass
class _Step:
    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **dataclasses.asdict(self)}


def _refusal(records: Sequence[GuardRecord]) -> str | None:
    return next((r.reason for r in records if r.kind == "refuse"), None)


@dataclass
class RetrievalStep(_Step):
    """Skills retrieved for a task (``subtask_index`` None) or a subtask, with how code skills loaded."""

    query: str
    query_kind: str
    """"instruction" or "subtask"."""
    subtask_index: int | None
    skills: list[dict[str, Any]] = field(default_factory=list)
    """Per skill: id, name, format, score, source_task_id, source_position, load_error (code skills)."""
    organization: dict[str, Any] | None = None
    """How the skills were organised for the agent when not flat: kind, ``built_by`` (e.g. the task-tree fallback of
    a tree/graph stream without a frozen organisation), routing nodes."""
    route: dict[str, Any] | None = None
    """What the retriever did, when one chose the skills section (lens reuse: `skilltransfer.lens.RouteLog`)."""
    below_min_score: int = 0
    """Top-k hits left out because their cosine was below ``retrieval_min_score``."""
    guards: list[GuardRecord] = field(default_factory=list)
    """The harness's decisions on this retrieval (`skilltransfer.agents.harness`)."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.route is None:
            del out["route"]  # flat reuse logs as before
        if not self.below_min_score:
            del out["below_min_score"]
        if not self.guards:
            del out["guards"]
        return out


@dataclass
class PlanStep(_Step):
    """The planner's decision: the next subtask, or done."""

    subtask_index: int
    decision: str
    """"subtask", "done", "format_error", or a plan a guard put in place of a DONE (``"closing"``: the closing
    subtask)."""
    subtask: str | None
    reply: str
    prompt_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refused_reply: str | None = None
    """A reply that was refused before this decision, if any (a premature ``DONE`` or a repeated subtask)."""
    guards: list[GuardRecord] = field(default_factory=list)
    """The harness's decisions on this plan (refusals of earlier replies, rewrites, an end)."""
    final: bool = False
    """The task ends after this subtask (unless it submitted): a plan a guard put in place of a DONE."""
    query: str | None = None
    """What this subtask's retrieval queries with when not the agent's setting: ``"instruction"``."""

    @property
    def refused(self) -> str | None:
        """Why a reply before this decision was refused (the refusing prompt, e.g. ``"unfinished_planner_done"``)."""
        return _refusal(self.guards)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "refused": self.refused}


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
    window: int = 0
    """The context window that took the step: 0 the main agent, k the task's k-th subagent."""
    skill_action: dict[str, Any] | None = None
    """A harness-side skill action (``skilltransfer.agents.skill_actions``) the step was, instead of code run in the
    episode: ``action``, ``target``, ``skill_id`` when the target is a skill (a pick, `skilltransfer.log.selection`),
    and for ``run_skill`` the subagent's ``window``, ``status``, ``steps``,
    ``sent_tokens``, ``seed_tokens``, ``returned_tokens``."""
    guards: list[GuardRecord] = field(default_factory=list)
    """The harness's decisions on this step (a refusal, a rewritten observation, an end)."""
    skill_calls: dict[str, int] = field(default_factory=dict)
    """Calls the step's code made of retrieved code skills' functions (skill id -> calls), as the sandbox recorded
    them (`skilltransfer.protocols.Observation.skill_calls`)."""

    @property
    def refused(self) -> str | None:
        """Why the reply was refused, if it was (``"ungrounded_answer"``, ``"early_completion"``, ...: its code was
        not run)."""
        return _refusal(self.guards)

    @property
    def stuck(self) -> str | None:
        """The loop pattern stuck detection found after this step (``skilltransfer.agents.harness.observations``), if
        any."""
        return next((r.reason for r in self.guards if r.guard == "stuck_detection"), None)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "stuck": self.stuck, "refused": self.refused}


@dataclass
class SummaryStep(_Step):
    """The running summary after a subtask."""

    subtask_index: int
    summary: str
    prompt_id: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "ok"
    """"ok", or "context_exceeded" (the summarizer's prompt could not fit: the previous summary is kept)."""
    dropped: list[str] = field(default_factory=list)
    """Lines of the summarizer's reply the harness left out (``grounded_summary``)."""
    guards: list[GuardRecord] = field(default_factory=list)
    """The harness's decisions on this summary."""


@dataclass
class InductionStep(_Step):
    """One induction attempt and what the memory did with the skill."""

    subtask_index: int | None
    prompt_id: str
    status: str
    """"added", "merged", "dropped", "pruned" (memory's AddResult.action), "unparseable", "skipped" (``only_successful``
    and the task failed, or a guard skipped it: ``induction_gate``), "context_exceeded" (the induction prompt could
    not fit: no skill), or the reason a guard refused to store the skill (``"ungrounded"``: ``grounded_skills``)."""
    skill_id: str | None = None
    skill_name: str | None = None
    target_id: str | None = None
    reason: str = ""
    reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    guards: list[GuardRecord] = field(default_factory=list)
    """The harness's decisions on this induction (skipped, a skill not stored)."""


@dataclass
class MessageStep(_Step):
    """A message that is no model reply: a later user turn or a system event of a trajectory another agent wrote
    (ATIF ``source`` "user" or "system", `skilltransfer.log.atif_import`); the toolkit's own agents write none."""

    source: str
    """"user" or "system"."""
    message: str
    window: int = 0
    """The context window it belongs to: 0 the main agent, k the trajectory's k-th subagent."""


Step = RetrievalStep | PlanStep | ActionStep | SummaryStep | InductionStep | MessageStep
