"""Typed trajectory steps (each with ``to_dict()``) and per-call model accounting.

A trajectory is a flat, ordered list of steps: ``RetrievalStep`` (skills read from memory), ``PlanStep`` (the planner's
decision), ``ActionStep`` (one ReAct step: model reply, code, observation), ``SummaryStep`` (the running summary after
a subtask) and ``InductionStep`` (the skill written to memory after a (sub)task).

`CallLog` is the one place every model call of a task goes through (all roles): it adds the role's completion budget,
fits the prompt to the context window (`skilltransfer.agents.context`), records the call and reports events.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.agents.config import AgentConfig, role_budgets
from skilltransfer.agents.context import (
    ContextFitter,
    SkillBlock,
    Trajectory,
    dropped_note,
    elide_observation,
    elide_reply,
)
from skilltransfer.agents.decisions import GuardRecord
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.protocols import ChatModel, Completion, Message
from skilltransfer.util.text import truncate

EventSink = Callable[[str, dict[str, Any]], None]
"""Receives ``(kind, data)`` events: "call_start"/"call_end" (role, tokens) from `CallLog`, "step_start"/"step_end"
from the executor."""


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
        `skilltransfer.experiments.runlog.PromptStore`)."""
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in ("messages", "reply", "reasoning")}
        return {**data, "dependency": self.dependency}


@dataclass
class CallLog:
    """Every model call made while solving one task (all roles), in order.

    Args:
        calls: the calls so far.
        fitter: fits each prompt to the model's window and adds the role's ``max_tokens`` (None: neither).
        on_event: receives call and step events (progress display, step-by-step trajectory writes).
        skills: the retrieved skills currently in the prompts, rendered (or as `SkillBlock`s), best first (fitting may
            shorten them, the worst first).
    """

    calls: list[ModelCall] = field(default_factory=list)
    fitter: ContextFitter | None = None
    on_event: EventSink | None = None
    skills: Sequence[str | SkillBlock] = ()
    section: str = ""
    """The skills section in the prompts when fitting may leave it out whole as its last resort (progressive
    disclosure); '' otherwise."""
    window: int = 0
    """The context window calls are recorded under now (`ModelCall.window`)."""
    windows: int = 0
    """Subagent windows opened so far in the task."""

    def emit(self, kind: str, **data: Any) -> None:
        """Report an event to ``on_event`` (if any)."""
        if self.on_event is not None:
            self.on_event(kind, data)

    def complete(self, model: ChatModel, messages: list[Message], role: str, *, trajectory: Trajectory | None = None,
                 head: int | None = None, **params: Any) -> Completion:
        """Fit the prompt, call the model and record the call's tokens, latency and fitting.

        Args:
            model: the model to call.
            messages: the prompt.
            role: "executor", "planner", "summarizer" or "induction".
            trajectory: the rendered (sub-)trajectory inside ``messages``, which fitting may re-render with steps
                elided (summarizer, induction).
            head: leading messages that fitting keeps verbatim (default: up to the first user message).
            **params: sampling parameters.

        Raises:
            ContextExceeded: the prompt cannot fit, or the endpoint refused it as too long (the call is recorded
                with its ``error``).
        """
        fit = None
        if self.fitter is not None:
            params, budget = self.fitter.params(model, role, params)
            try:
                messages, fitted = self.fitter.fit(model, messages, budget, trajectory=trajectory, skills=self.skills,
                                                   head=head, section=self.section)
            except ContextExceeded as exc:
                self.calls.append(ModelCall(role, 0, 0, 0.0, "none", exc.fit, f"context_exceeded: {exc.message}",
                                            self.window, messages=[dict(m) for m in messages]))
                raise
            fit = fitted.to_dict() if fitted is not None else None
        self.emit("call_start", role=role)
        start = time.perf_counter()
        try:
            completion = model.complete(messages, **params)
        except ContextLengthError as exc:
            self.calls.append(ModelCall(role, 0, 0, time.perf_counter() - start, "none", fit,
                                        f"context_exceeded: {exc}", self.window, messages=[dict(m) for m in messages]))
            raise ContextExceeded(str(exc), fit=fit) from exc
        self.calls.append(ModelCall(role, int(completion.prompt_tokens), int(completion.completion_tokens),
                                    float(completion.latency_s), completion.usage_source, fit, window=self.window,
                                    messages=[dict(m) for m in messages], reply=completion.text,
                                    finish_reason=completion.finish_reason,
                                    reasoning=getattr(completion, "reasoning", "") or None,
                                    reasoning_tokens=int(getattr(completion, "reasoning_tokens", 0) or 0)))
        self.emit("call_end", role=role, tokens=int(completion.prompt_tokens) + int(completion.completion_tokens))
        return completion

    @property
    def fitted_calls(self) -> int:
        """Calls whose prompt fitting changed."""
        keys = ("elided_steps", "elided_replies", "dropped_steps", "cut_skills", "shortened_skills",
                "dropped_skills_section")
        return sum(1 for c in self.calls if c.context_fit and any(c.context_fit.get(k) for k in keys))

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
    def reasoning_tokens(self) -> int:
        return sum(c.reasoning_tokens for c in self.calls)

    @property
    def length_cut_calls(self) -> int:
        """Answered calls whose reply was cut by the completion cap (finish_reason "length")."""
        return sum(1 for c in self.calls if c.error is None and c.finish_reason == "length")

    @property
    def peak_context(self) -> int:
        """The largest single prompt (tokens)."""
        return max((c.prompt_tokens for c in self.calls), default=0)


