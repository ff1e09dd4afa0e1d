"""The overnight acceptance test: a 20-stream grid through the mock endpoint, with a price, in which one task raises,
one runs past ``agent.task_timeout_s``, and the grid process is killed (SIGKILL) mid-way and resumed once, ends with
every task recorded (one ``error``, one ``task_timeout``), a cost total, and an export that loads into pandas with
one row per task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers_cli import main_cli
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.llm.testing.mock_server import MockServer

TESTS = Path(__file__).resolve().parents[1]
ENVS = 5
CONDITIONS = ["task", "task+text", "subtask", "subtask+text"]
TASKS = 3


def spec(tmp_path: Path, url: str) -> Path:
    envs = {f"e{i}": {"env": "helpers_overnight:OnceFaultyEnv",
                      "args": {"targets": [99 if i == 0 else 98 if i == 1 else 3 + i, 5, 2],
                               "marker_dir": str(tmp_path / "markers")}} for i in range(ENVS)}
    data = {"name": "overnight", "out": str(tmp_path / "out"), "max_concurrency": 4, "embedder": "hash:64",
            "envs": envs, "conditions": CONDITIONS, "agent": {"task_timeout_s": 3.0, "step_limit": 12},
            "models": {"mock": {"name": "openai", "base_url": url, "model": "mock", "api_key": "x",
                                "price": {"input": 0.5, "output": 1.5}}}}
    path = tmp_path / "overnight.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def committed(out: Path) -> list[dict]:
    rows = []
    for results in out.rglob("results.jsonl"):
        rows += [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return rows


@pytest.mark.slow
def test_an_overnight_grid_survives_a_failure_a_timeout_and_a_kill(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    with MockServer(CounterScript(TEXT_SKILL), latency_s=0.1) as server:
        path = spec(tmp_path, server.url)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent),
                                                           os.environ.get("PYTHONPATH", "")])}
        grid = subprocess.Popen([sys.executable, "-m", "skilltransfer", "grid", str(path), "--no-progress",
                                 "--max-connections", "2",  # slow enough to be killed mid-way
                                 "--allow-import", "helpers_overnight"],
                                env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and grid.poll() is None:
            statuses = [r["exit_status"] for r in committed(out)]
            if {"error", "task_timeout"} <= set(statuses) and len(statuses) >= 12:
                break
            time.sleep(0.2)
        assert grid.poll() is None, grid.stderr.read().decode() if grid.stderr else ""
        os.killpg(grid.pid, signal.SIGKILL)
        grid.wait()
        before = len(committed(out))
        assert before < ENVS * len(CONDITIONS) * TASKS  # killed mid-way
        code, stdout, _ = main_cli(["grid", str(path), "--no-progress", "--allow-import", "helpers_overnight"],
                                   monkeypatch, capsys)
        assert code == 0, stdout
    rows = committed(out)
    assert len(rows) == ENVS * len(CONDITIONS) * TASKS
    assert len({(r["run"], r["task_id"]) for r in rows}) == len(rows)
    statuses = [r["exit_status"] for r in rows]
    assert statuses.count("error") == 1
    assert statuses.count("task_timeout") == 1
    total = sum(r["cost_usd"] for r in rows)
    assert total > 0
    assert "$" in stdout  # the end line's cost total of the resumed invocation
    status = json.loads((out / "status.json").read_text())
    assert status["failed_streams"] == []
    assert sum(status["task_errors"].values()) == 2
    target = tmp_path / "tasks.parquet"
    code, _, _ = main_cli(["export", str(out), "--format", "parquet", "--out", str(target)], monkeypatch, capsys)
    assert code == 0
    frame = pd.read_parquet(target)
    assert len(frame) == len(rows)
    assert frame["run"].nunique() == ENVS * len(CONDITIONS)
    assert frame["cost_usd"].sum() == pytest.approx(total)
    assert sorted(frame["exit_status"].value_counts().loc[["error", "task_timeout"]]) == [1, 1]
