"""What a coordinated task produces: the agent result (steps, calls, contexts) plus the plan and its audit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skilltransfer.agents.result import AgentResult
from skilltransfer.coordination.audit import Audit


@dataclass
class CoordinationResult(AgentResult):
    """An `AgentResult` of one coordinated task (so the stream's records and trajectories read it unchanged).

    ``exit_status`` is the host executor's for nl-sop and prompt-graph; for metaskill "submitted" (the finishing
    context, or a node, called ``complete_task``), "node_failed" (a node failed twice: its dependents were skipped),
    or the finishing context's exit status when it did not submit.
    """

    interface: str = ""
    plan_fingerprint: str = ""
    audit: Audit | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    """Node id -> output text (metaskill: each completed node's ``SUBTASK DONE`` report)."""
    prompt_ids: dict[str, str] = field(default_factory=dict)

    def coordination_dict(self) -> dict[str, Any]:
        """The coordination part of a trajectory log: interface, plan fingerprint, audit, node outputs."""
        return {"interface": self.interface, "plan_fingerprint": self.plan_fingerprint,
                "audit": self.audit.to_dict() if self.audit is not None else None, "outputs": self.outputs,
                "prompt_ids": self.prompt_ids}
