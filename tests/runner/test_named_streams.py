"""Curated (named) streams of an env, and transfer events in a run's summary."""

from __future__ import annotations

import json

import pytest
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.envs.apps import AppsEnv
from skilltransfer.envs.opening import select_tasks
from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import InducedSkill, RetrievedSkill, TaskRecord
from skilltransfer.report.events import transfer_events
from skilltransfer.report.summary import summarize_run


class StreamedTinyEnv(TinyEnv):
    """The counter world with one curated stream (a test helper)."""

    streams = {"warmup": ("tiny/2", "tiny/0")}


def test_named_stream_keeps_its_order_and_limit(tmp_path):
    env = StreamedTinyEnv([3, 5, 2], workdir=tmp_path)
    assert [t.id for t in select_tasks(env, stream="warmup")] == ["tiny/2", "tiny/0"]
    assert [t.id for t in select_tasks(env, stream="warmup", limit=1)] == ["tiny/2"]
    assert sorted(t.id for t in select_tasks(env, stream="warmup", order_seed=3)) == ["tiny/0", "tiny/2"]


def test_positions_pick_from_the_ordered_and_cut_stream(tmp_path):
    """``positions`` index the stream after its order and limit (what ``task_positions`` and ``--only-tasks`` mean),
    in the order given; one past the stream is refused."""
    env = StreamedTinyEnv([3, 5, 2, 4], workdir=tmp_path)
    ordered = [t.id for t in select_tasks(env, order_seed=2, limit=3)]
    assert [t.id for t in select_tasks(env, order_seed=2, limit=3, positions=[2, 0])] == [ordered[2], ordered[0]]
    assert [t.id for t in select_tasks(env, stream="warmup", positions=[1])] == ["tiny/0"]
    with pytest.raises(InputError, match="position 3 is outside the stream's 3 tasks"):
        select_tasks(env, order_seed=2, limit=3, positions=[3])


def test_named_stream_errors(tmp_path):
    with pytest.raises(InputError, match="choose one of: warmup"):
        select_tasks(StreamedTinyEnv(workdir=tmp_path), stream="nope")
    with pytest.raises(InputError, match="defines no named streams"):
        select_tasks(TinyEnv(workdir=tmp_path), stream="warmup")
    with pytest.raises(InputError, match="lacks: tiny/2"):
        select_tasks(StreamedTinyEnv([3, 5], workdir=tmp_path), stream="warmup")


def test_apps_starter_stream_is_real_difficulty_one_tasks():
    env = AppsEnv(sandboxed=False)
    tasks = select_tasks(env, stream="starter")
    assert len(tasks) == len(AppsEnv.streams["starter"]) >= 4
    assert all(t.difficulty == 1 and "contacts" in t.apps for t in tasks)
    assert len({t.template for t in tasks}) >= 3  # different tasks sharing one sub-procedure


def _record(position: int, *, retrieved: tuple[str, ...] = (), induced: str | None = None,
            status: str = "added", target: str | None = None, success: bool = True) -> TaskRecord:
    return TaskRecord(
        run="r", condition="task+text", position=position, task_id=f"t{position}", difficulty=1, template="x",
        reward=float(success), success=success, exit_status="submitted", steps=1, subtasks=1, latency_s=1.0,
        model_calls=1, prompt_tokens=1, completion_tokens=1, dependency=1, peak_context=1, tokens_by_role={},
        retrieved=[RetrievedSkill(skill_id=s, name=f"skill-{s}", format="text", score=0.9, subtask_index=i,
                                  query_kind="subtask", source_task_id=None, source_position=None)
                   for i, s in enumerate(retrieved)],
        induced=[] if induced is None else [InducedSkill(subtask_index=None, status=status, skill_id=induced,
                                                         skill_name=induced, target_id=target, reason="",
                                                         prompt_id="p")],
        memory_size=0, trajectory="x")


def test_transfer_events_from_records():
    records = [
        _record(0, induced="a"),
        _record(1, retrieved=("a", "a", "lib"), induced="b", status="merged", target="a", success=False),
        _record(2, retrieved=("b", "a"), induced="c", status="dropped"),
        _record(3, retrieved=("c",)),
    ]
    events = [(e.target_position, e.skill_name, e.source_position, e.target_success)
              for e in transfer_events(records)]
    # a library skill ("lib") and a dropped induction ("c") are not transfer; "b" was merged into "a"
    assert events == [(1, "skill-a", 0, False), (2, "skill-b", 1, True), (2, "skill-a", 0, True)]


