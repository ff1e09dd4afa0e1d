"""The paper's agent through reasoning models, end to end through the CLI against the mock server: each reasoning
style's double gives the plain double's answers (role play) after reasoning first, and the agent's records (exit
statuses, plan decisions, actions, summaries, induced skills, lens routing, judge verdicts) equal the plain model's,
at task and subtask level, with code and text skills; no reasoning text reaches any prompt, skill or file but its
own place in ``prompts.jsonl``; a strict API rejects each parameter at most once per run, and a resumed run sends
what the first one learnt (from ``config.json``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers_cli import main_cli

from skilltransfer.llm.testing.mock_server import REASONING_MARKER, MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.log import RunFolder
from skilltransfer.report.summary import summarize_run, summary_rows
from skilltransfer.view.data import Catalog

STRICT = ("--temperature", "0", "--max-tokens", "8000", "-c", 'agent.stop=["\\nObservation:"]')
"""Parameters OpenAI's reasoning models reject (sent to every double alike)."""
VOLATILE = ("tokens", "latency", "dependency", "created", "attempts")


def _stable(value: Any) -> Any:
    """``value`` without token counts, timings and other accounting that reasoning changes by design."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items()
                if not any(word in k for word in VOLATILE) and not k.endswith("_s")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _records(folder: Path) -> dict[str, Any]:
    """What the agent did: each task's record and trajectory steps (accounting left out) and its memory's skills."""
    run = RunFolder(folder)
    out: dict[str, Any] = {}
    for record in run.read_records():
        out[record.task_id] = {"record": _stable(record.model_dump(mode="json", exclude={"run"})),
                               "steps": _stable(run.read_trajectory(record.trajectory).steps)}
    stored = folder / "memory" / "skills.jsonl"
    lines = stored.read_text().splitlines() if stored.is_file() else []
    out["skills"] = sorted((s["name"], s["description"], s["format"], s["body"])
                           for s in map(json.loads, lines))
    return out


def _run(server: MockServer, out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         *args: str) -> str:
    argv = ["run", "--env", "apps", "--limit", "2", "--harness", "paper", "--model", f"mock@{server.url}",
            "--api-key", "x", "--embedder", "hash:64", "--no-sandbox", "--no-progress", "--out", str(out), *STRICT,
            *args]
    code, stdout, stderr = main_cli(argv, monkeypatch, capsys)
    assert code == 0, (stdout[-2000:], stderr[-2000:])
    return stderr


def _judge(server: MockServer, a: Path, b: Path, out: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> list[Any]:
    code, stdout, stderr = main_cli(["judge", str(a), str(b), "--model", f"mock@{server.url}", "--api-key", "x",
                                     "--out", str(out)], monkeypatch, capsys)
    assert code == 0, (stdout[-2000:], stderr[-2000:])
    report = json.loads(out.read_text())
    keep = ("task_id", "order", "verdict", "outcome", "replies", "error")
    return [{k: v for k, v in j.items() if k in keep} for j in report["judgments"]] + \
        [report["unparsed"], _stable(report["preference"])]


def _cells(server: MockServer, root: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Task level with code skills, subtask level with text skills, subtask level reusing the first cell's skills
    through the lens verifier, and the judge on the first two: every record, and each run's warnings."""
    warnings: dict[str, str] = {}
    warnings["task+code"] = _run(server, root / "task-code", monkeypatch, capsys, "--condition", "task+code")
    warnings["subtask+text"] = _run(server, root / "subtask-text", monkeypatch, capsys, "--condition", "subtask+text")
    warnings["lens"] = _run(server, root / "lens", monkeypatch, capsys, "--condition", "subtask+text", "--library",
                            str(root / "subtask-text" / "memory"), "--reuse", "lens")
    records = {name: _records(root / name) for name in ("task-code", "subtask-text", "lens")}
    records["judge"] = _judge(server, root / "task-code", root / "subtask-text", root / "judge.json", monkeypatch,
                              capsys)
    return records, warnings


def _no_reasoning_outside_its_place(server: MockServer, root: Path, style: str) -> None:
    for body in server.requests:  # every prompt of every role (planner ... judge)
        assert REASONING_MARKER not in json.dumps(body)
    kept = 0
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.name != "prompts.jsonl":
            assert REASONING_MARKER not in text, path
            continue
        for line in text.splitlines():
            message = json.loads(line)["message"]
            if REASONING_MARKER in json.dumps(message):
                assert message["role"] == "reasoning", path
                kept += 1
    assert (kept > 0) == (style != "openai")  # OpenAI's API returns no reasoning text


