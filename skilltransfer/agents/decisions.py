"""The harness's typed decisions (`Accept`, `Refuse`, `Rewrite`, `End`) and `GuardRecord`, the record of a
non-accept decision on a step (the harness seam: `skilltransfer.agents.harness.base`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


# --------------------------------------------------------------------------------------------- decisions
@dataclass(frozen=True)
class Accept:
    """Nothing to do."""


ACCEPT = Accept()


@dataclass(frozen=True)
class Refuse:
    """Do not act on the reply; tell the model ``message`` (``reason`` names the refusal, e.g. its prompt)."""

    reason: str
    message: str


@dataclass(frozen=True)
class Rewrite(Generic[T]):
    """Replace the value at the hook by ``value``; ``removed`` lists what was left out (summary lines), if any."""

    value: T
    reason: str
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class End:
    """End the (sub)task now with ``exit_status``; ``message`` is its result, ``observation`` (if any) the step's."""

    exit_status: str
    reason: str
    message: str
    observation: str | None = None


Decision = Accept | Refuse | Rewrite[Any] | End


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

    @staticmethod
    def of(guard: str, hook: str, decision: Refuse | Rewrite[Any] | End) -> GuardRecord:
        if isinstance(decision, Refuse):
            return GuardRecord(guard, hook, "refuse", decision.reason, decision.message)
        if isinstance(decision, End):
            return GuardRecord(guard, hook, "end", decision.reason, decision.message, decision.exit_status)
        return GuardRecord(guard, hook, "rewrite", decision.reason, removed=decision.removed)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"guard": self.guard, "hook": self.hook, "kind": self.kind, "reason": self.reason}
        if self.message:
            out["message"] = self.message
        if self.exit_status is not None:
            out["exit_status"] = self.exit_status
        if self.removed:
            out["removed"] = list(self.removed)
        return out
