"""Specs checked at load (every (phase, env) resolves to tasks, before any stream runs), each stream on its own env's
tasks, overrides that narrow every shipped spec, and an empty library from a source phase as a result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import OFFICEBENCH_TASKS
from helpers_cli import ALLOW_TINY, main_cli
from helpers_tinyenv import CounterScript

from skilltransfer.envs.registry import get_env
from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.log import RunFolder
from skilltransfer.report import make_report
from skilltransfer.runner.grid import resolve_streams, run_grid
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import SPEC_DIR, build_spec, load_spec

TINY = "helpers_tinyenv:TinyEnv"
SHIPPED = sorted(SPEC_DIR.glob("*.yaml"))


def _write(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _mock(url: str) -> dict:
    return {"mock": {"base_url": url, "model": "mock", "api_key": "x", "backoff_base_s": 0, "max_retries": 2}}


# --------------------------------------------------------------------------------------------- tasks per env
def test_two_env_short_form_gives_each_stream_its_own_envs_tasks(tmp_path):
    with MockServer(RolePlay()) as server:
        spec = build_spec({"name": "two", "out": str(tmp_path / "out"), "envs": ["apps", "office"],
                           "condition": "task", "models": _mock(server.url), "limits": {"task_limit": 2}})
        summary = run_grid(spec)
    assert summary.counts["done"] == 2, [o.error for o in summary.outcomes]
    for env in ("apps", "office"):
        own = {t.id for t in get_env(env, workdir=tmp_path / "probe" / env).tasks()}
        ids = [r.task_id for r in RunFolder(tmp_path / "out" / env / "mock" / "task").read_records()]
        assert len(ids) == 2
        assert set(ids) <= own


def test_dry_run_prints_each_streams_task_count_and_library(tmp_path, monkeypatch, capsys):
    root = Path(os.environ.get("OFFICEBENCH_ROOT") or OFFICEBENCH_TASKS)
    if not root.is_dir():
        pytest.skip("paper-table2 runs the real OfficeBench tasks; ../shared/officebench/tasks is absent")
    monkeypatch.setenv("OFFICEBENCH_ROOT", str(root))
    code, out, _ = main_cli(["grid", str(SPEC_DIR / "paper-table2.yaml"), "--dry-run"], monkeypatch, capsys)
    assert code == 0
    lines = [line for line in out.splitlines() if " tasks" in line and "/" in line.split()[0]]
    counts = {line.split("/")[0]: int(line.split()[1]) for line in lines}
    # the paper's evaluation sets: the look-alikes' test splits and every real OfficeBench task (the paper's 300)
    assert counts == {"apps": 325, "officebench": 300, "datasci": 105}
    assert all(line.endswith("tasks (test split)") for line in lines if not line.startswith("officebench/"))
    assert len(lines) == 18
    code, out, _ = main_cli(["grid", "cross-level", "--dry-run", "--limit", "3"], monkeypatch, capsys)
    transfer = [line for line in out.splitlines() if line.startswith("transfer/apps/")]
    assert transfer
    assert all("   3 tasks (test split)  library: source/apps/default/subtask+" in line for line in transfer)


# --------------------------------------------------------------------------------------------- checked at load
def _bad(tmp_path: Path, data: dict) -> str:
    with pytest.raises(InputError) as err:
        resolve_streams(load_spec(str(_write(tmp_path, {"name": "bad", **data}))))
    return str(err.value)


def test_spec_problems_stop_the_grid_before_any_stream_runs_naming_spec_phase_and_env(tmp_path):
    composition = yaml.safe_load((SPEC_DIR / "composition.yaml").read_text())
    for entry in composition["phases"][1]["envs"].values():
        entry.pop("split")  # as shipped before: the compose phase inherited split dev
    message = _bad(tmp_path, {**composition, "name": "bad"})
    assert "spec.yaml: spec 'bad', phase 'compose', env 'datasci' (datasci; split 'dev', stream 'multi-step'" in message
    assert "stream 'multi-step' names tasks this env split 'dev' lacks" in message
    assert "env 'apps' (apps; split 'nope')" in _bad(tmp_path, {"envs": {"apps": {"split": "nope"}},
                                                                 "condition": "task"})
    message = _bad(tmp_path, {"envs": ["apps"], "condition": "task",
                              "phases": [{"name": "a"}, {"name": "b", "library_from": {"phase": "a",
                                                                                       "condition": "task"}}]})
    assert "phase 'b', env 'apps': library_from: the source stream 'a/apps/local/task' keeps no skill memory" in message
    message = _bad(tmp_path, {"envs": ["apps"], "condition": "task+text", "limits": {"task_limit": 1},
                              "phases": [{"name": "a"}, {"name": "b", "library_filter": "top",
                                                         "library_from": {"phase": "a", "condition": "task+text"}}]})
    assert "phase 'b', env 'apps' (apps; task_limit 1): library_filter 'top'" in message
    assert "library not found" in _bad(tmp_path, {"envs": ["apps"], "condition": "task",
                                                  "library": str(tmp_path / "nowhere")})


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_spec_resolves_and_narrows_to_one_env_and_a_task_limit(path):
    spec = load_spec(str(path))
    plans, tasks = resolve_streams(spec)
    assert all(tasks[p.run] for p in plans)
    first = next(iter(spec.phases[0].envs))
    narrowed = load_spec(str(path), [f"envs=[{first}]", "limits.task_limit=3"])
    plans = plan_streams(narrowed)
    assert {p.config.env.display_label for p in plans} == {first}
    assert {p.config.task_limit for p in plans} == {3}  # phases that set their own limits too
    assert {p.phase for p in plans} == {p.name for p in spec.phases}
    by_phase = {(p.phase, p.config.env.display_label): p.config.env for p in plan_streams(spec)}
    for p in plans:  # a narrowed env keeps the spec's settings of that env in each phase
        assert p.config.env == by_phase[(p.phase, first)]


# --------------------------------------------------------------------------------------------- empty libraries
def _unparseable(_n, _messages):
    return "I could not find a reusable procedure in this trajectory."


def test_a_source_phase_that_induced_nothing_gives_its_dependents_zero_skills(tmp_path, monkeypatch, capsys):
    with MockServer(CounterScript(_unparseable)) as server:
        data = {"name": "empty", "out": str(tmp_path / "out"), "embedder": "hash:64", "models": _mock(server.url),
                "envs": {"a": {"env": TINY, "args": {"targets": [3, 5]}}}, "condition": "task+text",
                "phases": [{"name": "source"},
                           {"name": "reuse", "library_from": {"phase": "source", "condition": "task+text",
                                                            "same_tasks": True}},
                           {"name": "split", "library_filter": "bottom",
                            "library_from": {"phase": "source", "condition": "task+text", "same_tasks": True}}]}
        code, out, _ = main_cli(["grid", str(_write(tmp_path, data)), "--no-progress", *ALLOW_TINY], monkeypatch,
                                capsys)
    assert code == 0, out
    status = json.loads((tmp_path / "out" / "status.json").read_text())["streams"]
    assert {run: s["state"] for run, s in status.items()} == dict.fromkeys(status, "done")
    for run in ("reuse/a/mock/task+text", "split/a/mock/task+text-bottom"):
        assert status[run]["library"] == "0 skills from source/a/mock/task+text"
        assert len(RunFolder(tmp_path / "out" / run).read_records()) == 2
    assert status["source/a/mock/task+text"]["library"] is None
    assert "2 streams read a frozen library, 2 of them with no skills" in out
    assert "library: 0 skills from source/a/mock/task+text" in out
    _, written = make_report([tmp_path / "out"], tmp_path / "report", utility=False)
    assert "reuse/a/mock/task+text (library: 0 skills from source/a/mock/task+text)" in written.markdown.read_text()