def _check_style(style: str, plain: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
    with MockServer(RolePlay(), reasoning=style, reasoning_tokens=120) as server:
        got, warnings = _cells(server, tmp_path / style, monkeypatch, capsys)
        rejected = Counter(server.rejected)
    assert got == plain
    _no_reasoning_outside_its_place(server, tmp_path / style, style)
    for name in ("task-code", "subtask-text", "lens"):
        records = RunFolder(tmp_path / style / name).read_records()
        assert sum(r.reasoning_tokens for r in records) > 0
        assert sum(r.length_cut_calls for r in records) == 0
    if style == "openai":  # three runs (all three parameters), at most one each per run; the judge sends no cap
        assert rejected == {"max_tokens": 3, "stop": 3, "temperature": 3}
        for name, err in warnings.items():  # the runs' (the judge's own line is printed by its run)
            assert err.count("warning: model mock rejected") == 3, name
        config = json.loads((tmp_path / style / "task-code" / "config.json").read_text())
        assert config["model_adaptations"] == {"max_tokens": "max_completion_tokens", "stop": "dropped",
                                               "temperature": "dropped"}
    else:
        assert not rejected


@pytest.fixture
def plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with MockServer(RolePlay()) as server:
        records, _ = _cells(server, tmp_path / "plain", monkeypatch, capsys)
    assert all(r["record"]["exit_status"] != "planner_format_error"
               for cell in ("task-code", "subtask-text", "lens") for k, r in records[cell].items() if k != "skills")
    assert records["subtask-text"]["skills"], "the plain run induced no skill: the comparison would be empty"
    return records


@pytest.mark.parametrize("style", ["think", "openai"])
def test_reasoning_double_gives_the_plain_records(style: str, plain: dict[str, Any], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _check_style(style, plain, tmp_path, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("style", ["reasoning", "reasoning_content"])
def test_reasoning_field_doubles_give_the_plain_records(style: str, plain: dict[str, Any], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _check_style(style, plain, tmp_path, monkeypatch, capsys)


def test_a_resumed_run_sends_what_the_first_learnt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with MockServer(RolePlay(), reasoning="openai") as server:
        first = _run(server, tmp_path / "run", monkeypatch, capsys, "--condition", "subtask+text", "--limit", "1")
        assert sorted(server.rejected) == ["max_tokens", "stop", "temperature"]
        again = _run(server, tmp_path / "run", monkeypatch, capsys, "--condition", "subtask+text", "--limit", "2")
        assert len(server.rejected) == 3
    assert first.count("warning:") == 3
    assert "warning:" not in again
    assert len(RunFolder(tmp_path / "run").read_records()) == 2


def test_small_model_caps_still_cut_a_reasoning_reply_and_show_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The failure the paper preset removes: under small-model caps the planner's 96 tokens go to reasoning; the
    cut replies are recorded, counted in the summary and shown by ``show``."""
    with MockServer(RolePlay(), reasoning="reasoning_content", reasoning_tokens=120) as server:
        code, stdout, stderr = main_cli(
            ["run", "--env", "apps", "--limit", "1", "--condition", "subtask+text", "--harness", "small-model",
             "--model", f"mock@{server.url}", "--api-key", "x", "--embedder", "hash:64", "--no-sandbox",
             "--no-progress", "--out", str(tmp_path / "run")], monkeypatch, capsys)
    assert code == 0, stderr[-2000:]
    record = RunFolder(tmp_path / "run").read_records()[0]
    assert record.exit_status == "planner_format_error"
    assert record.length_cut_calls >= 1
    summary = summarize_run(tmp_path / "run")
    assert summary.length_cut_calls == record.length_cut_calls
    assert f"{summary.length_cut_calls:,} replies cut by the completion cap" in dict(summary_rows(summary))["context"]
    assert "Run run" in stdout
    code, shown, _ = main_cli(["show", str(tmp_path / "run"), "--task", record.task_id, "--prompts"], monkeypatch,
                              capsys)
    assert code == 0
    assert "cut by the completion cap (finish_reason length)" in shown
    assert "--- reasoning (kept apart" in shown
    catalog = Catalog([tmp_path / "run"])
    task = catalog.task(catalog.index()["runs"][0]["key"], 0)
    calls = task["trajectory"]["calls"]
    thoughts = [task["messages"][c["reasoning"]] for c in calls if c.get("reasoning")]  # view folds these
    assert len(thoughts) == sum(1 for c in calls if c["reasoning_tokens"]) > 0
    assert all(t["role"] == "reasoning" and REASONING_MARKER in t["content"] for t in thoughts)
    assert any(c["finish_reason"] == "length" for c in calls)
    code, _, err = main_cli(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")], monkeypatch, capsys)
    assert code == 0, err[-2000:]
    text = " ".join((tmp_path / "report" / "report.md").read_text().split())
    assert f"run {record.reasoning_tokens:,} reasoning tokens" in text
    assert f"{record.length_cut_calls:,} replies cut by the completion cap" in text
