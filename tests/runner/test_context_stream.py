"""Streams that hit the context limit, partial trajectories, and what a long run prints.

Through the CLI and the real openai client against the mock server enforcing a 2,048-token limit, on a counter
world whose observations are long: every task is recorded with the expected exit status and no refusal stops the
run. Then: an error mid-task leaves the partial trajectory on disk; the step-level progress display (heartbeat lines
with a fake clock) and the summary at the end of a run.
"""

from __future__ import annotations

import io
import json

import pytest
from helpers_cli import cli, records_of, run_tiny, trajectory_of
from helpers_tinyenv import TEXT_SKILL, CounterScript, HistoryScript, SimulatedCrash, TinyEnv
from rich.console import Console

from skilltransfer.agents import AgentEvent, AgentResult
from skilltransfer.llm.context import messages_tokens
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import TaskRecord, TrajectoryLog
from skilltransfer.runner.progress import StreamProgress
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

WINDOW = 2048


@pytest.mark.parametrize("condition", ["task+text", "subtask+text"])
def test_a_2048_token_window_with_long_observations(tmp_path, condition):
    """The window is read from /v1/models; prompts are fitted, so the server never refuses one."""
    out = tmp_path / "r"
    with MockServer(replies=HistoryScript(TEXT_SKILL, reads=6), context_window=WINDOW) as server:
        run_tiny(server, out, condition)
        refusals, requests = server.context_refusals, list(server.requests)
    assert refusals == 0
    for request in requests:  # what reached the server fits, completion budget (sent, else reserved) included
        reserved = request.get("max_tokens", min(1024, WINDOW // 4))  # paper sends no cap: a quarter is reserved
        assert messages_tokens(request["messages"]) + reserved <= WINDOW
    records = records_of(out)
    assert sorted(r["task_id"] for r in records) == ["tiny/0", "tiny/1", "tiny/2"]
    assert all(r["success"] and r["exit_status"] == "submitted" for r in records)
    assert sum(r["context_fitted_calls"] for r in records) > 0
    for record in records:
        trajectory = trajectory_of(out, record)
        assert trajectory.status == "finished"
        assert trajectory.exit_status == "submitted"
        assert all(c["context_fit"]["window"] == WINDOW for c in trajectory.calls)
        assert max(c["prompt_tokens"] for c in trajectory.calls) <= WINDOW - 96
        assert {i["status"] for i in record["induced"]} <= {"added", "merged", "dropped", "context_exceeded"}
        elided = [c["context_fit"] for c in trajectory.calls if c["context_fit"]["elided_steps"]]
        assert all(f["tokens_after"] < f["tokens_before"] for f in elided)


def test_a_window_set_too_large_costs_one_task_then_is_learnt(tmp_path):
    """--context-window says 8,192 but the server holds 2,048 and does not say so: its refusal ends the first task
    as context_exceeded (recorded like any failure); the client learns 2,048 from the error and the rest succeed."""
    out = tmp_path / "r"
    with MockServer(replies=HistoryScript(TEXT_SKILL, reads=6), context_window=WINDOW, advertise_window=False,
                    context_error="llamacpp") as server:
        result = run_tiny(server, out, "task", (3, 5, 2), "--context-window", "8192",
                          "--max-connections", "1")  # baselines one at a time: each later task learns from the first
        refusals = server.context_refusals
    assert refusals == 1
    records = records_of(out)
    assert [(r["exit_status"], r["success"]) for r in records] == [("context_exceeded", False), ("submitted", True),
                                                                   ("submitted", True)]
    first = trajectory_of(out, records[0])
    assert first.status == "finished"
    assert first.exit_status == "context_exceeded"
    assert first.calls[-1]["error"].startswith("context_exceeded")
    assert records[0]["model_calls"] == len(first.calls) - 1  # the refused call is logged, not counted
    assert sum(1 for s in first.steps if s["type"] == "ActionStep") == records[0]["steps"] > 0
    assert "context_exceeded 1" in result.output
    shown = cli("show", str(out), "--task", records[0]["task_id"]).output
    assert "exit context_exceeded" in shown
    assert "last failed call: context_exceeded: the prompt does not fit" in shown
    assert "calls shortened to fit" in cli("show", str(out), "--task", records[1]["task_id"]).output
    config = json.loads((out / "config.json").read_text())
    assert (config["config"]["model"]["model"], config["config"]["model"]["context_window"]) == ("mock", 8192)


def test_a_prompt_that_can_never_fit_ends_every_task_and_the_stream_goes_on(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(), context_window=WINDOW) as server:
        run_tiny(server, out, "subtask", (3, 5, 2), "--env-arg", "docs_padding=12000")
        requests = len(server.requests)
    assert requests == 0  # nothing over-long was ever sent
    records = records_of(out)
    assert [r["exit_status"] for r in records] == ["context_exceeded"] * 3
    for record in records:
        trajectory = trajectory_of(out, record)
        assert [c["role"] for c in trajectory.calls] == ["planner"]
        assert trajectory.calls[0]["context_fit"]["tokens_after"] > WINDOW


# --------------------------------------------------------------------------------------------- partial trajectories
def test_an_error_mid_task_leaves_the_partial_trajectory_and_resume_finishes_it(tmp_path, hash_embedder):
    config = StreamConfig(run="r", runs_dir=str(tmp_path / "runs"), condition="subtask+text")
    env = TinyEnv([3, 5], workdir=tmp_path / "ws")
    crash = CounterScript(TEXT_SKILL, fail_at=11)  # a few calls into the second task
    with pytest.raises(SimulatedCrash, match="simulated crash"):
        run_stream(env, ScriptedModel(crash), config, embedder=hash_embedder)
    path = config.path
    assert [r["task_id"] for r in records_of(path)] == ["tiny/0"]
    partial = trajectory_file(path, "tiny/1")
    assert partial.status == "aborted"
    assert partial.error == "SimulatedCrash: simulated crash"
    assert partial.score == {}
    kinds = [s["type"] for s in partial.steps]
    assert "PlanStep" in kinds
    assert "ActionStep" in kinds
    assert len(partial.calls) == 11 - len(trajectory_calls(path, "tiny/0"))
    shown = cli("show", str(path), "--task", "tiny/1").output
    assert "not finished, trajectory aborted (SimulatedCrash: simulated crash)" in shown
    assert "[plan 0]" in shown
    resumed = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), config, embedder=hash_embedder)
    assert resumed.ran == ["tiny/1"]
    final = trajectory_file(path, "tiny/1")
    assert final.status == "finished"
    assert final.score["success"] is True


