"""One stream path: ``run --config FILE -c key=value`` layered like ``grid``; ``run`` and ``grid`` record the same
stream the same way; every axis of `StreamConfig` is a spec key, a run-name suffix and a report tag; run folders of
the old log format (format_version 1, ``tests/data/v1``) are shown and reported, and refused for resume."""

from __future__ import annotations

import json
import shutil
import typing
from pathlib import Path

import pytest
import yaml
from helpers_cli import ALLOW_TINY, TINY, cli, records_of
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.report import load_run, make_report
from skilltransfer.report.summary import summarize_run
from skilltransfer.runner.grid import run_grid
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import build_spec, load_spec
from skilltransfer.settings.config import StreamConfig, axes

V1 = Path(__file__).resolve().parents[1] / "data" / "v1"


def stream_yaml(url: str, **extra: object) -> dict:
    """One stream's keys, as a grid spec holds them (the labels envs.tiny and models.mock)."""
    return {"envs": {"tiny": {"env": TINY, "args": {"targets": [3, 5, 2]}}},
            "models": {"mock": {"name": "openai", "base_url": url, "model": "mock", "api_key": "x"}},
            "condition": "task+text", "embedder": "hash:64", **extra}


def test_run_config_then_c_then_flags(tmp_path):
    config = tmp_path / "x.yaml"
    config.write_text(yaml.safe_dump({"env": {"env": TINY, "args": {"targets": [3, 5, 2]}}, "condition": "task",
                                      "embedder": "hash:64", "agent": {"top_k": 1, "max_observation_chars": 900},
                                      "limits": {"task_limit": 3}}))
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        cli("run", "--config", str(config), "-c", "agent.top_k=3", "-c", "limits.task_limit=2", "--condition",
            "task+text", "--model", "openai/mock", "--base-url", server.url, "--api-key", "x",
            "--out", str(out), "--no-sandbox", "--no-progress", *ALLOW_TINY)
    log = json.loads((out / "config.json").read_text())
    assert log["format_version"] == 2
    assert log["config"]["condition"] == "task+text"  # the flag beats the file
    assert log["config"]["agent"]["top_k"] == log["agent"]["top_k"] == 3  # -c beats the file
    assert log["agent"]["max_observation_chars"] == 900  # the file's own setting stays
    assert log["config"]["limits"]["task_limit"] == 2
    assert log["config"]["env"] == {"env": TINY, "label": None, "args": {"targets": [3, 5, 2]}, "seed": None,
                                    "split": None, "stream": None, "task_limit": None}
    assert set(log["config"]["model"]) == {"label", "name", "model", "params", "extra_body", "context_window"}
    assert len(records_of(out)) == 2
    assert all(len(hit) <= 3 for hit in [r["retrieved"] for r in records_of(out)])


def test_run_and_grid_record_one_stream_alike(tmp_path):
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        data = stream_yaml(server.url)
        (tmp_path / "one.yaml").write_text(yaml.safe_dump(data))
        cli("run", "--config", str(tmp_path / "one.yaml"), "--out", str(tmp_path / "run"), "--no-sandbox",
            "--no-progress", *ALLOW_TINY)
        grid = build_spec({**data, "name": "g", "out": str(tmp_path / "grid")})
        assert run_grid(grid).counts["done"] == 1
    by_run = json.loads((tmp_path / "run" / "config.json").read_text())
    by_grid = json.loads((tmp_path / "grid" / "tiny" / "mock" / "task+text" / "config.json").read_text())
    for log in (by_run, by_grid):
        del log["created"], log["config"]["run"], log["config"]["runs_dir"]
    assert by_run["config"] == by_grid["config"]
    assert by_run == by_grid
    assert [r["success"] for r in records_of(tmp_path / "run")] == [r["success"] for r in
                                                                      records_of(tmp_path / "grid/tiny/mock/task+text")]


