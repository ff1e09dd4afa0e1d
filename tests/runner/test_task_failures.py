"""A task's own failure is its record: an exception inside a task (exit status ``error``, traceback in its
trajectory) and a task past ``agent.task_timeout_s`` (``task_timeout``) are recorded and the stream goes on; an
endpoint/user-input error and a crash still stop the stream."""

from __future__ import annotations

import json
import time

import pytest
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import TASK_ERROR, TASK_TIMEOUT, TrajectoryLog
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

TARGETS = [3, 5, 2]


class BrokenEnv(TinyEnv):
    """TinyEnv whose second task's evaluation raises (a bug in an env's checker)."""

    def start(self, task):
        episode = super().start(task)
        if task.id == "tiny/1":
            def evaluate():
                raise ZeroDivisionError("checker bug")

            episode.evaluate = evaluate
        return episode


def records_of(path):
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def config_for(tmp_path, name, **cfg):
    return StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task+text", **cfg)


def test_an_exception_inside_a_task_is_its_record(tmp_path, hash_embedder):
    env = BrokenEnv(TARGETS, workdir=tmp_path / "ws")
    summary = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), config_for(tmp_path, "r"),
                         embedder=hash_embedder)
    records = records_of(summary.path)
    assert [r["task_id"] for r in records] == ["tiny/0", "tiny/1", "tiny/2"]
    assert [r["exit_status"] for r in records] == ["submitted", TASK_ERROR, "submitted"]
    assert [r["success"] for r in records] == [True, False, True]
    assert records[1]["model_calls"] >= 1  # what the task spent before the exception is counted
    log = TrajectoryLog.model_validate_json((summary.path / records[1]["trajectory"]).read_text())
    assert log.status == "finished"
    assert log.exit_status == TASK_ERROR
    assert log.error is not None
    assert "Traceback" in log.error
    assert "ZeroDivisionError: checker bug" in log.error
    assert log.steps  # the steps it took are kept


class SlowScript(CounterScript):
    """The counter script, sleeping before each executor reply of task ``slow_task``."""

    def __init__(self, slow_task: int, sleep_s: float) -> None:
        super().__init__(TEXT_SKILL)
        self.slow_task, self.sleep_s = slow_task, sleep_s

    def __call__(self, messages):
        if f"Set the counter to {TARGETS[self.slow_task]}." in messages[-1]["content"] or any(
                f"Set the counter to {TARGETS[self.slow_task]}." in str(m["content"]) for m in messages[1:2]):
            time.sleep(self.sleep_s)
        return super().__call__(messages)


def test_a_task_past_its_timeout_is_recorded_and_the_stream_goes_on(tmp_path, hash_embedder):
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    config = config_for(tmp_path, "t", agent={"task_timeout_s": 0.3})
    summary = run_stream(env, ScriptedModel(SlowScript(1, 0.4)), config, embedder=hash_embedder)
    records = records_of(summary.path)
    assert [r["exit_status"] for r in records] == ["submitted", TASK_TIMEOUT, "submitted"]
    log = TrajectoryLog.model_validate_json((summary.path / records[1]["trajectory"]).read_text())
    assert log.exit_status == TASK_TIMEOUT
    assert "task_timeout_s=0.3" in (log.error or "")


def test_a_model_call_error_still_stops_the_stream(tmp_path, hash_embedder):
    """An endpoint down past its retry budget is not the task's failure: the stream stops, the task is redone on
    resume."""

    def down(messages):
        raise InputError("the endpoint is down")

    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    with pytest.raises(InputError, match="endpoint is down"):
        run_stream(env, ScriptedModel(down), config_for(tmp_path, "d"), embedder=hash_embedder)
    assert not (tmp_path / "runs" / "d" / "results.jsonl").exists() or records_of(tmp_path / "runs" / "d") == []
