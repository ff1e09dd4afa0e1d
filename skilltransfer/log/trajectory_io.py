"""The one reader of a logged trajectory's steps: the dicts of ``trajectories/<task>.json`` back as the typed steps of
log format 2 (`skilltransfer.log.steps`). ``show``, ``view``, ``report`` and the metrics read steps through it,
never by key (tests/log/test_trajectory_io.py), so a renamed field fails here, once, not silently in each reader.

Older steps are converted on read: format 1 recorded ``refused`` and ``stuck`` as strings, without ``guards``; they
come back as guard records, so `ActionStep.refused` / `ActionStep.stuck` read as they were logged. The file is
untrusted (the agent under test can write crafted fields): a bad field is one `InputError` naming the trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from skilltransfer.errors import InputError, validation_message
from skilltransfer.log.steps import (
    ActionStep,
    GuardRecord,
    InductionStep,
    MessageStep,
    PlanStep,
    RetrievalStep,
    Step,
    SummaryStep,
)

STEP_TYPES: dict[str, type[Step]] = {cls.__name__: cls for cls in (RetrievalStep, PlanStep, ActionStep, SummaryStep,
                                                                      InductionStep, MessageStep)}
"""A logged step's ``type`` -> its class."""

_ADAPTERS = {name: TypeAdapter(cls) for name, cls in STEP_TYPES.items()}
_DERIVED = ("type", "refused", "stuck")
"""Keys ``to_dict`` adds that are not fields (``refused``/``stuck`` are read from the guards)."""


@dataclass
class UnknownStep:
    """A step of a type this version does not know, kept as logged (shown as its JSON)."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)


ReadStep = Step | UnknownStep


def _legacy_guards(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Format 1: ``refused`` / ``stuck`` strings as the guard records that derive them now."""
    out = []
    if isinstance(data.get("refused"), str) and data["refused"]:
        out.append({"guard": data["refused"], "hook": "", "kind": "refuse", "reason": data["refused"]})
    if isinstance(data.get("stuck"), str) and data["stuck"]:
        out.append({"guard": "stuck_detection", "hook": "", "kind": "end", "reason": data["stuck"]})
    return out


def read_step(data: Any, *, index: int = 0, path: str | Path | None = None) -> ReadStep:
    """One logged step as a typed step.

    Raises:
        InputError: naming ``path`` and the step's field when the step is not a step of its type.
    """
    if not isinstance(data, dict):
        raise InputError(f"steps[{index}]: not an object", path=path)
    kind = data.get("type")
    adapter = _ADAPTERS.get(kind) if isinstance(kind, str) else None
    if adapter is None:
        return UnknownStep(str(kind) if kind is not None else "?", data)
    fields = {k: v for k, v in data.items() if k not in _DERIVED}
    if "guards" not in fields and kind in ("ActionStep", "PlanStep"):
        fields["guards"] = _legacy_guards(data)
    try:
        step: Step = adapter.validate_python(fields)
    except ValidationError as exc:
        raise InputError(f"not a trajectory: {validation_message(exc, prefix=f'steps[{index}]')}", path=path) from None
    return step


def read_steps(steps: Sequence[Any], *, path: str | Path | None = None) -> list[ReadStep]:
    """A trajectory's logged steps, typed (`read_step`), in order."""
    return [read_step(data, index=i, path=path) for i, data in enumerate(steps)]


__all__ = ["STEP_TYPES", "GuardRecord", "ReadStep", "UnknownStep", "read_step", "read_steps"]
