"""``skilltransfer induce``: skills induced from other agents' ATIF trajectories through the mock server, written as
an Agent Skills library the reference validator accepts, each skill naming its source trajectory; successful
trajectories only by default; subtask level with the segmenter (or a run's own subtasks); resumable; failing
replies cost a skill, not the run; the library then works with ``score``, ``library export`` and ``run --library``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers_agentskills import assert_valid_agent_skills
from helpers_atif import harbor_job, other_writers
from helpers_cli import cli, main_cli, records_of, run_tiny

from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import CONTENT_FAULTS, MockServer
from skilltransfer.llm.testing.roleplay import RolePlay, make_role_play
from skilltransfer.log import RunFolder
from skilltransfer.log.atif_files import read_atif
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import read_library
from skilltransfer.runner.induce import STATE, InduceOptions, induce_library
from skilltransfer.settings.config import ModelSpec
from skilltransfer.view import Catalog


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("induce-sources")
    harbor_job(root / "jobs")
    other_writers(root / "other")
    return root


def induce(server: MockServer, *args: str) -> Any:
    return cli("induce", *args, "--model", "openai/mock", "--base-url", server.url, "--api-key", "x",
               "--embedder", "hash:64")


def test_a_valid_library_whose_skills_name_their_source(sources: Path, tmp_path: Path) -> None:
    library = tmp_path / "lib"
    play = make_role_play("")
    with MockServer(play) as server:
        out = induce(server, str(sources), "--out", str(library), "--price", "2.5,10").output
    assert "induced from 4 of 7 trajectories (skipped: 2 no reward known; 1 reward below 1)" in out
    assert "$0.0" in out
    assert "not read:" in out
    folders = assert_valid_agent_skills(library)
    skills = read_library(library).skills
    assert len(skills) == len(folders) >= 1
    sources_read = {t.source: t for t in read_atif([sources]).trajectories}
    for skill in skills:
        source = sources_read[skill.extra["source_file"]]  # each skill names the file it was induced from
        assert skill.provenance.source_task_id == source.trajectory.task_id
        assert skill.extra["source_agent"] == source.agent
        assert skill.extra["source_reward"] == "1"
        assert skill.extra["inducer_model"] == "mock"
        assert source.success
    for folder in folders:  # the Agent Skills metadata carries the source
        text = (folder / "SKILL.md").read_text()
        assert "skilltransfer.extra.source_file:" in text
        assert "skilltransfer.extra.source_session:" in text
    records = RunFolder(library / STATE).read_records()
    assert len(records) == 7
    assert sum(r.model_calls for r in records) == play.roles["inducer"] == 4
    assert {i.status for r in records for i in r.induced} >= {"added", "skipped"}
    assert all(r.cost_usd is not None for r in records if r.model_calls)
    index = Catalog([library / STATE]).index()  # view shows what was induced from what
    assert not index["problems"]
    assert index["runs"][0]["finished"] == 7


def test_all_induces_every_trajectory_and_a_rerun_resumes(sources: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    library = tmp_path / "lib"
    play = make_role_play("")
    with MockServer(play) as server:
        induce(server, str(sources), "--out", str(library), "--source", "all", "--limit", "3")
        assert play.roles["inducer"] == 3
        out = induce(server, str(sources), "--out", str(library), "--source", "all").output
        assert play.roles["inducer"] == 7  # the first three were not induced again
        assert "(3 done before, resumed)" in out
        code, _, err = main_cli(["induce", str(sources), "--out", str(library), "--source", "all", "--format", "code",
                                 "--model", "openai/mock", "--base-url", server.url, "--api-key", "x",
                                 "--embedder", "hash:64"], monkeypatch, capsys)
    assert code == 2
    assert "started with different settings" in err
    assert "skill_format" in err
    assert len(RunFolder(library / STATE).read_records()) == 7
    assert_valid_agent_skills(library)


def _options(**kwargs: Any) -> InduceOptions:
    return InduceOptions(embedder="hash:64", **kwargs)


class Interrupting:
    """A role play that stops the process (KeyboardInterrupt) at its ``at``-th call."""

    def __init__(self, at: int) -> None:
        self.play, self.at, self.n = RolePlay(), at, 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.n += 1
        if self.n == self.at:
            raise KeyboardInterrupt
        return self.play(messages)


def test_an_interrupted_induce_resumes_to_the_library_of_an_uninterrupted_one(sources: Path, tmp_path: Path) -> None:
    items = read_atif([sources]).trajectories
    embedder = HashEmbedder(64)
    whole = induce_library(items, tmp_path / "whole", ScriptedModel(RolePlay()), ModelSpec(), _options(source="all"),
                           embedder=embedder)
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        induce_library(items, cut, ScriptedModel(Interrupting(4)), ModelSpec(), _options(source="all"),
                       embedder=embedder)
    assert len(RunFolder(cut / STATE).read_records()) == 3  # three committed, the fourth not
    again = induce_library(items, cut, ScriptedModel(RolePlay()), ModelSpec(), _options(source="all"),
                           embedder=embedder)
    assert again.resumed == 3
    assert again.skills == whole.skills
    names = sorted(p.name for p in cut.iterdir() if not p.name.startswith("."))
    assert names == sorted(p.name for p in (tmp_path / "whole").iterdir() if not p.name.startswith("."))


def test_subtask_level_segments_other_agents_and_keeps_a_runs_own_subtasks(sources: Path, tmp_path: Path) -> None:
    play = make_role_play("")
    with MockServer(play) as server:
        induce(server, str(sources / "jobs"), "--out", str(tmp_path / "foreign"), "--level", "subtask")
        assert play.roles["segmenter"] == 2  # one call per induced trajectory of two steps or more
        run_tiny(server, tmp_path / "runs" / "sub", "subtask+text", (3, 5))
        cli("export", str(tmp_path / "runs" / "sub"), "--format", "atif", "--out", str(tmp_path / "atif"))
        induce(server, str(tmp_path / "atif"), "--out", str(tmp_path / "own"), "--level", "subtask",
               "--source", "all")
        assert play.roles["segmenter"] == 2  # the run's own subtasks: no segmentation call
    records = RunFolder(tmp_path / "foreign" / STATE).read_records()
    assert [len(r.induced) for r in records if r.success] == [2, 2]  # the role play's two halves
    own = RunFolder(tmp_path / "own" / STATE).read_records()
    assert [[i.subtask_index for i in r.induced] for r in own] == [[0, 1], [0, 1]]  # the planner's subtasks
    skills = read_library(tmp_path / "own").skills
    assert {s.level for s in skills} == {"subtask"}
    assert_valid_agent_skills(tmp_path / "own")


def test_failing_replies_cost_a_skill_not_the_run(sources: Path, tmp_path: Path) -> None:
    with MockServer(make_role_play("fail_rate=0.5,seed=3"), fault_rate=0.3, fault_kinds=CONTENT_FAULTS,
                    seed=2) as server:
        out = induce(server, str(sources), "--out", str(tmp_path / "lib"), "--source", "all").output
    assert "unparseable" in out
    records = RunFolder(tmp_path / "lib" / STATE).read_records()
    assert len(records) == 7
    if any(i.status == "added" for r in records for i in r.induced):
        assert_valid_agent_skills(tmp_path / "lib")


def test_the_induced_library_works_with_score_export_and_run(sources: Path, tmp_path: Path) -> None:
    library = tmp_path / "lib"
    with MockServer(make_role_play("")) as server:
        induce(server, str(sources), "--out", str(library), "--source", "all")
        report = tmp_path / "scores.json"
        cli("score", str(library), "--tasks", str(sources), "--embedder", "hash:64", "--out", str(report))
        assert json.loads(report.read_text())["n_tasks"] == 2
        cli("library", "export", str(library), "--out", str(tmp_path / "exported"))
        assert_valid_agent_skills(tmp_path / "exported")
        run_tiny(server, tmp_path / "run", "task", (3,), "--library", str(library))
    (record,) = records_of(tmp_path / "run")
    assert record["retrieved"]
    assert record["retrieved"][0]["source_task_id"]


def test_bad_output_folders_and_nothing_to_read_are_refused(sources: Path, tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="neither empty nor an earlier induce output"):
        cli("induce", str(sources), "--out", str(used), "--model", "scripted:none")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no ATIF trajectory could be read"):
        cli("induce", str(empty), "--out", str(tmp_path / "lib"), "--model", "scripted:none")
    assert not (tmp_path / "lib").exists()
    with pytest.raises(InputError, match="--source lessons writes text lessons"):
        cli("induce", str(sources), "--out", str(tmp_path / "lib"), "--source", "lessons", "--format", "code")