def _two_values(name: str) -> list[object]:
    """Two values of an axis: its first two choices, or 0 and 1 (a rate in [0, 1): 0 and 0.3; a library size: 5
    and 20)."""
    if name == "mask_rate":
        return [0.0, 0.3]
    if name == "library_size":  # at least one skill
        return [5, 20]
    annotation = StreamConfig.model_fields[name].annotation
    choices = [a for arg in typing.get_args(annotation) or (annotation,) for a in (typing.get_args(arg) or [arg])
               if a is not type(None)]
    literals = [c for c in choices if isinstance(c, str)]
    return literals[:2] if literals else [0, 1]


@pytest.mark.parametrize("name", [n for n, a in axes().items() if not a.labelled and n != "condition"])
def test_every_axis_is_a_spec_key_a_run_name_and_a_report_label(name):
    axis = axes()[name]
    values = _two_values(name)
    of_library = ("library_filter", "library_snapshot", "library_use")  # axes of a library
    extra = {"library": "lib.jsonl"} if name in of_library else {}
    spec = build_spec({"name": "x", "envs": ["apps"], "conditions": ["task+text"], axis.plural: values, **extra})
    plans = plan_streams(spec)
    assert [getattr(p.config, name) for p in plans] == values
    assert len({p.run for p in plans}) == 2  # a suffix tells the streams apart
    labels = {p.config.condition_label() for p in plans}
    assert len(labels) == (1 if axis.report == "replicate" else 2)  # the report groups by it, or averages over it
    one = load_spec("paper-table2", [f"{name}={json.dumps(values[1])}", "env=apps", "condition=task+text",
                                     *([f"library={extra['library']}"] if extra else [])])
    assert [getattr(p.config, name) for p in plan_streams(one)] == [values[1]]  # the singular key: -c, run


# --------------------------------------------------------------------------------------------- format_version 1
@pytest.fixture
def old_runs(tmp_path):
    shutil.copytree(V1, tmp_path / "v1")
    return tmp_path / "v1"


def test_old_run_folders_show_and_report(old_runs, tmp_path):
    run, stream = old_runs / "run", old_runs / "grid" / "tiny" / "mock" / "task+text"
    summary = summarize_run(run)
    assert (summary.finished, summary.success, summary.format_version) == (2, 1.0, 1)
    assert summary.env == 'helpers_tinyenv:TinyEnv {"seed": 0, "targets": [3, 5]}'
    assert summary.model == "openai:mock temperature=0.0"
    assert "format_version 1: shown, not resumable" in cli("show", str(run)).output
    assert "SUCCESS" in cli("show", str(stream), "--task", "1").output
    assert [(r.env, r.model, r.condition) for r in map(load_run, (run, stream))] == [
        ("TinyEnv", "mock", "subtask+text"), ("tiny", "mock", "task+text")]
    report, _ = make_report([old_runs], tmp_path / "report", utility=False)
    assert {(r["env"], r["condition"]) for r in report.table("table2_success").rows} >= {
        ("TinyEnv", "subtask+text"), ("tiny", "task+text")}


def test_old_run_folder_is_not_resumed(old_runs):
    folders = [old_runs / "run", old_runs / "grid" / "tiny"]
    before = {p: p.read_bytes() for folder in folders for p in folder.rglob("*") if p.is_file()}
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        with pytest.raises(InputError, match="format_version 1 .* cannot be resumed; show and report still read it"):
            cli("run", "--env", TINY, "--condition", "subtask+text", "--model", "openai/mock", "--base-url", server.url,
                "--api-key", "x", "--embedder", "hash:64", "--out", str(old_runs / "run"),
                "--env-arg", "targets=[3, 5]", "--temperature", "0", "--no-sandbox", "--no-progress")
        spec = {"name": "v1", "out": str(old_runs / "grid"), "embedder": "hash:64", "conditions": ["task+text"],
                "envs": {"tiny": {"env": TINY, "args": {"targets": [4, 1]}}},
                "models": {"mock": {"name": "openai", "base_url": server.url, "model": "mock"}}}
        outcome = run_grid(build_spec(spec)).outcomes[0]
    assert outcome.state == "failed"
    assert "format_version 1" in outcome.error
    assert server.requests == []
    assert {p: p.read_bytes() for folder in folders for p in folder.rglob("*") if p.is_file()} == before
