"""Per-skill causal effects (issue 39 §1): the masking retriever through the real stream, the draws in the run log,
the IPW estimator (planted effects recovered, BH flag), the axis in a grid spec, and the report table.

The world is ``benchmarks/skill_effects.py``'s (planted effects of +0.3 / -0.3 / 0 when a skill is shown)."""

from __future__ import annotations

import json
from types import ModuleType

import numpy as np
import pytest
from helpers_bench import load_benchmark
from pydantic import ValidationError

from skilltransfer.log import TrajectoryLog
from skilltransfer.memory.masking import MaskedRetriever, coin
from skilltransfer.metrics.effects import Draw, TaskDraws, benjamini_hochberg, skill_effects
from skilltransfer.report import build_report, load_runs
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import load_spec
from skilltransfer.settings.config import StreamConfig


@pytest.fixture(scope="module")
def world() -> ModuleType:
    return load_benchmark("skill_effects")


# --------------------------------------------------------------------------------------------- the estimator
def _synthetic(n: int, effects: dict[str, float], p: float, seed: int) -> list[TaskDraws]:
    rng = np.random.default_rng(seed)
    tasks = []
    for t in range(n):
        shown = {s: bool(rng.random() >= p) for s in effects}
        prob = 0.5 + sum(e for s, e in effects.items() if shown[s])
        y = float(rng.random() < prob)
        tasks.append(TaskDraws(f"t{t}", {"success": y, "reward": y, "steps": 3.0 + 2 * shown["a"], "tokens": 100.0},
                               tuple(Draw(s, 1 - p, shown[s]) for s in effects)))
    return tasks


def test_planted_effects_are_recovered_and_the_harmful_skill_flagged():
    rows = {r.skill_id: r for r in skill_effects(_synthetic(600, {"a": 0.3, "b": -0.3, "c": 0.0}, 0.5, 1))}
    a, b, c = rows["a"].effects["success"], rows["b"].effects["success"], rows["c"].effects["success"]
    assert a.low is not None
    assert a.high is not None
    assert a.low <= 0.3 <= a.high
    assert a.low > 0
    assert b.high is not None
    assert b.high < 0
    assert rows["b"].harmful
    assert rows["b"].p_harm is not None
    assert not rows["a"].harmful
    assert not rows["c"].harmful
    assert c.low is not None
    assert c.high is not None
    assert c.low <= 0 <= c.high
    assert rows["a"].effects["steps"].estimate == pytest.approx(2.0)  # steps: +2 exactly when a is shown
    assert rows["a"].shown + rows["a"].withheld == rows["a"].candidates == 600


def test_draws_without_randomisation_carry_no_contrast():
    unmasked = [TaskDraws(f"t{i}", {"success": 1.0, "reward": 1.0, "steps": 1.0, "tokens": 1.0},
                          (Draw("a", 1.0, True),)) for i in range(10)]
    assert skill_effects(unmasked) == []
    one_arm = [TaskDraws(f"t{i}", {"success": 1.0, "reward": 1.0, "steps": 1.0, "tokens": 1.0},
                         (Draw("a", 0.7, True),)) for i in range(5)]
    row = skill_effects(one_arm)[0]
    assert (row.shown, row.withheld, row.effects, row.p_harm, row.harmful) == (5, 0, {}, None, False)


def test_benjamini_hochberg():
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.5], 0.05) == [True, False, False, False]
    assert benjamini_hochberg([0.01, 0.02, 0.03, 0.5], 0.05) == [True, True, True, False]
    assert benjamini_hochberg([0.01, 0.04, 0.035, 0.04], 0.05) == [True] * 4  # step-up: 0.035 > 0.025 still in
    assert benjamini_hochberg([0.02, 0.5], 0.05) == [True, False]
    assert benjamini_hochberg([0.03, 0.5], 0.05) == [False, False]


