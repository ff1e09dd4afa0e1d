"""`skilltransfer evolve` end to end: rounds of real streams, gap reports from failed tasks, a writer's candidates
evaluated on the validation split, J monotone, the final pair usable in `run`; on a scripted model (library API) and
through the mock server (CLI), then `report` shows J per round."""

from __future__ import annotations

import csv
import json

import pytest
from helpers_cli import TINY, cli
from helpers_lens import VERIFIER_MARK, LensCounterScript
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv, task_start

from skilltransfer.errors import InputError
from skilltransfer.lens.evolve import EvolveConfig, WriterConfig
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import export_jsonl
from skilltransfer.report import make_report
from skilltransfer.runner.evolve import evolve_stream
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Skill

GOOD_NOTE = "ACCEPT counter steps."
BAD_NOTE = "SKIP every unit."
SKILL = Skill(name="set_counter_value", description="Set the counter to a target value.",
              body="1. Reset the counter with apis.counter.reset().\n2. Add the target with apis.counter.add(n).")


class GatedScript:
    """The verifier SKIPs everything until its routing notes hold `GOOD_NOTE`; the executor solves a task only when
    the skills section shows the reset step (else it adds one too many); the writer proposes the bad note first,
    then the good one (a test double)."""

    def __init__(self) -> None:
        self.lens = LensCounterScript(CounterScript(TEXT_SKILL))
        self.writer_calls = 0

    def __call__(self, messages):
        system = messages[0]["content"]
        if system.startswith("You improve a skill library"):
            self.writer_calls += 1
            return f"NOTE: {BAD_NOTE if self.writer_calls % 2 else GOOD_NOTE}"
        if system.startswith(VERIFIER_MARK) and GOOD_NOTE not in system:
            return "DECISION: SKIP"
        reply = self.lens(messages)
        task = messages[task_start(messages)]["content"]
        if "You are the EXECUTOR" in system and "Reset the counter with" not in task:
            return reply.replace("add(", "add(1 + ")
        return reply


def library(tmp_path):
    path = tmp_path / "lib.jsonl"
    export_jsonl([SKILL], path)
    return path


TARGETS = [3, 5, 2, 4, 6, 7, 8, 9, 1, 5]
"""2 dev, 6 validation and 2 test tasks: six validation tasks that all turn from failure to success are what an exact
paired test at 2.5 % (5 % over two candidates) can see (p = 1/64)."""


def test_evolve_on_a_scripted_model_commits_the_better_candidate(tmp_path):
    embedder = HashEmbedder(dim=64)
    config = StreamConfig(condition="task", library=str(library(tmp_path)), reuse="lens", env=TINY)
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    tasks = env.tasks()
    script = GatedScript()
    model = ScriptedModel(script)
    result, info = evolve_stream(env, model, config, tasks[:2], tasks[2:8], tmp_path / "evo", embedder=embedder,
                                 test_tasks=tasks[8:], evolve_config=EvolveConfig(rounds=2),
                                 writer_config=WriterConfig(candidates=2))
    assert result.baseline.success == 0.0
    first, second = result.rounds
    assert first.gap_reports == 2
    assert [c.applied[0].text for c in first.candidates] == [BAD_NOTE, GOOD_NOTE]
    assert first.candidates[0].evaluation.success == 0.0  # the worse candidate is evaluated and not taken
    assert not first.candidates[0].gain["passed"]
    assert first.candidates[1].gain["passed"]
    assert first.committed == 1
    assert first.j > first.j_before
    assert first.writer_tokens > 0
    assert first.candidates[1].evaluation.refinement_tokens == first.writer_tokens // 2
    assert second.gap_reports == 0
    assert second.committed is None
    assert second.incumbent is None
    assert second.j == first.j  # nothing failed, nothing proposed: the pair stays
    assert result.test is not None
    assert not result.test.same_pair
    assert (result.test.initial.success, result.test.final.success) == (0.0, 1.0)
    assert result.test.final.refinement_tokens == result.writer_tokens == info["writer_tokens"]
    saved = SkillGraph.load(tmp_path / "evo" / "graph", embedder)
    assert saved.routing_notes == [GOOD_NOTE]
    lines = (tmp_path / "evo" / "evolution.jsonl").read_text().splitlines()
    assert "baseline" in json.loads(lines[0])
    assert "test" in json.loads(lines[-1])
    assert len(lines) == 4
    # baseline; round 1: dev + 2 candidates; round 2: dev only; the test split: initial and final pair
    assert info["evaluations"] == 1 + 3 + 1 + 2
    evals = sorted(p.name for p in (tmp_path / "evo" / "evals").iterdir())
    assert evals == ["001-val", "002-dev", "003-val", "004-val", "005-dev", "006-test-initial", "007-test-final"]
    # the final pair as a frozen library's verifier in `run`: the tasks now succeed
    frozen = config.model_copy(update={"run": "frozen", "runs_dir": str(tmp_path / "runs"),
                                       "skill_graph": str(tmp_path / "evo" / "graph")})
    summary = run_stream(TinyEnv([7, 1], workdir=tmp_path / "ws2"), ScriptedModel(GatedScript()), frozen,
                         embedder=embedder)
    assert summary.success_rate == 1.0
    with pytest.raises(InputError, match="not empty"):
        evolve_stream(env, model, config, tasks[:2], tasks[2:], tmp_path / "evo", embedder=embedder)
    with pytest.raises(InputError, match="share tasks"):
        evolve_stream(env, model, config, tasks[:2], tasks[1:], tmp_path / "evo2", embedder=embedder)
    with pytest.raises(InputError, match="validation and test splits share"):
        evolve_stream(env, model, config, tasks[:2], tasks[2:8], tmp_path / "evo2", embedder=embedder,
                      test_tasks=tasks[7:])
    with pytest.raises(InputError, match="flat"):
        evolve_stream(env, model, config.model_copy(update={"reuse": "flat"}), tasks[:2], tasks[2:],
                      tmp_path / "evo3", embedder=embedder)


