"""Guards on a claim that work is done: the planner's ``DONE`` (hooks ``plan_proposed``, ``completion``), the
executor's ``SUBTASK DONE`` report (``subtask_report``) and its ``complete_task`` (``code_proposed``). A small model
declares victory early, reports a value it never saw or a change it never made, and copies the worked example's
closing ``complete_task()`` into a subtask; each guard below refuses one such claim (once, or a bounded number of
times) with the reason, or plans the closing subtask. The checks they apply are `grounding`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skilltransfer.agents.harness.base import (
    ACCEPT,
    Decision,
    Guard,
    PlanProposal,
    Refuse,
    Rewrite,
    RunLike,
    TaskView,
)
from skilltransfer.agents.harness.grounding import (
    asks_completion,
    called_listing,
    calls_complete_task,
    literal_answers,
    makes_change,
    missing_numbers,
    missing_parts,
    outputs_of,
    ran_code,
    requested_change,
    unmade_change,
)
from skilltransfer.log import ActionStep, PlanStep
from skilltransfer.util.text import truncate


# --------------------------------------------------------------------------------------------- the planner's DONE
@dataclass
class _SubtaskDoneRefusal:
    refused: bool = False


class PrematureDone(Guard):
    """Premature done: a planner ``DONE`` before any subtask ran, and (once per task) a planner ``DONE`` after
    subtasks ran while nobody has called ``complete_task`` (a planner reaching DONE is never told the task is
    finished, so a small model stops one subtask short), are refused with the reason; so is (once per subtask) a
    ``SUBTASK DONE`` before any code of the subtask ran without an error (none ran: ``premature_subtask_done``; only
    failing code ran: ``failed_subtask_done``). Switch: ``agent.refuse_premature_done``."""

    name = "premature_done"

    @property
    def refused_unfinished(self) -> bool:
        """Whether the task's planner already had a DONE refused as unfinished (``complete_task`` not called)."""
        return self.spent("unfinished")

    def plan_proposed(self, task: TaskView, proposal: PlanProposal) -> Decision:
        if proposal.kind != "done" or not proposal.refusable:
            return ACCEPT
        if not task.history:
            prompt = self.prompts.premature_planner_done
            return Refuse(prompt.name, prompt.render())
        if self.refused_unfinished:
            return ACCEPT
        return self.refuse_once(self.prompts.unfinished_planner_done, "unfinished")

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Decision:
        state = self.run_state(run, _SubtaskDoneRefusal)
        if state.refused or ran_code(run.steps):
            return ACCEPT
        prompt = self.prompts.failed_subtask_done if any(s.action for s in run.steps) else \
            self.prompts.premature_subtask_done
        state.refused = True
        return Refuse(prompt.name, prompt.render())


class ClosingSubtask(Guard):
    """Closing subtask: a planner ``DONE`` that stands (after the unfinished-DONE refusal, when that guard is on)
    while nobody has called ``complete_task`` is followed by one harness-planned subtask
    (``prompts/closing_subtask.md``) that asks the executor to make a change the goal asks for and the progress does
    not show, or compute an answer the progress does not give, and then submit; it retrieves skills by the
    instruction and the task ends after it (``PlanStep.decision = "closing"``). Switch: ``agent.close_unfinished``."""

    name = "closing_subtask"

    def completion(self, task: TaskView, plan: PlanStep) -> Decision:
        if not task.history:
            return ACCEPT
        refusing = [peer for peer in self.peers if isinstance(peer, PrematureDone)]
        if any(not peer.refused_unfinished for peer in refusing):
            return ACCEPT  # the unfinished-DONE refusal has not had its turn: the DONE ends the task
        prompt = self.prompts.closing_subtask
        return Rewrite(PlanStep(plan.subtask_index, "closing", prompt.render().strip(), "", prompt.id, final=True,
                                query="instruction"), "closing_subtask")


# --------------------------------------------------------------------------------------------- complete_task
class EarlyCompletion(Guard):
    """Early completion: at subtask level, code that calls ``complete_task`` in a subtask whose text asks for neither
    ``complete_task``, a submission nor the end of the task is refused once per task, without running it; the refusal
    quotes the subtask (``prompts/early_completion.md``). A small executor copies the worked example's closing
    ``complete_task()`` into the first subtask. Switch: ``agent.refuse_early_completion``."""

    name = "early_completion"

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        context = run.context
        if not context.subtask or context.subagent or self.spent() or asks_completion(context.subtask):
            return ACCEPT
        if not calls_complete_task(code):
            return ACCEPT
        return self.refuse_once(self.prompts.early_completion, subtask=context.subtask.strip())


