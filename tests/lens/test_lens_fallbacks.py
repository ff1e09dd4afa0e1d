"""Every decision the lens verifier did not make (no decision in its reply, or a prompt that did not fit: the
fallback ACCEPT, which is what flat reuse does) is counted per retrieval and shown in `report`'s reuse table."""

from __future__ import annotations

import pytest

from skilltransfer.lens.graph import SkillGraph, Unit
from skilltransfer.lens.route import RouteConfig, route
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import RouteRecord, TaskRecord
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.report.reuse import reuse_table
from skilltransfer.report.runs import RunLog
from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig
from skilltransfer.settings.recorded import RunSettings
from skilltransfer.skill import Skill


def graph() -> SkillGraph:
    out = SkillGraph(HashEmbedder(32))
    for i in range(3):
        skill = Skill(name=f"s{i}", description=f"Reset the counter {i}", body="")
        out.add_skill(skill, Unit(id=f"p{i}", layer="policy", text=f"Reset the counter {i}", sources=[skill.id]))
    return out


def test_fallbacks_are_counted_from_the_routing_log_and_reported() -> None:
    replies = iter(["DECISION: SKIP", "I think so", "no idea", "DECISION: ACCEPT"] * 4)
    cfg = RouteConfig(mode="no-walk", retries=1)
    log = route(graph(), "reset the counter", ScriptedModel(lambda *_: next(replies)), cfg).log
    hows = [visit.how for visit in log.visits]
    assert "fallback:unparseable" in hows  # the second unit's reply and its retry named no decision
    record = RouteRecord.from_log(log.to_dict(), None)
    assert record.fallbacks == hows.count("fallback:unparseable") + hows.count("fallback:context") >= 1

    config = StreamConfig(run="r", env=EnvSpec(env="apps"), model=ModelSpec(label="m"), condition="subtask+text",
                          reuse="lens", library="lib")
    records = [TaskRecord.model_construct(task_id=f"t{i}", success=bool(i % 2), reward=0.0, difficulty=1,
                                          prompt_tokens=10, completion_tokens=5, routes=[record, record])
               for i in range(3)]
    run = RunLog(path=config.path, log=RunSettings.model_construct(config=config), records=records)
    [row] = reuse_table([run]).rows
    assert (row["decisions"], row["fallbacks"]) == (6 * record.visited, 6 * record.fallbacks)
    assert row["fallback_pct"] == pytest.approx(100 * record.fallbacks / record.visited)
