"""Retrieval as an axis (issue 55 §3): BM25 by bm25s, reciprocal rank fusion, category -> skill routing, each hit
scored by its cosine, the ``retrieval`` / ``retrieval_text`` axes through a stream, a grid and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers_cli import main_cli

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.memory import HashEmbedder
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.library import read_library
from skilltransfer.memory.organization import Organization, RoutingNode, task_tree
from skilltransfer.memory.ranking import (
    LexicalIndex,
    Ranker,
    folder_categories,
    reciprocal_rank_fusion,
)
from skilltransfer.memory.store import SkillMemory
from skilltransfer.report import build_report, load_runs
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance, Skill

DESCRIPTIONS = ["Merge several PDF files into one document.", "Send an email with an attachment to a contact.",
                "Sum a numeric column of an Excel sheet.", "Create a calendar event for a team meeting.",
                "Knead dough and bake a loaf of bread.", "Water the garden plants every morning.",
                "Export the contacts to an Excel file.", "Plot a chart of stock prices."]


def _memory(descriptions: list[str] = DESCRIPTIONS, **config: object) -> SkillMemory:
    memory = SkillMemory(HashEmbedder(64), **config)  # type: ignore[arg-type]
    memory.add_many([Skill(name=f"s{i}", description=d, body=f"Steps for {d.lower()} Marker{i}x") for i, d in
                     enumerate(descriptions)])
    return memory


# --------------------------------------------------------------------------------------------- the modes
def test_bm25_stems_drops_stop_words_and_matches_only_shared_terms() -> None:
    index = LexicalIndex(DESCRIPTIONS)
    assert [row for row, _ in index.top("merging PDFs", 3)] == [0]  # "merging" -> merg, "PDFs" -> pdf
    assert index.top("the a of into", 5) == []  # stop words only: no shared term
    assert index.top("zzz quux", 5) == []
    excel = index.top("excel", 5)
    assert sorted(row for row, _ in excel) == [2, 6]
    assert all(score > 0 for _, score in excel)
    assert LexicalIndex(["", "bread"]).top("nothing", 2) == []  # an empty text matches no query


def test_reciprocal_rank_fusion_by_hand() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]])
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert sorted(fused, key=lambda k: -fused[k]) == ["a", "c", "b"]


def test_every_mode_scores_hits_by_their_cosine_and_dense_is_untouched() -> None:
    memory = _memory()
    query = "email the excel report to a contact"
    dense = memory.retrieve(query, 4)
    cosine = {skill.id: float(memory.vector(skill.id) @ memory.embed([query])[0]) for skill in memory}
    assert [round(c, 5) for _, c in dense] == [round(cosine[s.id], 5) for s, _ in dense]
    for mode in ("bm25", "hybrid", "hierarchical"):
        memory.ranker = Ranker(mode)  # type: ignore[arg-type]
        hits = memory.retrieve(query, 4)
        assert hits, mode
        assert all(c == pytest.approx(cosine[s.id], abs=1e-5) for s, c in hits), mode
    memory.ranker = Ranker("bm25")
    assert [s.name for s, _ in memory.retrieve(query, 4)][0] == "s1"  # "email" and "contact" both match s1
    memory.ranker = Ranker("dense")
    assert memory.retrieve(query, 4) == dense


def test_hybrid_is_dense_when_no_term_is_shared_and_fuses_otherwise() -> None:
    memory = _memory()
    dense = memory.retrieve("zzz qqq", 3)
    memory.ranker = Ranker("hybrid")
    assert memory.retrieve("zzz qqq", 3) == dense
    query = "bake bread"
    memory.ranker = None
    dense_ids = [s.id for s, _ in memory.retrieve(query, 8)]
    lexical = [memory.get(i).id for i in [s.id for s in memory] if "bread" in memory.get(i).description.lower()]
    fused = reciprocal_rank_fusion([dense_ids, lexical])
    expected = sorted(fused, key=lambda i: (-fused[i], dense_ids.index(i)))[:3]
    memory.ranker = Ranker("hybrid")
    assert [s.id for s, _ in memory.retrieve(query, 3)] == expected


def test_bm25_index_follows_the_memory_as_it_grows_and_indexes_bodies_when_asked() -> None:
    memory = _memory()
    memory.ranker = Ranker("bm25")
    assert memory.retrieve("translate a poem", 3) == []
    memory.add(Skill(name="poet", description="Translate a poem into French.", body="Keep the rhyme."))
    assert [s.name for s, _ in memory.retrieve("translate a poem", 3)] == ["poet"]
    assert memory.retrieve("rhyme", 3) == []  # the description only
    with_body = _memory(index_body=True)
    with_body.ranker = Ranker("bm25")
    assert [s.name for s, _ in with_body.retrieve("marker4x", 2)] == ["s4"]  # a word of the body only
    assert memory.retrieve("marker4x", 2) == []


def _vectors_memory(rows: dict[str, list[float]]) -> SkillMemory:
    """A memory whose skills have given unit vectors (a test double embedder that knows each description)."""

    class Fixed:
        id = "fixed:3"
        dim = 3

        def embed(self, texts: list[str]) -> np.ndarray:
            out = np.array([rows.get(t, [0.0, 0.0, 1.0]) for t in texts], dtype=np.float32)
            return out / np.linalg.norm(out, axis=1, keepdims=True)

    memory = SkillMemory(Fixed(), dedup_threshold=1.01)  # type: ignore[arg-type]
    memory.add_many([Skill(id=name, name=name, description=name, body="x") for name in rows if name != "q"])
    return memory


def test_hierarchical_routes_the_best_category_first_even_past_a_better_skill() -> None:
    # category A: a1 (close to the query) and a2 (far); category B: b1, b2 both fairly close -> B's centroid wins
    rows = {"a1": [1.0, 0.05, 0], "a2": [-0.6, 1, 0], "b1": [0.8, 0.6, 0], "b2": [0.75, 0.66, 0], "q": [1.0, 0.3, 0]}
    memory = _vectors_memory(rows)
    org = Organization(kind="tree", roots=["A", "B"], nodes=[RoutingNode(name="A", skills=["a1", "a2"]),
                                                             RoutingNode(name="B", skills=["b1", "b2"])])
    assert [s.id for s, _ in memory.retrieve("q", 3)] == ["a1", "b1", "b2"]  # dense
    memory.ranker = Ranker("hierarchical", org)
    assert [s.id for s, _ in memory.retrieve("q", 3)] == ["b1", "b2", "a1"]  # the right skill a1 is routed past
    tree = memory.ranker.routing_tree(memory.ranking_corpus())
    assert tree.source == "organization (tree, built by ?)"
    partial = Organization(kind="tree", roots=["B"], nodes=[RoutingNode(name="B", skills=["b1", "b2", "gone"])])
    memory.ranker = Ranker("hierarchical", partial)  # a1, a2 are held by no node: entries of the top level
    assert [s.id for s, _ in memory.retrieve("q", 4)] == ["a1", "b1", "b2", "a2"]


def test_hierarchical_without_an_organisation_clusters_and_below_four_skills_is_dense() -> None:
    small = _memory(DESCRIPTIONS[:3])
    dense = small.retrieve("sum the excel column of a pdf", 3)
    assert len({round(c, 6) for _, c in dense}) == 3  # no tie: one order
    small.ranker = Ranker("hierarchical")
    assert small.retrieve("sum the excel column of a pdf", 3) == dense
    memory = _memory()
    memory.ranker = Ranker("hierarchical")
    tree = memory.ranker.routing_tree(memory.ranking_corpus())
    assert tree.source == "clusters (3)"  # round(sqrt(8))
    assert sorted(row for node in tree.children for _, row in node) == list(range(8))
    first = memory.retrieve("merge the pdf files", 8)
    assert sorted(s.name for s, _ in first) == sorted(s.name for s in memory)  # every skill, each once
    assert "no organisation" in memory.ranker.describe(list(memory))
    assert "k-means" in memory.ranker.describe(list(memory))


def _write_skill(folder: Path, description: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {folder.name}\ndescription: {description}\n---\n\nDo it.\n")


def test_hierarchical_routes_a_library_by_its_folders(tmp_path: Path) -> None:
    for task, names in {"pdf-tasks": ["merge-pdf", "split-pdf"], "mail-tasks": ["send-mail", "read-mail"]}.items():
        for name in names:
            _write_skill(tmp_path / "lib" / task / name, f"{name.replace('-', ' ')} for the user")
    skills = read_library(tmp_path / "lib").skills
    paths = folder_categories(skills)
    assert paths is not None
    assert sorted(set(paths.values())) == [("mail-tasks",), ("pdf-tasks",)]
    memory = SkillMemory(HashEmbedder(64))
    memory.add_many(skills)
    memory.ranker = Ranker("hierarchical")
    assert memory.ranker.routing_tree(memory.ranking_corpus()).source == "folders (2)"
    hits = [s.name for s, _ in memory.retrieve("merge pdf", 4)]
    assert {hits[0], hits[1]} == {"merge-pdf", "split-pdf"}  # the pdf folder is opened first, whole
    assert "folders (2 categories of 4 skills)" in memory.ranker.describe(skills)
    flat = [s for s in skills if "pdf" in s.name]  # one folder: no folder organisation
    assert folder_categories(flat) is None


def test_a_library_beside_the_memory_is_ranked_as_one_corpus() -> None:
    library, own = _memory(DESCRIPTIONS[:4]), SkillMemory(HashEmbedder(64))
    own.add(Skill(name="mine", description="Email the weekly report to the team.", body="x"))
    joint = JointMemory(library, own)
    dense = joint.retrieve("email the report", 2)
    joint.ranker = Ranker("bm25")
    hits = joint.retrieve("email the report", 5)
    assert [s.name for s, _ in hits][:1] == ["mine"]
    assert {s.name for s, _ in hits} <= {"mine", "s1"}
    joint.ranker = None
    assert joint.retrieve("email the report", 2) == dense


# --------------------------------------------------------------------------------------------- the axis
def test_the_axes_tag_the_label_set_index_body_and_refuse_lens() -> None:
    config = StreamConfig(condition="task+text", retrieval="bm25", retrieval_text="description+body")
    assert config.condition_label() == "task+text[bm25][description+body]"
    assert config.memory.index_body is True
    assert StreamConfig(condition="task+text", memory={"index_body": True}).retrieval_text == "description+body"
    assert StreamConfig(condition="task+text").condition_label() == "task+text"
    with pytest.raises(ValueError, match="retrieval 'hybrid' chooses the top-k skills of flat reuse"):
        StreamConfig(condition="task+text", retrieval="hybrid", reuse="lens")
    with pytest.raises(ValueError, match="retrieval"):
        StreamConfig(condition="task+text", retrieval="sparse")  # type: ignore[arg-type]


def _run(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    code, out, err = main_cli(argv, monkeypatch, capsys)
    assert code == 0, err
    return out, err


@pytest.mark.slow
def test_each_mode_runs_a_stream_end_to_end_on_two_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Through the mock server (role play, replies that fail as well as succeed): one ``run`` per mode and env, a
    resume under another mode refused, the mode recorded in config.json."""
    with MockServer(RolePlay(fail_rate=0.3, seed=2)) as server:
        for env in ("apps", "office"):
            for mode in ("dense", "bm25", "hybrid", "hierarchical"):
                out = tmp_path / f"{env}-{mode}"
                _, err = _run(["run", "--env", env, "--condition", "task+text", "--limit", "3", "--model",
                               f"mock@{server.url}", "--embedder", "hash:64", "--no-progress", "-c",
                               f"retrieval={mode}", "--out", str(out)], monkeypatch, capsys)
                config = json.loads((out / "config.json").read_text())
                assert config["config"]["retrieval"] == mode
                records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
                assert len(records) == 3
                if mode == "hierarchical":
                    assert "retrieval: hierarchical: a growing memory has no organisation" in " ".join(err.split())
                if mode == "dense":
                    assert "retrieval:" not in err
        code, _, err = main_cli(["run", "--env", "apps", "--condition", "task+text", "--limit", "3", "--model",
                                 f"mock@{server.url}", "--embedder", "hash:64", "--no-progress", "-c",
                                 "retrieval=bm25", "--out", str(tmp_path / "apps-dense")], monkeypatch, capsys)
        assert code == 2
        assert "retrieval" in err


