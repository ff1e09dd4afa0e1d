"""End to end through the CLI and the real openai client against the mock OpenAI-compatible server: all six
conditions, call order, skill transfer, dedup/pruning, every log field, `show`, resume extension and user errors."""

from __future__ import annotations

import json
import re

import pytest
from helpers_cli import TINY, cli, records_of, run_tiny, trajectory_of
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, TinyEnv, role_of, task_start
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.errors import InputError
from skilltransfer.llm.context import messages_tokens
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import FORMAT_VERSION, TaskRecord, safe_task_id
from skilltransfer.report.summary import summarize_run
from skilltransfer.settings.config import CONDITIONS

ROLE_LETTER = {"executor": "E", "planner": "P", "summarizer": "S", "induction": "I"}


def _check_step_order(steps, *, memory: bool) -> None:
    """Per (sub)task: exactly one retrieval before the first action and one induction after the last."""
    spans: dict = {}
    for step in steps:
        if step["type"] in ("RetrievalStep", "ActionStep", "InductionStep"):
            spans.setdefault(step.get("subtask_index"), []).append(step["type"])
    for kinds in spans.values():
        if not memory:
            assert set(kinds) == {"ActionStep"}
            continue
        assert kinds[0] == "RetrievalStep"
        assert kinds[-1] == "InductionStep"
        assert kinds.count("RetrievalStep") == kinds.count("InductionStep") == 1


