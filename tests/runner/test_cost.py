"""Cost: a model's price gives each task's cost (reasoning billed as output), summed per run and grid; --token-limit
and --cost-limit stop cleanly after the running tasks and a rerun resumes; grid --dry-run estimates from earlier
tasks of the same spec."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers_cli import ALLOW_TINY, TINY, main_cli
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.llm.config import Price
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.report.summary import summarize_run, summary_rows
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

PRICE = {"input": 2.0, "output": 8.0}


def records_of(path):
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def priced_config(tmp_path, name="r"):
    return StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task+text",
                        model={"name": "scripted", "price": PRICE})


def test_reasoning_is_billed_as_output():
    assert Price(**PRICE).cost(1_000_000, 500_000) == pytest.approx(2.0 + 4.0)


def test_each_task_has_its_cost_and_show_sums_it(tmp_path, hash_embedder):
    env = TinyEnv([3, 5, 2], workdir=tmp_path / "ws")
    summary = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), priced_config(tmp_path),
                         embedder=hash_embedder)
    records = records_of(summary.path)
    for record in records:
        expected = (record["prompt_tokens"] * 2.0 + record["completion_tokens"] * 8.0) / 1e6
        assert record["cost_usd"] == pytest.approx(expected, abs=1e-6)
        assert record["cost_usd"] > 0
    run = summarize_run(summary.path)
    assert run.cost_usd == pytest.approx(sum(r["cost_usd"] for r in records), abs=1e-6)
    assert dict(summary_rows(run))["cost"].startswith(f"${run.cost_usd:,.4f}")


def test_no_price_no_cost(tmp_path, hash_embedder):
    env = TinyEnv([3], workdir=tmp_path / "ws")
    config = StreamConfig(run="n", runs_dir=str(tmp_path / "runs"), condition="task")
    summary = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), config)
    assert records_of(summary.path)[0]["cost_usd"] is None
    assert "cost" not in dict(summary_rows(summarize_run(summary.path)))


def test_a_token_limit_stops_after_the_running_task_and_a_rerun_resumes(tmp_path, hash_embedder):
    env = TinyEnv([3, 5, 2], workdir=tmp_path / "ws")
    budget = Budget(token_limit=1)
    first = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), priced_config(tmp_path), embedder=hash_embedder,
                       budget=budget)
    assert first.ran == ["tiny/0"]
    assert first.stopped is not None
    assert first.stopped.startswith("token limit 1 reached")
    again = run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), priced_config(tmp_path), embedder=hash_embedder)
    assert again.ran == ["tiny/1", "tiny/2"]
    assert again.stopped is None


def write_spec(tmp_path, url, *, price=True):
    model = {"name": "openai", "base_url": url, "model": "mock", "api_key": "x"}
    if price:
        model["price"] = PRICE
    spec = {"name": "c", "out": str(tmp_path / "out"), "max_concurrency": 1, "embedder": "hash:64",
            "envs": {"a": {"env": TINY, "args": {"targets": [3, 5]}}, "b": {"env": TINY, "args": {"targets": [4, 1]}}},
            "models": {"mock": model}, "conditions": ["task"]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_grid_cost_limit_stops_cleanly_resumes_and_dry_run_estimates(tmp_path, monkeypatch, capsys):
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        spec = str(write_spec(tmp_path, server.url))
        code, out, _ = main_cli(["grid", spec, "--no-progress", "--cost-limit", "0.000001", *ALLOW_TINY], monkeypatch,
                                capsys)
        assert code == 0
        stopped = [line for line in out.splitlines() if line.startswith("stopped: cost limit $0.00 reached")]
        assert len(stopped) == 1
        assert f"resume: skilltransfer grid {spec} --allow-import helpers_tinyenv --cost-limit 1e-06" in stopped[0]
        status = json.loads((tmp_path / "out" / "status.json").read_text())
        states = sorted(row["state"] for row in status["streams"].values())
        assert states == ["done", "stopped"] or states == ["stopped", "stopped"]
        committed = sum(len(records_of(tmp_path / "out" / run)) for run, row in status["streams"].items()
                        if (tmp_path / "out" / run / "results.jsonl").exists())
        assert 1 <= committed < 4
        code, out, _ = main_cli(["grid", spec, "--dry-run", *ALLOW_TINY], monkeypatch, capsys)
        assert code == 0
        assert f"estimate from {committed} earlier tasks of this spec: {4 - committed} tasks left" in out
        assert "~$" in out
        code, out, _ = main_cli(["grid", spec, "--no-progress", *ALLOW_TINY], monkeypatch, capsys)
        assert code == 0
    total = sum(r["cost_usd"] for run in ("a/mock/task", "b/mock/task") for r in records_of(tmp_path / "out" / run))
    assert len(records_of(tmp_path / "out" / "a/mock/task")) == 2
    assert len(records_of(tmp_path / "out" / "b/mock/task")) == 2
    assert total > 0


def test_a_cost_limit_needs_a_price(tmp_path, monkeypatch, capsys):
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        spec = str(write_spec(tmp_path, server.url, price=False))
        code, _, err = main_cli(["grid", spec, "--no-progress", "--cost-limit", "1", *ALLOW_TINY], monkeypatch, capsys)
    assert code == 2
    assert "--cost-limit needs a price for every model: set models.<label>.price" in err
    assert not (tmp_path / "out").exists()


def test_report_has_a_cost_table_beside_table_2(tmp_path, hash_embedder):
    from skilltransfer.report import make_report

    for name in ("p", "q"):
        env = TinyEnv([3, 5], workdir=tmp_path / "ws" / name)
        run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), priced_config(tmp_path, name),
                   embedder=hash_embedder)
    report, written = make_report([tmp_path / "runs"], tmp_path / "report", utility=False)
    table = report.tables["cost"]
    rows = {row["run"]: row for row in table.rows}
    for name in ("p", "q"):
        assert rows[name]["cost_usd"] == pytest.approx(summarize_run(tmp_path / "runs" / name).cost_usd)
    assert rows["(all runs)"]["cost_usd"] == pytest.approx(rows["p"]["cost_usd"] + rows["q"]["cost_usd"])
    assert rows["(all runs)"]["tasks"] == 4
    assert "Tokens and cost per run" in written.markdown.read_text()
