"""Pairwise judging: verdict parsing and unblinding, W/T/L + preference + task-bootstrap CI on scripted judges,
position bias, episode artifacts (changed files as text), reading run folders, and the ``judge`` command."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers_cli import cli
from helpers_runs import task_record, trajectory_log
from helpers_tinyenv import CounterScript, TinyEnv
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.envs.artifacts import episode_artifacts, render_file, snapshot_workspace
from skilltransfer.errors import InputError
from skilltransfer.judge import (
    PairwiseJudge,
    first_order,
    judge_runs,
    load_judge_prompt,
    load_run,
    parse_verdict,
    unblind,
)
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import ActionStep
from skilltransfer.metrics import bootstrap_ci, pairwise_preference, position_bias
from skilltransfer.runner.stream import StreamConfig, run_stream


@pytest.mark.parametrize(("reply", "verdict"), [
    ("A is right.\nVERDICT: A", "first"), ("verdict: b", "second"), ("VERDICT: **TIE**", "tie"),
    ("VERDICT: B ... on reflection\nVERDICT: A", "first"), ("B", "second"), (" tie. ", "tie"),
    ("Both are fine.", None), ("VERDICT: maybe", None),
])
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) == verdict


def test_unblinding_and_seeded_orders():
    assert [unblind("AB", "first"), unblind("AB", "second"), unblind("BA", "first"), unblind("BA", "second"),
            unblind("BA", "tie")] == ["win", "loss", "loss", "win", "tie"]
    orders = [first_order(0, f"t{i}") for i in range(200)]
    assert orders == [first_order(0, f"t{i}") for i in range(200)]  # seeded
    assert 70 < orders.count("AB") < 130
    assert orders != [first_order(1, f"t{i}") for i in range(200)]


def test_preference_is_w_plus_half_t_over_n_with_a_task_bootstrap_ci():
    outcomes = {"t1": ["win", "win"], "t2": ["tie", "loss"], "t3": ["loss", "loss"], "t4": ["win", "tie"], "t5": []}
    pref = pairwise_preference(outcomes, seed=3)
    assert (pref.wins, pref.ties, pref.losses, pref.n_judgments, pref.n_tasks) == (3, 2, 3, 8, 4)
    assert pref.preference == pytest.approx((3 + 2 / 2) / 8)
    assert (pref.preference, pref.ci_low, pref.ci_high) == bootstrap_ci([1.0, 0.25, 0.0, 0.75], seed=3)
    assert pref.ci_low < pref.preference < pref.ci_high
    with pytest.raises(ValueError, match="unknown outcome 'draw'"):
        pairwise_preference({"t": ["draw"]})
    with pytest.raises(ValueError, match="no judged task"):
        pairwise_preference({"t": []})


def test_position_bias_and_order_consistency():
    bias = position_bias({"t1": [("AB", "win"), ("BA", "loss")],   # always the first shown: inconsistent
                          "t2": [("AB", "win"), ("BA", "win")],    # consistent
                          "t3": [("AB", "tie")]})
    assert (bias.decisive, bias.first_chosen, bias.both_orders, bias.consistent) == (4, 3, 2, 1)
    assert bias.first_share == 0.75
    assert bias.consistency == 0.5


# ------------------------------------------------------------------------------------------------- artifacts
def test_episode_artifacts_render_changed_files_and_the_answer(tmp_path):
    env = TinyEnv([3], workdir=tmp_path / "ws")
    episode = env.start(env.tasks()[0])
    ws = episode.workspace
    (ws / "keep.txt").write_text("same")
    (ws / "old.txt").write_text("bye")
    (ws / "edit.md").write_text("v1")
    before = snapshot_workspace(ws)
    (ws / "old.txt").unlink()
    (ws / "edit.md").write_text("v2 text")
    (ws / "sub").mkdir()
    (ws / "sub" / "new.csv").write_text("a,b\n1,2\n")
    (ws / "blob.bin").write_bytes(bytes(range(256)))
    os.symlink("/etc/passwd", ws / "link.txt")
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["item", "qty"])
    book.active.append(["pens", 4])
    book.save(ws / "sheet.xlsx")
    episode.step("complete_task(answer={'total': 5})")
    episode.evaluate()
    record = episode_artifacts(episode, before)
    episode.close()
    files = {f["path"]: f for f in record["files"]}
    assert sorted(files) == ["blob.bin", "edit.md", "old.txt", "sheet.xlsx", "sub/new.csv"]  # no link, no keep.txt
    assert files["edit.md"] == {"path": "edit.md", "status": "changed", "text": "v2 text"}
    assert files["old.txt"]["status"] == "deleted"
    assert files["sub/new.csv"]["text"] == "a,b\n1,2\n"
    assert files["blob.bin"]["text"] == "(binary file, 256 bytes)"
    assert "pens" in files["sheet.xlsx"]["text"]
    assert "4" in files["sheet.xlsx"]["text"]
    assert record["submitted"] is True
    assert record["answer"] == {"total": 5}
    assert record["unchanged"] == 1
    broken = tmp_path / "b"
    broken.mkdir()
    (broken / "bad.docx").write_bytes(b"not a zip")
    assert render_file(broken, "bad.docx").startswith("(not read: bad.docx: not a valid Office file")


# ------------------------------------------------------------------------------------------------- run folders
def fake_run(path, answers, *, artifacts=True):
    """A run folder with one finished task per answer (artifacts files, or trajectories only)."""
    (path / "trajectories").mkdir(parents=True)
    lines = []
    for index, (task_id, answer) in enumerate(answers.items()):
        name = f"trajectories/t{index}.json"
        steps = [ActionStep(0, None, "r", "t", "x = 1", f"found {answer}").to_dict(),
                 ActionStep(1, None, "r", "t", f"complete_task(answer={answer!r})", "ok", done=True).to_dict()]
        (path / name).write_text(trajectory_log(task_id, f"Solve {task_id}.", steps, position=index).model_dump_json())
        if artifacts:
            (path / "artifacts").mkdir(exist_ok=True)
            (path / "artifacts" / f"t{index}.json").write_text(json.dumps(
                {"submitted": True, "answer": answer, "files": [{"path": "out.txt", "status": "added",
                                                                 "text": f"report {answer}"}]}))
        lines.append(task_record(task_id, name, position=index).model_dump_json())
    (path / "results.jsonl").write_text("\n".join(lines) + "\n")
    return path


def test_load_run_reads_artifacts_or_falls_back_to_the_trajectory(tmp_path):
    run = load_run(fake_run(tmp_path / "a", {"t1": "GOOD", "t2": "bad"}))
    art = run.tasks["t1"]
    assert art.source == "artifacts"
    assert art.instruction == "Solve t1."
    assert art.answer == "GOOD"
    assert art.render(1000) == "Submitted answer: GOOD\nFiles created or changed:\n--- out.txt (added)\nreport GOOD"
    assert art.render(20).endswith("more characters cut]")
    fallback = load_run(fake_run(tmp_path / "b", {"t1": "GOOD"}, artifacts=False)).tasks["t1"]
    assert fallback.source == "trajectory"
    assert fallback.files is None
    text = fallback.render(1000)
    assert "Files: not recorded" in text
    assert "complete_task(answer='GOOD')" in text
    assert "found GOOD" in text
    with pytest.raises(InputError, match="not a run folder"):
        load_run(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.jsonl").write_text('{"task_id": "x"}\n')
    with pytest.raises(InputError, match=r"results.jsonl:1: field 'run'"):  # read as the log's typed record
        load_run(tmp_path / "c")
    rest = '"calls": [], "contexts": [], "task_id": "t1", "position": 0, "instruction": "Solve t1."'
    for bad, reason in (("[]", "not a trajectory"), ('{"steps": {}, ' + rest + "}", "not a trajectory: field 'steps'"),
                        ('{"steps": [{"type": "ActionStep", "action": 3}], ' + rest + "}", r"steps\[0\]")):
        folder = fake_run(tmp_path / f"bad{len(bad)}", {"t1": "GOOD"}, artifacts=False)
        (folder / "trajectories" / "t0.json").write_text(bad)  # written by whoever shared the folder
        with pytest.raises(InputError, match=reason):
            load_run(folder)


def test_load_run_reads_a_real_stream_folder(tmp_path):
    env = TinyEnv([3, 4], workdir=tmp_path / "ws")
    run_stream(env, ScriptedModel(CounterScript()), StreamConfig(run="r", runs_dir=str(tmp_path), condition="task"))
    run = load_run(tmp_path / "r")
    assert list(run.tasks) == ["tiny/0", "tiny/1"]
    art = run.tasks["tiny/1"]
    assert art.source == "artifacts"  # the stream writes artifacts/<task file>.json
    assert art.submitted
    assert art.files == []  # the counter world keeps no files
    record = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()][1]
    saved = json.loads((tmp_path / "r" / "artifacts" / Path(record["trajectory"]).name).read_text())
    assert (saved["task_id"], saved["submitted"], saved["files"]) == ("tiny/1", True, [])
    shutil.rmtree(tmp_path / "r" / "artifacts")  # a run folder from before artifacts: the trajectory fallback
    art = load_run(tmp_path / "r").tasks["tiny/1"]
    assert art.source == "trajectory"
    assert art.submitted
    assert "complete_task()" in art.final_action
    assert art.instruction == "Set the counter to 4."


# ------------------------------------------------------------------------------------------------- judging
def prefers_good(messages):
    """A scripted judge that prefers the artifact whose answer is GOOD (ties when neither or both are)."""
    prompt = messages[0]["content"]
    first = "GOOD" in prompt.split("# Result A")[1].split("# Result B")[0]
    second = "GOOD" in prompt.split("# Result B")[1]
    label = "TIE" if first == second else ("A" if first else "B")
    return f"Reasoning.\nVERDICT: {label}"


def test_scripted_judge_aggregates_w_t_l_and_measures_position_bias(tmp_path):
    a = load_run(fake_run(tmp_path / "a", {"t1": "GOOD", "t2": "GOOD", "t3": "bad", "t4": "GOOD"}))
    b = load_run(fake_run(tmp_path / "b", {"t1": "bad", "t2": "GOOD", "t3": "GOOD", "t5": "GOOD"}))
    model = ScriptedModel(prefers_good)
    report = judge_runs(PairwiseJudge(model), a, b, seed=0, orders="both", repeats=1)
    pref = report.preference
    assert (pref.wins, pref.ties, pref.losses, pref.n_tasks) == (2, 2, 2, 3)
    assert pref.preference == pytest.approx(0.5)
    assert (report.only_in_a, report.only_in_b) == (["t4"], ["t5"])
    assert report.bias.consistency == 1.0
    assert report.bias.first_share == 0.5
    assert {j.order for j in report.judgments if j.task_id == "t1"} == {"AB", "BA"}
    assert report.judgments[0].order == first_order(0, "t1")
    assert len(model.calls) == 6
    assert "max_tokens" not in model.params[0]  # no hidden cap: the provider's default, as the study
    capped = ScriptedModel(prefers_good)
    judge_runs(PairwiseJudge(capped, max_tokens=300), a, b, orders="one", repeats=1, limit=1)
    assert capped.params[0]["max_tokens"] == 300
    data = report.to_dict()
    assert data["prompt_id"] == load_judge_prompt().id
    assert data["preference"]["wins"] == 2
    assert data["artifact_sources"] == {"a": {"artifacts": 3, "trajectory": 0}, "b": {"artifacts": 3, "trajectory": 0}}
    one = judge_runs(PairwiseJudge(ScriptedModel(prefers_good)), a, b, orders="one", repeats=1)
    assert len(one.judgments) == 3
    assert one.bias.both_orders == 0


def test_a_judge_that_always_picks_the_first_shown_is_exposed(tmp_path):
    a = load_run(fake_run(tmp_path / "a", {f"t{i}": "GOOD" for i in range(10)}))
    b = load_run(fake_run(tmp_path / "b", {f"t{i}": "bad" for i in range(10)}))
    report = judge_runs(PairwiseJudge(ScriptedModel(lambda m: "VERDICT: A")), a, b)  # the defaults: balanced, 3
    assert report.bias.first_share == 1.0
    assert report.bias.consistency == 0.0
    assert report.preference.preference == pytest.approx(0.5)  # balanced orders: the first-shown bias cancels
    assert report.preference.wins == report.preference.losses == 15


def test_unparsed_replies_are_reasked_then_left_out(tmp_path):
    a = load_run(fake_run(tmp_path / "a", {"t1": "GOOD", "t2": "GOOD"}))
    b = load_run(fake_run(tmp_path / "b", {"t1": "bad", "t2": "bad"}))
    replies = iter(["hmm", "VERDICT: A", "no idea", "still no idea", "VERDICT: B", "VERDICT: A"])
    model = ScriptedModel(lambda m: next(replies))
    report = judge_runs(PairwiseJudge(model), a, b, orders="both", repeats=1)
    assert [j.error for j in report.judgments] == [None, "unparsed: no verdict line", None, None]
    assert report.unparsed == 1
    assert report.preference.n_judgments == 3
    assert model.calls[1][-1]["content"].startswith("Reply with your verdict")


def test_judge_command_writes_json_and_prints_the_table(tmp_path):
    fake_run(tmp_path / "a", {"t1": "GOOD", "t2": "GOOD", "t3": "GOOD"})
    fake_run(tmp_path / "b", {"t1": "bad", "t2": "GOOD", "t3": "bad"})
    script = tmp_path / "judge.jsonl"
    script.write_text("\n".join(json.dumps(r) for r in [
        {"match": r"# Result A\n<<<BEGIN RESULT A \w+>>>\nSubmitted answer: GOOD[^#]*"
                  r"# Result B\n<<<BEGIN RESULT B \w+>>>\nSubmitted answer: GOOD", "reply": "VERDICT: TIE"},
        {"match": r"# Result A\n<<<BEGIN RESULT A \w+>>>\nSubmitted answer: GOOD", "reply": "VERDICT: A"},
        {"reply": "VERDICT: B"}]) + "\n")
    out = tmp_path / "report" / "judge.json"
    result = cli("judge", str(tmp_path / "a"), str(tmp_path / "b"), "--model", f"scripted:{script}",
                 "--out", str(out), "--orders", "both", "--repeats", "1")
    data = json.loads(out.read_text())
    assert data["preference"]["wins"] == 4
    assert data["preference"]["ties"] == 2
    assert data["preference"]["losses"] == 0
    assert data["preference"]["preference"] == pytest.approx(5 / 6)
    assert data["judge_model"] == "scripted"
    assert re.fullmatch(r"judge@[0-9a-f]{8}", data["prompt_id"])
    assert "4/2/0" in result.output
    assert "0.833" in result.output


def test_judge_command_errors_are_one_line(tmp_path):
    fake_run(tmp_path / "a", {"t1": "GOOD"})
    fake_run(tmp_path / "b", {"t9": "GOOD"})
    with pytest.raises(InputError, match="share no finished task"):
        cli("judge", str(tmp_path / "a"), str(tmp_path / "b"), "--model",
            f"scripted:{tmp_path / 'a' / 'results.jsonl'}")
    with pytest.raises(InputError, match="not a run folder"):
        cli("judge", str(tmp_path), str(tmp_path / "b"), "--model", "scripted")
    bad_prompt = tmp_path / "p.md"
    bad_prompt.write_text("Judge {{instruction}} and {{first}}")
    with pytest.raises(InputError, match=r"lacks the placeholder\(s\) \{\{second\}\}"):
        cli("judge", str(tmp_path / "a"), str(tmp_path / "a"), "--prompt", str(bad_prompt))
    result = CliRunner().invoke(app, ["judge", str(tmp_path / "a"), str(tmp_path / "a"), "--orders", "three"])
    assert result.exit_code == 2
    assert "--orders" in result.output


# --------------------------------------------------------------------------------------------- repeats, the table
def test_repeats_judge_each_task_n_times_with_distinct_seeds(tmp_path):
    a = load_run(fake_run(tmp_path / "a", {"t1": "GOOD", "t2": "bad"}))
    b = load_run(fake_run(tmp_path / "b", {"t1": "bad", "t2": "bad"}))
    model = ScriptedModel(prefers_good)
    report = judge_runs(PairwiseJudge(model), a, b, repeats=3, orders="one")
    assert [(j.task_id, j.repeat) for j in report.judgments] == [(t, r) for t in ("t1", "t2") for r in range(3)]
    assert "seed" not in model.params[0]
    assert [p["seed"] for p in model.params[1:3]] == [1, 2]  # a repeat draws afresh (and misses the cache)
    pref = report.preference
    assert (pref.wins, pref.ties, pref.losses, pref.n_judgments, pref.n_tasks) == (3, 3, 0, 6, 2)
    assert pref.preference == pytest.approx(0.75)
    assert report.to_dict()["repeats"] == 3
    both = judge_runs(PairwiseJudge(ScriptedModel(prefers_good)), a, b, repeats=2, orders="both")
    assert len(both.judgments) == 8
    assert both.bias.both_orders == 4  # each task's pair of orders, per repeat
    with pytest.raises(InputError, match="--repeats must be at least 1"):
        judge_runs(PairwiseJudge(model), a, b, repeats=0)


def test_the_defaults_are_the_studys_three_judgments_per_task_with_balanced_orders(tmp_path):
    tasks = {f"t{i}": "GOOD" for i in range(6)}
    a = load_run(fake_run(tmp_path / "a", tasks))
    b = load_run(fake_run(tmp_path / "b", dict.fromkeys(tasks, "bad")))
    model = ScriptedModel(prefers_good)
    report = judge_runs(PairwiseJudge(model), a, b, seed=4)
    assert (report.orders, report.repeats) == ("balanced", 3)
    by_task: dict[str, list[str]] = {}
    for j in report.judgments:
        by_task.setdefault(j.task_id, []).append(j.order)
    assert all(len(orders) == 3 for orders in by_task.values())  # 3 judgments per task, not 3 per order
    assert all(o[0] != o[1] and o[0] == o[2] for o in by_task.values())  # alternating within a task
    shown = [o for orders in by_task.values() for o in orders]
    assert shown.count("AB") == shown.count("BA") == 9  # both orders equally often over the tasks
    assert {o[0] for o in by_task.values()} == {"AB", "BA"}
    assert [p.get("seed") for p in model.params[:3]] == [None, 1, 2]  # each judgment of a task draws afresh
    assert report.bias.both_orders == 6  # judgments 1 and 2 of each task form an order pair
    assert report.preference.wins == 18


def test_report_tables_judge_reports_over_repeats_and_envs(tmp_path):
    from skilltransfer.report.judgments import find_judgments, judgment_table

    grid = tmp_path / "grid"
    for env, answers_a in (("office", {"t1": "GOOD", "t2": "GOOD"}), ("datasci", {"t3": "GOOD", "t4": "bad"})):
        fake_run(grid / env / "metaskill", answers_a)
        fake_run(grid / env / "nl-sop", dict.fromkeys(answers_a, "bad"))
        cli("judge", str(grid / env / "metaskill"), str(grid / env / "nl-sop"), "--model", "scripted:" + str(
            _script(tmp_path)), "--repeats", "3", "--orders", "one", "--out", str(grid / f"{env}.judge.json"))
    files = find_judgments([grid])
    assert [f.name for f in files] == ["datasci.judge.json", "office.judge.json"]
    table = judgment_table(files)
    rows = {row["env"]: row for row in table.rows}
    assert set(rows) == {"office", "datasci", "(all envs)"}  # runs without config.json: labels from folder names
    office, pooled = rows["office"], rows["(all envs)"]
    assert (office["a"], office["b"], office["repeats"], office["wtl"]) == ("metaskill", "nl-sop", "3", "6/0/0")
    assert (pooled["tasks"], pooled["judgments"], pooled["wtl"]) == (4, 12, "9/3/0")
    assert pooled["preference"] == pytest.approx(7 / 8)
    assert pooled["ci_low"] <= pooled["preference"] <= pooled["ci_high"]


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "judge.jsonl"
    if not script.exists():
        script.write_text("\n".join(json.dumps(r) for r in [
            {"match": r"# Result A\n<<<BEGIN RESULT A \w+>>>\nSubmitted answer: GOOD[^#]*"
                      r"# Result B\n<<<BEGIN RESULT B \w+>>>\nSubmitted answer: GOOD", "reply": "VERDICT: TIE"},
            {"match": r"# Result A\n<<<BEGIN RESULT A \w+>>>\nSubmitted answer: GOOD", "reply": "VERDICT: A"},
            {"match": r"# Result B\n<<<BEGIN RESULT B \w+>>>\nSubmitted answer: GOOD", "reply": "VERDICT: B"},
            {"reply": "VERDICT: TIE"}]) + "\n")
    return script
