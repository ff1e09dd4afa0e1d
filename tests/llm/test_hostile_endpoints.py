"""``run`` against endpoints that misbehave (issue 47): one that drips its answer and one that streams without end.
Each answers ``GET /v1/models`` correctly, so the run starts; its first chat call ends at the model's deadline or size
bound, is retried within the retry budget, and the run stops with one ``error:`` line naming the endpoint and what
happened, its folder resumable against a working endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_cli import main_cli
from helpers_hostile import HostileServer

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay

REPO = Path(__file__).resolve().parents[2]


def run_args(url: str, out: Path, *settings: str) -> list[str]:
    return ["run", "--env", "apps", "--condition", "task", "--limit", "1", "--model", f"m@{url}", "--out", str(out),
            "--no-sandbox", "--no-progress", *settings]


def test_a_dripping_endpoint_ends_the_run_in_one_line_and_the_folder_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with HostileServer("drip", every_s=2.0) as server:  # one byte every 2 s, the status line included
        start = time.monotonic()
        code, _, err = main_cli(run_args(server.url, out, "-c", "model.timeout_s=1.5", "--retry-budget", "2"),
                                monkeypatch, capsys)
        took = time.monotonic() - start
        attempts = server.chat_requests
    errors = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert code == 2
    assert errors == [err.strip().splitlines()[-1]]
    assert errors[0].startswith(f"error: model endpoint {server.url} failed after {attempts} attempts (last: "
                                "timeout: no complete answer within 1.5 s (the model's timeout_s))")
    assert attempts == 2  # the retry budget (2 s) allows a second attempt after the first deadline (1.5 s)
    assert took < 1.5 * attempts + 5  # the deadlines, and the run's start (the imports are done by the test session)
    assert (out / "config.json").is_file()
    with MockServer(RolePlay()) as good:  # the same folder, resumed against a working endpoint
        code, _, err = main_cli(run_args(good.url, out), monkeypatch, capsys)
    assert code == 0, err[-2000:]
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


def test_a_flooding_endpoint_ends_the_run_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with HostileServer("flood", block=1 << 16) as server:
        code, _, err = main_cli(run_args(server.url, out, "-c", "model.max_answer_mib=1", "--retry-budget", "0.5"),
                                monkeypatch, capsys)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(
        f"error: model endpoint {server.url} failed after ")
    assert "too_large: an answer over the 1 MiB limit, refused as it arrived (the model's max_answer_mib)" in err
    assert (out / "config.json").is_file()


@pytest.mark.slow
def test_a_flooding_endpoint_leaves_the_runs_memory_far_under_a_gigabyte(tmp_path: Path) -> None:
    """The user's command in its own process with the default bound (64 MiB): its peak resident memory stays far
    under 1 GB while the server sends as fast as the run reads."""
    with HostileServer("flood") as server:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        child = subprocess.Popen([sys.executable, "-m", "skilltransfer", *run_args(server.url, tmp_path / "run"),
                                  "--retry-budget", "3"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        _, status, usage = os.wait4(child.pid, 0)
        assert child.stderr is not None
        err = child.stderr.read()
        sent = server.sent
    assert os.waitstatus_to_exitcode(status) == 2, err[-2000:]
    assert "too_large: an answer over the 64 MiB limit" in err.strip().splitlines()[-1]
    assert sent > 64 << 20
    assert usage.ru_maxrss * 1024 < 1 << 30, json.dumps({"peak_rss_mb": usage.ru_maxrss / 1024})
