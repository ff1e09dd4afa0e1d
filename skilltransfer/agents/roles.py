"""The subtask-level agent's planner and summarizer: small objects over the same ChatModel as the executor."""

from __future__ import annotations

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.decisions import Refuse
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.replies import parse_plan
from skilltransfer.agents.steps import CallLog, TrajectoryText
from skilltransfer.agents.views import PlanProposal, SummaryView, TaskView
from skilltransfer.log import ActionStep, GuardRecord, PlanStep, SummaryStep
from skilltransfer.protocols import ChatModel, Message


class Planner:
    """Reads the goal and running summary; proposes the next subtask or declares completion.

    Args:
        harness: the task's guards: a reply may be rewritten or refused (``plan_proposed``; at most one reply per
            call is refused, the next answer stands) and the prompt's parts shaped (``planner_opening``).
    """

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog,
                 harness: Harness) -> None:
        self.model, self.prompts, self.config, self.calls, self.harness = model, prompts, config, calls, harness

    def next(self, task: TaskView, summary: str, *, steps_left: int, subtasks_left: int) -> PlanStep:
        """Ask for the next subtask (re-asking after a malformed reply up to ``planner_retries`` times)."""
        opening = self.harness.planner_opening(task)
        messages: list[Message] = [
            {"role": "system",
             "content": self.prompts.planner.render(docs=opening.docs.strip(), example=opening.example)},
            {"role": "user", "content": self.prompts.planner_user.render(
                instruction=task.instruction, summary=summary, history=opening.history,
                steps_left=steps_left, subtasks_left=subtasks_left)}]
        prompt_tokens = completion_tokens = 0
        reply, refused, format_errors = "", None, 0
        records: list[GuardRecord] = []
        decision: PlanProposal | None = None
        while format_errors <= self.config.planner_retries:
            completion = self.calls.complete(self.model, messages, "planner",
                                             **self.harness.sampling("planner", dict(self.config.model_params)))
            reply = completion.text
            prompt_tokens += completion.prompt_tokens
            completion_tokens += completion.completion_tokens
            parsed = parse_plan(reply)
            if parsed is not None:
                verdict = self.harness.plan_proposed(task, PlanProposal(*parsed, refusable=refused is None))
                records.extend(verdict.records)
                decision = verdict.value
                if isinstance(verdict.stop, Refuse):
                    refused = reply
                    messages += [{"role": "assistant", "content": reply},
                                 {"role": "user", "content": verdict.stop.message}]
                    continue
                break
            decision = None
            format_errors += 1
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": self.prompts.planner_format_error.render()}]
        kind, subtask = (decision.kind, decision.subtask) if decision is not None else ("format_error", None)
        return PlanStep(task.index, kind, subtask, reply, self.prompts.planner.id, prompt_tokens, completion_tokens,
                        refused_reply=refused, guards=records)


class Summarizer:
    """Compresses a finished sub-trajectory into the running summary (the harness may cut or check its reply)."""

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog,
                 harness: Harness) -> None:
        self.model, self.prompts, self.config, self.calls, self.harness = model, prompts, config, calls, harness

    def summarize(self, view: SummaryView, subtask: str, actions: list[ActionStep], *, index: int) -> SummaryStep:
        """Return the updated running summary (the previous one, ``view.previous``, is kept if the model replies with
        nothing, or with nothing the harness keeps)."""
        trajectory = TrajectoryText(actions, self.config.max_observation_chars)
        messages: list[Message] = [
            {"role": "system", "content": self.prompts.summarizer.render()},
            {"role": "user", "content": self.prompts.summarizer_user.render(
                instruction=view.instruction, summary=view.previous, subtask=subtask,
                trajectory=trajectory.render())}]
        params = self.harness.sampling("summarizer", dict(self.config.model_params))
        completion = self.calls.complete(self.model, messages, "summarizer", trajectory=trajectory, **params)
        text = self.harness.reply("summarizer", completion.text).strip()
        verdict = self.harness.summary(view, text)
        dropped = [line for record in verdict.records for line in record.removed]
        return SummaryStep(index, verdict.value or view.previous, self.prompts.summarizer.id, completion.prompt_tokens,
                           completion.completion_tokens, dropped=dropped, guards=verdict.records)
