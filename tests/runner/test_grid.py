"""``skilltransfer grid``: spec layering and errors, a concurrent grid over the mock server, resume, failure isolation,
phases (cross-level library, utility split), the CLI, and the Ray backend."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from helpers_cli import ALLOW_TINY, TINY
from helpers_grid import ALL, spec_data, write_spec
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, TinyEnv
from rich.console import Console

from skilltransfer.commands.grid import GridView
from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.runner.grid import run_grid
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import (
    SPEC_DIR,
    apply_override,
    available_specs,
    build_spec,
    load_spec,
)
from skilltransfer.settings.config import CONDITIONS

TESTS = Path(__file__).resolve().parents[1]
"""The tests' root (its helpers), which Ray's workers import from beside this file's folder (`test_grid`'s envs)."""


class ExplodingEnv(TinyEnv):
    """A counter env whose episode for target 99 cannot start (a failed task)."""

    def start(self, task):  # noqa: ANN001, ANN201 - test double
        if task.metadata["target"] == 99:
            raise RuntimeError("boom: this env broke")
        return super().start(task)


class FatalEnv(TinyEnv):
    """A counter env whose episode for target 99 fails with an input error (a failed stream, every attempt)."""

    def start(self, task):  # noqa: ANN001, ANN201 - test double
        if task.metadata["target"] == 99:
            raise InputError("the env's data is gone")
        return super().start(task)


class FlakyEnv(TinyEnv):
    """A counter env whose first episode of each instance fails with an input error: a stream that fails once and
    then, started again, resumes and finishes."""

    starts = 0

    def start(self, task):  # noqa: ANN001, ANN201 - test double
        FlakyEnv.starts += 1
        if FlakyEnv.starts == 2:
            raise InputError("the endpoint went away")
        return super().start(task)


def _induction(_n, messages):
    return CODE_SKILL if any("Skill format: code" in str(m["content"]) for m in messages) else TEXT_SKILL


@pytest.fixture
def server():
    """The mock endpoint playing every role of the counter world (role-aware script)."""
    with MockServer(CounterScript(_induction), latency_s=0.01) as srv:
        yield srv


def results(out, run):
    path = out / run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------- running
def test_grid_runs_streams_concurrently_sharing_the_endpoint_limit(tmp_path, server):
    spec = load_spec(str(write_spec(tmp_path, spec_data(tmp_path, server.url))))
    views = []

    def view(state):
        views.append(GridView(state, "grid t", Console(file=io.StringIO(), width=200), log_every_s=0))
        return views[-1]

    summary = run_grid(spec, progress=view)
    assert summary.counts == {"done": 12, "skipped": 0, "failed": 0}
    # the progress view's counters agree with what ran
    snap = views[0].state.snapshot()
    assert (snap["streams"], snap["finished"], snap["running"], snap["failed"]) == (12, 12, 0, 0)
    assert snap["tasks"] == snap["tasks_done"] == snap["new_tasks"] == 30
    assert (snap["tokens"], snap["model_calls"]) == (summary.tokens, summary.model_calls)
    assert snap["eta_s"] == 0
    logged = views[0].console.file.getvalue()
    assert "grid t  streams 12/12 done, 0 running, 0 failed  tasks 30/30" in logged
    out = tmp_path / "out"
    runs = {o.run for o in summary.outcomes}
    assert runs == {f"{env}/mock/{c}" for env in ("a", "b") for c in ALL}
    for outcome in summary.outcomes:
        records = results(out, outcome.run)
        assert len(records) == outcome.tasks_total == (3 if outcome.run.startswith("a/") else 2)
        assert all(r["success"] for r in records)
        config = json.loads((out / outcome.run / "config.json").read_text())
        assert config["config"]["condition"] == outcome.run.split("/")[-1]
        assert config["config"]["embedder"] == "hash:64"
        assert (out / outcome.run / "memory").is_dir() == (CONDITIONS[config["config"]["condition"]][1] is not None)
    # in-process actions of concurrent streams kept their own output: the code skill's print reached its observation
    for env in ("a", "b"):
        second = results(out, f"{env}/mock/task+code")[1]
        traj = json.loads((out / f"{env}/mock/task+code" / second["trajectory"]).read_text())
        observations = [s["observation"] for s in traj["steps"] if s["type"] == "ActionStep"]
        assert any("set_counter_to called" in o for o in observations)
    # the streams overlapped, but never beyond the endpoint's limit (one limiter shared by all streams)
    assert server.max_in_flight == 3
    assert summary.model_calls == len(server.requests)
    assert summary.tokens == sum(r["prompt_tokens"] + r["completion_tokens"] for o in summary.outcomes
                                 for r in results(out, o.run))
    status = json.loads((out / "status.json").read_text())["streams"]
    assert {s["state"] for s in status.values()} == {"done"}
    grid = json.loads((out / "grid.json").read_text())
    assert len(grid["streams"]) == 12
    assert "api_key" not in json.dumps(grid["spec"])
    assert not (out / ".work").exists()


def test_rerun_runs_nothing_new_and_resumes_unfinished_tasks(tmp_path, server):
    path = write_spec(tmp_path, spec_data(tmp_path, server.url, conditions=["task", "subtask+text"]))
    first = run_grid(load_spec(str(path)))
    assert first.counts["done"] == 4
    calls = len(server.requests)
    again = run_grid(load_spec(str(path)))
    assert again.counts == {"done": 0, "skipped": 4, "failed": 0}
    assert len(server.requests) == calls  # not one model call
    assert again.tasks_ran == 0
    # drop the last committed task of one stream: only that task runs again
    out = tmp_path / "out"
    lines = (out / "a/mock/subtask+text" / "results.jsonl").read_text().splitlines()
    (out / "a/mock/subtask+text" / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    third = run_grid(load_spec(str(path)))
    assert third.counts == {"done": 1, "skipped": 3, "failed": 0}
    assert [o.ran for o in third.outcomes if o.state == "done"] == [1]
    assert len(results(out, "a/mock/subtask+text")) == 3


def test_rerun_on_another_port_still_skips(tmp_path, server):
    """The endpoint URL is not part of a stream's identity: a restarted server does not invalidate finished runs."""
    data = spec_data(tmp_path, server.url, conditions=["task"], envs={"a": {"env": TINY, "args": {"targets": [1]}}})
    run_grid(build_spec(data))
    with MockServer(CounterScript(_induction)) as other:
        again = run_grid(build_spec({**data, "models": {"mock": {**data["models"]["mock"], "base_url": other.url}}}))
        assert other.requests == []
    assert again.counts["skipped"] == 1


