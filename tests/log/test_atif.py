"""ATIF out: every mode that writes trajectories, run through the mock server, exported as ATIF; the ``atif`` models
validate every document, and reading one back gives the same trajectory view (every step, tool call, observation
and token count) and the same record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from atif import Trajectory
from helpers_cli import cli, run_tiny

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import make_role_play
from skilltransfer.log import RunFolder, TrajectoryLog, read_steps
from skilltransfer.log.atif import from_atif, to_atif
from skilltransfer.report.atif import run_documents

MODES = ("task", "subtask", "subagent", "composition", "nl-sop")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run per mode through the mock server's role play (two tasks each; induction on where the mode has it)."""
    root = tmp_path_factory.mktemp("atif-runs")
    out = {mode: root / mode for mode in MODES}
    with MockServer(make_role_play("")) as server:
        run_tiny(server, out["task"], "task+text", (3, 5))
        run_tiny(server, out["subtask"], "subtask+code", (3, 5))
        run_tiny(server, out["subagent"], "task", (3, 5), "--library", str(out["task"] / "memory"),
                 "-c", "skill_exec=subagent")
        run_tiny(server, out["composition"], "task", (5, 3), "--coordination", "metaskill",
                 "-c", f"plans={root / 'plans'}")
        run_tiny(server, out["nl-sop"], "task", (5, 3), "--coordination", "nl-sop", "-c", f"plans={root / 'plans'}")
    return out


def _documents(run: Path) -> list[dict]:
    return [document for _, document in run_documents(run)]


@pytest.mark.parametrize("mode", MODES)
def test_every_trajectory_of_every_mode_validates_and_reads_back_the_same(runs: dict[str, Path], mode: str) -> None:
    folder = RunFolder(runs[mode])
    records = {r.task_id: r for r in folder.read_records()}
    documents = _documents(runs[mode])
    assert len(documents) == len(records) == 2
    for document in documents:
        text = json.dumps(document)
        Trajectory.model_validate_json(text)  # the atif package's models: 100 % valid
        back = from_atif(json.loads(text))
        original = folder.read_trajectory(records[back.trajectory.task_id].trajectory)
        assert back.trajectory == original  # every step, tool call, observation, token count, call, context
        assert back.record == records[original.task_id]
        steps = read_steps(original.steps)
        assert [type(s).__name__ for s in read_steps(back.trajectory.steps)] == [type(s).__name__ for s in steps]


def _all_documents(document: dict) -> list[dict]:
    out, pending = [], [document]
    while pending:
        doc = pending.pop()
        out.append(doc)
        pending.extend(doc.get("subagent_trajectories") or [])
    return out


def test_roles_and_subagents_are_subagent_trajectories(runs: dict[str, Path]) -> None:
    subtask = _documents(runs["subtask"])[0]
    ids = [sub["trajectory_id"] for sub in subtask["subagent_trajectories"]]
    assert {"planner-0", "executor-0", "summarizer-0", "induction-0", "planner-1", "executor-1"} <= set(ids)
    refs = [ref["trajectory_id"] for step in subtask["steps"] for result in (step.get("observation") or {}).get(
        "results", []) for ref in result.get("subagent_trajectory_ref") or []]
    assert refs == ids  # each subagent is named by the system step that dispatched it, in order
    executor = subtask["subagent_trajectories"][ids.index("executor-0")]
    assert executor["steps"][0]["source"] == "user"  # the planner's subtask is the executor's goal
    assert all(s["source"] == "agent" and s["tool_calls"] for s in executor["steps"][1:] if s.get("tool_calls"))

    subagent = _documents(runs["subagent"])[0]
    (run_skill,) = [s for s in subagent["steps"] if any(c["function_name"] == "run_skill"
                                                        for c in s.get("tool_calls") or [])]
    (result,) = run_skill["observation"]["results"]
    assert result["source_call_id"] == run_skill["tool_calls"][0]["tool_call_id"]
    assert result["subagent_trajectory_ref"] == [{"trajectory_id": "subagent-1"}]
    (child,) = subagent["subagent_trajectories"]
    assert child["trajectory_id"] == "subagent-1"
    assert all(s["source"] == "agent" for s in child["steps"])

    composed = _documents(runs["composition"])[0]
    assert [s["trajectory_id"] for s in composed["subagent_trajectories"]][:2] == ["node-0", "node-1"]
    assert composed["extra"]["skilltransfer"]["coordination"]["interface"] == "metaskill"


def test_reward_skills_and_tokens_are_in_extra_and_metrics(runs: dict[str, Path]) -> None:
    folder = RunFolder(runs["subagent"])
    record = folder.read_records()[0]
    document = _documents(runs["subagent"])[0]
    assert document["extra"]["reward"] == record.reward
    assert document["extra"]["success"] == record.success
    skills = document["extra"]["skills"]
    assert [s["id"] for s in skills["retrieved"]] == [r.skill_id for r in record.retrieved]
    assert skills["shown"]
    assert skills["picked"][0]["kind"] == "subagent"  # the record's picks (a run_skill call is a subagent pick)
    assert skills["picked"][0]["skill_id"] == record.picks[0].skill_id
    agent_steps = [s for d in _all_documents(document) for s in d["steps"] if s["source"] == "agent"]
    assert sum(s["metrics"]["prompt_tokens"] for s in agent_steps if "metrics" in s) == record.prompt_tokens
    assert document["final_metrics"]["total_prompt_tokens"] == record.prompt_tokens
    system = document["steps"][0]
    assert system["source"] == "system"
    assert "EXECUTOR" in system["message"]
    assert document["steps"][1] == {"step_id": 2, "source": "user", "message": "Set the counter to 3."}


def test_export_writes_one_valid_file_per_task_and_refuses_a_used_folder(runs: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "atif"
    cli("export", str(runs["task"].parent), "--format", "atif", "--out", str(out))
    files = sorted(out.rglob("*.json"))
    assert len(files) == 2 * len(MODES)
    assert {f.parent.name for f in files} == set(MODES)
    for file in files:
        Trajectory.model_validate_json(file.read_text())
    with pytest.raises(Exception, match="not an empty folder"):
        cli("export", str(runs["task"]), "--format", "atif", "--out", str(out))


def test_an_unfinished_task_is_written_without_a_record(runs: dict[str, Path], tmp_path: Path) -> None:
    source = RunFolder(runs["task"])
    log = source.read_trajectory(source.read_records()[0].trajectory)
    running = TrajectoryLog.model_validate({**log.model_dump(), "status": "running", "score": {}})
    document = to_atif(running, None, run="r")
    Trajectory.model_validate(document)
    assert "reward" not in document["extra"]
    assert from_atif(document).trajectory == running
