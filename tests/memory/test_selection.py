"""Selection as data (issue 55): picks recorded in every mode that shows skills, the selection metrics and tables,
per-task libraries grown with near misses (``library_size``) and the size study's estimands."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers_skill_exec import SkillActionScript
from helpers_tinyenv import TinyEnv

from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import ActionStep, RetrievalStep, TaskRecord, picks_from_steps, ranked
from skilltransfer.memory import HashEmbedder
from skilltransfer.memory.library import export_jsonl
from skilltransfer.memory.near_miss import NearMissConfig, SizedLibrary, right_skills
from skilltransfer.memory.store import SkillMemory
from skilltransfer.metrics.selection import TaskSelection, ndcg, selection_summary, skill_triggers, task_scores
from skilltransfer.metrics.selection_scale import scale_analysis
from skilltransfer.protocols import TaskSpec
from skilltransfer.report import build_report, load_runs
from skilltransfer.report.selection import read_labels
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance, Skill

ALPHA = Skill(name="set_counter", description="Set the counter to a target value.",
              body="Reset, then add: apis.counter.reset() then apis.counter.add(target).",
              provenance=Provenance(source_task_id="tiny/0"), resources={"notes.txt": "resource text"})
BETA = Skill(name="read_counter", description="Read the counter and print it.", body="Call apis.counter.get().",
             provenance=Provenance(source_task_id="tiny/1"))


def _stream(tmp_path, name, **settings):
    library = export_jsonl([ALPHA, BETA], tmp_path / "lib.jsonl")
    agent = {"top_k": 2, "harness": "paper", **settings.pop("agent", {})}
    config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task", library=str(library),
                          embedder="hash:128", agent=agent, **settings)
    return run_stream(TinyEnv([4, 7], workdir=tmp_path / "ws" / name), ScriptedModel(SkillActionScript()), config,
                      embedder=HashEmbedder(128))


# --------------------------------------------------------------------------------------------- picks in the log
@pytest.mark.parametrize(("settings", "kind"), [
    ({}, "load"),  # inline under progressive disclosure: cards are loaded
    ({"agent": {"skill_disclosure": "full"}}, "followed"),  # inline in full: following is the pick
    ({"skill_exec": "agent-skill"}, "load"),
    ({"skill_exec": "subagent"}, "subagent"),
    ({"skill_exec": "hybrid", "library_organization": "task-tree"}, "subagent"),
    ({"skill_exec": "agent-skill", "library_organization": "task-tree"}, "load"),
    ({"skill_exec": "agent-skill", "library_exposure": "whole"}, "load"),
], ids=["inline", "inline-full", "agent-skill", "subagent", "hybrid-tree", "agent-skill-tree", "whole"])
def test_picks_are_recorded_in_every_mode_that_shows_skills(tmp_path, settings, kind):
    summary = _stream(tmp_path, "r", **settings)
    for record in summary.records:
        assert [hit.rank for hit in record.retrieved] == [1, 2]
        assert record.picks is not None
        assert record.picks[0].kind == kind
        first = record.picks[0]
        assert (first.name, first.rank) == ("set_counter", 1)
        assert first.score == record.retrieved[0].score
        assert first.skill_id == record.retrieved[0].skill_id
        assert (first.step is None) == (kind == "followed")
    alpha, beta = (next(h.skill_id for h in summary.records[0].retrieved if h.name == n)
                   for n in ("set_counter", "read_counter"))
    assert summary.records[0].relevant_skills == [alpha]  # the frozen library's provenance
    assert summary.records[1].relevant_skills == [beta]
    reread = load_runs([tmp_path / "runs" / "r"])[0].records
    assert [r.picks for r in reread] == [r.picks for r in summary.records]  # typed in the log, read back typed


def test_picks_from_steps_in_order_with_rank_and_score():
    retrieval = RetrievalStep(query="q", query_kind="instruction", subtask_index=None,
                              skills=[{"id": "a", "name": "A", "score": 0.9}, {"id": "b", "name": "B", "score": 0.5}])
    steps = [retrieval,
             ActionStep(index=0, subtask_index=None, reply="", thought="", action='load_skill("B")', observation="",
                        skill_action={"action": "load_skill", "target": "B", "skill_id": "b"}),
             ActionStep(index=1, subtask_index=None, reply="", thought="", action="f()", observation="",
                        skill_calls={"a": 2}),
             ActionStep(index=2, subtask_index=None, reply="", thought="", action='open_node("g")', observation="",
                        skill_action={"action": "open_node", "target": "g"}),
             ActionStep(index=3, subtask_index=None, reply="", thought="", action='load_skill("Z")', observation="",
                        skill_action={"action": "load_skill", "target": "Z", "skill_id": "z"})]
    picks = picks_from_steps(steps, [("a", "A", 0.7), ("a", "A", 0.7), ("b", "B", 0.2)])
    assert [(p.skill_id, p.kind, p.rank, p.score, p.step) for p in picks] == [
        ("b", "load", 2, 0.5, 0), ("a", "call", 1, 0.9, 1), ("z", "load", None, None, 3), ("a", "followed", 1, 0.9,
                                                                                              None)]


def test_records_logged_before_picks_read_back_with_defaults():
    old = {"run": "r", "condition": "task+text", "position": 0, "task_id": "t", "difficulty": 1, "template": "x",
           "reward": 1.0, "success": True, "exit_status": "submitted", "steps": 1, "subtasks": 0, "latency_s": 1.0,
           "model_calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "dependency": 1, "peak_context": 1,
           "tokens_by_role": {}, "induced": [], "memory_size": 2, "trajectory": "trajectories/t.json",
           "retrieved": [{"skill_id": s, "name": s, "format": "text", "score": 0.5, "subtask_index": i,
                          "query_kind": "subtask", "source_task_id": None, "source_position": None}
                         for s, i in (("a", 0), ("b", 0), ("a", 1))]}
    record = TaskRecord.model_validate(old)
    assert record.picks is None
    assert record.relevant_skills is None
    assert record.library_draw is None
    assert [rank for _, rank in ranked(record.retrieved)] == [1, 2, 1]


# --------------------------------------------------------------------------------------------- metrics
def _task(ranking, picks, relevant, success=1.0, task_id="t"):
    return TaskSelection(task_id, tuple(ranking), tuple(picks), frozenset(relevant), success)


def test_retrieval_and_pick_metrics_by_hand():
    scores = task_scores(_task(["x", "r", "y"], ["x", "r"], {"r"}))
    assert scores["hit1"] == 0
    assert scores["hit5"] == 1
    assert scores["mrr"] == 0.5
    assert scores["ndcg10"] == pytest.approx(1 / np.log2(3))
    assert scores["pick_accuracy"] == 0
    assert scores["trigger_rate"] == 1
    assert scores["picks"] == 2
    assert task_scores(_task(["r"], [], {"r"}))["pick_accuracy"] == 0  # no pick is not a right pick
    assert ndcg(["a", "b", "c"], frozenset({"a", "b"})) == pytest.approx(1.0)
    assert task_scores(_task([], [], {"r"}))["mrr"] == 0
    summary = selection_summary([_task(["r"], ["r"], {"r"}), _task(["x"], ["x"], {"r"})], resamples=200)
    assert summary["pick_accuracy"][0] == 0.5
    assert summary["hit1"][0] == 0.5


def test_trigger_precision_and_recall_per_skill():
    tasks = [_task([], ["r"], {"r"}, task_id="1"), _task([], ["r"], {"s"}, task_id="2"),
             _task([], [], {"r"}, task_id="3"), _task([], ["s"], {"s"}, task_id="4")]
    rows = {row.skill_id: row for row in skill_triggers(tasks, resamples=200)}
    assert rows["r"].precision[0] == 0.5
    assert rows["r"].recall[0] == 0.5
    assert rows["s"].precision[0] == 1.0
    assert rows["s"].recall[0] == 0.5
    assert rows["s"].f1 == pytest.approx(2 / 3)


def test_the_size_analysis_recovers_a_planted_slope_and_split():
    rng = np.random.default_rng(3)
    by_size: dict[float, list[TaskSelection]] = {}
    for size in (5, 20, 80, 320):
        d = np.log2(size / 5)
        a, cost = 0.9 - 0.1 * d, 0.02 * d
        tasks = []
        for i in range(400):
            right = rng.random() < a
            success = float(rng.random() < (0.8 if right else 0.2) - cost)
            tasks.append(TaskSelection(f"t{i}", ("r",), ("r",) if right else ("x",), frozenset({"r"}), success,
                                       size=size, nn_cosine=float(rng.random())))
        by_size[float(size)] = tasks
    analysis = scale_analysis(by_size, resamples=300)
    slope = next(s for s in analysis.slopes if s.metric == "pick_accuracy")
    assert slope.slope.covers(-0.1)
    assert slope.r2 > 0.95
    last = analysis.sizes[-1]
    assert last.shadowing.value + last.context_overhead.value == pytest.approx(last.drop.value)
    assert last.shadowing.covers(0.6 * 0.6)
    assert last.context_overhead.covers(0.12)
    assert last.shadowing.upper >= last.shadowing.value
    assert analysis.hinge.size == 5  # a straight line: no break
    assert analysis.confusability.auroc.covers(0.5)  # the cosine here is noise


# --------------------------------------------------------------------------------------------- library_size
def _skill(name, description, source=None):
    return Skill(name=name, description=description, body=f"do {name}", provenance=Provenance(source_task_id=source))


def test_a_task_library_holds_its_right_skills_then_near_misses_nested_across_sizes():
    embedder = HashEmbedder(64)
    library = SkillMemory(embedder, dedup_threshold=1.01)
    library.add_many([_skill("right", "alpha beta gamma delta", "t0"), _skill("dup", "alpha beta gamma delta"),
                      *[_skill(f"n{i}", f"alpha beta other{i} words{i}") for i in range(6)],
                      *[_skill(f"far{i}", f"unrelated thing number {i}") for i in range(4)]])
    library.read_only = True
    task = TaskSpec(id="t0", instruction="alpha beta gamma", difficulty=1, template="x")
    right = right_skills(task, library)
    assert right == [next(s.id for s in library if s.name == "right")]
    vectors = dict(zip(*library.embeddings(), strict=True))
    band = (0.2, 0.95)
    drawn = {size: SizedLibrary(library, None, size, NearMissConfig(band=band)).draw(task, right)
             for size in (1, 4, 8, 12)}
    assert drawn[1][0] == right
    assert drawn[1][1].nn_cosine is None
    for small, large in ((1, 4), (4, 8), (8, 12)):
        assert drawn[large][0][:len(drawn[small][0])] == drawn[small][0]  # nested
    ids, record = drawn[12]
    dup = next(s.id for s in library if s.name == "dup")
    assert dup not in ids  # above the band: a near duplicate is never drawn
    cos = {i: float(vectors[i] @ vectors[right[0]]) for i in ids[1:]}
    in_band = [i for i in ids[1:] if band[0] <= cos[i] <= band[1]]
    assert ids[1:len(in_band) + 1] == in_band  # the band first, then below it, nearest first
    assert record.size == len(ids) == 11
    assert record.requested == 12
    assert record.in_band == len(in_band)
    assert record.nn_cosine == pytest.approx(max(cos.values()), abs=1e-5)


def test_a_stream_with_library_size_records_each_tasks_library_and_picks(tmp_path):
    corpus = export_jsonl([_skill(f"near{i}", f"Set the counter value {i} carefully") for i in range(6)],
                          tmp_path / "corpus.jsonl")
    summary = _stream(tmp_path, "sized", library_size=4, skill_exec="agent-skill",
                      near_miss={"corpus": [str(corpus)], "band": (-1.0, 1.0)})
    for record in summary.records:
        assert record.library_draw is not None
        assert record.library_draw.size == 4
        assert record.library_draw.right == 1
        assert record.picks
        assert record.relevant_skills
    assert summary.records[0].memory_size == 2  # the run's memory is the library; the corpus is read, not saved
    trajectory = (tmp_path / "runs" / "sized" / summary.records[0].trajectory).read_text()
    assert "holds 4 skills" in trajectory
    with pytest.raises(InputError, match="library_size grows a frozen library"):
        StreamConfig(condition="task+text", library_size=5).check_skill_exec()


# --------------------------------------------------------------------------------------------- the report
def test_report_writes_the_selection_tables_and_labels_replace_the_recorded_right_skills(tmp_path):
    _stream(tmp_path, "r", skill_exec="agent-skill")
    runs = load_runs([tmp_path / "runs"])
    report = build_report(runs, seed=0)
    row = report.table("selection").rows[0]
    assert (row["tasks"], row["labelled"], row["pick_accuracy_pct"], row["hit1_pct"]) == (2, 2, 50.0, 50.0)
    skills = {r["skill"]: r for r in report.table("selection_skills").rows}
    assert skills["set_counter"]["precision_pct"] == 50.0
    assert skills["set_counter"]["recall_pct"] == 100.0
    from skilltransfer.report.export import task_rows

    exported = {row["task_id"]: row for row in task_rows([tmp_path / "runs"])}
    assert exported["tiny/0"]["picked_skills"] == exported["tiny/0"]["right_skills"]  # set_counter, right for tiny/0
    assert exported["tiny/1"]["picked_skills"] != exported["tiny/1"]["right_skills"]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"tiny/0": ["set_counter"], "tiny/1": ["set_counter"]}))
    relabelled = build_report(runs, seed=0, labels=read_labels(labels))
    assert relabelled.table("selection").rows[0]["pick_accuracy_pct"] == 100.0
    for bad, message in (("[1, 2]", "a labels file is a JSON object"), ('{"t": "x"}', "give a list"),
                         ("{nope", "invalid JSON")):
        labels.write_text(bad)
        with pytest.raises(InputError, match=message):
            read_labels(labels)


def test_view_shows_each_tasks_picks_and_the_page_draws_them(tmp_path):
    from pathlib import Path

    from skilltransfer.view.data import Catalog

    _stream(tmp_path, "r", skill_exec="agent-skill")
    catalog = Catalog([tmp_path / "runs"])
    key = catalog.index()["runs"][0]["key"]
    rows = {t["task_id"]: t for t in catalog.run(key)["tasks"]}
    assert rows["tiny/0"]["picks"][0] | {"skill_id": None} == {"skill_id": None, "name": "set_counter",
                                                                 "kind": "load", "rank": 1, "right": True}
    assert rows["tiny/1"]["picks"][0]["right"] is False
    task = catalog.task(key, 0)
    assert task["record"]["picks"]
    assert task["record"]["relevant_skills"]
    script = (Path(__file__).resolve().parents[2] / "skilltransfer" / "view" / "static" / "app.js").read_text()
    assert 'label: "picked"' in script
    assert "Selection: shown and picked" in script


@pytest.mark.slow
def test_the_selection_scale_grid_through_a_failing_endpoint_reports_and_views(tmp_path):
    """Acceptance: ``grid selection-scale --limit 2`` through the mock server's role play with a third of its replies
    failing: every stream finishes, ``report`` writes the selection tables and the figure, ``view`` shows picks."""
    from pathlib import Path

    from helpers_cli import cli

    from skilltransfer.llm.testing.mock_server import MockServer
    from skilltransfer.llm.testing.roleplay import RolePlay
    from skilltransfer.view.data import Catalog

    corpus = export_jsonl([_skill(f"near-{i}", f"Find and update records of kind {i} for the user") for i in range(40)],
                          tmp_path / "corpus.jsonl")
    out = tmp_path / "grid"
    spec = Path(__file__).resolve().parents[2] / "experiments" / "selection-scale.yaml"
    with MockServer(RolePlay(fail_rate=0.3, seed=2)) as server:
        cli("grid", str(spec), "--limit", "2", "-c", "models.default.model=mock", "-c",
            f"models.default.base_url={server.url}", "-c", "models.default.api_key=x", "--embedder", "hash:64",
            "-c", f"near_miss.corpus=[{corpus}]", "--out", str(out), "--no-progress")
    status = json.loads((out / "status.json").read_text())
    assert {s["state"] for s in status["streams"].values()} == {"done"}
    assert len(status["streams"]) == 11
    report = tmp_path / "report"
    cli("report", str(out), "--out", str(report), "--embedder", "hash:64", "--no-utility")
    for name in ("selection.csv", "selection_scale.csv", "selection_slope.csv", "selection_confusability.csv",
                 "figures/selection_scale.png"):
        assert (report / name).is_file(), name
    scale = (report / "selection_scale.csv").read_text().splitlines()
    assert len(scale) >= 1 + 5  # a row per size of the unmasked group at least
    catalog = Catalog([out])
    scaled = [r for r in catalog.index()["runs"] if "size20" in str(r.get("label"))]
    tasks = catalog.run(scaled[0]["key"])["tasks"]
    assert all(t["picks"] is not None for t in tasks)


def test_a_corpus_repeats_names_and_an_unreadable_one_is_refused_before_the_grid_runs(tmp_path):
    from skilltransfer.memory.near_miss import corpus_skills, read_corpus
    from skilltransfer.runner.stream_build import near_miss_note

    root = tmp_path / "corpus"
    for version, body in (("v1", "one way"), ("v2", "another way")):
        folder = root / version / "merge-pdfs"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: merge-pdfs\ndescription: Merge PDF files.\n---\n\n{body}\n")
    skills, unread = read_corpus(root)
    assert sorted(s.name for s in skills) == ["v1/merge-pdfs", "v2/merge-pdfs"]  # one name, two folders: both
    assert unread == []
    again = corpus_skills([("corpus", skills), ("copy", skills)], [_skill("v1/merge-pdfs", "Merge PDFs.", "t0")])
    assert sorted(s.name for s in again) == ["v1/merge-pdfs_2", "v2/merge-pdfs"]  # a skill met twice counts once
    assert {s.provenance.source_task_id for s in again} == {"near-miss/corpus"}
    config = StreamConfig(condition="task", library="lib.jsonl", library_size=20, near_miss={"corpus": [str(root)]})
    assert "2 skills" in near_miss_note(config, [5, 20])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="empty"):
        near_miss_note(config.model_copy(update={"near_miss": NearMissConfig(corpus=[str(empty)])}))