def test_a_crashing_stream_is_recorded_and_does_not_stop_the_others(tmp_path, server):
    """An env that cannot start a task fails that task (its record), not the stream; an endpoint that is down fails
    its streams, which the others outlive."""
    envs = {"good": {"env": TINY, "args": {"targets": [3, 5]}},
            "bad": {"env": "test_grid:ExplodingEnv", "args": {"targets": [99, 2]}}}
    data = spec_data(tmp_path, server.url, envs=envs, conditions=["task", "task+text"])
    data["models"]["down"] = {"name": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x", "max_retries": 0,
                              "timeout_s": 2}
    summary = run_grid(build_spec(data), stream_retries=0, check_endpoints=False)
    state = {o.run: o for o in summary.outcomes}
    assert {r for r, o in state.items() if o.state == "done"} == {"good/mock/task", "good/mock/task+text",
                                                                  "bad/mock/task", "bad/mock/task+text"}
    bad = results(tmp_path / "out", "bad/mock/task")
    assert [r["exit_status"] for r in bad] == ["error", "submitted"]
    assert state["bad/mock/task"].task_errors == 1
    assert "cannot connect" in state["good/down/task"].error
    assert "Traceback" in state["good/down/task"].traceback
    status = json.loads((tmp_path / "out" / "status.json").read_text())
    assert status["streams"]["good/down/task+text"]["state"] == "failed"
    assert status["streams"]["bad/mock/task+text"]["task_errors"] == 1
    assert len(results(tmp_path / "out", "good/mock/task+text")) == 2


