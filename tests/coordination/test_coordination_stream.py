"""The ``coordination`` axis end to end: ``run`` per interface on the counter world through the mock server (one
shared plan folder, so every interface replays the same plan file), the stream's records, trajectories, audits and
artifacts, induction under metaskill at subtask level, ``show``, ``judge`` over the new artifacts, and a grid of the
three interfaces whose report compares them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers_cli import ALLOW_TINY, TINY, cli, main_output, records_of, run_tiny, trajectory_of
from helpers_compose import ComposeScript, plan_json
from helpers_tinyenv import TEXT_SKILL, TinyEnv

from skilltransfer.coordination import Plan, PlanFolder, PlanNode
from skilltransfer.errors import InputError
from skilltransfer.judge import load_run
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import load_spec
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

INTERFACES = ("nl-sop", "prompt-graph", "metaskill")
SKILL = "add-to-counter"


def five_plan(task_id: str = "tiny/0", skill: str | None = None) -> Plan:
    """v1 reads the counter; v2 adds 2 (with ``skill``), v3 adds 3, both after v1; v4 reads it, bound to both."""
    return Plan(task_id=task_id, nodes=[
        PlanNode(id="v1", instructions="Read the counter.", expected_output="the counter value"),
        PlanNode(id="v2", skill=skill, instructions="Add 2 to the counter.", depends_on=["v1"],
                 bindings={"start": "outputs.v1"}, expected_output="the new value"),
        PlanNode(id="v3", instructions="Add 3 to the counter.", depends_on=["v1"]),
        PlanNode(id="v4", instructions="Read the counter.", depends_on=["v2", "v3"],
                 bindings={"a": "outputs.v2", "b": "outputs.v3"}, expected_output="the final value")])


class InducingScript(ComposeScript):
    """`ComposeScript` that also answers induction prompts (a fixed text skill)."""

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        if "You induce a reusable SKILL" in str(messages[0]["content"]):
            with self._lock:
                self.kinds.append("induction")
            return TEXT_SKILL
        return super().__call__(messages)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``run --coordination X`` for each interface over tasks set-to-5 (x2), all sharing one plan folder."""
    root = tmp_path_factory.mktemp("coord")
    script = ComposeScript([plan_json(five_plan())])
    out = {}
    with MockServer(script) as server:
        for interface in INTERFACES:
            out[interface] = root / interface
            run_tiny(server, out[interface], "task", (5, 5), "--coordination", interface,
                     "-c", f"plans={root / 'plans'}")
    assert script.kinds.count("plan") == 2  # one plan per task, written once, replayed by the other interfaces
    return out


def test_every_interface_solves_the_tasks_from_the_same_plan_files(runs: dict[str, Path]) -> None:
    fingerprints = {}
    for interface, path in runs.items():
        rows = records_of(path)
        assert [r["success"] for r in rows] == [True, True], interface
        for row in rows:
            coord = row["coordination"]
            assert coord["interface"] == interface
            assert coord["nodes"] == 4
            assert coord["violated_constraints"] == 0
            fingerprints.setdefault(row["task_id"], set()).add(coord["plan_fingerprint"])
            assert coord["plan_written"] == (interface == "nl-sop")  # the first stream wrote both plans
            trajectory = trajectory_of(path, row)
            assert trajectory.coordination is not None
            assert trajectory.coordination["plan"]["file"] == str(
                PlanFolder(runs["nl-sop"].parent / "plans").path_for(row["task_id"]))
            roles = {call["role"] for call in trajectory.calls}
            assert ("plan_writer" in roles) == coord["plan_written"]  # the writer's calls are in the task's call log
        assert not (path / "plans").exists()  # the shared folder, not <run>/plans
    assert all(len(prints) == 1 for prints in fingerprints.values())
    assert {p.name for p in (runs["nl-sop"].parent / "plans").glob("*.plan.json")} == {
        PlanFolder("x").path_for(t).name for t in ("tiny/0", "tiny/1")}


def test_metaskill_audit_is_complete_with_zero_violations(runs: dict[str, Path]) -> None:
    for row in records_of(runs["metaskill"]):
        audit = trajectory_of(runs["metaskill"], row).coordination["audit"]  # type: ignore[index]
        assert audit["source"] == "runtime"
        assert audit["completed_nodes"] == audit["n_nodes"] == 4
        assert audit["violated_constraints"] == 0
        assert audit["unverified_constraints"] == 0
        assert all(c["held"] is True for c in audit["constraints"])
        assert row["exit_status"] == "submitted"
        assert row["coordination"]["completed_nodes"] == 4