@pytest.mark.slow
def test_a_grid_lists_the_modes_and_the_report_compares_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped spec (a source phase, then the same tasks over its frozen library under every mode and text)
    through the mock server; the report's retrieval table has one row per setting with Hit@k over the labelled
    tasks (the library's provenance)."""
    spec = Path(__file__).parents[2] / "experiments" / "retrieval-modes.yaml"
    with MockServer(RolePlay(fail_rate=0.3, seed=5)) as server:
        _, err = _run(["grid", str(spec), "--limit", "3", "--out", str(tmp_path / "grid"), "--embedder", "hash:64",
                       "--no-progress", "-c", "models.default.model=mock", "-c",
                       f"models.default.base_url={server.url}"], monkeypatch, capsys)
    assert "retrieval: bm25 (bm25s" in err
    runs = load_runs([tmp_path / "grid"])
    assert {run.log.config.retrieval for run in runs} == {"dense", "bm25", "hybrid", "hierarchical"}
    report = build_report(runs, metric="success")
    rows = report.table("retrieval").rows
    frozen = [row for row in rows if row["library"] != "own memory"]
    assert len(frozen) == 2 * 4 * 2  # envs x modes x texts
    assert {(row["retrieval"], row["retrieval_text"]) for row in frozen} == {
        (mode, text) for mode in ("dense", "bm25", "hybrid", "hierarchical")
        for text in ("description", "description+body")}
    assert {row["condition"] for row in frozen} == {"task+text+library"}
    labelled = [row for row in frozen if row["labelled"]]
    assert labelled
    assert all(0 <= row["hit1_pct"] <= row["hit5_pct"] <= 100 for row in labelled)
    assert all(row["success_low"] <= row["success_pct"] <= row["success_high"] for row in frozen)


def test_the_default_builds_no_ranker_and_a_mode_reaches_every_view(tmp_path: Path) -> None:
    """Dense builds no ranker (today's FAISS search, same records); another mode reaches the memory, its
    own-task views and a library beside the memory."""
    from skilltransfer.memory.scope import OwnTaskLibrary
    from skilltransfer.runner.stream_build import StreamInputs, retrieval_ranker

    library = _memory(DESCRIPTIONS[:4])
    for skill in library:
        skill.provenance = Provenance(source_task_id="t1")
    config = StreamConfig(condition="task+text", retrieval="hierarchical")
    library.ranker = retrieval_ranker(config, StreamInputs())
    view = OwnTaskLibrary(library, library.embedder).memory_for("t1")
    assert view.ranker is library.ranker
    assert len(view.retrieve("bread", 4)) == 4
    org = task_tree(list(library))
    from skilltransfer.memory.organization import LibraryView

    ranker = retrieval_ranker(config, StreamInputs(organization=LibraryView(org, list(library))))
    assert ranker.organization is org
    with pytest.raises(InputError):
        StreamConfig(condition="task", organization=str(tmp_path)).check_skill_exec()
