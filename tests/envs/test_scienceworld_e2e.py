"""End to end on ScienceWorld: ``run`` and ``grid`` (the ready-made ``experiments/scienceworld.yaml``) with a model
behind the mock server that plays each task's gold path through ``act``, then ``report``. Needs Java."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from helpers_cli import main_output
from helpers_tinyenv import role_of

from skilltransfer.envs.opening import select_tasks
from skilltransfer.envs.scienceworld import simulator
from skilltransfer.envs.scienceworld.env import ScienceWorldEnv
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.settings.config import CONDITIONS

REASON = simulator.unavailable_reason()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REASON is not None, reason=f"scienceworld simulator unavailable: {REASON}")]
SPEC = Path(__file__).resolve().parents[2] / "experiments" / "scienceworld.yaml"
N_TASKS = 3

CODE_SKILL = '''NAME: go_to_room
DESCRIPTION: Open the door to a neighbouring room and go there.
BODY:
```python
def go_to_room(room):
    """Open the door to ``room`` and move there; returns the simulator's observation."""
    act("open door to " + room)
    return act("go to " + room)
```'''
TEXT_SKILL = """NAME: go_to_room
DESCRIPTION: Open the door to a neighbouring room and go there.
BODY:
1. act("open door to <room>"), then act("go to <room>").
2. Print look() to see what is there."""


class GoldScript:
    """Plays every role: the executor replies with the gold-path program of the task whose instruction its prompt
    holds (long: up to ~180 actions, so the runs raise ``max_tokens``); the planner asks for the whole task once;
    induction writes a fixed text or code skill."""

    def __init__(self, programs: dict[str, str]) -> None:
        self.programs = programs

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        role = role_of(messages)
        text = "\n".join(str(m["content"]) for m in messages)
        if role == "planner":
            if "# Subtasks so far" in text:  # the small-model planner's subtask list
                first_plan = "(none yet)" in text.split("# Subtasks so far")[1]
            else:  # the paper's planner: goal and running summary only
                first_plan = "(nothing done yet)" in text.split("# Running summary")[1]
            if first_plan:
                return "SUBTASK: Do the whole task as stated."
            return "DONE"
        if role == "summarizer":
            return "- the task was played to its end"
        if role == "induction":
            return CODE_SKILL if "Skill format: code" in text else TEXT_SKILL
        first = str(messages[1]["content"])
        found = [code for instruction, code in self.programs.items() if instruction in first]
        assert len(found) == 1, first[:300]
        return f"Play the known solution.\n```python\n{found[0]}\n```"


@pytest.fixture(scope="module")
def stream() -> tuple[list[Any], dict[str, str]]:
    env = ScienceWorldEnv()
    tasks = select_tasks(env, stream="dev30", limit=N_TASKS)
    programs = {t.instruction: env.reference_solution(t) for t in tasks}
    assert len(programs) == N_TASKS  # distinct instructions: the script can tell the tasks apart
    return tasks, programs


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]


def test_run_plays_the_gold_paths_through_the_sandbox(tmp_path: Path, stream) -> None:
    tasks, programs = stream
    out = tmp_path / "run"
    with MockServer(GoldScript(programs)) as server:
        code, output = main_output("run", "--env", "scienceworld", "--stream", "dev30", "--limit", str(N_TASKS),
                           "--condition", "subtask+code", "--model", "openai/mock", "--base-url", server.url,
                           "--api-key", "x", "--embedder", "hash:64", "--out", str(out),
                           "--max-tokens", "4096", "--no-progress")
    assert code == 0, output
    records = _records(out)
    assert [r["task_id"] for r in records] == [t.id for t in tasks]
    assert all((r["reward"], r["success"]) == (1.0, True) for r in records), records
    trajectory = json.loads((out / records[0]["trajectory"]).read_text())
    checks = trajectory["score"]["checks"]
    assert checks[0]["passed"]
    assert "final score 100" in checks[0]["detail"]
    assert "score trace" in checks[1]["detail"]
    assert "'look around': 0" in checks[1]["detail"]
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["env"]["env"] == "scienceworld"


def test_grid_and_report_over_the_ready_made_spec(tmp_path: Path, stream) -> None:
    tasks, programs = stream
    out, report = tmp_path / "grid", tmp_path / "report"
    with MockServer(GoldScript(programs)) as server:
        code, output = main_output("grid", str(SPEC), "-c", f"models.default.base_url={server.url}",
                           "-c", "models.default.model=mock", "-c", "models.default.api_key=x",
                           "-c", "models.default.params.max_tokens=4096",
                           "--limit", str(N_TASKS), "--embedder", "hash:64", "--out", str(out), "-j", "3",
                           "--no-progress")
    assert code == 0, output
    runs = sorted(p.parent for p in out.rglob("results.jsonl"))
    assert len(runs) == len(CONDITIONS)
    for run in runs:
        records = _records(run)
        assert [r["task_id"] for r in records] == [t.id for t in tasks], run
        assert all(r["success"] for r in records), run
    memory_runs = [run for run in runs if "+" in run.name]
    assert all((run / "memory" / "skills.jsonl").read_text().strip() for run in memory_runs)
    code, output = main_output("report", str(out), "--out", str(report), "--embedder", "hash:64")
    assert code == 0, output
    with (report / "table2_success.csv").open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("env") == "scienceworld"]
    assert {r["condition"] for r in rows} == set(CONDITIONS)
    assert (report / "report.md").read_text().count("scienceworld") >= 1
    assert list((report / "figures").glob("*.png"))