def test_artifacts_are_written_for_every_task_and_judge_reads_them(runs: dict[str, Path], tmp_path: Path) -> None:
    for path in runs.values():
        for row in records_of(path):
            data = json.loads((path / "artifacts" / Path(row["trajectory"]).name).read_text())
            assert data["task_id"] == row["task_id"]
            assert data["submitted"] is True
    artifacts = load_run(runs["metaskill"])
    assert {a.source for a in artifacts.tasks.values()} == {"artifacts"}
    script = tmp_path / "judge.jsonl"
    script.write_text(json.dumps({"reply": "VERDICT: TIE"}) + "\n")
    out = tmp_path / "judge.json"
    cli("judge", str(runs["metaskill"]), str(runs["nl-sop"]), "--model", f"scripted:{script}",
        "--out", str(out))
    data = json.loads(out.read_text())
    assert data["preference"]["ties"] == 6  # 2 tasks x 3 judgments (the judge's defaults: the study's)
    assert data["preference"]["preference"] == pytest.approx(0.5)


def test_plan_writing_cost_is_its_own_line_and_out_of_every_interface(runs: dict[str, Path], tmp_path: Path) -> None:
    from skilltransfer.report import make_report

    written = records_of(runs["nl-sop"])
    plan_tokens = [row["coordination"]["plan_tokens"] for row in written]
    assert all(tokens > 0 for tokens in plan_tokens)  # nl-sop reached the tasks first and wrote both plans
    assert all(row["coordination"]["plan_tokens"] == 0 for row in records_of(runs["metaskill"]))
    assert all(row["coordination"]["submitted_by"] == "host" for row in written)
    assert all(row["coordination"]["submitted_by"] == "finish" for row in records_of(runs["metaskill"]))
    report, _ = make_report(list(runs.values()), tmp_path / "report", utility=False)
    table = report.table("coordination")
    nl_sop = next(row for row in table.rows if row["interface"] == "nl-sop")
    totals = [row["prompt_tokens"] + row["completion_tokens"] for row in written]
    assert nl_sop["tokens_per_task"] == pytest.approx(sum(t - p for t, p in zip(totals, plan_tokens, strict=True)) / 2)
    [line] = [row for row in table.rows if row["condition"] == "plan writing"]
    assert (line["interface"], line["plans_written"]) == ("plan writer", 2)
    assert line["tokens_per_task"] == pytest.approx(sum(plan_tokens) / 2)


def test_show_prints_the_coordination_setting_totals_and_audit(runs: dict[str, Path]) -> None:
    text = cli("show", str(runs["metaskill"])).output  # type: ignore[attr-defined]
    assert "coordination=metaskill" in text
    assert "nodes 8/8 completed" in text
    data = json.loads(cli("show", str(runs["metaskill"]), "--json").output)  # type: ignore[attr-defined]
    assert data["settings"] == {"coordination": "metaskill", "plans": str(runs["metaskill"].parent / "plans")}
    assert data["coordination"] == {"tasks": 2, "plans_written": 0, "plans_replayed": 2, "plan_fallbacks": 0,
                                    "nodes": 8, "completed_nodes": 8, "violated_constraints": 0,
                                    "unverified_constraints": 0, "submitted_by_node": 0, "not_run_nodes": 0}
    text = cli("show", str(runs["prompt-graph"]), "--task", "tiny/0").output  # type: ignore[attr-defined]
    assert "coordination: prompt-graph, plan " in text
    assert "audit (reported): 4/4 nodes completed, 0 constraints violated" in text


def test_a_resume_under_another_interface_is_refused(runs: dict[str, Path]) -> None:
    with MockServer(ComposeScript([plan_json(five_plan())])) as server, \
            pytest.raises(InputError, match="config.coordination"):
        run_tiny(server, runs["nl-sop"], "task", (5, 5), "--coordination", "metaskill")


def test_default_plan_folder_and_frozen_skill_packages(tmp_path: Path) -> None:
    """Without ``plans`` the plans go to <run>/plans; a plan naming a retrieved skill is frozen with its package."""
    library = tmp_path / "lib.jsonl"
    library.write_text(json.dumps({"name": SKILL, "description": "Add a number to the counter.",
                                   "body": "Call apis.counter.add(n) and report the new value."}) + "\n")
    script = ComposeScript([plan_json(five_plan(skill=SKILL))])
    config = StreamConfig(run="r", runs_dir=str(tmp_path), condition="task+text", coordination="metaskill",
                          library=str(library))
    summary = run_stream(TinyEnv([5], workdir=tmp_path / "ws"), ScriptedModel(script), config,
                         embedder=HashEmbedder(64))
    assert summary.records[0].success
    assert [r.name for r in summary.records[0].retrieved] == [SKILL]
    plan = PlanFolder(tmp_path / "r" / "plans").load("tiny/0")
    assert plan is not None
    assert [s.name for s in plan.packages] == [SKILL]
    assert "Call apis.counter.add(n)" in script.node_prompts["v2"][0]  # the node context holds the frozen package


