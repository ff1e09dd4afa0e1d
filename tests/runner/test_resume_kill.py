"""Resume after SIGKILL: the `skilltransfer run` CLI as a subprocess against the mock OpenAI-compatible server (with
the response cache), killed at several points mid-stream and rerun, ends with the results of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_tinyenv import CODE_SKILL, CounterScript
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.llm.testing.mock_server import MockServer

TESTS = Path(__file__).resolve().parents[1]
TARGETS = [3, 5, 2, 4, 7, 1]
TIMING_FIELDS = ("latency_s",)


def run_args(server: MockServer, out: Path, cache: Path) -> list[str]:
    return ["run", "--env", "helpers_tinyenv:TinyEnv", "--env-arg", f"targets={json.dumps(TARGETS)}",
            "--condition", "subtask+code", "--model", "openai/mock", "--base-url", server.url, "--api-key", "x",
            "--embedder", "hash:128", "--cache", str(cache), "--out", str(out), "--no-sandbox",
            "--no-progress"]


def spawn(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    code = "from skilltransfer.cli import main; main()"
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def lines(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def strip(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in records]


def kill_when(proc: subprocess.Popen, ready, timeout_s: float = 60.0) -> bool:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; False if it exited first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    proc.kill()
    raise AssertionError("the run neither reached the kill point nor finished")


@pytest.mark.slow
def test_sigkill_at_several_points_then_resume_equals_an_uninterrupted_run(tmp_path):
    with MockServer(replies=CounterScript(CODE_SKILL)) as server:
        reference = tmp_path / "a" / "run"  # the same run name: records carry it
        result = CliRunner().invoke(app, run_args(server, reference, tmp_path / "ref-cache.sqlite"))
        assert result.exit_code == 0, result.output
        expected = lines(reference)
        per_task = len(server.requests) / len(TARGETS)
        assert len(expected) == len(TARGETS)

    with MockServer(replies=CounterScript(CODE_SKILL), latency_s=0.005) as server:
        out, cache = tmp_path / "b" / "run", tmp_path / "cache.sqlite"
        args = run_args(server, out, cache)
        seen = 0
        # kill mid-call in the first task, mid-stream at two request counts, and right after a results line lands
        points = [lambda: len(server.requests) >= 3,
                  lambda: len(server.requests) >= int(2.4 * per_task),
                  lambda: len(lines(out)) >= 4,
                  lambda: len(server.requests) >= int(4.6 * per_task)]
        kills = 0
        for ready in points:
            proc = spawn(args)
            killed = kill_when(proc, ready)
            kills += killed
            records = lines(out)
            ids = [r["task_id"] for r in records]
            assert len(ids) == len(set(ids)), "a task was recorded twice"
            assert strip(records) == strip(expected[: len(records)]), "a partial run diverged"
            assert len(records) >= seen
            seen = len(records)
        assert kills >= 3
        assert seen < len(TARGETS)
        proc = spawn(args)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    final = lines(out)
    assert strip(final) == strip(expected)
    assert (out / "memory" / "skills.jsonl").read_text() == (reference / "memory" / "skills.jsonl").read_text()
    assert not (out / "memory.next").exists()
    assert len(list((out / "trajectories").glob("*.json"))) == len(TARGETS)
