"""Streams of independent tasks (no skill memory, or a frozen library read as it is) run several tasks at once and
commit them in stream order: the records, trajectories and library usage counts are a sequential run's, timings
aside; streams with a memory of their own, or state shared between tasks, stay sequential."""

from __future__ import annotations

import json
import threading
import time

from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import export_jsonl, read_jsonl
from skilltransfer.runner.stream import independent_tasks, parallel_width, run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Skill

TARGETS = [3, 5, 2, 4, 7, 1, 6, 8]
TIMING = {"latency_s", "seconds", "latency", "created", "started", "elapsed_s"}


class CountingScript(CounterScript):
    """The counter script, holding each reply briefly and counting the calls in flight at once."""

    def __init__(self) -> None:
        super().__init__(TEXT_SKILL)
        self.in_flight = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, messages):
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(0.02)
            return super().__call__(messages)
        finally:
            with self._lock:
                self.in_flight -= 1


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def run(tmp_path, name, condition, parallel, **settings):
    script = CountingScript()
    env = TinyEnv(TARGETS, workdir=tmp_path / "ws" / name)
    config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition=condition, **settings)
    embedder = HashEmbedder(dim=64) if config.has_memory else None
    script.usage = []  # the memory's usage counts as each commit saved them

    def committed(_record):
        if config.has_memory:
            script.usage.append({s.id: s.usage.times_retrieved for s, _ in read_jsonl(
                "memory/skills.jsonl", root=tmp_path / "runs" / name)})

    summary = run_stream(env, ScriptedModel(script), config, embedder=embedder, parallel_tasks=parallel,
                         on_task=committed)
    records = [json.loads(line) for line in (summary.path / "results.jsonl").read_text().splitlines()]
    trajectories = [json.loads((summary.path / r["trajectory"]).read_text()) for r in records]
    return summary, records, trajectories, script


def test_independent_tasks_run_at_once_with_a_sequential_runs_records(tmp_path):
    for condition in ("task", "subtask"):
        _, seq, seq_traj, seq_script = run(tmp_path, f"seq-{condition}", condition, 1)
        summary, par, par_traj, par_script = run(tmp_path, f"par-{condition}", condition, 4)
        assert seq_script.most == 1
        assert par_script.most > 1  # tasks overlapped
        assert summary.ran == [f"tiny/{i}" for i in range(len(TARGETS))]
        assert [r["position"] for r in par] == list(range(len(TARGETS)))
        for a, b in zip(seq, par, strict=True):
            a.pop("run"), b.pop("run")
            assert strip(a) == strip(b)
        assert strip(seq_traj) == strip(par_traj)


def test_a_frozen_library_streams_tasks_run_at_once_with_a_sequential_runs_records_and_usage(tmp_path):
    library = tmp_path / "library.jsonl"
    export_jsonl([Skill(name="set_counter_value", description="Set the counter to a target value.",
                        body="1. Reset the counter with apis.counter.reset().\n2. Add the target with "
                             "apis.counter.add(n) and call complete_task()."),
                  Skill(name="read_counter", description="Read the current counter value.",
                        body="1. Print apis.counter.get().")], library)
    for condition in ("task+text", "subtask"):  # a library with or without a skill format: read-only either way
        config = StreamConfig(run="x", condition=condition, library=str(library),
                              model={"name": "openai", "max_concurrency": 8})
        assert independent_tasks(config)
        assert parallel_width(config) == 8
        _, seq, seq_traj, seq_script = run(tmp_path, f"seq-{condition}", condition, 1, library=str(library))
        summary, par, par_traj, par_script = run(tmp_path, f"par-{condition}", condition, 4, library=str(library))
        assert (seq_script.most, par_script.most > 1) == (1, True)  # tasks overlapped
        assert all(r["retrieved"] for r in par)
        assert all(not r["induced"] for r in par)  # a frozen library: nothing induced
        for a, b in zip(seq, par, strict=True):
            a.pop("run"), b.pop("run")
            assert strip(a) == strip(b)
        assert strip(seq_traj) == strip(par_traj)
        assert par_script.usage == seq_script.usage  # each commit's saved counts: a resume counts no task twice
        assert len(par_script.usage) == len(TARGETS)
        assert sum(par_script.usage[-1].values()) >= len(TARGETS)