def test_metaskill_at_subtask_level_induces_one_skill_per_node(tmp_path: Path) -> None:
    script = InducingScript([plan_json(five_plan())])
    config = StreamConfig(run="r", runs_dir=str(tmp_path), condition="subtask+text", coordination="nl-sop")
    run_stream(TinyEnv([5], workdir=tmp_path / "ws"), ScriptedModel(script), config, embedder=HashEmbedder(64))
    assert script.kinds.count("induction") == 1  # a host interface: one skill per task
    config = config.model_copy(update={"run": "m", "coordination": "metaskill"})
    summary = run_stream(TinyEnv([5], workdir=tmp_path / "ws2"), ScriptedModel(script), config,
                         embedder=HashEmbedder(64))
    induced = summary.records[0].induced
    assert [i.subtask_index for i in induced] == [0, 1, 2, 3]
    assert summary.records[0].memory_size >= 1


def test_metaskill_needs_room_for_its_finishing_context(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="step limit"):
        StreamConfig(condition="task", coordination="metaskill", limits={"step_limit": 5})


def test_grid_of_the_three_interfaces_renders_the_comparison_table(tmp_path: Path) -> None:
    script = ComposeScript([plan_json(five_plan())])
    with MockServer(script, latency_s=0.002) as server:
        spec = {"name": "c", "out": str(tmp_path / "out"), "max_concurrency": 6,
                "envs": {"tiny": {"env": TINY, "args": {"targets": [5, 5, 5]}}},
                "models": {"mock": {"name": "openai", "base_url": server.url, "model": "mock", "max_retries": 1}},
                "condition": "task", "coordinations": list(INTERFACES), "plans": "plans", "embedder": "hash:64"}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        code, output = main_output("grid", str(tmp_path / "spec.yaml"), "--no-progress", *ALLOW_TINY)
    assert code == 0, output
    assert "3 streams run, 0 already finished, 0 failed" in output
    assert script.kinds.count("plan") == 3  # three tasks, each planned once for the three concurrent streams
    out = tmp_path / "out"
    assert len(list((out / "plans").glob("*.plan.json"))) == 3
    written = [r["coordination"]["plan_written"] for i in INTERFACES
               for r in records_of(out / "tiny" / "mock" / f"task-{i}")]
    assert sum(written) == 3
    code, output = main_output("report", str(out), "--out", str(tmp_path / "report"), "--no-utility")
    assert code == 0, output
    rows = (tmp_path / "report" / "coordination.csv").read_text().splitlines()
    assert rows[0].startswith("env,model,condition,interface,runs,tasks,success_pct")
    header = rows[0].split(",")
    by_condition = {line.split(",")[2]: dict(zip(header, line.split(","), strict=True)) for line in rows[1:]}
    assert set(by_condition) == {f"task[{i}]" for i in INTERFACES} | {"plan writing"}
    assert all(row["success_pct"] == "100.0" for c, row in by_condition.items() if c != "plan writing")
    assert by_condition["task[metaskill]"]["violated_constraints"] == "0"
    assert by_condition["plan writing"]["plans_written"] == "3"
    table2 = (tmp_path / "report" / "table2_success.csv").read_text()
    assert all(f"task[{i}]" in table2 for i in INTERFACES)
    assert "## Coordination interfaces" in (tmp_path / "report" / "report.md").read_text()


def test_composition_spec_expands_to_three_interfaces_over_one_plan_folder_per_env() -> None:
    plans = plan_streams(load_spec("composition"))
    compose = [p for p in plans if p.phase == "compose"]
    assert len(plans) == 8
    assert sorted(p.config.coordination for p in compose) == sorted(INTERFACES * 2)
    assert {p.config.env.stream for p in compose} == {"multi-app", "multi-step"}
    assert {p.config.plan_dir for p in compose} == {Path(compose[0].config.runs_dir) / "plans"}
    assert all(p.depends_on and p.depends_on.startswith("skills/") for p in compose)
    assert {p.config.coordination for p in plans if p.phase == "skills"} == {"none"}