def new_call_log(config: AgentConfig, on_event: EventSink | None = None) -> CallLog:
    """A task's call log with the agent's fitting policy: the role budgets (`role_budgets`) and
    ``config.context_keep_steps``."""
    budgets, capped = role_budgets(config)
    fitter = ContextFitter(budgets, config.context_keep_steps, cap_to_window=capped)
    return CallLog(fitter=fitter, on_event=on_event)


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
    episode: ``action``, ``target``, and for ``run_skill`` the subagent's ``window``, ``status``, ``steps``,
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
        """The loop pattern stuck detection found after this step (``skilltransfer.agents.harness.stuck``), if any."""
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


Step = RetrievalStep | PlanStep | ActionStep | SummaryStep | InductionStep


def render_actions(steps: list[ActionStep], max_observation_chars: int = 2000, *, elided_observations: int = 0,
                   elided_replies: int = 0, dropped: int = 0) -> str:
    """A (sub-)trajectory as readable text: each step's thought, code and (cut) observation.

    Args:
        steps: the action steps.
        max_observation_chars: each observation is cut (head and tail kept) to this many characters.
        elided_observations: the observations of this many first steps become one line each (context fitting).
        elided_replies: the thought and code of this many first steps become one line each.
        dropped: this many first steps are left out (one line says so).
    """
    if not steps:
        return "(no actions)"
    parts = [dropped_note(dropped)] if dropped else []
    for number, step in enumerate(steps, start=1):
        if number <= dropped:
            continue
        head = f"## Step {number}"
        thought = f"Thought: {step.thought.strip()}\n" if step.thought.strip() else ""
        if step.action is None:
            action = "Action: (none: format error)\n" if step.format_error else f"Reply: {step.reply.strip()}\n"
        else:
            action = f"Action:\n```python\n{step.action.strip()}\n```\n"
        if number <= elided_replies:
            thought, action = "", f"Reply: {elide_reply(step.reply.strip())}\n"
        observation = truncate(step.observation.strip(), max_observation_chars)
        if number <= elided_observations:
            observation = elide_observation(observation)
        parts.append(f"{head}\n{thought}{action}Observation:\n{observation}\n")
    return "\n".join(parts)


@dataclass(frozen=True)
class TrajectoryText:
    """A (sub-)trajectory as rendered into a prompt (summarizer, induction), re-renderable with steps elided.

    Args:
        steps: the action steps.
        max_observation_chars: the per-observation cut.
        max_chars: the whole text is cut (head and tail kept) to this many characters (None: no cut).
    """

    steps: list[ActionStep]
    max_observation_chars: int = 2000
    max_chars: int | None = None

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def render(self, elided_observations: int = 0, elided_replies: int = 0, *, dropped: int = 0) -> str:
        """The text, with the observations/replies of the first steps elided to one line each, the first ``dropped``
        steps left out."""
        text = render_actions(self.steps, self.max_observation_chars, elided_observations=elided_observations,
                              elided_replies=elided_replies, dropped=dropped)
        return truncate(text, self.max_chars) if self.max_chars is not None else text
