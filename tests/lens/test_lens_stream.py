"""Lens reuse in the stream runner: the routed skills section through the real agent loop, the graph kept in step with
a growing memory, resume, route logs in the run log, and the axis in config/run names."""

from __future__ import annotations

import json

import pytest
from helpers_lens import LensCounterScript
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.errors import InputError
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import TrajectoryLog
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import export_jsonl
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Skill

COUNTER = Skill(name="set_counter_value", description="Set the counter to a target value.",
                body="1. Reset the counter with apis.counter.reset().\n2. Add the target with apis.counter.add(n).\n"
                     "Caveat: add() needs an int.")
_EMB = HashEmbedder(dim=128)
BREAD = Skill(name="bake_bread", description="Bake bread for the team.",
              body="1. Heat the oven for the bread.\n2. Knead the bread dough.")


def library(tmp_path, skills=(COUNTER, BREAD)):
    path = tmp_path / "lib.jsonl"
    export_jsonl(list(skills), path)
    return path


def run(tmp_path, condition, script, *, name="r", targets=(3, 5), **cfg):
    config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition=condition, **cfg)
    env = TinyEnv(list(targets), workdir=tmp_path / "ws" / name)
    return run_stream(env, ScriptedModel(script), config, embedder=_EMB)


def records_of(path):
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def executor_prompts(path, record):
    log = TrajectoryLog.model_validate_json((path / record["trajectory"]).read_text())
    return log, ["\n".join(m["content"] for m in context if m["role"] != "assistant") for context in log.contexts]


def test_context_holds_only_accepted_and_rewritten_units(tmp_path):
    script = LensCounterScript(CounterScript(TEXT_SKILL))
    summary = run(tmp_path, "task", script, library=str(library(tmp_path)), reuse="lens")
    records = records_of(summary.path)
    assert [r["success"] for r in records] == [True, True]
    log, prompts = executor_prompts(summary.path, records[0])
    prompt = prompts[0]
    accepted = [text for text, decision in script.verified if decision == "ACCEPT"]
    skipped = [text for text, decision in script.verified if decision == "SKIP"]
    assert "Reset the counter with apis.counter.reset()." in accepted
    assert skipped
    assert all("bread" in text for text in skipped)
    for text in accepted:
        assert text in prompt
    for text in skipped:
        assert text not in prompt
    assert "oven" not in prompt
    assert "Bake bread" not in prompt
    assert "Caveat: add() needs an int. (adapted)" in prompt  # the rewrite, not the stored unit alone
    route = next(s for s in log.steps if s["type"] == "RetrievalStep")["route"]
    assert route["mode"] == "lens"
    assert route["rewrites"]
    decisions = {v["decision"] for v in route["visits"]}
    assert decisions == {"ACCEPT", "DECOMPOSE", "REWRITE", "SKIP"}
    # the routed units in graph order
    positions = [prompt.index(line) for line in ("Reset the counter", "(adapted)")]
    assert positions == sorted(positions)
    # route briefs in the record; verifier and decomposer calls in the task's call log
    brief = records[0]["routes"][0]
    assert brief["visited"] == len(route["visits"])
    assert brief["rewritten"] == 1
    assert brief["decisions"]["SKIP"] == sum(v["decision"] == "SKIP" for v in route["visits"]) > 0
    assert brief["decomposed"] == 2
    assert brief["context_tokens"] == route["context_tokens"] > 0
    roles = {c["role"] for c in log.calls}
    assert {"verifier", "rewriter", "decomposer", "executor"} <= roles
    by_role = records[0]["tokens_by_role"]
    assert by_role["verifier"]["calls"] + by_role["rewriter"]["calls"] == brief["verifier_calls"]
    assert by_role["rewriter"]["calls"] == brief["rewritten"]
    assert records[1]["routes"][0]["decomposed"] == 0  # the graph is kept, not rebuilt
    assert [s["name"] for s in records[0]["retrieved"]] == ["set_counter_value"]  # source skills of the units
    config = json.loads((summary.path / "config.json").read_text())
    assert config["config"]["reuse"] == "lens"
    assert "lens.verifier" in config["prompt_ids"]
    assert "lens.decomposer" in config["prompt_ids"]


def test_flat_reuse_logs_no_route(tmp_path):
    script = LensCounterScript(CounterScript(TEXT_SKILL))
    summary = run(tmp_path, "task", script, library=str(library(tmp_path)), agent={"retrieval_min_score": -1})
    record = records_of(summary.path)[0]
    log, prompts = executor_prompts(summary.path, record)
    assert record["routes"] == []
    assert not script.lens_roles
    assert all("route" not in s for s in log.steps if s["type"] == "RetrievalStep")
    assert "Heat the oven" in prompts[0] or "Bake bread" in prompts[0]  # whole skills, as before


