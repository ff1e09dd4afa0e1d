"""The stream runner: all six conditions, the log folder, dedup/pruning, resume, frozen and filtered libraries."""

from __future__ import annotations

import json
import re

import pytest
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, SimulatedCrash, TinyEnv, role_of, task_start

from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import FORMAT_VERSION, RunFolder, TaskRecord, TrajectoryLog, safe_task_id
from skilltransfer.memory.library import export_jsonl
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import CONDITIONS, StreamConfig, parse_condition
from skilltransfer.skill import Skill

TARGETS = [3, 5, 2]


def run(tmp_path, condition, *, name=None, script=None, embedder=None, targets=TARGETS, **cfg):
    script = script or CounterScript(CODE_SKILL if condition.endswith("code") else TEXT_SKILL)
    model = ScriptedModel(script)
    config = StreamConfig(run=name or condition.replace("+", "_"), runs_dir=str(tmp_path / "runs"),
                          condition=condition, **cfg)
    env = TinyEnv(targets, workdir=tmp_path / "ws" / config.run)
    summary = run_stream(env, model, config, embedder=embedder)
    return summary, model, script


def records_of(path):
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def trajectory_of(path, record):
    return TrajectoryLog.model_validate_json((path / record["trajectory"]).read_text())


@pytest.mark.parametrize("condition", list(CONDITIONS))
def test_conditions_log_everything(tmp_path, condition, hash_embedder):
    level, fmt = CONDITIONS[condition]
    summary, model, _ = run(tmp_path, condition, embedder=hash_embedder)
    path = summary.path
    config = json.loads((path / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION
    assert config["level"] == level
    assert config["skill_format"] == fmt
    assert config["agent"]["step_limit"] == 50
    assert "executor_system" in config["prompt_ids"]
    assert ("induction" in config["prompt_ids"]) == (fmt is not None)
    records = records_of(path)
    assert [r["task_id"] for r in records] == ["tiny/0", "tiny/1", "tiny/2"]
    assert summary.ran == ["tiny/0", "tiny/1", "tiny/2"]
    assert summary.success_rate == 1.0
    for position, record in enumerate(records):
        TaskRecord.model_validate(record)
        assert record["format_version"] == FORMAT_VERSION
        assert record["position"] == position
        assert record["reward"] == 1.0
        assert record["success"] is True
        assert record["steps"] >= 1
        assert record["subtasks"] == (1 if level == "task" else 2)
        assert record["latency_s"] >= 0
        traj = trajectory_of(path, record)
        assert record["trajectory"] == f"trajectories/{safe_task_id(record['task_id'])}.json"
        assert "/" not in record["trajectory"].removeprefix("trajectories/")
        calls = traj.calls
        assert record["model_calls"] == len(calls)
        assert record["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
        assert record["completion_tokens"] == sum(c["completion_tokens"] for c in calls)
        p_c = [(c["prompt_tokens"], c["completion_tokens"]) for c in calls]
        assert record["dependency"] == sum(p * c + c * (c + 1) // 2 for p, c in p_c)
        assert record["peak_context"] == max(p for p, _ in p_c)
        assert sum(r["calls"] for r in record["tokens_by_role"].values()) == len(calls)
        assert sum(r["dependency"] for r in record["tokens_by_role"].values()) == record["dependency"]
        roles = set(record["tokens_by_role"])
        assert roles == {"executor"} | ({"induction"} if fmt else set()) | \
            ({"planner"} if level == "subtask" else set()) | ({"summarizer"} if level == "subtask" else set())
        assert traj.score["success"] is True
        assert sum(s["type"] == "ActionStep" for s in traj.steps) == record["steps"]
        _check_order(traj.steps, memory=fmt is not None)
    if fmt is None:
        assert not (path / "memory").exists()
        assert all(not r["retrieved"] and not r["induced"] for r in records)
        return
    assert (path / "memory" / "manifest.json").is_file()
    assert not (path / "memory.next").exists()
    first, second = records[0], records[1]
    # the memory is empty before the first (sub)task
    assert [r["subtask_index"] for r in first["retrieved"]] == ([] if level == "task" else [1])
    assert first["induced"][0]["status"] == "added"
    assert first["induced"][0]["prompt_id"] == config["prompt_ids"]["induction"]
    hit = next(r for r in second["retrieved"] if r["skill_id"] == first["induced"][0]["skill_id"])
    assert hit["source_position"] == 0
    assert hit["source_task_id"] == "tiny/0"
    executor_prompts = [c for c in model.calls if role_of(c) == "executor"]
    task2_prompts = [c[1]["content"] for c in executor_prompts if "Set the counter to 5" in c[1]["content"]]
    if fmt == "text":  # the text skill induced on task 1 is in task 2's prompt
        assert any("Reset the counter with apis.counter.reset()" in p for p in task2_prompts)
    else:  # the code skill induced on task 1 is called by name on task 2
        traj = trajectory_of(path, second)
        calls = [s for s in traj.steps if s["type"] == "ActionStep" and "set_counter_to(5)" in (s["action"] or "")]
        assert calls
        assert "set_counter_called" not in calls[0]["observation"]
        assert "set_counter_to called" in calls[0]["observation"]
        assert not calls[0]["error"]
    skills = [json.loads(line) for line in (path / "memory" / "skills.jsonl").read_text().splitlines()]
    assert len(skills) == 1
    # counted once per retrieving task: tasks 2 and 3 (and task 1's second subtask at subtask level)
    assert skills[0]["usage"]["times_retrieved"] == (2 if level == "task" else 3)


def _check_order(steps, *, memory):
    """Per (sub)task: retrieval before the first action, induction after the last."""
    key = "subtask_index"
    spans = {}
    for i, step in enumerate(steps):
        spans.setdefault(step.get(key), []).append((i, step["type"]))
    for items in spans.values():
        kinds = [k for _, k in items if k in ("RetrievalStep", "ActionStep", "InductionStep")]
        if not memory:
            assert "RetrievalStep" not in kinds
            assert "InductionStep" not in kinds
            continue
        assert kinds[0] == "RetrievalStep"
        assert kinds[-1] == "InductionStep"
        assert kinds.count("RetrievalStep") == 1
        assert kinds.count("InductionStep") == 1


def test_dedup_and_pruning(tmp_path, hash_embedder):
    longer = CODE_SKILL.replace("    return apis.counter.add(int(target))",
                                "    value = apis.counter.add(int(target))\n    return value")
    broken = CODE_SKILL.replace("DESCRIPTION: Set the counter to a target value.",
                                "DESCRIPTION: Read the counter.").replace("def set_counter_to(target):",
                                                                         "def set_counter_to(target:")
    replies = [CODE_SKILL, longer, broken, "no skill here"]
    script = CounterScript(lambda n, messages: replies[n])
    summary, _, _ = run(tmp_path, "task+code", script=script, embedder=hash_embedder, targets=[3, 5, 2, 4])
    statuses = [[i["status"] for i in r["induced"]] for r in records_of(summary.path)]
    assert statuses == [["added"], ["merged"], ["pruned"], ["unparseable"]]
    records = records_of(summary.path)
    assert records[1]["induced"][0]["target_id"] == records[0]["induced"][0]["skill_id"]
    assert "does not parse" in records[2]["induced"][0]["reason"]
    prune_log = (summary.path / "memory" / "prune_log.jsonl").read_text().splitlines()
    assert len(prune_log) == 1
    assert records[3]["success"] is True  # an unparseable induction never stops the stream
    stored = [json.loads(x) for x in (summary.path / "memory" / "skills.jsonl").read_text().splitlines()]
    assert len(stored) == 1
    assert "value = apis.counter.add" in stored[0]["body"]  # merged: the longer body is kept


def _strip(records):
    return [{k: v for k, v in r.items() if k != "latency_s"} for r in records]


@pytest.mark.parametrize(("condition", "fail_at"), [("task+text", 4), ("subtask+code", 10)])
def test_resume_redoes_only_unfinished_tasks(tmp_path, hash_embedder, condition, fail_at):
    fmt_skill = CODE_SKILL if condition.endswith("code") else TEXT_SKILL
    full, _, _ = run(tmp_path / "a", condition, name="r", embedder=hash_embedder)
    with pytest.raises(SimulatedCrash, match="simulated crash"):
        run(tmp_path / "b", condition, name="r", embedder=hash_embedder,
            script=CounterScript(fmt_skill, fail_at=fail_at))
    partial = records_of(tmp_path / "b" / "runs" / "r")
    assert [r["task_id"] for r in partial] == ["tiny/0"]
    script = CounterScript(fmt_skill)
    resumed, _, _ = run(tmp_path / "b", condition, name="r", embedder=hash_embedder, script=script)
    assert resumed.ran == ["tiny/1", "tiny/2"]
    assert _strip(records_of(resumed.path)) == _strip(records_of(full.path))
    assert (resumed.path / "memory" / "skills.jsonl").read_text() == (full.path / "memory" / "skills.jsonl").read_text()
    again, model, _ = run(tmp_path / "b", condition, name="r", embedder=hash_embedder)
    assert again.ran == []
    assert model.calls == []


def test_resume_after_crash_between_commit_and_memory_swap(tmp_path, hash_embedder, monkeypatch):
    real_swap = RunFolder.swap_memory

    def crash(folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunFolder, "swap_memory", crash)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "task+text", name="r", embedder=hash_embedder)
    path = tmp_path / "runs" / "r"
    assert (path / "memory.next").is_dir()
    assert not (path / "memory").exists()
    monkeypatch.setattr(RunFolder, "swap_memory", real_swap)
    resumed, _, _ = run(tmp_path, "task+text", name="r", embedder=hash_embedder)
    assert resumed.ran == ["tiny/1", "tiny/2"]
    records = records_of(path)
    assert records[1]["retrieved"][0]["source_position"] == 0  # task 1's committed skill survived the crash
    assert not (path / "memory.next").exists()
    assert not (path / "memory.next.task").exists()


def test_uncommitted_memory_snapshot_is_discarded(tmp_path, hash_embedder, monkeypatch):
    real_append = RunFolder._append_result

    def fail_results(self, line):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunFolder, "_append_result", fail_results)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "task+text", name="r", embedder=hash_embedder)
    monkeypatch.setattr(RunFolder, "_append_result", real_append)
    resumed, _, _ = run(tmp_path, "task+text", name="r", embedder=hash_embedder)
    assert resumed.ran == ["tiny/0", "tiny/1", "tiny/2"]
    assert records_of(resumed.path)[0]["retrieved"] == []  # the uncommitted task-1 skill was not kept


def test_a_commit_appends_its_line_instead_of_rewriting_the_results_file(tmp_path):
    config = StreamConfig(run="r", runs_dir=str(tmp_path / "runs"), condition="task")
    results = tmp_path / "runs" / "r" / "results.jsonl"
    seen = []

    def on_task(record):
        seen.append((results.stat().st_ino, results.read_text().count("\n")))

    run_stream(TinyEnv(TARGETS, workdir=tmp_path / "ws"), ScriptedModel(CounterScript(TEXT_SKILL)), config,
               on_task=on_task)
    assert [lines for _, lines in seen] == [1, 2, 3]
    assert len({inode for inode, _ in seen}) == 1  # one file, appended (a rewrite per commit grows with the stream)


def test_a_partial_results_line_is_no_committed_task(tmp_path):
    full, _, _ = run(tmp_path / "a", "task", name="r")
    with pytest.raises(SimulatedCrash, match="simulated crash"):
        run(tmp_path / "b", "task", name="r", script=CounterScript(TEXT_SKILL, fail_at=2))
    path = tmp_path / "b" / "runs" / "r"
    whole = (full.path / "results.jsonl").read_text().splitlines()
    with (path / "results.jsonl").open("a") as fh:
        fh.write(whole[1][:40])  # an append cut off part-way
    assert [r.task_id for r in RunFolder(path).read_records()] == ["tiny/0"]
    assert RunFolder(path).committed() == 1
    resumed, _, _ = run(tmp_path / "b", "task", name="r")
    assert resumed.ran == ["tiny/1", "tiny/2"]
    assert _strip(records_of(resumed.path)) == _strip(records_of(full.path))


def test_rerun_with_other_settings_is_refused(tmp_path, hash_embedder):
    run(tmp_path, "task+text", name="r", embedder=hash_embedder)
    with pytest.raises(InputError, match="different settings"):
        run(tmp_path, "task+code", name="r", embedder=hash_embedder)


def test_condition_errors(tmp_path):
    assert parse_condition("Subtask+Text") == ("subtask", "text")
    with pytest.raises(InputError, match=re.escape("unknown condition 'task+video'; choose one of: task, task+text")):
        parse_condition("task+video")
    with pytest.raises(InputError, match="needs an embedder"):
        run(tmp_path, "task+text")


def test_frozen_library_from_another_run(tmp_path, hash_embedder):
    source, _, _ = run(tmp_path, "subtask+text", name="src", embedder=hash_embedder)
    before = (source.path / "memory" / "skills.jsonl").read_text()
    script = CounterScript()
    frozen, _, _ = run(tmp_path, "task+text", name="frozen", embedder=hash_embedder, script=script,
                       library=str(source.path / "memory"))
    assert "induction" not in script.roles
    records = records_of(frozen.path)
    assert all(r["induced"] == [] for r in records)
    assert all(r["retrieved"] for r in records)
    assert {r["memory_size"] for r in records} == {1}
    assert (source.path / "memory" / "skills.jsonl").read_text() == before
    manifest = json.loads((frozen.path / "memory" / "manifest.json").read_text())
    assert manifest["read_only"] is True
    usage = json.loads((frozen.path / "memory" / "skills.jsonl").read_text().splitlines()[0])["usage"]
    assert usage["times_retrieved"] == 3


def test_library_filtered_by_utility(tmp_path, hash_embedder):
    from skilltransfer.metrics import score_library

    skills = [Skill(name=f"s{i}", description=d, body="b") for i, d in enumerate(
        ["Set the counter to a value.", "Read the counter.", "Add to the counter.", "Send an email to a contact.",
         "Book a flight.", "Set the counter to zero then add."])]
    library = tmp_path / "lib.jsonl"
    export_jsonl(skills, library)
    env_tasks = [f"Set the counter to {t}." for t in TARGETS]
    utility = {row.id: row.utility for row in score_library(skills, env_tasks, hash_embedder).skills}
    retrieved = {}
    for half in ("top", "bottom"):
        summary, _, _ = run(tmp_path, "task", name=half, embedder=hash_embedder, library=str(library),
                            library_filter=half, agent={"top_k": 10, "retrieval_min_score": -1})
        retrieved[half] = {r["skill_id"] for r in records_of(summary.path)[0]["retrieved"]}
        ranking = RunFolder(summary.path).read_config().library_utility  # config.json records the ranking
        assert ranking is not None
        assert ranking.utility == pytest.approx(utility)
        assert set(ranking.kept) == retrieved[half]
        assert (ranking.tasks, ranking.specificity) == (len(TARGETS), "pairs")
    assert retrieved["top"].isdisjoint(retrieved["bottom"])
    assert retrieved["top"] | retrieved["bottom"] == {s.id for s in skills}
    assert min(utility[i] for i in retrieved["top"]) >= max(utility[i] for i in retrieved["bottom"])


def test_safe_task_id():
    assert safe_task_id("plain-id_1.x") == "plain-id_1.x"
    slash, underscore = safe_task_id("a/b"), safe_task_id("a_b")
    assert slash.startswith("a_b-")
    assert slash != underscore


def test_sandboxed_stream_calls_code_skill(tmp_path, hash_embedder):
    pytest.importorskip("skilltransfer.sandbox")
    config = StreamConfig(run="sandboxed", runs_dir=str(tmp_path / "runs"), condition="task+code")
    env = TinyEnv([3, 5], workdir=tmp_path / "ws", sandboxed=True)
    summary = run_stream(env, ScriptedModel(CounterScript(CODE_SKILL)), config, embedder=hash_embedder)
    records = records_of(summary.path)
    assert [r["success"] for r in records] == [True, True]
    assert records[1]["retrieved"][0]["load_error"] is None
    traj = trajectory_of(summary.path, records[1])
    assert "set_counter_to called" in traj.steps[1]["observation"]


@pytest.mark.parametrize("env_name", ["apps", "office", "datasci"])
def test_real_env_stream_with_oracle_policy(tmp_path, hash_embedder, env_name):
    """The runner drives a real env: an oracle executor replies with each task's reference solution."""
    from skilltransfer.envs.registry import ENVS
    from skilltransfer.util.imports import resolve

    try:
        env_cls = resolve(ENVS[env_name])
    except ImportError as exc:
        pytest.skip(f"env {env_name} not importable: {exc}")
    env = env_cls(seed=0, workdir=tmp_path / "ws", sandboxed=False)
    tasks = list(env.tasks())[:3]
    by_instruction = {t.instruction: t for t in tasks}

    def oracle(messages):
        if role_of(messages) == "induction":
            return TEXT_SKILL
        task = next(t for text, t in by_instruction.items() if text in messages[task_start(messages)]["content"])
        return f"Solve it.\n```python\n{env.reference_solution(task)}\n```"

    config = StreamConfig(run=env_name, runs_dir=str(tmp_path / "runs"), condition="task+text", env=env_name,
                          agent={"ground_skills": False})  # the scripted skill is about a counter, not this env
    summary = run_stream(env, ScriptedModel(oracle), config, embedder=hash_embedder, tasks=tasks)
    records = records_of(summary.path)
    assert [r["success"] for r in records] == [True, True, True]
    assert [r["steps"] for r in records] == [1, 1, 1]
    assert all(r["induced"][0]["status"] in ("added", "dropped") for r in records)


def test_repeated_task_ids_are_refused(tmp_path):
    env = TinyEnv([1, 2])
    task = env.tasks()[0]
    with pytest.raises(InputError, match="repeats task ids: tiny/0"):
        run_stream(env, ScriptedModel([]), StreamConfig(run="x", runs_dir=str(tmp_path)), tasks=[task, task])


def test_resume_reads_lines_holding_unicode_line_separators(tmp_path, hash_embedder):
    """pydantic writes U+2028 and U+0085 unescaped; resume, show and report split results.jsonl on \\n only."""
    from skilltransfer.report import load_run
    from skilltransfer.report.summary import summarize_run

    name = "set\u2028counter\x85value"
    script = CounterScript(TEXT_SKILL.replace("NAME: set_counter_value", f"NAME: {name}"))
    first, _, _ = run(tmp_path, "task+text", name="r", embedder=hash_embedder, script=script, targets=TARGETS[:2])
    assert "\u2028" in (first.path / "results.jsonl").read_text(encoding="utf-8")  # what str.splitlines breaks
    resumed, _, _ = run(tmp_path, "task+text", name="r", embedder=hash_embedder, targets=TARGETS)
    assert resumed.ran == ["tiny/2"]
    assert resumed.records[0].induced[0].skill_name == name
    assert summarize_run(first.path).finished == 3
    assert [r.task_id for r in load_run(first.path).records] == ["tiny/0", "tiny/1", "tiny/2"]


def test_own_task_scope_shows_each_task_only_the_skills_induced_from_it(tmp_path, hash_embedder):
    """The subagent study's relation: packages built from a task's own runs, executed on that task."""
    from skilltransfer.skill import Provenance

    skills = [Skill(name=f"s{i}", description=f"Set the counter to {t}.", body="b",
                  provenance=Provenance(source_task_id=f"tiny/{i % 2}")) for i, t in enumerate([3, 5, 3, 5])]
    library = tmp_path / "own.jsonl"
    export_jsonl(skills, library)
    summary, _, _ = run(tmp_path, "task+text", name="own", embedder=hash_embedder, library=str(library),
                        library_scope="own-task", agent={"top_k": 5, "retrieval_min_score": -1})
    records = records_of(summary.path)
    by_id = {s.id: s.provenance.source_task_id for s in skills}
    for record in records:
        seen = {by_id[item["skill_id"]] for item in record["retrieved"]}
        assert seen == ({record["task_id"]} if record["task_id"] in ("tiny/0", "tiny/1") else set()), record
    assert len(records[0]["retrieved"]) == 2  # the two packages of its own task, not the four of the library
    everything, _, _ = run(tmp_path, "task+text", name="all", embedder=hash_embedder, library=str(library),
                           agent={"top_k": 5, "retrieval_min_score": -1})
    assert all(len(r["retrieved"]) == 4 for r in records_of(everything.path))
    with pytest.raises(InputError, match="library_scope own-task .* needs a frozen library"):
        run(tmp_path, "task+text", name="bad", embedder=hash_embedder, library_scope="own-task")