def test_null_skills_are_rarely_flagged():
    flagged = sum(r.harmful for seed in range(10)
                  for r in skill_effects(_synthetic(120, {s: 0.0 for s in "abcdef"}, 0.3, seed), resamples=200,
                                         randomizations=400, seed=seed))
    assert flagged <= 3  # 60 null skills at FDR 0.05


# --------------------------------------------------------------------------------------------- the retriever
def test_coin_is_fixed_by_seed_task_and_skill():
    assert coin(0, "t1", "s1") == coin(0, "t1", "s1")
    assert len({coin(seed, "t1", "s1") for seed in range(20)}) == 20
    draws = [coin(0, f"t{i}", "s") for i in range(4000)]
    assert 0.47 < float(np.mean(np.array(draws) < 0.5)) < 0.53


def test_masked_retriever_withholds_and_logs_every_candidate(world, hash_embedder):
    from skilltransfer.memory import SkillMemory

    skills, _ = world.planted_library(2)
    memory = SkillMemory(hash_embedder)
    memory.add_many(skills)
    retriever = MaskedRetriever(memory, 0.5, seed=3)
    shown_counts = 0
    for i in range(40):
        retriever.task_key = f"task{i}"
        got = retriever.retrieve("Handle the alpha request.", 4, lambda role: None)  # type: ignore[arg-type, return-value]
        log = got.log
        assert log is not None
        assert log["kind"] == "mask"
        assert log["mask_rate"] == 0.5
        assert [r["rank"] for r in log["candidates"]] == [0, 1, 2, 3]
        assert {r["id"] for r in log["candidates"]} == {s.id for s in skills if s.name.startswith("alpha")}
        assert [s.id for s, _ in got.hits] == [r["id"] for r in log["candidates"] if r["shown"]]
        assert all(r["propensity"] == 0.5 for r in log["candidates"])
        again = retriever.retrieve("alpha request procedure", 4, lambda role: None)  # type: ignore[arg-type, return-value]
        assert {s.id for s, _ in again.hits} == {s.id for s, _ in got.hits}  # one draw per (task, skill)
        shown_counts += len(got.hits)
    assert 40 < shown_counts < 120
    floor = MaskedRetriever(memory, 0.5, min_score=0.99)
    got = floor.retrieve("Handle the alpha request.", 4, lambda role: None)  # type: ignore[arg-type, return-value]
    assert got.hits == []
    assert got.log is not None
    assert got.log["candidates"] == []
    assert got.log["below_min_score"] == 4


def test_mask_rate_is_checked():
    with pytest.raises(ValidationError, match="mask_rate"):
        StreamConfig(condition="task", mask_rate=0.3)  # no memory
    with pytest.raises(ValidationError):
        StreamConfig(condition="task+text", mask_rate=1.0)
    with pytest.raises(ValidationError, match="mask_rate"):
        StreamConfig(condition="task+text", mask_rate=0.3, library_exposure="whole")


# --------------------------------------------------------------------------------------------- the stream
def test_masked_stream_logs_draws_and_shows_only_the_drawn_skills(world, tmp_path):
    records = world.run_replicate(tmp_path, 0, groups=2, per_topic=12, mask_rate=0.5)
    assert len(records) == 24
    names = {}
    for record in records:
        assert len(record.exposures) == 4  # the topic's four skills
        trajectory = TrajectoryLog.model_validate_json((tmp_path / "rep0" / record.trajectory).read_text())
        step = next(s for s in trajectory.steps if s["type"] == "RetrievalStep")
        assert step["route"]["kind"] == "mask"
        shown = [c["id"] for c in step["route"]["candidates"] if c["shown"]]
        assert [s["id"] for s in step["skills"]] == shown == [e.skill_id for e in record.exposures if e.shown]
        assert [r.skill_id for r in record.retrieved] == shown
        names.update({r.skill_id: r.name for r in record.retrieved})
        submitted = trajectory.steps[-1]
        assert all(names[i] in str(submitted) for i in shown)  # the agent saw exactly the shown skills
        assert record.routes == []
    assert {e.shown for r in records for e in r.exposures} == {True, False}
    again = world.run_replicate(tmp_path / "again", 0, groups=2, per_topic=12, mask_rate=0.5)
    assert [[(e.skill_id, e.shown) for e in r.exposures] for r in again] == \
        [[(e.skill_id, e.shown) for e in r.exposures] for r in records]  # seeded


