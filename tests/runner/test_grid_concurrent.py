"""Concurrent streams do not disturb each other: nothing process-wide (cwd, stdout, stderr, env vars) changes while
16 apps streams run at once, and each stream's records equal those of the same stream run alone."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.log import RunFolder
from skilltransfer.runner.grid import run_grid
from skilltransfer.runner.spec import build_spec
from skilltransfer.sandbox import InProcessRunner

COMPARED = ("task_id", "success", "reward", "exit_status", "steps", "subtasks", "model_calls")
"""The record fields that must not depend on what runs beside a stream (not timings)."""


class ProcessWatch:
    """Records every change of the working directory, stdout, stderr or the environment while it runs: ``os.chdir``
    is wrapped, and a sampling thread compares the rest every millisecond."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.changes: list[str] = []
        self._stop = threading.Event()
        self._cwd, self._out, self._err, self._env = os.getcwd(), sys.stdout, sys.stderr, dict(os.environ)
        real_chdir = os.chdir

        def chdir(path: Any) -> None:
            self.changes.append(f"chdir({path}) in {threading.current_thread().name}")
            real_chdir(path)

        monkeypatch.setattr(os, "chdir", chdir)
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            if sys.stdout is not self._out or sys.stderr is not self._err:
                self.changes.append("stdout/stderr replaced")
            if os.environ != self._env:
                self.changes.append("environment changed")
            try:
                if os.getcwd() != self._cwd:
                    self.changes.append("cwd changed")
            except FileNotFoundError:
                self.changes.append("cwd removed")

    def __enter__(self) -> ProcessWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _spec(out: Path, url: str, max_concurrency: int) -> Any:
    return build_spec({"name": "concurrent", "out": str(out), "max_concurrency": max_concurrency,
                       "envs": ["apps"], "conditions": ["task", "subtask"], "order_seeds": list(range(8)),
                       "models": {"mock": {"base_url": url, "model": "mock", "api_key": "x", "backoff_base_s": 0,
                                           "max_retries": 2}},
                       "limits": {"task_limit": 2, "step_limit": 8, "subtask_limit": 4}})


def _records(out: Path, runs: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    return {run: [tuple(getattr(r, f) for f in COMPARED) for r in RunFolder(out / run).read_records()]
            for run in runs}


def test_scoped_in_process_runner_changes_nothing_process_wide(tmp_path, monkeypatch):
    with ProcessWatch(monkeypatch) as watch:
        runner = InProcessRunner(tmp_path, scoped=True)
        result = runner.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                                "with open('note.txt', 'w') as fh:\n    fh.write('x')\n6 * 7")
        failed = runner.execute("def f():\n    print('inside')\n    raise ValueError('boom')\nf()")
        time.sleep(0.01)
    assert result.output == "out\nerr\n42\n"
    assert result.error is None
    assert (tmp_path / "note.txt").read_text() == "x"
    assert failed.output == "inside\n"
    assert "ValueError: boom" in (failed.error or "")
    assert "inprocess.py" not in (failed.error or "")  # only the action's own frames
    assert watch.changes == []


@pytest.mark.slow
def test_sixteen_apps_streams_at_once_match_the_streams_run_one_at_a_time(tmp_path, monkeypatch):
    with MockServer(RolePlay()) as server:
        with ProcessWatch(monkeypatch) as watch:
            together = run_grid(_spec(tmp_path / "together", server.url, 16))
        alone = run_grid(_spec(tmp_path / "alone", server.url, 1))
    runs = [o.run for o in together.outcomes]
    assert len(runs) == 16
    assert not together.failed
    assert not alone.failed
    assert watch.changes == []
    concurrent, sequential = _records(tmp_path / "together", runs), _records(tmp_path / "alone", runs)
    assert all(len(records) == 2 for records in sequential.values())
    assert concurrent == sequential


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the half-built env's __del__
def test_scienceworld_jvm_options_go_to_its_launch_not_the_environment(monkeypatch):
    import py4j.java_gateway

    from skilltransfer.envs.scienceworld import simulator

    pytest.importorskip("scienceworld")
    seen: list[tuple[list[str], str | None]] = []

    def launch_gateway(**kwargs: Any) -> Any:
        seen.append((kwargs["javaopts"], os.environ.get("JAVA_TOOL_OPTIONS")))
        raise RuntimeError("no JVM in this test")

    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.setattr(py4j.java_gateway, "launch_gateway", launch_gateway)
    with pytest.raises(RuntimeError, match="no JVM"):
        simulator._launch(384)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx2g")
    with pytest.raises(RuntimeError, match="no JVM"):
        simulator._launch(384)
    assert seen == [(["-Xmx384m", "-XX:+UseSerialGC"], None), (["-XX:+UseSerialGC"], "-Xmx2g")]
