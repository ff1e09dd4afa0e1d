"""The subtask-level agent's planner and summarizer: small objects over the same ChatModel as the executor."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.demonstration import split_demonstration, split_plan_example
from skilltransfer.agents.grounding import ungrounded_lines
from skilltransfer.agents.prompts import NO_HISTORY, AgentPrompts
from skilltransfer.agents.steps import ActionStep, CallLog, PlanStep, SummaryStep, TrajectoryText
from skilltransfer.protocols import ChatModel, Message
from skilltransfer.util.prompts import Prompt

_PLAN = re.compile(r"^[ \t>*#_-]*(?:(SUBTASK)[ \t*_]*:[ \t*_]*(.*)|(DONE)\b.*)$", re.MULTILINE | re.IGNORECASE)


def parse_plan(reply: str) -> tuple[str, str | None] | None:
    """The planner's decision: ("subtask", text), ("done", None), or None when the reply has neither form.

    The first ``SUBTASK: ...`` or ``DONE`` line wins; a ``SUBTASK:`` with an empty rest takes the next non-empty line.
    """
    match = _PLAN.search(reply)
    if match is None:
        return None
    if match.group(3):
        return "done", None
    text = match.group(2).strip()
    if not text:
        rest = [line.strip() for line in reply[match.end():].splitlines() if line.strip()]
        if not rest:
            return None
        text = rest[0]
    return "subtask", text


_COPIED_OUTCOME = re.compile(r"\s+->\s+(?:subtask_done|stuck|limits_exceeded|context_exceeded|submitted)\b.*\Z",
                             re.DOTALL)
_NUMBERED = re.compile(r"^\d+\.\s+")


def uncopied(subtask: str) -> str:
    """``subtask`` without the history-line form a planner imitates: a leading ``<n>. `` and a trailing
    ``-> <exit status>: <result>`` (``"<n>. <subtask> -> <status>: <result>"`` is how the planner's history reads)."""
    text = _COPIED_OUTCOME.sub("", subtask)
    return _NUMBERED.sub("", text) if text != subtask else text


def normalized_subtask(subtask: str) -> str:
    """A subtask's text compared case- and whitespace-insensitively."""
    return " ".join(subtask.lower().split())


class Planner:
    """Reads the goal and running summary; proposes the next subtask or declares completion."""

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog) -> None:
        self.model, self.prompts, self.config, self.calls = model, prompts, config, calls

    def next(self, docs: str, instruction: str, summary: str, history: list[str], *, index: int, steps_left: int,
             subtasks_left: int, refusal: Prompt | None = None, done: Mapping[str, str] | None = None) -> PlanStep:
        """Ask for the next subtask (re-asking after a malformed reply up to ``planner_retries`` times).

        Args:
            refusal: when set, a ``DONE`` is refused once with this prompt (it gives the reason) and the planner is
                asked again; the second answer stands. ``PlanStep.refused`` names the prompt.
            done: the subtasks that already ended ``subtask_done``, by `normalized_subtask`, each with its line of
                the subtask list; planning one of them again is refused with ``prompts.repeated_subtask``. At most one
                reply is refused per call.
        """
        docs, plan_example = split_plan_example(split_demonstration(docs)[0])
        example = f"\n{plan_example}\n" if plan_example else ""
        messages: list[Message] = [
            {"role": "system", "content": self.prompts.planner.render(docs=docs.strip(), example=example)},
            {"role": "user", "content": self.prompts.planner_user.render(
                instruction=instruction, summary=summary, history="\n".join(history) or NO_HISTORY,
                steps_left=steps_left, subtasks_left=subtasks_left)}]
        prompt_tokens = completion_tokens = 0
        reply, refused, refused_as, format_errors = "", None, None, 0
        decision: tuple[str, str | None] | None = None
        while format_errors <= self.config.planner_retries:
            completion = self.calls.complete(self.model, messages, "planner", **self.config.model_params)
            reply = completion.text
            prompt_tokens += completion.prompt_tokens
            completion_tokens += completion.completion_tokens
            decision = parse_plan(reply)
            due = self._refusal(decision, refusal, done or {}) if refused is None else None
            if due is not None:
                refused, refused_as = reply, due[0]
                messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": due[1]}]
                continue
            if decision is not None:
                break
            format_errors += 1
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": self.prompts.planner_format_error.render()}]
        kind, subtask = decision if decision is not None else ("format_error", None)
        if subtask is not None:
            subtask = uncopied(subtask)
        return PlanStep(index, kind, subtask, reply, self.prompts.planner.id, prompt_tokens, completion_tokens,
                        refused_reply=refused, refused=refused_as)

    def _refusal(self, decision: tuple[str, str | None] | None, refusal: Prompt | None,
                 done: Mapping[str, str]) -> tuple[str, str] | None:
        """The (prompt name, text) refusing this decision, or None: a due ``DONE`` refusal, or a repeated subtask."""
        if decision is None:
            return None
        kind, subtask = decision
        if kind == "done":
            return (refusal.name, refusal.render()) if refusal is not None else None
        line = done.get(normalized_subtask(uncopied(subtask or "")))
        if line is None:
            return None
        return self.prompts.repeated_subtask.name, self.prompts.repeated_subtask.render(line=line)


SUMMARY_STOP = "\n#"
"""Where a summary ends (with ``AgentConfig.stop`` set): a summary is bullet points, and a heading after them is the
model writing on into an invented next prompt (``## Subtask just executed`` ...)."""


class Summarizer:
    """Compresses a finished sub-trajectory into the running summary."""

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog) -> None:
        self.model, self.prompts, self.config, self.calls = model, prompts, config, calls

    def summarize(self, instruction: str, summary: str, subtask: str, actions: list[ActionStep], *,
                  index: int, outputs: Sequence[str] = (), codes: Sequence[str] = ()) -> SummaryStep:
        """Return the updated running summary (the previous one is kept if the model replies with nothing).

        Args:
            outputs: the task's outputs so far (with ``ground_summary``, new lines need their numbers in one of these
                or in ``instruction``).
            codes: the task's code that ran without an error so far (a new line claiming a change needs one that
                called a function named for a change).
        """
        trajectory = TrajectoryText(actions, self.config.max_observation_chars)
        messages: list[Message] = [
            {"role": "system", "content": self.prompts.summarizer.render()},
            {"role": "user", "content": self.prompts.summarizer_user.render(
                instruction=instruction, summary=summary, subtask=subtask, trajectory=trajectory.render())}]
        params = dict(self.config.model_params)
        if self.config.stop:
            params.setdefault("stop", [SUMMARY_STOP])
        completion = self.calls.complete(self.model, messages, "summarizer", trajectory=trajectory, **params)
        text = completion.text
        if self.config.stop:
            text = text.split(SUMMARY_STOP, 1)[0] if not text.startswith("#") else ""
        text, dropped = text.strip(), list[str]()
        if self.config.ground_summary and text:
            text, dropped = ungrounded_lines(text, summary, [instruction, *outputs], codes)
        return SummaryStep(index, text or summary, self.prompts.summarizer.id, completion.prompt_tokens,
                           completion.completion_tokens, dropped=dropped)