def test_cross_level_phase_reads_the_source_memory(tmp_path, server):
    data = spec_data(tmp_path, server.url, envs={"a": {"env": TINY, "args": {"targets": [3, 5, 2]}}},
                     conditions=["subtask+text", "subtask+code"],
                     phases=[{"name": "source"},
                             {"name": "transfer", "conditions": ["task+text", "task+code"],
                              "library_from": {"phase": "source", "same_tasks": True,
                                               "condition": {"task+text": "subtask+text",
                                                             "task+code": "subtask+code"}}}])
    spec = build_spec(data)
    plans = {p.run: p for p in plan_streams(spec)}
    transfer = plans["transfer/a/mock/task+code"]
    assert transfer.depends_on == "source/a/mock/subtask+code"
    assert transfer.config.library == str(tmp_path / "out" / "source/a/mock/subtask+code" / "memory")
    summary = run_grid(spec)
    assert summary.counts["done"] == 4
    out = tmp_path / "out"
    source_ids = {json.loads(line)["id"] for line in
                  (out / "source/a/mock/subtask+text/memory/skills.jsonl").read_text().splitlines()}
    records = results(out, "transfer/a/mock/task+text")
    assert all(r["induced"] == [] for r in records)  # frozen library: no induction
    assert all({h["skill_id"] for h in r["retrieved"]} <= source_ids and r["retrieved"] for r in records)
    config = json.loads((out / "transfer/a/mock/task+text/config.json").read_text())
    assert config["level"] == "task"
    assert config["config"]["library"].endswith("source/a/mock/subtask+text/memory")


def test_a_failed_stream_is_retried_and_resumes(tmp_path, server):
    FlakyEnv.starts = 0
    data = spec_data(tmp_path, server.url, envs={"f": {"env": "test_grid:FlakyEnv", "args": {"targets": [3, 5, 2]}}},
                     conditions=["task"])
    summary = run_grid(build_spec(data), resume_command="skilltransfer grid t")
    (outcome,) = summary.outcomes
    assert (outcome.state, outcome.attempts, outcome.tasks_done) == ("done", 2, 3)
    assert len(results(tmp_path / "out", "f/mock/task")) == 3
    status = json.loads((tmp_path / "out" / "status.json").read_text())
    assert status["failed_streams"] == []
    assert status["resume"] is None
    FlakyEnv.starts = 0
    again = run_grid(build_spec({**data, "out": str(tmp_path / "out2")}), stream_retries=0,
                     resume_command="skilltransfer grid t -o out2")
    assert again.outcomes[0].state == "failed"
    status = json.loads((tmp_path / "out2" / "status.json").read_text())
    assert status["failed_streams"] == ["f/mock/task"]
    assert status["resume"] == "skilltransfer grid t -o out2"


def test_dependent_of_a_failed_stream_fails_without_running(tmp_path, server):
    bad = {"env": "test_grid:FatalEnv", "args": {"targets": [99, 3]}}  # 2 tasks: the split ranks against them
    data = spec_data(tmp_path, server.url, envs={"bad": bad},
                     conditions=["subtask+text"],
                     phases=[{"name": "source"}, {"name": "split", "library_from": {"phase": "source",
                                                                                    "condition": "subtask+text",
                                                                                    "same_tasks": True},
                                                  "library_filters": ["top", "bottom"]}])
    summary = run_grid(build_spec(data))
    state = {o.run: o for o in summary.outcomes}
    assert state["split/bad/mock/subtask+text-top"].error == "source stream source/bad/mock/subtask+text failed"
    assert summary.counts["failed"] == 3


