"""The agent's model calls and its steps as prompt text: the step types are the log's (`skilltransfer.log.steps`).

`CallLog` is the one place every model call of a task goes through (all roles): it adds the role's completion budget,
fits the prompt to the context window (`skilltransfer.agents.context`), records the call and reports events.
"""

from __future__ import annotations

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
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.log.steps import ActionStep, ModelCall
from skilltransfer.protocols import ChatModel, Completion, Message
from skilltransfer.util.text import truncate

EventSink = Callable[[str, dict[str, Any]], None]
"""Receives ``(kind, data)`` events: "call_start"/"call_end" (role, tokens) from `CallLog`, "step_start"/"step_end"
from the executor."""


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