def test_graph_grows_when_a_skill_is_induced_and_resume_reloads_it(tmp_path):
    script = LensCounterScript(CounterScript(TEXT_SKILL))
    summary = run(tmp_path, "subtask+text", script, reuse="lens", targets=(3, 5))
    records = records_of(summary.path)
    first = records[0]["routes"]
    assert first[0]["graph_units"] == 0
    assert first[0]["context_units"] == 0
    assert first[1]["decomposed"] == 1
    assert first[1]["graph_units"] > 0
    graph = SkillGraph.load(summary.path / "memory" / "graph", _EMB)
    lines = (summary.path / "memory" / "skills.jsonl").read_text().split("\n")
    memory_ids = {json.loads(line)["id"] for line in lines if line.strip()}
    assert set(graph.roots) == memory_ids
    units = len(graph)
    # resume with a longer stream: the saved graph is reloaded, nothing is decomposed again
    again = LensCounterScript(CounterScript(TEXT_SKILL))
    summary = run(tmp_path, "subtask+text", again, reuse="lens", targets=(3, 5, 2))
    third = records_of(summary.path)[2]["routes"][0]
    assert third["graph_units"] == units
    assert third["decomposed"] == 0
    assert "decomposer" not in again.lens_roles[:1]


def test_prebuilt_graph_for_a_frozen_library(tmp_path):
    from skilltransfer.lens.decompose import decompose_library

    lib = library(tmp_path)
    graph, _ = decompose_library([COUNTER, BREAD], ScriptedModel(LensCounterScript(None)), _EMB)
    graph.save(tmp_path / "graph")
    script = LensCounterScript(CounterScript(TEXT_SKILL))
    summary = run(tmp_path, "task", script, library=str(lib), reuse="no-walk", skill_graph=str(tmp_path / "graph"))
    record = records_of(summary.path)[0]
    assert "decomposer" not in script.lens_roles
    assert record["routes"][0]["decomposed"] == 0
    assert record["routes"][0]["graph_units"] == len(graph)
    log, _ = executor_prompts(summary.path, record)
    route = next(s for s in log.steps if s["type"] == "RetrievalStep")["route"]
    assert route["mode"] == "no-walk"
    assert route["expanded"] == []


def test_reuse_axis_in_names_and_errors(tmp_path):
    cfg = StreamConfig(condition="task+text", reuse="rewrite-all", env="apps")
    assert cfg.condition_label() == "task+text[rewrite-all]"
    assert cfg.run_leaf({}) == "task+text-rewrite-all"
    assert StreamConfig(condition="task+text", env="apps").condition_label() == "task+text"
    with pytest.raises(ValueError, match="needs a skill memory"):
        StreamConfig(condition="task", reuse="lens", env="apps")
    with pytest.raises(ValueError, match="skill_graph"):
        StreamConfig(condition="task+text", reuse="lens", skill_graph="g", env="apps")
    with pytest.raises(InputError, match="skill graph folder not found"):
        run(tmp_path, "task", LensCounterScript(CounterScript()), library=str(library(tmp_path)), reuse="lens",
            skill_graph=str(tmp_path / "nothing"))


def test_incremental_add_merges_into_existing_units_and_remove_keeps_the_rest():
    from skilltransfer.lens.decompose import Decomposer, add_skill

    decomposer = Decomposer(ScriptedModel(LensCounterScript(None)))
    graph = SkillGraph(_EMB)
    add_skill(graph, COUNTER, decomposer)
    before = len(graph)
    twin = COUNTER.model_copy(update={"id": "twin", "name": "set_counter_twin"})
    _, merges = add_skill(graph, twin, decomposer)
    assert merges  # its procedures are the counter skill's: merged, shared by both skills
    shared = [u for u in graph if set(u.sources) == {COUNTER.id, "twin"}]
    assert shared
    assert len(graph) == before + 1  # only the twin's policy is new: its strategy, steps and caveat merged
    graph.remove_skill("twin")
    graph.validate()
    assert len(graph) == before
    assert all(u.sources == [COUNTER.id] for u in graph)
    changed = COUNTER.model_copy(update={"body": COUNTER.body + "\n3. Print the counter."})
    record, _ = add_skill(graph, changed, decomposer)  # a new version replaces the old units
    graph.validate()
    assert record.status == "model"
    assert any(u.text == "Print the counter." for u in graph)
    assert len(graph.roots) == 1
