"""ATIF in: trajectories other tools write (Harbor job folders, Claude Code, Codex, OpenHands, a pre-1.5 writer, and
real files another project published, when its mirror is here) read as the toolkit's trajectory view; what cannot be
used is one line each; ``show``, ``view`` and ``score --tasks`` read them; hostile files cost one line, bounded
work, and nothing written."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from atif import Trajectory
from helpers_atif import COUNT_WORDS, ESCAPES, FIX_PERMISSIONS, harbor_job, hostile_cases, other_writers
from helpers_cli import cli, main_cli

from skilltransfer.log import ActionStep, MessageStep, read_steps
from skilltransfer.log.atif_files import looks_like_atif, read_atif, read_outcome
from skilltransfer.log.atif_import import MAX_STEPS, import_atif, render_call, task_text
from skilltransfer.settings.imported import write_imported_runs
from skilltransfer.view import Catalog, ViewServer

MIRROR = Path(__file__).resolve().parents[3] / ".mirror" / "OpenAgentsInc+openagents" / "repo"
"""A bare mirror of OpenAgentsInc/openagents beside the repository (``../.mirror``), when present."""
REAL = {  # (commit, path) -> what it is: ATIF files OpenAgentsInc/openagents (Apache-2.0) published
    ("c526259e8742c0adce7feca87639b8439a2b49d7", "results/trajectories/regex-log/20251211-161750-ba4ddb16/"
     "trajectory.json"): "a Terminal-Bench run of Claude Code in its pre-1.5 shape",
    ("HEAD", "apps/qa-runner/samples/login-trace/trajectory.json"): "its qa-runner's ATIF-v1.7 sample"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("atif-in")
    harbor_job(root / "jobs")
    other_writers(root / "other")
    return root


def test_harbor_job_folder_reads_each_trial_with_its_reward(sources: Path) -> None:
    read = read_atif([sources / "jobs"])
    assert [t.trajectory.task_id for t in read.trajectories] == [
        "count-words__Ab3xQ9k", "fix-permissions__Zz81Lmq", "count-words__Qp2ww7L"]  # time order
    assert [t.reward for t in read.trajectories] == [1.0, 0.0, 1.0]
    assert [t.record.success for t in read.trajectories] == [True, False, True]
    (broken,) = read.unusable  # the cut-off trial: one line naming it
    assert "broken__Xy0/agent/trajectory.json: not JSON" in broken
    first = read.trajectories[0]
    assert first.trajectory.instruction == COUNT_WORDS  # Terminus' Task Description section
    assert first.record.template == "count-words"
    assert first.agent == "terminus-2"
    assert first.trajectory.exit_status == "finished"
    assert read.trajectories[1].trajectory.exit_status == "AgentTimeoutError"
    steps = read_steps(first.trajectory.steps)
    actions = [s for s in steps if isinstance(s, ActionStep)]
    assert actions[0].action == "bash_command(keystrokes='ls -la /app\\n', duration=0.5)"
    assert "root@box:/app# ls -la /app" in actions[0].observation
    summary = [s for s in actions if s.window == 1]  # the summarisation subagent, read from its file
    assert [s.reply for s in summary] == ["Listed /app: notes.txt is there."]
    assert actions[-1].action == "bash_command(keystrokes='cat /app/count.txt\\n', duration=0.5)"  # continuation
    assert len(actions) == 5  # ls, the summary, wc; the continuation's wc and cat (its copied context left out)
    assert first.record.prompt_tokens == 900 + 400 + 900 + 900 + 900
    assert first.record.cost_usd == pytest.approx(0.0024)  # the document's final_metrics
    assert any("is_copied_context" in note for note in first.notes)


def test_other_writers_read_with_one_note_per_deviation(sources: Path) -> None:
    read = read_atif([sources / "other"])
    assert not read.unusable  # package.json is no trajectory: passed over silently
    by_agent = {t.agent: t for t in read.trajectories}
    assert set(by_agent) == {"claude-code", "codex", "openhands-sdk"}
    assert len(read.trajectories) == 4
    claude = next(t for t in read.trajectories if t.session_id == "cc-sess-1")
    assert "agent.version: Field required" in claude.notes[0]
    assert "read anyway" in claude.notes[0]
    steps = read_steps(claude.trajectory.steps)
    task = next(s for s in steps if isinstance(s, ActionStep) and s.action and s.action.startswith("Task("))
    assert task.action == "Task(prompt='make run.sh executable and run it')"  # arguments given as a JSON string
    sub = [s for s in steps if getattr(s, "window", 0) == 1]
    assert isinstance(sub[0], MessageStep)
    assert sub[0].source == "user"
    assert isinstance(sub[1], ActionStep)
    assert "chmod +x" in (sub[1].action or "")
    assert steps.index(sub[0]) == steps.index(task) + 1  # the subagent's steps right after the call that ran it
    codex = by_agent["codex"]
    assert codex.reward == 1.0
    assert codex.trajectory.instruction == COUNT_WORDS
    assert isinstance(read_steps(codex.trajectory.steps)[0], MessageStep)  # its system prompt
    (call,) = codex.trajectory.calls
    assert codex.prompts[call["reasoning"]]["content"] == "wc -w counts words; redirect to the file."
    openhands = by_agent["openhands-sdk"]
    (action,) = [s for s in read_steps(openhands.trajectory.steps) if isinstance(s, ActionStep)]
    assert action.observation == "exit 0"  # the tool step's result, on the call it answers
    legacy = next(t for t in read.trajectories if t.session_id == "legacy-1")
    assert legacy.model == "claude-legacy"
    assert legacy.reward == 1.0
    assert legacy.trajectory.instruction == COUNT_WORDS


def test_render_call_and_task_text() -> None:
    assert render_call({"function_name": "Bash", "arguments": {"command": "ls"}}) == "Bash(command='ls')"
    assert render_call({"name": "Write", "arguments": '{"file_path": "/a"}'}) == "Write(file_path='/a')"
    assert render_call({"function_name": "x", "arguments": "not json"}) == "x(not json)"
    assert task_text("Task Description:\nDo it.\n\nCurrent terminal state:\n$") == "Do it."
    assert task_text("Just a task.") == "Just a task."


def test_outcome_of_harbor_result_shapes() -> None:
    assert read_outcome({"verifier_result": {"rewards": {"reward": 0.5}}}).reward == 0.5
    assert read_outcome({"verifier_result": {"reward": 1}}).reward == 1.0
    assert read_outcome({"verifier_result": {"rewards": {"score": 0.25}}}).reward == 0.25
    assert read_outcome({"verifier_result": None}).reward is None
    assert read_outcome({"config": {"agent": {"name": "a", "model_name": "m"}}}).model == "m"


@pytest.mark.skipif(not MIRROR.is_dir(), reason="the OpenAgentsInc/openagents mirror is not on this machine")
@pytest.mark.parametrize(("commit", "path"), list(REAL), ids=list(REAL.values()))
def test_real_files_another_project_published(commit: str, path: str, tmp_path: Path) -> None:
    shown = subprocess.run(["git", "--git-dir", str(MIRROR), "show", f"{commit}:{path}"], capture_output=True,
                           check=False)
    if shown.returncode:
        pytest.skip(f"{path} is not in this mirror")
    file = tmp_path / "trajectory.json"
    file.write_bytes(shown.stdout)
    read = read_atif([file])
    assert not read.unusable
    (item,) = read.trajectories
    assert item.trajectory.instruction
    assert any(isinstance(s, ActionStep) for s in read_steps(item.trajectory.steps))
    out = cli("show", str(file)).output
    assert item.trajectory.instruction.splitlines()[0] in out


def test_show_lists_and_prints_and_names_what_it_cannot_read(sources: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main_cli(["show", str(sources)], monkeypatch, capsys)
    assert code == 0
    assert "7 ATIF trajectories" in out
    assert "count-words__Ab3xQ9k" in out
    assert err.count("not read:") == 1
    code, out, _ = main_cli(["show", str(sources / "other" / "codex" / "rollout.json")], monkeypatch, capsys)
    assert code == 0
    assert "exec_command(cmd='wc -w < /app/notes.txt > /app/count.txt')" in out
    code, out, _ = main_cli(["show", str(sources), "--task", "fix-permissions__Zz81Lmq"], monkeypatch, capsys)
    assert code == 0
    assert "FAILURE" in out
    assert FIX_PERMISSIONS in out
    code, _, err = main_cli(["show", str(sources), "--task", "99"], monkeypatch, capsys)
    assert code == 2
    assert err.splitlines()[-1].startswith("error:")
    assert err.count("\n") == 2


def test_score_takes_the_first_user_messages_as_tasks(sources: Path, tmp_path: Path) -> None:
    library = tmp_path / "lib"
    for name, text in (("count", "Count words in a file with wc -w"), ("chmod", "Make a script executable")):
        (library / name).mkdir(parents=True)
        (library / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n\n1. Do it.\n")
    report = tmp_path / "scores.json"
    cli("score", str(library), "--tasks", str(sources), "--embedder", "hash:64", "--out", str(report))
    data = json.loads(report.read_text())
    assert data["n_tasks"] == 2  # two distinct instructions among the trajectories (repeats of a task once)


def test_view_shows_imported_trajectories_and_serves_each_as_atif(sources: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    out = cli("view", str(sources), "--export", str(site)).output
    assert "7 trajectories" in out
    files = sorted((site / "atif").rglob("*.json"))
    assert len(files) == 7
    for file in files:
        Trajectory.model_validate_json(file.read_text())
    tasks = sorted((site / "data" / "task").rglob("*.js"))
    assert any("Listed /app: notes.txt is there." in t.read_text() for t in tasks)

    runs = write_imported_runs(tmp_path / "imported", read_atif([sources]).trajectories)
    assert len(runs) == 5  # one run per agent and model
    catalog = Catalog([tmp_path / "imported"])
    index = catalog.index()
    assert not index["problems"]
    terminus = next(r for r in index["runs"] if r["label"].startswith("imported/terminus-2"))
    assert terminus["finished"] == 3
    assert terminus["success"] == pytest.approx(2 / 3)
    with ViewServer(catalog) as server:
        with urllib.request.urlopen(f"{server.url}atif/{terminus['key']}/0.json", timeout=20) as answer:
            document = json.loads(answer.read())
    Trajectory.model_validate(document)
    assert document["steps"][0]["message"] == COUNT_WORDS


# ------------------------------------------------------------------------------------------------- hostile input
@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return hostile_cases(tmp_path_factory.mktemp("hostile"))


@pytest.mark.slow
@pytest.mark.parametrize(("case", "expected"), [
    ("100 MB", "over the 67108864-byte limit (not read)"),
    ("100,000 steps", f"100,000 steps with its subagents, over the {MAX_STEPS:,}-step limit"),
    ("deep nesting", "nests more than 64 levels deep"),
    ("deep subagents", "nests more than 64 levels deep"),
])
def test_a_hostile_file_is_one_line(hostile: dict[str, Path], case: str, expected: str,
                                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    read = read_atif([hostile[case]])
    assert not read.trajectories
    (line,) = read.unusable
    assert line.startswith(str(hostile[case]))
    assert expected in line
    assert "\n" not in line
    library = tmp_path / "lib"
    code, out, err = main_cli(["induce", str(hostile[case]), "--out", str(library), "--model", "scripted:none",
                               "--embedder", "hash:32"], monkeypatch, capsys)
    assert code == 2
    assert err.count("\n") == 2
    assert expected in err
    assert not library.exists()  # nothing written


def test_control_characters_reach_no_terminal(hostile: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (item,) = read_atif([hostile["control characters"]]).trajectories
    assert ESCAPES in item.trajectory.instruction  # kept as data
    for argv in (["show", str(hostile["control characters"])], ["show", str(hostile["control characters"].parent)]):
        code, out, err = main_cli(argv, monkeypatch, capsys)
        assert "\x1b" not in out + err
        assert "\x07" not in out + err
        assert "\x00" not in out + err
    assert "\\x1b]52" in out or "\\x1b" in out


def test_reference_loops_are_named_and_not_followed(hostile: dict[str, Path]) -> None:
    (item,) = read_atif([hostile["subagent_trajectories loop"]]).trajectories
    assert any("already open (a loop)" in note for note in item.notes)
    assert any("referenced again (read once)" in note for note in item.notes)
    windows = {s.get("window") for s in item.trajectory.steps}
    assert windows == {0, 1}  # subagent "a" read once; its own "a" (a loop) not
    (files,) = read_atif([hostile["file reference loop"]]).trajectories
    assert sum("already open (a loop)" in note for note in files.notes) == 2  # the sub's ref back, the continuation
    assert any("not a file name beside the trajectory" in note for note in files.notes)  # ../../huge.json


def test_links_fifos_and_bad_bytes_in_a_folder_are_one_line_each(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "a" / "agent").mkdir(parents=True)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"schema_version": "ATIF-v1.8", "steps": [{"source": "user", "message": "SECRET"}]}))
    (job / "a" / "agent" / "trajectory.json").symlink_to(secret)
    import os

    (job / "b" / "agent").mkdir(parents=True)
    os.mkfifo(job / "b" / "agent" / "trajectory.json")
    (job / "c" / "agent").mkdir(parents=True)
    (job / "c" / "agent" / "trajectory.json").write_bytes(b'{"schema_version": "\xff"}')
    read = read_atif([job])
    assert not read.trajectories
    assert len(read.unusable) == 3
    assert "symbolic link" in read.unusable[0]
    assert "FIFO" in read.unusable[1]
    assert "not UTF-8" in read.unusable[2]
    assert looks_like_atif(job)


def test_crafted_fields_are_a_note_or_a_line_never_a_traceback(sources: Path, tmp_path: Path) -> None:
    from skilltransfer.log.atif import KEY

    cli("view", str(sources / "other" / "codex"), "--export", str(tmp_path / "s"))
    own = json.loads(next((tmp_path / "s" / "atif").rglob("*.json")).read_text())
    assert own["extra"][KEY]["task_id"]  # a document this toolkit wrote (re-exported)
    for step in own["steps"]:
        if step.get("metrics"):
            step["metrics"]["extra"] = {"latency_s": "soon"}
    own["extra"][KEY]["record"] = {"reward": "lots"}
    (tmp_path / "crafted.json").write_text(json.dumps(own))
    mixed = {"schema_version": "ATIF-v1.8", "agent": {"name": "a", "version": "1"}, "steps": [
        {"step_id": 1, "source": "user", "message": "go", "timestamp": "2026-01-01T10:00:00"},
        {"step_id": 2, "source": "agent", "message": "x", "timestamp": "2026-01-01T10:00:05Z",
         "metrics": {"prompt_tokens": 10**400, "completion_tokens": 7, "cost_usd": float("inf")}}],
        "extra": {"reward": 1e308}}
    (tmp_path / "mixed.json").write_text(json.dumps(mixed))
    read = read_atif([tmp_path / "crafted.json", tmp_path / "mixed.json"])
    assert not read.unusable
    crafted = next(t for t in read.trajectories if t.source.endswith("crafted.json"))
    assert not crafted.own
    assert "read as another agent's" in crafted.notes[0]
    timed = next(t for t in read.trajectories if t.source.endswith("mixed.json"))
    assert timed.started == "2026-01-01T10:00:00+00:00"
    assert timed.record.latency_s == 5.0
    assert timed.record.prompt_tokens == 0  # a count no run folder holds: unknown
    assert timed.record.completion_tokens == 7
    assert timed.reward is None
    write_imported_runs(tmp_path / "imported", read.trajectories)  # what view writes reads back through the log
    assert not Catalog([tmp_path / "imported"]).index()["problems"]


def test_a_document_that_is_no_trajectory_is_unusable() -> None:
    from skilltransfer.log.atif_import import UnusableTrajectory

    for document, why in (([1, 2], "not an object"), ({"steps": 3}, "no steps list"),
                          ({"steps": [{"source": "user", "message": "x"}]}, "no agent step")):
        with pytest.raises(UnusableTrajectory, match=why):
            import_atif(document, source="x")
