"""Induction gate: no skill is induced from a (sub)trajectory in which no code ran without an error
(`InductionStep.status = "skipped"`): a small model's skill from a subtask that only failed records its invented calls,
is retrieved at the top by the next similar subtask and copied there. Switch: ``agent.induce_without_working_code``
(true is off: the paper induces from every executed trajectory)."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, InductionView, Refuse
from skilltransfer.agents.harness.text import ran_code


class InductionGate(Guard):
    name = "induction_gate"

    def induction_due(self, view: InductionView) -> Decision:
        if ran_code(view.actions):
            return ACCEPT
        return Refuse("skipped", "no code of this trajectory ran without an error")
