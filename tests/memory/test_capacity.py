"""Growth under a budget (issue 39 §5): ``memory.capacity`` and the eviction policies through the real stream."""

from __future__ import annotations

import json

import pytest
from helpers_tinyenv import CounterScript, SimulatedCrash, TinyEnv, _target, task_start
from pydantic import ValidationError

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.capacity import TaskOutcome, eviction_scores, online_effects, victims
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance, Skill, UsageStats

TARGETS = [3, 5, 2, 4, 6]


def distinct_skill(_: int, messages: list[dict]) -> str:
    call = TARGETS.index(_target(" ".join(str(m["content"]) for m in messages)))
    return (f"NAME: counter_skill_{call}\nDESCRIPTION: Counter procedure number {call} with its own words {call * 7}.\n"
            f"BODY:\n1. Reset the counter with apis.counter.reset().\n2. Add {call} with apis.counter.add({call}).")


def run(tmp_path, *, script=None, **memory):
    config = StreamConfig(run="cap", runs_dir=str(tmp_path / "runs"), condition="task+text",
                          memory={"dedup_threshold": 1.01, **memory})
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws")
    return run_stream(env, ScriptedModel(script or CounterScript(distinct_skill)), config,
                      embedder=_embedder())


def _embedder():
    from skilltransfer.memory.embedders import make_embedder
    return make_embedder("hash:64")


def records(path):
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def skill_names(path):
    return [json.loads(line)["name"] for line in (path / "memory" / "skills.jsonl").read_text().splitlines()]


def test_unbounded_by_default_keeps_every_skill(tmp_path):
    summary = run(tmp_path)
    assert len(skill_names(summary.path)) == 5
    assert not (summary.path / "memory" / "evictions.jsonl").exists()


@pytest.mark.parametrize("policy", ["fifo", "lru", "utility", "effect"])
def test_capacity_bounds_the_memory_and_logs_each_eviction(tmp_path, policy):
    summary = run(tmp_path, capacity=2, eviction=policy)
    rows = records(summary.path)
    assert [r["memory_size"] for r in rows] == [1, 2, 2, 2, 2]
    log = [json.loads(line) for line in (summary.path / "memory" / "evictions.jsonl").read_text().splitlines()]
    assert [e["position"] for e in log] == [2, 3, 4]
    assert {e["policy"] for e in log} == {policy}
    assert len({e["skill_id"] for e in log}) == 3
    config = json.loads((summary.path / "config.json").read_text())
    assert config["config"]["memory"]["capacity"] == 2
    assert config["config"]["memory"]["eviction"] == policy
    if policy in ("fifo", "effect"):  # effect: no masking draws, so fifo order
        assert skill_names(summary.path) == ["counter_skill_3", "counter_skill_4"]
        assert [e["name"] for e in log] == ["counter_skill_0", "counter_skill_1", "counter_skill_2"]


def test_resume_gives_the_same_library(tmp_path):
    full = run(tmp_path / "a", capacity=2, eviction="lru")
    with pytest.raises(SimulatedCrash):
        run(tmp_path / "b", capacity=2, eviction="lru", script=CounterScript(distinct_skill, fail_at=12))
    resumed = run(tmp_path / "b", capacity=2, eviction="lru", script=CounterScript(distinct_skill))
    assert resumed.ran
    assert resumed.ran != [r["task_id"] for r in records(full.path)]
    for name in ("skills.jsonl", "evictions.jsonl"):
        assert (resumed.path / "memory" / name).read_text() == (full.path / "memory" / name).read_text()


def test_capacity_is_checked():
    with pytest.raises(ValidationError, match="capacity"):
        StreamConfig(condition="task+text", memory={"capacity": 0})
    with pytest.raises(ValidationError, match="eviction"):
        StreamConfig(condition="task+text", memory={"eviction": "random"})


def _skill(i: int, *, retrieved: int = 0, successes: int = 0, born: int | None = None) -> Skill:
    return Skill(id=f"s{i}", name=f"s{i}", description=f"skill {i}", body="do it", format="text",
                 usage=UsageStats(times_retrieved=retrieved, successes_when_retrieved=successes),
                 provenance=Provenance(stream_position=born))


def test_policy_orders():
    skills = [_skill(0, retrieved=4, successes=4, born=0), _skill(1, retrieved=4, successes=0, born=1),
              _skill(2, born=2)]
    history = [TaskOutcome(3, True, ("s0",)), TaskOutcome(4, False, ("s2",))]
    assert [s.id for s, _ in victims(skills, 2, "fifo", history)] == ["s0"]
    assert [s.id for s, _ in victims(skills, 2, "lru", history)] == ["s1"]  # s0 used at 3, s2 at 4, s1 born at 1
    assert [s.id for s, _ in victims(skills, 1, "utility", history)] == ["s1", "s2"]  # 1/6, 1/2, 5/6
    assert victims(skills, None, "fifo", history) == []
    assert victims(skills, 3, "fifo", history) == []


