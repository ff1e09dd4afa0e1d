"""The granularity spec (reduced) as a grid through the mock server, then its report: the reuse-mode table, the
cost-vs-size CSV and figure; and `reuse: lens` through `run` on every bundled env (scripted smoke test)."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from helpers_cli import cli
from helpers_lens import LensCounterScript
from helpers_tinyenv import TEXT_SKILL, CounterScript, role_of

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.report import make_report
from skilltransfer.runner.grid import run_grid
from skilltransfer.runner.spec import SPEC_DIR, build_spec

TINY = "helpers_tinyenv:TinyEnv"
MODES = ["flat", "lens", "rewrite-all", "no-walk"]


def test_granularity_spec_through_the_mock_server_and_report(tmp_path):
    data = yaml.safe_load((SPEC_DIR / "granularity.yaml").read_text())
    with MockServer(LensCounterScript(CounterScript(TEXT_SKILL))) as server:
        data.update(out=str(tmp_path / "out"), embedder="hash:64", max_concurrency=4,
                    envs={"a": {"env": TINY, "args": {"targets": [3, 5, 2, 4, 6, 7]}}},
                    models={"mock": {"name": "openai", "base_url": server.url, "model": "mock", "backoff_base_s": 0,
                                     "max_retries": 1}})
        data["limits"]["task_limit"] = 2  # each evolution split too: 2 + 2 + 2 tasks
        for phase in data["phases"]:  # one tiny env without splits: every phase runs its tasks, on purpose
            phase.pop("envs", None)
            phase.get("limits", {})["task_limit"] = 2
            if "library_from" in phase:
                phase["library_from"]["same_tasks"] = True
        summary = run_grid(build_spec(data))
    assert summary.counts["done"] == 7, [o.error for o in summary.outcomes]
    runs = {o.run for o in summary.outcomes}
    assert runs == {"baseline/a/mock/subtask", "source/a/mock/subtask+text", "evolve/a/mock/subtask+text-lens"} | {
        f"reuse/a/mock/subtask+text-{m}" for m in MODES}
    evolved = tmp_path / "out" / "evolve/a/mock/subtask+text-lens"
    baseline = tmp_path / "out" / "baseline/a/mock/subtask"
    assert [json.loads(line)["task_id"] for line in (evolved / "results.jsonl").read_text().splitlines()] == [
        json.loads(line)["task_id"] for line in (baseline / "results.jsonl").read_text().splitlines()
    ]  # the test split (the final pair's run) is the stream's first tasks, the baseline's
    assert (evolved / "evolution" / "evolution.jsonl").is_file()
    again = run_grid(build_spec(data))  # finished: skipped, not evolved again
    assert again.counts["skipped"] == 7
    report, written = make_report([tmp_path / "out"], tmp_path / "report", utility=False)
    assert len(report.runs) == 7  # the evolution's evaluation streams are its own, not the report's
    evolved_row = report.table("table2_success").where(condition="subtask+text+library[lens][evolved]")[0]
    assert (evolved_row["baseline"], evolved_row["delta_tasks"]) == ("subtask", 2)
    assert report.table("evolution_rounds").rows
    assert report.table("evolution_test").rows[0]["tasks"] == 2
    rows = list(csv.DictReader((tmp_path / "report" / "reuse.csv").open()))
    by_mode = {row["reuse"]: row for row in rows if row["condition"].startswith("subtask+text+library")}
    assert set(by_mode) == set(MODES)
    assert by_mode["flat"]["queries"] == "0"
    assert all(int(by_mode[m]["queries"]) > 0 for m in MODES[1:])
    assert float(by_mode["lens"]["routing_tokens_per_task"]) > 0
    assert float(by_mode["lens"]["tokens_per_task"]) > float(by_mode["flat"]["tokens_per_task"])
    cost = list(csv.DictReader((tmp_path / "report" / "lens_cost_vs_size.csv").open()))
    assert {row["reuse"] for row in cost} == set(MODES[1:])
    for row in cost:  # adaptation cost = visited + rewritten; rewrite-all rewrites every unit it visits
        assert int(row["adaptation_cost"]) == int(row["visited"]) + int(row["rewritten"])
        if row["reuse"] == "rewrite-all":
            assert row["visited"] == row["rewritten"]
    figure = written.figures["lens_cost_vs_size"]
    assert figure.name == "lens_cost_vs_size.png"
    assert figure.stat().st_size > 1000
    page = written.markdown.read_text()
    assert "Reuse modes" in page
    assert "lens_cost_vs_size.png" in page
    assert "[lens]" in page


# --------------------------------------------------------------------------------------------- every bundled env
def _env_script(messages):
    """A scripted model for a bundled env: one executor step that submits, one skill; the lens roles as usual."""
    try:
        role = role_of(messages)
    except AssertionError:
        role = "lens"
    if role == "induction":
        return TEXT_SKILL
    if role == "executor":
        return "Finish.\n```python\ncomplete_task()\n```"
    return _LENS(messages)


_LENS = LensCounterScript(None)


@pytest.mark.parametrize("env", ["apps", "office", "datasci", "scienceworld"])
def test_lens_reuse_runs_on_every_bundled_env(tmp_path, env):
    from skilltransfer.envs.registry import get_env
    from skilltransfer.errors import InputError

    try:
        get_env(env, seed=0, sandboxed=False, workdir=tmp_path / "probe")
    except (InputError, ImportError) as exc:
        pytest.skip(f"{env} unavailable: {exc}")
    with MockServer(_env_script) as server:
        out = tmp_path / "run"
        cli("run", "--env", env, "--condition", "task+text", "--reuse", "lens", "--model", "openai/mock", "--base-url",
            server.url, "--api-key", "x", "--embedder", "hash:64", "--out", str(out),
            "--limit", "2", "--no-sandbox", "--no-progress",
            "-c", "agent.ground_skills=false")  # the scripted skill need not name this env's APIs
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert [len(r["routes"]) for r in records] == [1, 1]
    assert records[1]["routes"][0]["graph_units"] > 0  # the first task's skill, decomposed into the graph
    assert (out / "memory" / "graph" / "manifest.json").is_file()
    assert "reuse=lens" in cli("show", str(out)).output
    assert "routed (lens): visited" in cli("show", str(out), "--task", "2").output
