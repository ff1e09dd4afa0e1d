"""The harness's typed decisions (`Accept`, `Refuse`, `Rewrite`, `End`) and `guard_record`, which records a
non-accept decision on a step as the log keeps it (`skilltransfer.log.GuardRecord`; the harness seam:
`skilltransfer.agents.harness.base`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from skilltransfer.log.steps import GuardRecord

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


def guard_record(guard: str, hook: str, decision: Refuse | Rewrite[Any] | End) -> GuardRecord:
    """A non-accept decision of ``guard`` at ``hook`` as the step records it."""
    if isinstance(decision, Refuse):
        return GuardRecord(guard, hook, "refuse", decision.reason, decision.message)
    if isinstance(decision, End):
        return GuardRecord(guard, hook, "end", decision.reason, decision.message, decision.exit_status)
    return GuardRecord(guard, hook, "rewrite", decision.reason, removed=decision.removed)
