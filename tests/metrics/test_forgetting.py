"""Backward transfer and forgetting (issue 39 §3): memory snapshots per stream position (resume-consistent),
``task_positions`` / ``run --only-tasks``, ``library_snapshot`` (``run --at-snapshot``), and ``report``'s ``forgetting``
tables from probe streams against snapshots, through real streams of the counter world."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers_tinyenv import CounterScript, SimulatedCrash, TinyEnv, task_start

from skilltransfer.envs.opening import pick_positions
from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import memory_folder
from skilltransfer.memory.snapshots import read_snapshots, snapshot_library
from skilltransfer.metrics.forgetting import per_task_measures
from skilltransfer.report import build_report, load_runs
from skilltransfer.report.writer import write_report
from skilltransfer.runner.build import parse_positions
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.view.data import Catalog

SOURCE = [3, 5, 2, 7]
PROBES = [3, 5, 2, 7, 9]  # tiny/4 (9): held out (the source stream has 4 tasks)
WORDS = {3: "amber falcon", 5: "basalt heron", 2: "cobalt lynx", 7: "dune otter", 9: "ember wren"}


def recipe(_: int, messages: list[dict[str, Any]]) -> str:
    """A distinct text skill per target (so none merges with another)."""
    target = int(re.findall(r"[Ss]et the counter to (-?\d+)", messages[-1]["content"])[0])
    return (f"NAME: recipe_{target}\nDESCRIPTION: {WORDS[target]} procedure for value {target}.\nBODY:\n"
            f"1. {WORDS[target]}: reset, then apis.counter.add({target}).\n2. complete_task().")


class Crowded(CounterScript):
    """Succeeds on target T only when its recipe is shown among fewer than 3 skills (a crowded library forgets)."""

    @staticmethod
    def execute(messages: list[dict[str, Any]]) -> str:
        first = messages[task_start(messages)]["content"]
        target = int(re.findall(r"[Ss]et the counter to (-?\d+)", first)[0])
        if f"recipe_{target}" in first and first.count("recipe_") < 3:
            return f"Set it.\n```python\napis.counter.reset()\napis.counter.add({target})\ncomplete_task()\n```"
        return "Done.\n```python\ncomplete_task()\n```"


def _config(tmp_path, run: str, **cfg: Any) -> StreamConfig:
    return StreamConfig(run=run, runs_dir=str(tmp_path / "runs"), agent={"harness": "paper"}, **cfg)


def _source(tmp_path, embedder, script=None, run="source"):
    config = _config(tmp_path, run, condition="task+text")
    return run_stream(TinyEnv(SOURCE, workdir=tmp_path / "ws" / run), ScriptedModel(script or Crowded(recipe)),
                      config, embedder=embedder)


def test_a_memory_stream_records_one_snapshot_per_position(tmp_path, hash_embedder):
    summary = _source(tmp_path, hash_embedder)
    snapshots = read_snapshots(memory_folder(summary.path))
    assert [(s.position, s.task_id, len(s.skill_ids)) for s in snapshots] == [
        (0, "tiny/0", 1), (1, "tiny/1", 2), (2, "tiny/2", 3), (3, "tiny/3", 4)]
    assert snapshots[1].skill_ids == snapshots[3].skill_ids[:2]
    assert [s.name for s in snapshot_library(memory_folder(summary.path), 2)] == ["recipe_3", "recipe_5"]
    assert snapshot_library(summary.path / "memory", 0) == []
    with pytest.raises(InputError, match="snapshot 5: the run committed 4 tasks"):
        snapshot_library(memory_folder(summary.path), 5)


def test_a_resumed_stream_keeps_its_snapshots_consistent(tmp_path, hash_embedder):
    with pytest.raises(SimulatedCrash):
        _source(tmp_path, hash_embedder, Crowded(recipe, fail_at=5))
    first = read_snapshots(memory_folder(tmp_path / "runs" / "source"))
    assert [s.position for s in first] == list(range(len(first)))
    assert 0 < len(first) < 4
    summary = _source(tmp_path, hash_embedder)
    assert [s.position for s in read_snapshots(memory_folder(summary.path))] == [0, 1, 2, 3]
    assert len(summary.records) == 4


def test_task_positions_pick_tasks_and_bad_positions_are_refused(tmp_path, hash_embedder):
    assert parse_positions("1,4,6-8") == [0, 3, 5, 6, 7]
    for bad, match in [("a", "'a' is not N or A-B"), ("3-1", "A <= B"), ("1,1", "twice"), ("-2", "not N"),
                       ("0", ">= 1")]:
        with pytest.raises(InputError, match=match):
            parse_positions(bad)
    with pytest.raises(InputError, match="position 9 is outside the stream's 4 tasks"):
        pick_positions(TinyEnv(SOURCE, workdir=tmp_path / "w").tasks(), [0, 9])
    config = _config(tmp_path, "picked", condition="task", task_positions=[3, 1])
    summary = run_stream(TinyEnv(SOURCE, workdir=tmp_path / "ws" / "p"), ScriptedModel(CounterScript()), config,
                         embedder=hash_embedder)
    assert [r.task_id for r in summary.records] == ["tiny/3", "tiny/1"]


def test_a_snapshot_needs_a_library():
    with pytest.raises(ValueError, match="library_snapshot needs a library"):
        StreamConfig(condition="task", library_snapshot=1)


def test_measures_follow_their_definitions():
    matrix = {0: {"a": 0.0, "b": 0.0, "h": 0.0}, 1: {"a": 1.0, "b": 1.0, "h": 1.0},
              2: {"a": 0.0, "b": 1.0, "h": 0.0}, 3: {"a": 0.0, "b": 0.0, "h": 1.0}}
    out = per_task_measures(matrix, {"a": 0, "b": 1})
    assert out["bwt"] == {"a": -1.0, "b": -1.0}  # a: learned at 1, final 0; b: learned at 2 (1 -> 0)
    assert out["forgetting"] == {"a": 1.0, "b": 1.0}
    assert out["fwt"] == {"b": 1.0}  # b at position 1: snapshot 1 (before it) vs empty
    assert out["held_out_transfer"] == {"h": 1.0}


def test_report_gives_the_matrix_and_measures_from_probe_streams(tmp_path, hash_embedder):
    source = _source(tmp_path, hash_embedder)
    for k in range(5):
        config = _config(tmp_path, f"probe/snap{k}", condition="task+text", library=str(source.path / "memory"),
                         library_snapshot=k)
        summary = run_stream(TinyEnv(PROBES, workdir=tmp_path / "ws" / f"p{k}"), ScriptedModel(Crowded(recipe)),
                             config, embedder=hash_embedder)
        assert not any(item.status == "added" for r in summary.records for item in r.induced)  # frozen
    report = build_report(load_runs([tmp_path / "runs"]))
    matrix = {(row["snapshot"], row["task_id"]): row["value_pct"] for row in report.table("forgetting_matrix").rows}
    assert [matrix[(k, "tiny/0")] for k in range(5)] == [0, 100, 100, 0, 0]
    assert [matrix[(k, "tiny/1")] for k in range(5)] == [0, 0, 100, 0, 0]
    assert [matrix[(k, "tiny/4")] for k in range(5)] == [0, 0, 0, 0, 0]
    rows = {row["measure"]: row for row in report.table("forgetting").rows}
    assert rows["bwt"]["tasks"] == 3
    assert rows["bwt"]["value_pct"] == pytest.approx(-200 / 3)
    assert rows["forgetting"]["value_pct"] == pytest.approx(200 / 3)
    assert rows["bwt"]["ci_low"] <= rows["bwt"]["value_pct"] <= rows["bwt"]["ci_high"]
    assert rows["fwt"]["tasks"] == 3
    assert rows["fwt"]["value_pct"] == 0
    assert rows["held_out_transfer"]["tasks"] == 1
    assert "forgetting" not in build_report(load_runs([source.path])).tables
    assert json.loads((source.path / "memory" / "snapshots.jsonl").read_text().splitlines()[0])["position"] == 0
    written = write_report(report, tmp_path / "report")  # the heat map: a report figure that view lists
    assert written.figures["forgetting_matrix"].is_file()
    assert "figures/forgetting_matrix.png" in (tmp_path / "report" / "report.md").read_text()
    shown = Catalog([tmp_path / "report"]).index()["figures"]
    assert "report/figures/forgetting_matrix.png" in [f["label"] for f in shown]


def test_run_only_tasks_and_at_snapshot_through_the_cli(tmp_path, monkeypatch, capsys):
    from helpers_cli import TINY, main_cli, records_of, run_tiny

    from skilltransfer.llm.testing.mock_server import MockServer

    with MockServer(Crowded(recipe)) as server:
        run_tiny(server, tmp_path / "src", "task+text", SOURCE)
        run_tiny(server, tmp_path / "one", "task+text", SOURCE, "--library", str(tmp_path / "src"), "--at-snapshot",
                 "1", "--only-tasks", "1,3-4")
        base = ["run", "--env", TINY, "--condition", "task+text", "--model", "openai/mock", "--base-url", server.url,
                "--api-key", "x", "--embedder", "hash:128", "--no-sandbox", "--no-progress",
                "--env-arg", f"targets={json.dumps(SOURCE)}"]
        for extra, message in [(["--only-tasks", "0"], "--only-tasks: '0'"),
                               (["--only-tasks", "2,9"], "position 8 is outside the stream's 4 tasks"),
                               (["--library", str(tmp_path / "src"), "--at-snapshot", "7"], "snapshot 7"),
                               (["--at-snapshot", "1"], "a snapshot needs a library")]:
            code, _, err = main_cli([*base, "-o", str(tmp_path / "bad"), *extra], monkeypatch, capsys)
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2, err
            assert len(lines) == 1, err
            assert lines[0].startswith("error:"), err
            assert message in lines[0], err
    stream = [r["task_id"] for r in records_of(tmp_path / "src")]  # the stream's order (1-based numbers below)
    records = records_of(tmp_path / "one")
    assert [r["task_id"] for r in records] == [stream[0], stream[2], stream[3]]
    assert [r["success"] for r in records] == [True, False, False]  # snapshot 1: the first task's recipe only
    assert [len(s.skill_ids) for s in read_snapshots(memory_folder(tmp_path / "one"))] == [1, 1, 1]  # frozen
    assert not (tmp_path / "bad").exists()