def test_library_transfer_events_from_records():
    """With a frozen library, a retrieved skill no task of the run induced is a library event (once per task and
    skill, best score, its recorded source task); a planted distractor is none; skills the run induced stay
    within-run events."""
    records = [
        _record(0, retrieved=("lib", "lib", "noise"), induced="a"),
        _record(1, retrieved=("a", "lib")),
    ]
    records[0].retrieved[1].score = 0.95
    records[0].retrieved[1].source_task_id = "src/3"
    records[0].retrieved[2].source_task_id = "distractor/cooking"
    events = [(e.kind, e.target_position, e.skill_id, e.source_position, e.source, e.score)
              for e in transfer_events(records, "run source/x")]
    assert events == [("library", 0, "lib", None, "run source/x", 0.95),
                      ("within-run", 1, "a", 0, "", 0.9), ("library", 1, "lib", None, "run source/x", 0.9)]
    assert [e.kind for e in transfer_events(records)] == ["within-run"]  # no library: within-run events only
    assert transfer_events(records, "run source/x")[0].source_task_id == "src/3"


def test_library_event_source_names_the_source_run_or_library():
    from skilltransfer.settings.config import StreamConfig

    base = {"run": "r", "env": {"env": "apps"}, "model": {"name": "openai", "model": "m"}, "condition": "task+text"}
    assert StreamConfig.model_validate(base).library_event_source() is None
    grid = StreamConfig.model_validate({**base, "runs_dir": "/out",
                                        "library": "/out/source/apps/m/subtask+text/memory"})
    assert grid.library_event_source() == "run source/apps/m/subtask+text"
    snap = StreamConfig.model_validate({**base, "library": "/elsewhere/run1/memory", "library_snapshot": 4})
    assert snap.library_event_source() == "run /elsewhere/run1@4"
    assert StreamConfig.model_validate({**base, "library": "data/demo_library"}).library_event_source() == (
        "library data/demo_library")


def test_the_report_names_the_library_a_run_read_by_its_path_under_the_runs_folder():
    """`frozen_library_name` (the report's note on an empty library) and `skills_read_label` (the execution-mode
    and organisation tables' ``library`` column, the viewer's ``library``): one path rule, a run's memory folder named
    by its run folder, inside the runs folder or not."""
    from skilltransfer.settings.config import StreamConfig

    base = {"run": "r", "env": {"env": "apps"}, "model": {"name": "openai", "model": "m"}, "condition": "task+text"}
    own = StreamConfig.model_validate(base)
    assert own.frozen_library_name() is None
    assert own.skills_read_label() == "own memory"
    grid = StreamConfig.model_validate({**base, "runs_dir": "/out", "library": "/out/source/apps/m/task+text/memory"})
    assert grid.frozen_library_name() == grid.skills_read_label() == "source/apps/m/task+text"
    outside = StreamConfig.model_validate({**base, "runs_dir": "/out", "library": "/elsewhere/run1/memory"})
    assert outside.frozen_library_name() == "/elsewhere/run1"
    relative = StreamConfig.model_validate({**base, "library": "runs/src/apps/m/task+text/memory"})
    assert relative.frozen_library_name() == "src/apps/m/task+text"  # runs_dir "runs": relative to it too
    beside = StreamConfig.model_validate({**base, "library": "data/demo_library", "library_use": "beside",
                                          "reuse": "flat"})
    assert beside.frozen_library_name() == "data/demo_library"
    assert beside.skills_read_label() == "data/demo_library + own memory"


def test_show_lists_transfer_events(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        result = CliRunner().invoke(app, [
            "run", "--env", "helpers_tinyenv:TinyEnv", "--condition", "task+text", "--model", "openai/mock",
            "--base-url", server.url, "--api-key", "x", "--embedder", "hash:128",
            "--out", str(out), "--no-sandbox", "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = summarize_run(out)
    assert [(e.source_position, e.target_position) for e in summary.transfers] == [(0, 1), (0, 2)]
    shown = CliRunner().invoke(app, ["show", str(out)]).output
    assert "2 events in 2 tasks (2 solved)" in shown
    assert "<- 'set_counter_value' from task 1 tiny/0" in shown  # task numbers are 1-based where people read
    data = json.loads(CliRunner().invoke(app, ["show", str(out), "--json"]).output)
    assert data["transfers"][0]["source_task_id"] == "tiny/0"