def trajectory_file(path, task_id) -> TrajectoryLog:
    logs = [TrajectoryLog.model_validate_json(p.read_text()) for p in (path / "trajectories").iterdir()]
    return next(log for log in logs if log.task_id == task_id)


def trajectory_calls(path, task_id):
    record = next(r for r in records_of(path) if r["task_id"] == task_id)
    return trajectory_of(path, record).calls


def test_a_running_task_is_written_step_by_step(tmp_path, monkeypatch):
    """With no throttle, the file is rewritten after each step: a process killed mid-task leaves "running"."""
    from skilltransfer.runner import stream_record

    monkeypatch.setattr(stream_record, "PARTIAL_WRITE_S", 0.0)
    seen: list[tuple[str, int]] = []
    config = StreamConfig(run="r", runs_dir=str(tmp_path / "runs"), condition="task")
    path = config.path / "trajectories"

    def spy(event: AgentEvent) -> None:
        if event.kind == "step_start" and path.is_dir():
            for file in path.iterdir():
                log = TrajectoryLog.model_validate_json(file.read_text())
                seen.append((log.status, len(log.steps)))

    run_stream(TinyEnv([3], workdir=tmp_path / "ws"), ScriptedModel(CounterScript()), config, on_event=spy)
    assert seen == [("running", 1)]  # before the second step: the first one is on disk
    assert TrajectoryLog.model_validate_json(next(path.iterdir()).read_text()).status == "finished"


