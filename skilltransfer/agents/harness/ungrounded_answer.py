"""Ungrounded answer: a ``complete_task`` whose *literal* answer holds a number or a word of 3+ letters that no
observation of the task so far shows is refused once per task, without running the code; the executor then samples
at ``stuck_temperature`` (`skilltransfer.agents.harness.grounding`; it reads only what the agent saw). Switch:
``agent.refuse_ungrounded_answer``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, RunLike
from skilltransfer.agents.harness.grounding import literal_answers, missing_parts
from skilltransfer.agents.harness.text import outputs_of
from skilltransfer.log import ActionStep


@dataclass
class _Run:
    refused: bool = False


class UngroundedAnswer(Guard):
    name = "ungrounded_answer"

    def sampling(self, role: str, params: dict[str, Any], run: RunLike | None) -> dict[str, Any]:
        if run is not None and role == "executor" and self.run_state(run, _Run).refused \
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
                self.run_state(run, _Run).refused = True
                return self.refuse_once(self.prompts.ungrounded_answer, answer=answer,
                                        missing=", ".join(f'"{part}"' for part in missing))
        return ACCEPT