def test_library_streams_that_share_state_between_tasks_stay_sequential(tmp_path):
    library = str(tmp_path / "library.jsonl")
    for settings in ({"library_scope": "own-task"}, {"skill_exec": "subagent"}, {"library_organization": "tree"},
                     {"reuse": "lens"}, {"mask_rate": 0.5}, {"coordination": "metaskill"}):
        config = StreamConfig.model_construct(**{**StreamConfig(run="x", condition="task+text",
                                                                 library=library).__dict__, **settings})
        assert not independent_tasks(config), settings
    assert not independent_tasks(StreamConfig(run="x", condition="task+text"))  # its own memory


def test_streams_with_a_memory_stay_sequential(tmp_path, hash_embedder):
    config = StreamConfig(run="m", runs_dir=str(tmp_path / "runs"), condition="task+text",
                          model={"name": "scripted", "max_concurrency": 32})
    assert not independent_tasks(config)
    assert parallel_width(config) == 1
    script = CountingScript()
    env = TinyEnv(TARGETS[:3], workdir=tmp_path / "ws")
    run_stream(env, ScriptedModel(script), config, embedder=hash_embedder, parallel_tasks=4)
    assert script.most == 1
    baseline = StreamConfig(run="b", condition="task", model={"name": "openai", "max_concurrency": 32})
    assert parallel_width(baseline) == 16


def test_grid_max_connections_caps_the_endpoint_and_feeds_the_baselines(tmp_path, monkeypatch, capsys):
    import yaml
    from helpers_cli import ALLOW_TINY, TINY, main_cli

    from skilltransfer.llm.testing.mock_server import MockServer

    with MockServer(CounterScript(TEXT_SKILL), latency_s=0.05) as server:
        spec = {"name": "p", "out": str(tmp_path / "out"), "envs": {"a": {"env": TINY, "args": {"targets": TARGETS}}},
                "models": {"mock": {"name": "openai", "base_url": server.url, "model": "mock", "api_key": "x"}},
                "conditions": ["task"]}
        path = tmp_path / "p.yaml"
        path.write_text(yaml.safe_dump(spec))
        code, _, _ = main_cli(["grid", str(path), "--no-progress", "--max-connections", "3", *ALLOW_TINY], monkeypatch,
                              capsys)
        assert code == 0
        assert 1 < server.max_in_flight <= 3  # one stream of baselines kept several requests in flight
    records = [json.loads(line) for line in (tmp_path / "out" / "a/mock/task/results.jsonl").read_text().splitlines()]
    assert [r["position"] for r in records] == list(range(len(TARGETS)))  # committed in stream order
    assert sorted(r["task_id"] for r in records) == sorted(f"tiny/{i}" for i in range(len(TARGETS)))


def test_a_relative_run_folder_is_written_where_it_was_named_whatever_the_working_folder(tmp_path, monkeypatch):
    """A stream's writes go through the run folder's absolute path: an in-process (test-double) episode acting in
    another thread changes the working folder meanwhile (it ran ``runs/...: no such folder`` once under load)."""
    from skilltransfer.log import RunFolder

    monkeypatch.chdir(tmp_path)
    folder = RunFolder("runs/r")
    (tmp_path / "runs" / "r").mkdir(parents=True)
    elsewhere = tmp_path / "workspace"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # what contextlib.chdir in the in-process runner does to the whole process
    folder.prompts.add([{"role": "user", "content": "hello"}])
    assert (tmp_path / "runs" / "r" / "prompts.jsonl").is_file()
    assert not (elsewhere / "runs").exists()
    assert str(folder.path) == "runs/r"  # shown as given
