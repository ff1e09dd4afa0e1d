"""A frozen library beside the agent's growing memory (issue 46 §6, ``library_use: beside``; the "both" arm of
experiments/curated-vs-induced.yaml): the library never merged into, pruned, evicted or saved by induction; one
ranking over both stores; masking of the library's skills only; records that say where each retrieved skill came
from; both kinds of skill in one prompt; transfer events of both kinds; resume; the settings, labels and run names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_tinyenv import CounterScript, SimulatedCrash, TinyEnv, _target
from pydantic import ValidationError

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import RetrievedSkill, RunFolder, TaskRecord
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.library import load_library
from skilltransfer.memory.masking import MaskedRetriever
from skilltransfer.memory.store import ReadOnlyMemoryError, SkillMemory
from skilltransfer.report.events import LIBRARY, WITHIN_RUN, transfer_events
from skilltransfer.report.success import condition_order
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance, Skill

SKILLS = Path(__file__).resolve().parents[1] / "data" / "skills-library"
TARGETS = [3, 5, 2, 4, 6]


def _skill(name: str, description: str, body: str = "1. Do it.", skill_id: str | None = None) -> Skill:
    return Skill(id=skill_id or f"sk-{name}", name=name, description=description, body=body, level="task",
                 format="text", provenance=Provenance(source_task_id=f"t-{name}"))


def _joint(embedder, library: list[Skill], own: list[Skill] = (), **config) -> JointMemory:
    frozen = SkillMemory(embedder, dedup_threshold=1.01)
    frozen.add_many(library)
    mine = SkillMemory(embedder, **config)
    mine.add_many(list(own))
    return JointMemory(frozen, mine)


# --------------------------------------------------------------------------------------------- the store
def test_induction_never_merges_into_prunes_or_evicts_a_library_skill(hash_embedder, tmp_path):
    library = _skill("calendar-basics", "Add events to a user's calendar.", "1. List events.")
    memory = _joint(hash_embedder, [library], capacity=1)
    twin = _skill("add_event", "Add events to a user's calendar.", "1. List events.\n2. Add the event. " * 20)
    assert memory.add(twin).action == "added"  # a near-duplicate of a library skill: kept apart, not merged
    assert memory.library.get(library.id).body == "1. List events."
    assert "merged_from" not in memory.library.get(library.id).extra
    assert memory.add(_skill("x", "Other.", skill_id=library.id)).action == "dropped"  # a library skill's id
    renamed = memory.add(_skill("calendar-basics", "Something else entirely.", skill_id="sk-induced"))
    assert renamed.action == "added"
    assert "calendar-basics_2" in {s.name for s in memory.own}
    with pytest.raises(ReadOnlyMemoryError):
        memory.remove(library.id)
    evicted = memory.evict(3, [])
    assert len(evicted) == 1
    assert library.id not in evicted
    assert [s.id for s in memory.library] == [library.id]
    assert len(memory) == 2
    memory.save(tmp_path / "saved")
    saved = [json.loads(line)["id"] for line in (tmp_path / "saved" / "skills.jsonl").read_text().splitlines()]
    assert saved == [s.id for s in memory.own]  # the memory saved holds the induced skills only
    assert library.id not in saved


def test_retrieval_ranks_both_stores_together_and_a_tie_goes_to_the_library(hash_embedder):
    memory = _joint(hash_embedder, [_skill("lib-a", "Send an email with an attachment."),
                                    _skill("lib-b", "Sum a column of a spreadsheet.")],
                    [_skill("own_a", "Send an email with an attachment."),
                     _skill("own_b", "Water the tomato plants in the garden.")])
    hits = memory.retrieve("Send an email with an attachment.", k=3)
    assert [s.name for s, _ in hits[:2]] == ["lib-a", "own_a"]  # equal scores: the library's first
    assert hits[0][1] == pytest.approx(hits[1][1])
    assert len(hits) == 3
    assert {memory.source(s.id) for s, _ in hits[:2]} == {"library", "memory"}
    assert len(memory.retrieve("Sum a column.", k=10)) == 4


def test_masking_draws_the_library_skills_only(hash_embedder):
    memory = _joint(hash_embedder, [_skill("lib-a", "Set the counter.")], [_skill("own_a", "Set the counter.")])
    masked = MaskedRetriever(memory, 0.5, seed=1, drawn=lambda skill: memory.from_library(skill.id))
    shown = {"lib-a": 0, "own_a": 0}
    for i in range(60):
        masked.task_key = f"t{i}"
        got = masked.retrieve("Set the counter.", 2, lambda role: None)  # type: ignore[arg-type, return-value]
        assert got.log is not None
        rows = {row["name"]: row for row in got.log["candidates"]}
        assert rows["own_a"]["propensity"] == 1.0
        assert rows["own_a"]["shown"]
        assert rows["lib-a"]["propensity"] == 0.5
        for skill, _ in got.hits:
            shown[skill.name] += 1
    assert shown["own_a"] == 60
    assert 15 < shown["lib-a"] < 45


# --------------------------------------------------------------------------------------------- the stream
def distinct_skill(_: int, messages: list[dict]) -> str:
    call = TARGETS.index(_target(" ".join(str(m["content"]) for m in messages)))
    return (f"NAME: counter_skill_{call}\nDESCRIPTION: Set the counter to a value, procedure {call}.\n"
            f"BODY:\n1. Reset the counter with apis.counter.reset().\n2. Add the target with apis.counter.add(n).")


def _config(tmp_path: Path, **settings) -> StreamConfig:
    return StreamConfig(**{"run": "both", "runs_dir": str(tmp_path / "runs"), "condition": "task+text",
                           "library": str(SKILLS), "library_use": "beside", "mask_rate": 0.5, "embedder": "hash:64",
                           "memory": {"dedup_threshold": 1.01}, "agent": {"harness": "paper"}, **settings})


def _run(tmp_path: Path, script: CounterScript | None = None, **settings):
    model = ScriptedModel(script or CounterScript(distinct_skill))
    summary = run_stream(TinyEnv(TARGETS, workdir=tmp_path / "ws"), model, _config(tmp_path, **settings),
                         embedder=HashEmbedder(64))
    return summary, model


def _prompts(path: Path) -> dict[str, str]:
    return {row["id"]: row["message"]["content"] for row in map(json.loads, (path / "prompts.jsonl").open())}


def test_a_stream_beside_a_library_induces_its_own_and_records_where_each_skill_came_from(tmp_path):
    summary, _ = _run(tmp_path)
    library_ids = {s.id for s in load_library(SKILLS)}
    saved = [json.loads(line) for line in (summary.path / "memory" / "skills.jsonl").read_text().splitlines()]
    assert [s["name"] for s in saved] == [f"counter_skill_{i}" for i in range(5)]  # induced only
    records = summary.records
    sources = {(hit.skill_id, hit.source) for r in records for hit in r.retrieved}
    assert {source for _, source in sources} == {"library", "memory"}
    assert all((skill_id in library_ids) == (source == "library") for skill_id, source in sources)
    assert all(len(r.retrieved) <= 5 for r in records)  # one top-5 over both stores
    draws = [e for r in records for e in r.exposures]
    assert {e.propensity for e in draws if e.skill_id in library_ids} == {0.5}
    assert {(e.propensity, e.shown) for e in draws if e.skill_id not in library_ids} == {(1.0, True)}
    assert {e.shown for e in draws if e.skill_id in library_ids} == {True, False}
    assert all(e.name for e in draws)
    events = transfer_events(records, "library skills-library")
    assert {e.kind for e in events} == {LIBRARY, WITHIN_RUN}
    assert all((e.skill_id in library_ids) == (e.kind == LIBRARY) for e in events)
    config = json.loads((summary.path / "config.json").read_text())
    assert config["agent"]["skill_disclosure"] == "progressive"
    assert "disclosure_beside_section" in config["prompt_ids"]
    assert "disclosure_section" not in config["prompt_ids"]
    assert config["induction"] is not None
    assert records[-1].memory_size == 4 + 5


def test_one_prompt_shows_the_induced_skills_in_full_and_the_library_disclosed(tmp_path):
    summary, _ = _run(tmp_path, mask_rate=0.0)
    prompts = _prompts(summary.path)
    both = []
    for record in summary.records:
        trajectory = RunFolder(summary.path).read_trajectory(record.trajectory)
        task = next(prompts[i] for i in trajectory.calls[0]["messages"] if prompts[i].startswith("# Task"))
        if {h.source for h in record.retrieved} == {"library", "memory"}:
            both.append(task)
    assert both
    task = both[-1]
    own, _, library = task.partition("# Skills from the library `skills-library`\n")
    assert "# Skills from earlier tasks\nThese skills were learned on earlier tasks" in own
    assert "### Skill: counter_skill_" in own
    assert "1. Reset the counter with apis.counter.reset()." in own  # an induced skill in full, as the paper shows it
    assert library.startswith("The library holds 4 skills; ")  # the library's size, not both stores'
    assert "not learned on your earlier tasks" in library
    assert "not learned from yours" not in task
    assert "counter_skill_" not in library
    assert "## Skill actions" in library
    assert 'load_skill("skill name")' in library


def test_a_resumed_stream_beside_a_library_ends_as_an_uninterrupted_one(tmp_path):
    full, _ = _run(tmp_path / "a")
    with pytest.raises(SimulatedCrash):
        _run(tmp_path / "b", CounterScript(distinct_skill, fail_at=7))
    resumed, _ = _run(tmp_path / "b")
    assert resumed.ran
    assert len(resumed.ran) < len(TARGETS)

    def account(records: list[TaskRecord]) -> list[tuple]:
        return [(r.task_id, r.success, [(h.skill_id, h.source) for h in r.retrieved],
                 [(e.skill_id, e.propensity, e.shown) for e in r.exposures], r.memory_size) for r in records]

    assert account(resumed.records) == account(full.records)
    for name in ("skills.jsonl", "snapshots.jsonl"):
        assert (resumed.path / "memory" / name).read_text() == (full.path / "memory" / name).read_text()


def test_an_own_memory_shown_progressively_is_not_called_a_library(tmp_path):
    config = StreamConfig(run="own", runs_dir=str(tmp_path / "runs"), condition="task+text", embedder="hash:64",
                          memory={"dedup_threshold": 1.01},
                          agent={"harness": "paper", "skill_disclosure": "progressive"})
    summary = run_stream(TinyEnv(TARGETS[:2], workdir=tmp_path / "ws"), ScriptedModel(CounterScript(distinct_skill)),
                         config, embedder=HashEmbedder(64))
    prompts = _prompts(summary.path)
    second = RunFolder(summary.path).read_trajectory(summary.records[1].trajectory)
    task = next(prompts[i] for i in second.calls[0]["messages"] if prompts[i].startswith("# Task"))
    assert "# Skills from earlier tasks\nYour memory holds 1 skill; this is the 1 nearest to this task. These skills " \
           "were learned on earlier tasks" in task
    assert "library" not in task.lower()
    ids = json.loads((summary.path / "config.json").read_text())["prompt_ids"]
    assert "disclosure_memory_section" in ids
    assert "disclosure_section" not in ids


# --------------------------------------------------------------------------------------------- settings and labels
def test_beside_needs_a_library_a_memory_condition_and_flat_inline_reading():
    with pytest.raises(ValidationError, match="give library"):
        StreamConfig(condition="task+text", library_use="beside")
    with pytest.raises(ValidationError, match="induces nothing"):
        StreamConfig(condition="task", library="lib", library_use="beside")
    with pytest.raises(ValidationError, match="flat and inline"):
        StreamConfig(condition="task+text", library="lib", library_use="beside", skill_exec="agent-skill")
    both = StreamConfig(condition="task+text", library="lib", library_use="beside", mask_rate=0.3)
    assert both.induction_config() is not None
    assert both.condition_label() == "task+text+library+memory[mask=0.3]"
    assert both.run_leaf({"library_use": 2}) == "task+text-beside-mask0.3"
    instead = StreamConfig(condition="task+text", library="lib")
    assert instead.induction_config() is None
    assert instead.condition_label() == "task+text+library"
    assert instead.run_leaf({"library_use": 2}) == "task+text-instead"
    none = StreamConfig(condition="task+text", library="lib", library_use="none")
    assert none.library is None
    assert not none.has_memory or none.induction_config() is not None
    assert none.condition_label() == "task+text"
    assert none.run_leaf({"library_use": 1}) == "task+text"
    assert StreamConfig(condition="task", library="lib", library_use="none").has_memory is False


def test_the_arms_sort_as_the_study_reads_them():
    labels = ["task+text+library+memory[mask=0.3]", "task+text+library[mask=0.3]", "task+code+library",
              "task+text+library+memory", "subtask", "task+text+library", "task", "task+text"]
    assert sorted(labels, key=condition_order) == [
        "task", "task+text", "subtask", "task+text+library", "task+text+library[mask=0.3]",
        "task+text+library+memory", "task+text+library+memory[mask=0.3]", "task+code+library"]


def test_a_skill_the_task_itself_induced_is_no_library_event():
    hit = RetrievedSkill(skill_id="own", name="own", format="text", score=0.9, subtask_index=1, query_kind="subtask",
                         source_task_id="t0", source_position=0, source="memory")
    record = TaskRecord(run="r", condition="subtask+text", position=0, task_id="t0", difficulty=1, template="x",
                        reward=0, success=False, exit_status="submitted", steps=1, subtasks=2, latency_s=0,
                        model_calls=1, prompt_tokens=1, completion_tokens=1, dependency=0, peak_context=1,
                        tokens_by_role={}, retrieved=[hit], induced=[], memory_size=1, trajectory="t.json")
    assert transfer_events([record], "library x") == []
    legacy = record.model_copy(update={"retrieved": [hit.model_copy(update={"source": None})]})
    assert [e.kind for e in transfer_events([legacy], "library x")] == [LIBRARY]  # one store: the old rule