DESCRIPTIONS = ["Set the counter to a target value.", "Send an email to a contact.", "Reset then add to the counter.",
                "Book a flight for a trip."]


def _distinct_skills(n, _messages):
    return TEXT_SKILL.replace("set_counter_value", f"skill_{n}").replace(
        "Set the counter to a target value.", DESCRIPTIONS[n % len(DESCRIPTIONS)])


def test_utility_split_streams(tmp_path):
    data = {"conditions": ["task+text"], "agent": {"top_k": 10},
            "phases": [{"name": "source", "memory": {"dedup_threshold": 1.01}},
                       {"name": "split", "library_from": {"phase": "source", "condition": "task+text",
                                                          "same_tasks": True},
                        "library_filters": ["top", "bottom"]}]}
    with MockServer(CounterScript(_distinct_skills)) as server:
        spec = build_spec(spec_data(tmp_path, server.url, envs={"a": {"env": TINY, "args": {"targets": [3, 5, 2, 4]}}},
                                    **data))
        summary = run_grid(spec)
    assert summary.counts["done"] == 3, [o.error for o in summary.outcomes]
    out = tmp_path / "out"
    halves = {}
    for half in ("top", "bottom"):
        halves[half] = {h["skill_id"] for r in results(out, f"split/a/mock/task+text-{half}") for h in r["retrieved"]}
    assert halves["top"]
    assert halves["bottom"]
    assert halves["top"].isdisjoint(halves["bottom"])


# --------------------------------------------------------------------------------------------- specs
def test_ready_made_specs_parse_and_expand():
    assert {"paper-table2", "cross-level", "utility-split", "order-reshuffle", "prompt-ablation"} <= set(
        available_specs())
    counts = {name: len(plan_streams(load_spec(name))) for name in available_specs()}
    assert counts["paper-table2"] == 18
    assert counts["cross-level"] == 12
    assert counts["utility-split"] == 3 * 2 + 3 * 2 * 2
    assert counts["prompt-ablation"] == 3 * 4 * 2
    reshuffled = plan_streams(load_spec("order-reshuffle"))
    assert {p.config.order_seed for p in reshuffled} == {1}
    assert all(p.run.endswith("-seed1") for p in reshuffled)
    table2 = plan_streams(load_spec("paper-table2"))
    assert {p.config.agent_config().step_limit for p in table2} == {50}
    assert {p.config.condition for p in table2} == set(CONDITIONS)
    assert (SPEC_DIR / "paper-table2.yaml").is_file()