@dataclass
class _AnswerRefusal:
    refused: bool = False


class UngroundedAnswer(Guard):
    """Ungrounded answer: a ``complete_task`` whose *literal* answer holds a number or a word of 3+ letters that no
    observation of the task so far shows is refused once per task, without running the code; the executor then
    samples at ``stuck_temperature`` (`skilltransfer.agents.harness.grounding`; it reads only what the agent saw).
    Switch: ``agent.refuse_ungrounded_answer``."""

    name = "ungrounded_answer"

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        if run is not None and role == "executor" and self.run_state(run, _AnswerRefusal).refused \
                and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature
        return params

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        if self.spent():
            return ACCEPT
        outputs = [*outputs_of(run.context.earlier), *outputs_of(run.steps[:-1])]
        for answer in literal_answers(code):
            missing = missing_parts(answer, outputs)
            if missing:
                self.run_state(run, _AnswerRefusal).refused = True
                return self.refuse_once(self.prompts.ungrounded_answer, answer=answer,
                                        missing=", ".join(f'"{part}"' for part in missing))
        return ACCEPT


class UnmadeCompletion(Guard):
    """Unmade completion: a ``complete_task`` while the task's instruction asks for a change (its first change verb:
    "change", "forward", "remove", "add" ...; `grounding.requested_change`) and neither that code nor any code of the
    task that ran without an error called a function named for one is refused once per task, without running it; the
    refusal names the functions that were called. Switch: ``agent.refuse_unmade_completion``."""

    name = "unmade_completion"

    def code_proposed(self, run: RunLike, step: ActionStep, code: str, reply: str) -> Decision:
        if self.spent() or not calls_complete_task(code):
            return ACCEPT
        verb = requested_change(run.context.episode.task.instruction)
        codes = [*ran_code(run.context.earlier), *ran_code(run.steps[:-1]), code]
        if verb is None or makes_change(codes):
            return ACCEPT
        return self.refuse_once(self.prompts.unmade_completion, verb=verb,
                                called=called_listing(codes, frozenset({"print", "complete_task"})))


# --------------------------------------------------------------------------------------------- SUBTASK DONE
REPORT_REFUSALS = 2
"""How often a subtask's ungrounded ``SUBTASK DONE`` report is refused (a small model that computed the value after
the first refusal often re-sends its old report once)."""


@dataclass
class _ReportRefusals:
    refused: list[int] = field(default_factory=list)
    """Indices (in the run's steps) of the refused reports."""


class UngroundedReport(Guard):
    """Ungrounded report and unmade change: a ``SUBTASK DONE`` report holding a number that no output of the task and
    not the task message shows, or claiming a change ("removed", "updated", "sent" ...) while no code of the task that
    ran without an error called a function named for one, is refused, at most twice per subtask
    (`REPORT_REFUSALS`); the second refusal of a number quotes the output of the code run after the first. The
    executor then samples at ``stuck_temperature``. Switch: ``agent.refuse_ungrounded_report``."""

    name = "ungrounded_report"

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        if run is not None and role == "executor" and self.run_state(run, _ReportRefusals).refused \
                and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature
        return params

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Decision:
        state = self.run_state(run, _ReportRefusals)
        if len(state.refused) >= REPORT_REFUSALS:
            return ACCEPT
        earlier = run.steps[:-1]
        task_message = run.messages[run.head - 1]["content"]  # not the worked example's turns before it
        seen = [*outputs_of(run.context.earlier), *outputs_of(earlier), task_message]
        missing = missing_numbers(report, seen)
        codes = [*ran_code(run.context.earlier), *ran_code(earlier)]
        claim = None if missing else unmade_change(report, codes)
        if not missing and claim is None:
            return ACCEPT
        last = state.refused[-1] if state.refused else None
        state.refused.append(len(run.steps) - 1)
        if claim is not None:
            prompt = self.prompts.unmade_change
            return Refuse("ungrounded_report", prompt.render(report=report[:300], claim=claim,
                                                            called=called_listing(codes)))
        ran = [s for s in run.steps[last + 1: -1] if s.action is not None and not s.error] if last is not None else []
        shown = (f"\nThe output of your code after the previous refusal:\n{truncate(ran[-1].observation.strip(), 600)}"
                 "\nReport what it shows.") if ran else ""  # a model that computed the value re-sends its old report
        prompt = self.prompts.ungrounded_report
        missed = ", ".join(f'"{n}"' for n in missing)
        return Refuse("ungrounded_report", prompt.render(report=report[:300], missing=missed, last_output=shown))
