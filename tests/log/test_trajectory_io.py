"""Trajectories are read back typed (issue 40, item 4): one reader (`skilltransfer.log.trajectory_io`) turns logged
steps into the typed steps of format 2; nothing else in the readers of run logs reads a step by key."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from skilltransfer.errors import InputError
from skilltransfer.log import (
    STEP_TYPES,
    ActionStep,
    GuardRecord,
    InductionStep,
    PlanStep,
    RetrievalStep,
    SummaryStep,
    UnknownStep,
    read_step,
    read_steps,
)

PACKAGE = Path(__file__).resolve().parents[2] / "skilltransfer"
READERS = ("runner", "report", "view", "metrics", "commands", "judge", "lens")
"""The packages that read run logs back (show, view, report, metrics, evolve, judge)."""
STEP_NAMES = ("step", "steps")


def key_reads(source: str) -> list[int]:
    """Lines where a step is read by key: ``step["x"]`` / ``steps[i]["x"]`` or ``step.get("x")``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        target: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                isinstance(node.slice.value, str):
            target = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            target = node.func.value
        if isinstance(node, ast.Compare) and any(isinstance(side, ast.Constant) and side.value in STEP_TYPES
                                                 for side in (node.left, *node.comparators)):
            lines.append(node.lineno)  # s.get("type") == "ActionStep": a step told apart by its logged type
        while isinstance(target, ast.Subscript):  # steps[i]["x"]
            target = target.value
        if isinstance(target, ast.Name) and target.id in STEP_NAMES or \
                isinstance(target, ast.Attribute) and target.attr in STEP_NAMES:
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_scan_finds_key_reads() -> None:
    """The scan below can fail: each form of a key read is found, typed reads are not."""
    assert key_reads('step["action"]\nstep.get("type")\nsteps[0]["reply"]\nlog.steps[1].get("route")\n') == [1, 2, 3, 4]
    assert key_reads('actions = [s for s in log if s.get("type") == "ActionStep"]\n') == [1]
    assert key_reads("step.action\nstep.route.get('kind')\nskill['name']\nisinstance(s, ActionStep)\n") == []


def test_no_step_is_read_by_key_outside_the_reader() -> None:
    found = []
    for package in READERS:
        assert (PACKAGE / package).is_dir(), package
        for path in sorted((PACKAGE / package).rglob("*.py")):
            found += [f"{path.relative_to(PACKAGE)}:{line}" for line in key_reads(path.read_text())]
    assert found == [], f"read steps through skilltransfer.log.trajectory_io, not by key: {found}"


def test_steps_round_trip_typed() -> None:
    guard = GuardRecord("ungrounded_answer", "on_action", "refuse", "ungrounded_answer", "no")
    steps = [RetrievalStep("q", "instruction", None, [{"id": "a", "name": "n"}], route={"mode": "lens"}),
             PlanStep(0, "subtask", "do it", "reply", "planner", refused_reply="DONE", guards=[guard]),
             ActionStep(1, 0, "r", "t", "x = 1", "ok", done=True, guards=[guard]),
             SummaryStep(0, "so far", "summarizer"), InductionStep(None, "induce", "added", skill_id="s1")]
    read = read_steps([step.to_dict() for step in steps])
    assert read == steps
    assert isinstance(read[2], ActionStep)
    assert read[2].refused == "ungrounded_answer"


def test_format_1_steps_convert_on_read() -> None:
    """Format 1 logged ``refused`` and ``stuck`` without guards: they read back as they were logged."""
    data = next(Path(__file__).parents[1].glob("data/v1/run/trajectories/*.json")).read_text()
    import json

    steps = read_steps(json.loads(data)["steps"])
    assert {type(s) for s in steps} >= {RetrievalStep, ActionStep, InductionStep}
    old = {"type": "ActionStep", "index": 3, "subtask_index": None, "reply": "r", "thought": "", "action": None,
           "observation": "", "refused": "early_completion", "stuck": "repeated_action"}
    step = read_step(old)
    assert isinstance(step, ActionStep)
    assert (step.refused, step.stuck) == ("early_completion", "repeated_action")


def test_unknown_types_are_kept_and_bad_fields_name_the_trajectory(tmp_path: Path) -> None:
    assert read_step({"type": "FutureStep", "x": 1}) == UnknownStep("FutureStep", {"type": "FutureStep", "x": 1})
    path = tmp_path / "t.json"
    with pytest.raises(InputError) as err:
        read_steps([{"type": "SummaryStep", "subtask_index": 0, "summary": "", "prompt_id": "p"},
                    {"type": "ActionStep", "index": "seven"}], path=path)
    assert str(err.value).startswith(f"{path}: not a trajectory: field 'steps[1].")
    with pytest.raises(InputError, match="steps.0.: not an object"):
        read_steps([7], path=path)