# --------------------------------------------------------------------------------------------- progress
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def event(kind: str, task_id: str = "tiny/0", **fields: object) -> AgentEvent:
    return AgentEvent(kind, task_id, AgentResult(task_id), step_limit=50, **fields)  # type: ignore[arg-type]


def record(task_id: str, latency: float, success: bool = True) -> TaskRecord:
    status = "submitted" if success else "context_exceeded"
    return TaskRecord(run="r", condition="task", position=0, task_id=task_id, difficulty=1, template="t",
                      reward=float(success), success=success, exit_status=status,
                      steps=3, subtasks=1, latency_s=latency, model_calls=3, prompt_tokens=900, completion_tokens=100,
                      dependency=0, peak_context=400, tokens_by_role={}, retrieved=[], induced=[], memory_size=0,
                      trajectory="t.json")


def test_heartbeat_lines_without_a_terminal_with_a_fake_clock():
    out = io.StringIO()
    clock = FakeClock()
    bar = StreamProgress(3, console=Console(file=out, force_terminal=False, width=200), heartbeat_s=30, clock=clock)
    bar.on_event(event("task_start"))
    bar.on_event(event("subtask_start", subtask_index=1))
    bar.on_event(event("step_start", subtask_index=1, step_index=6))
    assert not bar.beat()  # nothing is due yet
    clock.now += 31
    assert bar.beat()
    line = out.getvalue().strip().splitlines()[-1]
    assert "task 1/3 tiny/0 · subtask 2 · step 7/50" in line
    assert "task 0:00:31, run 0:00:31" in line
    assert "ETA ?" in line  # no finished task to estimate from
    clock.now += 10
    bar.on_event(event("call_start", subtask_index=1, role="summarizer"))  # events check too, but 30 s did not pass
    assert out.getvalue().count("\n") == 1
    bar(record("tiny/0", 60.0))
    assert "[1/3] tiny/0: success in 60.0 s" in out.getvalue()
    bar.on_event(event("task_start", "tiny/1"))
    clock.now += 29
    assert not bar.beat()  # the task line counts as output
    clock.now += 2
    bar.on_event(event("step_start", "tiny/1", step_index=0))
    line = out.getvalue().strip().splitlines()[-1]
    assert "task 2/3 tiny/1 · step 1/50" in line
    assert "ETA 0:01:29" in line  # 2 tasks left x 60 s mean - 31 s into this one
    bar(record("tiny/1", 50.0, success=False))
    assert "[2/3] tiny/1: failure (context_exceeded) in 50.0 s" in out.getvalue()
    bar.on_event(event("task_end", "tiny/1"))
    clock.now += 100
    assert not bar.beat()  # between tasks there is nothing to report


def test_the_heartbeat_thread_reports_a_long_call(tmp_path):
    out = io.StringIO()
    bar = StreamProgress(1, console=Console(file=out, force_terminal=False, width=200), heartbeat_s=0.05)
    with bar:
        bar.on_event(event("task_start"))
        bar.on_event(event("call_start", role="executor"))
        import time

        deadline = time.monotonic() + 5
        while "... task 1/1 tiny/0" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "... task 1/1 tiny/0" in out.getvalue()


def test_run_prints_the_summary_and_where_everything_is(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        output = run_tiny(server, out, "task+text", (3, 5)).output
    assert "Run r" in output
    assert "2 of 2 finished" in output
    assert "100.0%" in output
    assert "calls shortened to fit the window" in output
    assert f"results: {out / 'results.jsonl'}" in output
    assert f"trajectories: {out / 'trajectories'}" in output
    assert f"memory: {out / 'memory'}" in output