@pytest.mark.parametrize("condition", list(CONDITIONS))
def test_conditions_end_to_end_through_http(tmp_path, condition):
    level, fmt = CONDITIONS[condition]
    script = CounterScript(CODE_SKILL if fmt == "code" else TEXT_SKILL)
    out = tmp_path / "runs" / "r"
    with MockServer(replies=script) as server:
        run_tiny(server, out, condition, (3, 5, 2), "--max-connections", "1")  # one task at a time: the order below
        requests = [r["messages"] for r in server.requests]
    records = records_of(out)
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["model"] == {"label": None, "name": "openai", "model": "mock", "params": {},
                                         "extra_body": {}, "context_window": None}  # no endpoint, key, cache
    assert config["config"]["env"]["env"] == TINY
    assert (config["embedder_id"] is not None) == (fmt is not None)
    assert len(records) == 3
    assert sorted(r["task_id"] for r in records) == ["tiny/0", "tiny/1", "tiny/2"]
    assert config["task_ids"] == [r["task_id"] for r in records]  # stream order, nothing lost or duplicated

    # the HTTP call order: per task E+ (I) at task level; at subtask level P E+ (I) S per subtask, except that the
    # subtask that submits the task ends it without a summary
    letters = "".join(ROLE_LETTER[role_of(m)] for m in requests)
    memory = "I" if fmt else ""
    task_pattern = f"(?:E+{memory})" if level == "task" else f"(?:(?:PE+{memory}S)*PE+{memory})"
    assert re.fullmatch(f"{task_pattern}{{3}}", letters), letters
    assert sum(r["model_calls"] for r in records) == len(requests)
    # tokens are the server's usage (it counts messages_tokens of each request)
    assert sum(r["prompt_tokens"] for r in records) == sum(messages_tokens(m) for m in requests)

    for position, record in enumerate(records):
        TaskRecord.model_validate(record)
        assert record["format_version"] == FORMAT_VERSION
        assert record["position"] == position
        assert (record["reward"], record["success"], record["exit_status"]) == (1.0, True, "submitted")
        assert record["steps"] >= 1
        assert record["subtasks"] == (1 if level == "task" else 2)
        assert record["latency_s"] > 0
        assert record["completion_tokens"] > 0
        traj = trajectory_of(out, record)
        assert record["trajectory"] == f"trajectories/{safe_task_id(record['task_id'])}.json"
        p_c = [(c["prompt_tokens"], c["completion_tokens"]) for c in traj.calls]
        assert {c["usage_source"] for c in traj.calls} == {"server"}
        assert record["dependency"] == sum(p * c + c * (c + 1) // 2 for p, c in p_c)
        assert record["peak_context"] == max(p for p, _ in p_c)
        assert sum(s["type"] == "ActionStep" for s in traj.steps) == record["steps"]
        _check_step_order(traj.steps, memory=fmt is not None)
    if fmt is None:
        assert all(not r["retrieved"] and not r["induced"] for r in records)
        assert not (out / "memory").exists()
        return
    first, second = records[0], records[1]
    skill_id = first["induced"][0]["skill_id"]
    assert first["induced"][0]["status"] == "added"
    hit = next(r for r in second["retrieved"] if r["skill_id"] == skill_id)
    assert (hit["source_position"], hit["source_task_id"]) == (0, first["task_id"])
    target = re.findall(r"\d+", trajectory_of(out, second).instruction)[0]
    task2_executor = [m[1]["content"] for m in requests
                      if role_of(m) == "executor" and f"Set the counter to {target}." in m[1]["content"]]
    if fmt == "text":  # the text skill induced on task 1 is in task 2's prompt (as the server received it)
        assert any("Reset the counter with apis.counter.reset()" in p for p in task2_executor)
    else:  # the code skill induced on task 1 is called by name on task 2 and runs
        actions = [s for s in trajectory_of(out, second).steps
                   if s["type"] == "ActionStep" and f"set_counter_to({target})" in (s["action"] or "")]
        assert actions
        assert "set_counter_to called" in actions[0]["observation"]
        assert not actions[0]["error"]


def test_dedup_and_pruning_through_http(tmp_path):
    longer = CODE_SKILL.replace("    return apis.counter.add(int(target))",
                                "    value = apis.counter.add(int(target))\n    return value")
    broken = CODE_SKILL.replace("DESCRIPTION: Set the counter to a target value.",
                                "DESCRIPTION: Read the counter.").replace("def set_counter_to(target):",
                                                                         "def set_counter_to(target:")
    replies = [CODE_SKILL, longer, broken, "no skill here"]
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(lambda n, _messages: replies[n])) as server:
        run_tiny(server, out, "task+code", (3, 5, 2, 4))
    records = records_of(out)
    assert [[i["status"] for i in r["induced"]] for r in records] == [["added"], ["merged"], ["pruned"],
                                                                      ["unparseable"]]
    assert records[1]["induced"][0]["target_id"] == records[0]["induced"][0]["skill_id"]
    assert len((out / "memory" / "prune_log.jsonl").read_text().splitlines()) == 1
    stored = [json.loads(x) for x in (out / "memory" / "skills.jsonl").read_text().splitlines()]
    assert len(stored) == 1
    assert "value = apis.counter.add" in stored[0]["body"]
    summary = summarize_run(out)
    assert (summary.skills_written, summary.skills_merged, summary.skills_pruned, summary.skills_unparseable) == \
        (1, 1, 1, 1)
    assert summary.memory_size == 1


def test_real_env_through_http_and_cli(tmp_path):
    """The datasci env from the CLI; the mock server plays an oracle that submits each task's reference solution."""
    from skilltransfer.envs.registry import get_env

    try:
        env = get_env("datasci", seed=0, sandboxed=False, workdir=tmp_path / "oracle-ws")
    except InputError as exc:
        pytest.skip(f"datasci env unavailable: {exc}")
    tasks = {t.instruction: t for t in env.tasks()}

    def oracle(messages):
        if role_of(messages) == "induction":
            return TEXT_SKILL
        task = next(t for text, t in tasks.items() if text in messages[task_start(messages)]["content"])
        return f"Solve it.\n```python\n{env.reference_solution(task)}\n```"

    out = tmp_path / "ds"
    with MockServer(replies=oracle) as server:
        cli("run", "--env", "datasci", "--condition", "task+text", "--model", "openai/mock", "--base-url", server.url,
            "--api-key", "x", "--embedder", "hash:128", "--out", str(out), "--limit", "3",
            "--no-sandbox", "--no-progress", "-c", "agent.retrieval_min_score=-1",
            "-c", "agent.ground_skills=false")  # the skill is about a counter (apis.counter: not a datasci API)
    records = records_of(out)
    assert [r["success"] for r in records] == [True, True, True]
    assert [r["steps"] for r in records] == [1, 1, 1]
    assert records[0]["induced"][0]["status"] == "added"
    assert records[1]["retrieved"][0]["source_position"] == 0
    config = json.loads((out / "config.json").read_text())
    from skilltransfer.envs.registry import stream_order

    assert config["task_ids"] == [t.id for t in stream_order(env.tasks(), 0)][:3]