def test_unmasked_stream_logs_no_draws(world, tmp_path):
    records = world.run_replicate(tmp_path, 0, groups=1, per_topic=3, mask_rate=0.0)
    assert all(r.exposures == [] and len(r.retrieved) == 4 for r in records)


def test_report_has_the_skill_effects_table(world, tmp_path):
    world.run_replicate(tmp_path, 0, groups=1, per_topic=40, mask_rate=0.5)
    report = build_report(load_runs([tmp_path]))
    table = report.table("skill_effects")
    assert len(table.rows) == 4
    assert {row["skill"] for row in table.rows} == {"alpha_one", "alpha_two", "alpha_three", "alpha_four"}
    row = next(r for r in table.rows if r["skill"] == "alpha_two")  # planted -0.3
    assert row["success_effect"] < 0
    assert row["shown"] + row["withheld"] == 40
    assert json.dumps(table.rows, default=str)
    unmasked = tmp_path / "plain"
    world.run_replicate(unmasked, 0, groups=1, per_topic=3, mask_rate=0.0)
    assert "skill_effects" not in build_report(load_runs([unmasked])).tables


def test_mask_rates_axis_plans_one_stream_per_rate(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: m\nenvs: [apps]\nconditions: [task+text]\nlibrary: lib.jsonl\nmask_rates: [0, 0.3]\n")
    plans = plan_streams(load_spec(str(spec)))
    assert sorted(p.config.mask_rate for p in plans) == [0.0, 0.3]
    assert len({p.run for p in plans}) == 2
    assert any(p.run.endswith("-mask0.3") for p in plans)
    assert {p.config.condition_label() for p in plans} == {"task+text+library", "task+text+library[mask=0.3]"}


def test_library_prune_harmful_leaves_out_the_flagged_skills(world, tmp_path, monkeypatch, capsys):
    from helpers_agentskills import assert_valid_agent_skills
    from helpers_cli import main_cli

    from skilltransfer.memory import load_library

    world.run_replicate(tmp_path / "runs", 0, groups=1, per_topic=160, mask_rate=0.5)
    library = tmp_path / "runs" / "library0.jsonl"
    out = tmp_path / "pruned"
    code, stdout, stderr = main_cli(["library", "prune", str(library), "--harmful", str(tmp_path / "runs"),
                                     "--out", str(out)], monkeypatch, capsys)
    assert code == 0, stderr
    assert "harmful: alpha_two" in stdout
    assert "wrote" in stdout
    flagged = {r["skill"] for r in build_report(load_runs([tmp_path / "runs"])).table("skill_effects").rows
               if r["harmful"]}
    kept = {s.name for s in load_library(out)}
    assert_valid_agent_skills(out, expected=len(kept))  # what prune writes passes agentskills validate
    assert any("success_effect" in s.extra for s in load_library(out))
    assert "alpha_two" in flagged
    assert "alpha_one" in kept
    assert kept == {"alpha_one", "alpha_two", "alpha_three", "alpha_four"} - flagged
    code, _, stderr = main_cli(["library", "prune", str(library), "--harmful", str(tmp_path / "runs"),
                                "--out", str(out)], monkeypatch, capsys)
    assert code == 2
    assert "error:" in stderr
    assert "--out" in stderr
    plain = tmp_path / "plain"
    world.run_replicate(plain, 0, groups=1, per_topic=2, mask_rate=0.0)
    code, _, stderr = main_cli(["library", "prune", str(library), "--harmful", str(plain), "--out",
                                str(tmp_path / "p2.jsonl")], monkeypatch, capsys)
    assert code == 2
    assert "mask_rate" in stderr
    assert not (tmp_path / "p2.jsonl").exists()
