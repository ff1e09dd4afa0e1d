"""Growth under a budget (issue 39 §5): ``memory.capacity`` and the eviction policies through the real stream."""

from __future__ import annotations

import json

import pytest
from helpers_tinyenv import CounterScript, SimulatedCrash, TinyEnv, _target
from pydantic import ValidationError

from skilltransfer.experiments.config import StreamConfig
from skilltransfer.experiments.stream import run_stream
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.capacity import TaskOutcome, eviction_scores, online_effects, victims
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
