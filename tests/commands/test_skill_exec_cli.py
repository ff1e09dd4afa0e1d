"""Every execution mode x library organisation through ``skilltransfer run`` on the bundled envs, and the
``subagent-vs-skill`` grid (reduced) through the mock server with both report tables (issue 14 §5)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from helpers_cli import ALLOW_TINY, cli, main_cli, records_of, trajectory_of
from helpers_skill_exec import SkillActionScript

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.library import export_skill_md
from skilltransfer.memory.organization import Organization, RoutingNode, save_organization
from skilltransfer.skill import Provenance, Skill

MODES = ["inline", "agent-skill", "subagent", "hybrid"]
ORGANIZATIONS = ["flat", "task-tree", "tree", "graph"]
SPEC = Path(__file__).resolve().parents[2] / "experiments" / "subagent-vs-skill.yaml"
SKILLS = [Skill(name="look-around", description="Inspect the environment before acting.",
                body="1. Read the docs.\n2. Print what you find.", inputs="what to inspect", outputs="what was found",
                provenance=Provenance(source_task_id="t1")),
          Skill(name="finish-up", description="Finish the task and submit.", body="Call complete_task().",
                provenance=Provenance(source_task_id="t2"))]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """A two-skill library with a frozen graph organisation beside it."""
    folder = tmp_path_factory.mktemp("organised")
    export_skill_md(SKILLS, folder)
    org = Organization(kind="graph", roots=["all work", "endings"], nodes=[
        RoutingNode(name="all work", description="Everything.", children=["endings"], skills=[SKILLS[0].id]),
        RoutingNode(name="endings", description="Finishing.", skills=[SKILLS[1].id])])
    save_organization(org, folder)
    return folder


@pytest.fixture(scope="module")
def server():
    with MockServer(SkillActionScript()) as running:
        yield running


def run_env(server: MockServer, out: Path, env: str, library: Path, mode: str, organization: str) -> None:
    extra = ["-c", f"organization={library}"] if organization in ("tree", "graph") else []
    cli("run", "--env", env, "--condition", "task", "--library", str(library), "--skill-exec", mode,
        "--library-organization", organization, "--model", "openai/mock", "--base-url", server.url, "--api-key", "x",
        "--embedder", "hash:64", "--limit", "1", "--max-steps", "8", "--no-sandbox",
        "--no-progress", "--out", str(out), "-c", "agent.retrieval_min_score=-1", *extra)  # every env retrieves both


def check_run(out: Path, mode: str, organization: str) -> None:
    [record] = records_of(out)
    assert record["exit_status"] == "submitted"
    trajectory = trajectory_of(out, record)
    actions = [s["skill_action"]["action"] for s in trajectory.steps if s.get("skill_action")]
    account = record["context_account"]
    if organization == "flat" or mode == "subagent":  # a SKILL.md folder is disclosed progressively: inline loads
        assert actions[0] == {"inline": "load_skill", "agent-skill": "load_skill"}.get(mode, "run_skill")
        assert account["subagent_calls"] >= (mode in ("subagent", "hybrid"))
    else:
        assert actions[0] == "open_node"
        assert account["nodes_opened"] == 1
    config = json.loads((out / "config.json").read_text())["config"]
    assert (config["skill_exec"], config["library_organization"]) == (mode, organization)


@pytest.mark.parametrize("organization", ORGANIZATIONS)
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_and_organisation_runs_on_apps(tmp_path, server, library, mode, organization):
    run_env(server, tmp_path / "run", "apps", library, mode, organization)
    check_run(tmp_path / "run", mode, organization)


@pytest.mark.slow
@pytest.mark.parametrize("env", ["office", "datasci", "scienceworld"])
@pytest.mark.parametrize("organization", ORGANIZATIONS)
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_and_organisation_runs_on_the_other_envs(tmp_path, server, library, env, mode, organization):
    if env == "scienceworld":
        from skilltransfer.envs.registry import get_env
        from skilltransfer.errors import InputError

        try:
            get_env(env, seed=0, sandboxed=False, workdir=tmp_path / "probe")
        except (InputError, ImportError) as exc:
            pytest.skip(f"{env} unavailable: {exc}")
    run_env(server, tmp_path / "run", env, library, mode, organization)
    check_run(tmp_path / "run", mode, organization)


def test_show_prints_the_axes(tmp_path, server, library):
    run_env(server, tmp_path / "run", "apps", library, "hybrid", "task-tree")
    shown = cli("show", str(tmp_path / "run")).output
    assert "skill_exec=hybrid" in shown
    assert "library_organization=task-tree" in shown
    assert "disclosure=progressive" in shown  # a SKILL.md folder is an external library


# --------------------------------------------------------------------------------------------- the grid spec
def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_subagent_vs_skill_spec_reduced_through_the_mock_server(tmp_path, server):
    spec = yaml.safe_load(SPEC.read_text())
    counter = {"env": "helpers_tinyenv:TinyEnv", "args": {"targets": [3, 5]}}
    spec.update(out=str(tmp_path / "out"), envs={"tiny": counter}, embedder="hash:64", max_concurrency=4,
                models={"mock": {"name": "openai", "base_url": server.url, "model": "mock", "api_key": "x"}})
    for phase in spec["phases"]:
        if "envs" in phase:
            phase["envs"] = {"tiny": {**counter, "args": {"targets": [4, 6]}}}
        if "library_organizations" in phase:
            phase["skill_execs"] = ["agent-skill", "subagent"]
            phase["library_organizations"] = ["flat", "graph"]
        if "distractor_counts" in phase:
            phase["distractor_counts"] = [0, 5]
        if phase.get("induction_variant") == "contract":
            phase["only_successful"] = False  # this script fails the subtask level: keep its skills
        if "library_from" in phase:  # the tiny env's two target lists share task ids: same tasks, on purpose
            phase["library_from"]["same_tasks"] = True
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    output = cli("grid", str(path), "--no-progress", *ALLOW_TINY).output
    # own, contract, 3 organise, 3 x (2 modes x 2 organisations), 2 modes on the own tasks, 2 modes x 2 distractors
    assert "23 streams run, 0 already finished, 0 failed" in output
    same = [json.loads(line) for line in (tmp_path / "out" / "exec-same/tiny/mock/task+text-subagent-whole-own-task"
                                          / "results.jsonl").read_text().splitlines()]
    assert same
    packages = [json.loads(line) for line in (tmp_path / "out" / "contract/tiny/mock/subtask+text-contract"
                                              / "memory" / "skills.jsonl").read_text().splitlines()]
    source = {p["id"]: p["provenance"]["source_task_id"] for p in packages}
    for record in same:  # each task sees only the packages induced from it
        assert {source[item["skill_id"]] for item in record["retrieved"]} <= {record["task_id"]}
    organised = tmp_path / "out" / "organize-contract" / "tiny" / "mock" / "task+text" / "organizations"
    assert {p.name for p in organised.iterdir()} == {"tree", "graph"}
    graph_run = json.loads((tmp_path / "out" / "exec-contract/tiny/mock/task+text-agent-skill-graph-whole"
                            / "config.json").read_text())["config"]
    assert graph_run["organization"] == str(organised / "graph")
    assert graph_run["library_exposure"] == "whole"
    cli("report", str(tmp_path / "out"), "--out", str(tmp_path / "report"), "--no-utility")
    execs = read_csv(tmp_path / "report" / "skill_exec.csv")
    orgs = read_csv(tmp_path / "report" / "library_organization.csv")
    seen = {(r["condition"].split("[library=")[0], r["library"], r["skill_exec"]) for r in execs}  # + report tags
    assert seen >= {("task+text+library[agent-skill][whole]", "own/tiny/mock/task+text", "agent-skill"),
                    ("task+text+library[subagent][whole]", "contract/tiny/mock/subtask+text-contract", "subagent")}
    subagent = next(r for r in execs if r["skill_exec"] == "subagent")
    assert float(subagent["subagent_calls"]) >= 1
    assert 0 < float(subagent["communication_share"]) < 1
    built = {r["organization_built"] for r in orgs if r["library_organization"] == "graph"}
    assert {b.split(" (")[0] for b in built} == {"fallback:task-tree"}  # the script gives no groups: shown
    assert {r["organization_built"] for r in orgs if r["library_organization"] == "flat"} == {"flat"}
    peaks = read_csv(tmp_path / "report" / "peak_context_paired.csv")
    assert {(r["library"], r["mode"], r["against"]) for r in peaks} >= {
        ("own/tiny/mock/task+text", "subagent", "agent-skill")}
    assert all(0 <= float(r["lower_pct"]) <= 100 and int(r["tasks"]) == 2 for r in peaks)
    distract = read_csv(tmp_path / "report" / "distractors.csv")
    assert {(r["skill_exec"], r["distractors"]) for r in distract} >= {
        ("agent-skill", "0"), ("agent-skill", "5"), ("subagent", "0"), ("subagent", "5")}
    page = (tmp_path / "report" / "report.md").read_text()
    assert "Paired peak context" in page
    assert "Distracting skills" in page


@pytest.mark.parametrize(("extra", "message"), [
    (["-c", "organization=somewhere"], "organization needs a frozen library"),
    (["--skill-exec", "subagent", "--coordination", "nl-sop"], "apply to the agent"),
    (["--skill-exec", "tool"], "tool")])
def test_bad_axis_settings_are_one_line_errors(tmp_path, monkeypatch, capsys, extra, message):
    code, _, err = main_cli(["run", "--env", "apps", "--condition", "task+text", "--model",
                             f"scripted:{tmp_path / 'none.jsonl'}", "--out", str(tmp_path / "run"), *extra],
                            monkeypatch, capsys)
    assert code == 2
    assert message in err
    assert not (tmp_path / "run").exists()
