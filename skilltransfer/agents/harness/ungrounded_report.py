"""Ungrounded report and unmade change: a ``SUBTASK DONE`` report holding a number that no output of the task and not
the task message shows, or claiming a change ("removed", "updated", "sent" ...) while no code of the task that ran
without an error called a function named for one, is refused, at most twice per subtask (`REPORT_REFUSALS`); the
second refusal of a number quotes the output of the code run after the first. The executor then samples at
``stuck_temperature``. Switch: ``agent.refuse_ungrounded_report``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, Refuse, RunLike
from skilltransfer.agents.harness.grounding import called_listing, missing_numbers, unmade_change
from skilltransfer.agents.harness.text import outputs_of, ran_code
from skilltransfer.log import ActionStep
from skilltransfer.util.text import truncate

REPORT_REFUSALS = 2
"""How often a subtask's ungrounded ``SUBTASK DONE`` report is refused (a small model that computed the value after
the first refusal often re-sends its old report once)."""


@dataclass
class _Run:
    refused: list[int] = field(default_factory=list)
    """Indices (in the run's steps) of the refused reports."""


class UngroundedReport(Guard):
    name = "ungrounded_report"

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        if run is not None and role == "executor" and self.run_state(run, _Run).refused \
                and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature
        return params

    def subtask_report(self, run: RunLike, step: ActionStep, report: str) -> Decision:
        state = self.run_state(run, _Run)
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