def test_layering_yaml_then_overrides_then_flags(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("models:\n  default:\n    params: {temperature: 0.5}\n")
    spec = load_spec("paper-table2", ["conditions=[task, subtask+text]", "envs=[office]", str(extra),
                                      "models.default.params.temperature=0", "models.default.max_concurrency=4",
                                      "limits.task_limit=7"],
                     out=str(tmp_path / "o"), max_concurrency=3, **{"limits.task_limit": 2})
    phase = spec.phases[0]
    assert phase.conditions == ["task", "subtask+text"]
    assert list(phase.envs) == ["office"]
    assert phase.models["default"].params == {"temperature": 0}
    assert phase.models["default"].max_concurrency == 4
    assert phase.limits.task_limit == 2  # the flag wins over -c
    assert spec.max_concurrency == 3
    assert spec.out_dir == tmp_path / "o"
    phased = load_spec("cross-level", ["phases.1.conditions=[task+text]"], **{"limits.task_limit": 5})
    assert phased.phases[1].conditions == ["task+text"]
    assert {p.limits.task_limit for p in phased.phases} == {5}


def test_apply_override_paths():
    data = {"a": {"b": 1}, "items": [{"x": 1}, {"x": 2}]}
    assert apply_override(data, "a.c=[1, 2]")["a"] == {"b": 1, "c": [1, 2]}
    assert apply_override(data, "items.1.x=hello")["items"][1] == {"x": "hello"}
    assert data["items"][1] == {"x": 2}  # not mutated
    with pytest.raises(InputError, match="not an index"):
        apply_override(data, "items.5.x=1")
    with pytest.raises(InputError, match="expected key.path=value or a YAML file"):
        apply_override(data, "nonsense")


@pytest.mark.parametrize(("override", "message"), [
    ("envs.x.args.seed=1", "field 'envs.x': unknown env 'x'; choose one of: apps"),
    ("envs=[apps, foo]", "field 'envs.foo': unknown env 'foo'; choose one of: apps, office, datasci, scienceworld, "
                         "officebench"),
    ("conditions=[task, task+video]", "field 'conditions[1]': unknown value 'task+video'; choose one of: task, "
                                      "task+text,"),
    ("models.default.temprature=0", "field 'models.default.temprature': unknown key; allowed: name, base_url,"),
    ("models.default.name=gpt", "field 'models.default.name': unknown model 'gpt'; choose one of: local, openai,"),
    ("modls.x=1", "unknown key 'modls'; allowed: name, description, out, max_concurrency, phases, envs"),
    ("limits.steps=3", "field 'limits.steps': unknown key; allowed: task_limit, step_limit, subtask_limit"),
    ("agent.topk=3", "field 'agent.topk': unknown key; allowed: step_limit, subtask_limit, top_k"),
    ("induction_variants=[short]", "field 'induction_variants[0]': unknown value 'short'; choose one of: full, "
                                   "no_demo"),
    ("library_filters=[top]", "library_filters: a filter needs a library or library_from"),
    ("order_seeds=abc", "field 'order_seeds[0]': Input should be a valid integer"),
    ("envs.apps.args.workdir=/tmp", "field 'envs.apps.args': workdir is set by the harness"),
    ("envs.x.env=nomodule_here:Env", "field 'envs.x': env class 'nomodule_here:Env' cannot be imported"),
])
def test_bad_spec_is_one_line_error_naming_the_key(override, message):
    with pytest.raises(InputError) as info:
        load_spec("paper-table2", [override])
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert text.split(": ")[0].endswith("experiments/paper-table2.yaml")


def test_axes_take_one_value_or_a_list():
    """``condition: x`` is ``conditions: [x]``; a later layer's key replaces its counterpart; one YAML may not hold
    both."""
    one = load_spec("paper-table2", ["condition=task", "env=apps", "order_seed=3"])
    assert [(p.run, p.config.order_seed) for p in plan_streams(one)] == [("apps/default/task-seed3", 3)]
    back = load_spec("paper-table2", ["condition=task", "conditions=[task, subtask]"])
    assert back.phases[0].conditions == ["task", "subtask"]
    with pytest.raises(InputError, match="give condition or conditions, not both"):
        build_spec({"name": "x", "envs": ["apps"], "condition": "task", "conditions": ["task"]})


def test_phase_errors():
    with pytest.raises(InputError, match=r"phases\[1\].library_from.phase: unknown phase 'nope'; choose an earlier"):
        load_spec("cross-level", ["phases.1.library_from.phase=nope"])
    with pytest.raises(InputError, match=r"no source condition for 'task\+code'"):
        load_spec("cross-level", ["phases.1.library_from.condition={task+text: subtask+text}"])
    with pytest.raises(InputError, match="no grid spec 'nosuch'.*paper-table2"):
        load_spec("nosuch")


# --------------------------------------------------------------------------------------------- CLI
def _cli(args, monkeypatch, capsys):
    from skilltransfer.cli import main

    monkeypatch.setattr(sys, "argv", ["skilltransfer", "grid", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_runs_resumes_and_rejects_bad_input(tmp_path, server, monkeypatch, capsys):
    path = write_spec(tmp_path, spec_data(tmp_path, server.url, conditions=["task"]))
    code, out, _ = _cli([str(path), "--out", str(tmp_path / "cli"), "-j", "2", "-c", "envs.a.args.targets=[7]",
                         *ALLOW_TINY], monkeypatch, capsys)
    assert code == 0
    assert "2 streams run, 0 already finished, 0 failed" in out
    assert len(results(tmp_path / "cli", "a/mock/task")) == 1
    code, out, _ = _cli([str(path), "--out", str(tmp_path / "cli"), "--no-progress", "-c", "envs.a.args.targets=[7]",
                         *ALLOW_TINY], monkeypatch, capsys)
    assert "0 streams run, 2 already finished" in out
    code, out, _ = _cli([str(path), "--dry-run", "-c", "order_seeds=[0, 1]", *ALLOW_TINY], monkeypatch, capsys)
    assert "a/mock/task-seed1" in out
    assert "4 streams" in out
    code, _, err = _cli([str(path), "--out", str(tmp_path / "bad"), "-c", "conditions=[tsk]", *ALLOW_TINY], monkeypatch,
                        capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert "conditions[0]': unknown value 'tsk'" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()  # nothing ran


def test_cli_exit_code_1_when_a_stream_fails(tmp_path, server, monkeypatch, capsys):
    data = spec_data(tmp_path, server.url, conditions=["task"],
                     envs={"bad": {"env": "test_grid:FatalEnv", "args": {"targets": [99]}},
                           "odd": {"env": "test_grid:ExplodingEnv", "args": {"targets": [99, 3]}}})
    spec = str(write_spec(tmp_path, data))
    code, out, _ = _cli([spec, "--no-progress", "--stream-retries", "0", "-c", "max_concurrency=3", "--allow-import",
                         "test_grid"], monkeypatch, capsys)
    assert code == 1
    assert "InputError: the env's data is gone" in out
    assert "1 task ended in an error or timeout (odd/mock/task: 1)" in out
    resume = f"resume: skilltransfer grid {spec} --allow-import test_grid --stream-retries 0 -c max_concurrency=3"
    assert resume in out
    status = json.loads((tmp_path / "out" / "status.json").read_text())
    assert status["resume"] == resume.removeprefix("resume: ")


# --------------------------------------------------------------------------------------------- Ray
@pytest.mark.slow
def test_ray_backend_runs_and_resumes(tmp_path, server):
    ray = pytest.importorskip("ray")
    pythonpath = os.pathsep.join([str(Path(__file__).resolve().parent), str(TESTS),
                                 os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    try:
        data = spec_data(tmp_path, server.url, conditions=["task", "subtask+text"],
                         envs={"a": {"env": TINY, "args": {"targets": [3, 5]}},
                               "c": {"env": TINY, "args": {"targets": [4, 1]}},
                               "bad": {"env": "test_grid:ExplodingEnv", "args": {"targets": [99]}}})
        data["models"]["mock"]["max_concurrency"] = 1  # one call at a time across all Ray workers
        server.latency_s = 0.05
        summary = run_grid(build_spec(data), backend="ray", ray_cpus_per_stream=0.5)
        state = {o.run: o for o in summary.outcomes}
        assert summary.backend == "ray"
        assert state["a/mock/task"].state == state["a/mock/subtask+text"].state == "done"
        assert state["bad/mock/task"].state == "done"  # the broken task is its record
        assert state["bad/mock/task"].task_errors == 1
        bad = results(tmp_path / "out", "bad/mock/task")
        assert [r["exit_status"] for r in bad] == ["error"]
        assert all(r["success"] for r in results(tmp_path / "out", "a/mock/subtask+text"))
        assert all(state[f"c/mock/{c}"].state == "done" for c in ("task", "subtask+text"))
        assert server.max_in_flight == 1  # the endpoint limit held across worker processes
        calls = len(server.requests)
        again = run_grid(build_spec(data), backend="ray")
        assert again.counts == {"done": 0, "skipped": 6, "failed": 0}, again.counts
        assert len(server.requests) == calls
    finally:
        ray.shutdown()