def test_show_summary_and_trajectory(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        run_tiny(server, out, "subtask+text")
    records = records_of(out)
    shown = cli("show", str(out)).output
    assert "100.0%" in shown
    assert "bootstrap CI" in shown
    assert "3 of 3 finished" in shown
    assert "1 written" in shown
    data = json.loads(cli("show", str(out), "--json").output)
    assert data["finished"] == 3
    assert data["success"] == 1.0
    assert data["prompt_tokens"] == sum(r["prompt_tokens"] for r in records)
    assert data["retrievals"] == sum(len(r["retrieved"]) for r in records)
    second = records[1]
    text = cli("show", str(out), "--task", second["task_id"]).output
    assert f"task {second['task_id']} (task 2 of the stream" in text
    assert "SUCCESS" in text
    assert "[retrieve (subtask 0)]" in text
    assert "set_counter_value [text]" in text
    assert text.index("[retrieve (subtask 0)]") < text.index("[step ") < text.index("[induce (subtask 0)]")
    assert "apis.counter.add(" in text
    assert cli("show", str(out), "--task", "2").output == text  # by its number in the stream (1-based)
    with pytest.raises(InputError, match="task numbers run from 1 to 3"):
        cli("show", str(out), "--task", "0")
    with pytest.raises(InputError, match="not finished in this run"):
        cli("show", str(out), "--task", "tiny/99")
    with pytest.raises(InputError, match="not a run folder"):
        cli("show", str(tmp_path))
    started = tmp_path / "started"  # a run killed before its first task finished
    started.mkdir()
    (started / "config.json").write_text((out / "config.json").read_text())
    assert "0 of 3 finished" in cli("show", str(started)).output
    assert "no finished task yet" in cli("show", str(started)).output


def test_progress_lines_without_a_terminal(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        args = ["run", "--env", TINY, "--condition", "task+text", "--model", "openai/mock", "--base-url", server.url,
                "--api-key", "x", "--embedder", "hash:128", "--out", str(out),
                "--env-arg", "targets=[3, 5]", "--no-sandbox"]
        output = cli(*args).output
        tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in records_of(out))
        assert re.search(r"\[1/2\] tiny/\d: success in [\d.]+ s \| success 1/1 \(100%\)", output), output
        assert "[2/2] tiny/" in output
        assert f"success 2/2 (100%) | tokens {tokens:,}" in output
        assert "done: 2 tasks run now, 2/2 finished" in output
        again = cli(*args).output  # resumed: nothing left to run
    assert "done: 0 tasks run now, 2/2 finished, success 2/2" in again


def test_scripted_model_from_a_script_file_and_default_out(tmp_path, monkeypatch):
    rules = [{"match": f"Set the counter to {t}\\.", "reply": f"Set it.\n```python\napis.counter.reset()\n"
              f"apis.counter.add({t})\ncomplete_task()\n```"} for t in (3, 5, 2)]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    monkeypatch.chdir(tmp_path)
    cli("run", "--env", TINY, "--condition", "task", "--model", f"scripted:{script}",
        "--no-sandbox", "--no-progress")
    out = tmp_path / "runs" / "TinyEnv-task-scripted"
    assert [r["success"] for r in records_of(out)] == [True, True, True]
    with pytest.raises(InputError, match="script is only for the scripted test double"):
        cli("run", "--env", TINY, "--condition", "task", "--script", str(script))


def test_resume_extends_a_stream_and_refuses_other_settings(tmp_path):
    out = tmp_path / "r"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        run_tiny(server, out, "task+text", (3, 5, 2, 4), "--limit", "2")
        first = records_of(out)
        assert len(first) == 2
        run_tiny(server, out, "task+text", (3, 5, 2, 4), "--limit", "4")
        records = records_of(out)
        assert records[:2] == first
        assert len(records) == 4
        assert json.loads((out / "config.json").read_text())["task_ids"] == [r["task_id"] for r in records]
        changed = r'different settings \(task_ids: was \["tiny/2", "tiny/0", "tiny/1", "tiny/3"\], now \["tiny/3", '
        with pytest.raises(InputError, match=changed + r".*\): give another output folder \(--out DIR\)"):
            run_tiny(server, out, "task+text", (3, 5, 2, 4), "--order-seed", "7")
        with pytest.raises(InputError, match="different settings"):
            run_tiny(server, out, "task+text", (3, 5, 2, 4), "--max-steps", "3")
        with pytest.raises(InputError, match=r"\(config.model.params.temperature: was null, now 0.5\): give another "
                                             r"output folder \(--out DIR\)"):
            run_tiny(server, out, "task+text", (3, 5, 2, 4), "--temperature", "0.5")


def test_frozen_library_and_replay_cache_from_the_cli(tmp_path):
    source, cache = tmp_path / "src", tmp_path / "cache.sqlite"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        run_tiny(server, source, "subtask+text", (3, 5, 2), "--cache", str(cache))
        script = CounterScript(TEXT_SKILL)
        server_calls = len(server.requests)
    with MockServer(replies=script) as server:
        run_tiny(server, tmp_path / "frozen", "task+text", (3, 5, 2), "--library", str(source / "memory"),
                 "--library-filter", "top")
        partial = ("--library", str(source / "memory"), "--library-filter", "top", "--limit", "2")
        run_tiny(server, tmp_path / "frozen2", "task+text", (3, 5, 2), *partial)
        with pytest.raises(InputError, match=r"task_ids: was"):  # the filter depends on the whole stream
            run_tiny(server, tmp_path / "frozen2", "task+text", (3, 5, 2), *partial[:-1], "3")
    assert "induction" not in script.roles
    frozen = records_of(tmp_path / "frozen")
    assert all(r["retrieved"] and not r["induced"] for r in frozen)
    assert {r["memory_size"] for r in frozen} == {1}
    # replay: the same stream from the response cache alone, against a server that is gone
    replay = tmp_path / "replay" / "src"
    run_tiny(server, replay, "subtask+text", (3, 5, 2), "--cache", str(cache), "--cache-mode", "ro")
    strip = [{k: v for k, v in r.items() if k != "latency_s"} for r in records_of(replay)]
    assert strip == [{k: v for k, v in r.items() if k != "latency_s"} for r in records_of(source)]
    assert server_calls == sum(r["model_calls"] for r in records_of(source))


class PluggedEnv(TinyEnv):
    """A user env for ``--env test_run_e2e:PluggedEnv``: takes ``seed`` and ``workdir`` but not ``sandboxed``."""

    made: list[dict] = []

    def __init__(self, targets=(3,), *, seed: int = 0, workdir=None, label: str = "") -> None:
        PluggedEnv.made.append({"targets": list(targets), "seed": seed, "workdir": workdir, "label": label})
        super().__init__(targets, workdir=workdir)


def test_plugged_env_gets_only_the_arguments_it_takes(tmp_path):
    rules = [{"reply": "Set it.\n```python\napis.counter.reset()\napis.counter.add(4)\ncomplete_task()\n```"}]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    PluggedEnv.made.clear()
    cli("run", "--env", "test_run_e2e:PluggedEnv", "--condition", "task", "--model", f"scripted:{script}",
        "--env-seed", "7", "--workdir", str(tmp_path / "ws"), "--env-arg", "targets=[4]",
        "--env-arg", "label=a b", "--out", str(tmp_path / "r"), "--no-progress")
    assert PluggedEnv.made == [{"targets": [4], "seed": 7, "workdir": tmp_path / "ws", "label": "a b"}]
    assert (tmp_path / "ws").is_dir()
    assert [r["success"] for r in records_of(tmp_path / "r")] == [True]


@pytest.mark.parametrize(("args", "message"), [
    (["--env", "nope", "--condition", "task"], "unknown env 'nope'"),
    (["--env", "no_such_module:Env", "--condition", "task"], "cannot be imported"),
    (["--env", TINY, "--condition", "task", "--env-arg", "oops"], "--env-arg must be key=value"),
    (["--env", TINY, "--condition", "task", "--env-arg", "colour=1"], "refused its arguments"),
    (["--env", TINY, "--condition", "task+video"], "Invalid value for '--condition'"),
    (["--env", TINY, "--condition", "task", "--library-filter", "top"], "a filter needs a library"),
    (["--env", TINY, "--condition", "task", "--induction-prompt", "short"], "Invalid value for '--induction-prompt'"),
    (["--env", TINY, "--condition", "task", "--max-steps", "0"], "'--max-steps': Input should be greater than or"),
    (["--env", TINY, "--condition", "task", "--top-k", "-1"], "'--top-k': Input should be greater than or equal to 0"),
    (["--env", TINY, "--condition", "task", "--model", "scripted"], "needs replies: --model scripted:<file.jsonl>"),
    (["--env", TINY, "--condition", "task", "--limit", "0", "--model", "scripted:x"],
     "Invalid value for '--limit' / '-n'"),
    (["--env", TINY, "--condition", "task", "-c", "agent.top_k=-1"], "field 'agent.top_k': Input should be greater"),
    (["--env", TINY, "-c", "conditions=[task, subtask]"], "run runs one stream, this config gives 2 (conditions"),
    (["--env", TINY], "condition: required; give --condition"),
])
def test_run_user_errors(tmp_path, monkeypatch, args, message):
    """Bad input is refused before anything is written: a spec error (one line) or a usage error of a flag."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--no-sandbox", *args])
    assert result.exit_code == 2 or isinstance(result.exception, InputError), result.output
    text = str(result.exception) if isinstance(result.exception, InputError) else " ".join(result.output.split())
    assert message in text
    assert not (tmp_path / "runs").exists()


def _bundled_model_or_skip() -> None:
    from skilltransfer.llm.local import assemble_model, llama_cpp_available

    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed (pip install 'skilltransfer[local]')")
    try:
        assemble_model()
    except InputError as exc:
        pytest.skip(f"the bundled model cannot be assembled: {exc}")


@pytest.mark.slow
@pytest.mark.xdist_group("embedded-model")
@pytest.mark.usefixtures("embedded_model_threads")
def test_embedded_local_model_smoke(tmp_path, monkeypatch):
    """An apps task under subtask+text on the embedded model (no endpoint configured): the run completes and logs
    the task (success not required). Budgets are cut so it takes minutes, not hours, on a small CPU: one task (a
    second added ~3 min of prompt processing on 2 cores and nothing the test checks; a growing conversation on one
    server is `test_llm_local`'s)."""
    _bundled_model_or_skip()
    for var in ("OPENAI_BASE_URL", "SKILLTRANSFER_MODEL"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "local"
    cli("run", "--env", "apps", "--condition", "subtask+text", "--limit", "1", "--out", str(out),
        "--embedder", "hash:256", "--max-steps", "4", "--max-subtasks", "2", "--max-tokens", "256",
        "--temperature", "0", "--no-progress")
    records = records_of(out)
    assert len(records) == 1
    config = json.loads((out / "config.json").read_text())
    assert config["config"]["model"]["name"] == "local"
    for record in records:
        TaskRecord.model_validate(record)
        assert record["model_calls"] >= 2
        assert record["prompt_tokens"] > 0
        assert (out / record["trajectory"]).is_file()
    assert {c["usage_source"] for r in records for c in trajectory_of(out, r).calls} == {"server"}