def test_effect_policy_evicts_the_harmful_skill_first():
    skills = [_skill(0), _skill(1), _skill(2)]
    history = [TaskOutcome(i, success, draws=(("s1", 0.5, shown), ("s0", 0.5, not shown)))
               for i, (shown, success) in enumerate([(True, False), (False, True)] * 3)]
    effects = online_effects(history)
    assert effects == {"s1": -1.0, "s0": 1.0}
    assert eviction_scores(skills, "effect", history) == [1.0, -1.0, 0.0]
    assert [s.id for s, _ in victims(skills, 2, "effect", history)] == ["s1"]
    assert [s.id for s, _ in victims(skills, 2, "effect", [])] == ["s0"]  # nothing estimable: fifo


# --------------------------------------------------------------------------------------------- the study's report
def _raw_use(path, positions):
    """(used, with a share) over the records at these positions, read from results.jsonl as JSON."""
    shares = [hit["followed"] for row in records(path) if row["position"] in positions for hit in row["retrieved"]
              if hit.get("followed") is not None]
    return sum(s >= 0.5 for s in shares), len(shares)


class Picky(CounterScript):
    """Follows a shown skill (reset, add: success) on odd targets; on even ones only reads the counter (fails, follows
    nothing), so success and use differ by task."""

    @staticmethod
    def execute(messages: list[dict]) -> str:
        target = _target(messages[task_start(messages)]["content"])
        if target % 2 == 0:
            return "Read it.\n```python\nprint(apis.counter.get())\ncomplete_task()\n```"
        return f"Set it.\n```python\napis.counter.reset()\napis.counter.add({target})\ncomplete_task()\n```"


def test_report_compares_policies_at_a_capacity_against_the_unbounded_stream(tmp_path):
    from skilltransfer.report import build_report, load_runs
    from skilltransfer.report.writer import write_report
    from skilltransfer.view.data import Catalog

    paths = {}
    for name, memory in [("unbounded", {}), ("fifo", {"capacity": 2, "eviction": "fifo"}),
                         ("lru", {"capacity": 2, "eviction": "lru"})]:
        config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task+text",
                              agent={"retrieval_min_score": -1}, memory={"dedup_threshold": 1.01, **memory})
        paths[name] = run_stream(TinyEnv(TARGETS, workdir=tmp_path / "ws" / name),
                                 ScriptedModel(Picky(distinct_skill)), config, embedder=_embedder()).path
    report = build_report(load_runs([tmp_path / "runs"]))
    rows = report.table("capacity").rows
    assert {r["condition"] for r in rows} == {"task+text"}  # the memory tags are not part of the group
    assert [(r["policy"], r["capacity"]) for r in rows[::5]] == [("fifo", 2), ("lru", 2), ("unbounded", None)]
    assert [r["positions"] for r in rows[:5]] == ["1-1", "2-2", "3-3", "4-4", "5-5"]
    assert [r["library_size"] for r in rows if r["policy"] == "unbounded"] == [1, 2, 3, 4, 5]
    assert [r["library_size"] for r in rows if r["policy"] == "lru"] == [1, 2, 2, 2, 2]
    for row in rows:
        raw = [json.loads(line) for line in (paths[row["policy"]] / "results.jsonl").read_text().splitlines()]
        assert row["success_pct"] == 100 * raw[row["bin"] - 1]["success"]
        used, shared = _raw_use(paths[row["policy"]], {row["bin"] - 1})
        assert row["retrieved"] == shared
        assert row["use_precision_pct"] == (100 * used / shared if shared else None)
    unbounded = [r for r in rows if r["policy"] == "unbounded"]
    assert [r["success_pct"] for r in unbounded] == [100, 100, 0, 0, 0]  # targets 3, 5, 2, 4, 6
    assert [r["retrieved"] for r in unbounded] == [0, 1, 2, 3, 4]  # every skill in memory is retrieved
    assert [r["use_precision_pct"] for r in unbounded] == [None, 100, 0, 0, 0]
    assert "capacity" not in build_report(load_runs([paths["unbounded"]])).tables  # no capped run: no table
    written = write_report(report, tmp_path / "report")
    assert written.figures["capacity_curves"].is_file()
    assert "figures/capacity_curves.png" in (tmp_path / "report" / "report.md").read_text()
    shown = Catalog([tmp_path / "report"]).index()["figures"]
    assert "report/figures/capacity_curves.png" in [f["label"] for f in shown]


def test_a_ratio_ci_resamples_tasks_whole():
    from skilltransfer.metrics.stats import ratio_bootstrap_ci

    ratio, low, high = ratio_bootstrap_ci([1, 0], [1, 9], seed=0)
    assert ratio == pytest.approx(0.1)  # a ratio of sums, not the mean of the tasks' ratios (0.5)
    assert low == 0.0
    assert high == 1.0  # the resample of the first task twice
    with pytest.raises(ValueError, match="positive denominator"):
        ratio_bootstrap_ci([1], [0])