def test_the_verifier_can_be_another_model(tmp_path):
    """``verifier_model``: the verifier's calls go to another endpoint; the agent's model never sees them."""
    seen = []

    def verifier(messages):
        seen.append(messages[0]["content"][:40])
        return "DECISION: ACCEPT"

    agent = GatedScript()
    with MockServer(verifier) as server:
        config = StreamConfig(condition="task", library=str(library(tmp_path)), reuse="lens", env=TINY,
                              run="v", runs_dir=str(tmp_path / "runs"),
                              verifier_model={"name": "openai", "base_url": server.url, "model": "judge",
                                              "api_key": "x"})
        summary = run_stream(TinyEnv([3, 5], workdir=tmp_path / "ws"), ScriptedModel(agent), config,
                             embedder=HashEmbedder(64))
    assert seen
    assert all(text.startswith(VERIFIER_MARK[:40]) for text in seen)
    assert summary.success_rate == 1.0  # ACCEPTed units show the reset step (the agent's script SKIPs them)
    saved = json.loads((tmp_path / "runs" / "v" / "config.json").read_text())
    assert saved["config"]["verifier_model"]["model"] == "judge"
    roles = summary.records[0].tokens_by_role
    assert roles["verifier"]["calls"] >= 1


def test_evolve_through_the_mock_server_and_report(tmp_path):
    out = tmp_path / "evo"
    with MockServer(GatedScript()) as server:
        result = cli("evolve", "--env", TINY, "--library", str(library(tmp_path)), "--out", str(out), "--dev", "2",
                     "--val", "6", "--test", "2", "--rounds", "2", "--candidates", "2", "--model", f"mock@{server.url}",
                     "--api-key", "x", "--embedder", "hash:64",
                     "--no-sandbox", "-c", f"env.args.targets={json.dumps(TARGETS)}")
    assert "final J" in result.output
    assert "power to commit a +0.1 success gain:" in result.output  # printed before any task runs
    headline = next(line for line in result.output.splitlines() if line.startswith("test split (2 tasks)"))
    assert "gain in J" in headline
    assert "[95% CI" in headline
    assert (out / "graph" / "manifest.json").is_file()
    make_report([out], tmp_path / "report", utility=False)
    rows = list(csv.DictReader((tmp_path / "report" / "evolution_rounds.csv").open()))
    assert [row["round"] for row in rows] == ["0", "1", "2"]
    assert rows[1]["committed"] == "1"
    assert float(rows[1]["best_gain"]) > 0
    assert float(rows[1]["best_p_value"]) < 0.025
    js = [float(row["j"]) for row in rows]
    assert js[2] >= js[1] > js[0]
    [test] = list(csv.DictReader((tmp_path / "report" / "evolution_test.csv").open()))
    assert (float(test["initial_success_pct"]), float(test["final_success_pct"]), test["commits"]) == (0, 100, "1")
    assert (tmp_path / "report" / "reuse.csv").is_file()  # the evaluation streams are lens runs
    assert test["gain_ci_low"] != ""
    low, gain, high = float(test["gain_ci_low"]), float(test["gain"]), float(test["gain_ci_high"])
    assert low - 1e-9 <= gain <= high + 1e-9  # the CI is of the per-task differences' mean: equal up to rounding
    with pytest.raises(InputError, match=r"--val 3 with --candidates 2 can never commit: the smallest p-value the "
                                         r"sign-flip test reaches on 3 validation tasks is 0\.1251 > alpha/k = "
                                         r"0\.05/2 = 0\.025"):
        cli("evolve", "--env", TINY, "--library", str(library(tmp_path)), "--out", str(tmp_path / "e3"), "--dev",
            "2", "--val", "3", "--candidates", "2", "--model", "openai/mock", "--base-url", "http://127.0.0.1:9",
            "--api-key", "x", "--embedder", "hash:64", "--no-sandbox", "-c", "env.args.targets=[3, 5]")
    assert not (tmp_path / "e3").exists()
    with pytest.raises(InputError, match="--dev 2 \\+ --val 9"):
        cli("evolve", "--env", TINY, "--library", str(library(tmp_path)), "--out", str(tmp_path / "e2"), "--dev",
            "2", "--val", "9", "--model", "openai/mock", "--base-url", "http://127.0.0.1:9", "--api-key", "x",
            "--embedder", "hash:64", "--no-sandbox", "-c", "env.args.targets=[3, 5]")
