"""Libraries across models (issue 39 §4): ``library_from.model`` plans every ordered (library model, user model)
pair, and ``report``'s ``model_transfer`` table pairs each with the user model's no-memory runs, through real
streams of the counter world."""

from __future__ import annotations

import pytest
from helpers_tinyenv import CounterScript, GivesUpOnFive, TinyEnv

from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.report import build_report, load_runs
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import SPEC_DIR, load_spec
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig

TARGETS = [3, 5, 2]


def test_the_shipped_spec_plans_every_ordered_pair():
    plans = {p.run: p for p in plan_streams(load_spec(str(SPEC_DIR / "model-transfer.yaml")))}
    assert plans["from-strong/office/weak/task+text"].source == "build/office/strong/task+text"
    assert plans["from-weak/office/strong/task+text"].source == "build/office/weak/task+text"
    assert plans["from-weak/office/weak/task+text"].source == "build/office/weak/task+text"
    assert {p.config.condition for run, p in plans.items() if run.startswith("none/")} == {"task"}
    assert len(plans) == 8


def test_an_unknown_library_model_is_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: m\nenvs: [apps]\nmodels: {a: {}}\nconditions: [task+text]\nphases:\n  - name: build\n"
                    "  - name: use\n    library_from: {phase: build, condition: task+text, model: zz,\n"
                    "                   same_tasks: true}\n")
    with pytest.raises(InputError, match="model 'zz'"):
        plan_streams(load_spec(str(spec)))


def _stream(tmp_path, embedder, run, label, condition, script, **cfg):
    config = StreamConfig(run=run, runs_dir=str(tmp_path / "runs"), condition=condition, model={"label": label},
                          agent={"harness": "paper"}, **cfg)
    return run_stream(TinyEnv(TARGETS, workdir=tmp_path / "ws" / run.replace("/", "_")), ScriptedModel(script),
                      config, embedder=embedder)


def test_report_pairs_each_library_with_the_user_models_no_memory_runs(tmp_path, hash_embedder):
    build = _stream(tmp_path, hash_embedder, "build/a", "a", "task+text", CounterScript())
    _stream(tmp_path, hash_embedder, "none/b", "b", "task", GivesUpOnFive())
    _stream(tmp_path, hash_embedder, "use/b", "b", "task+text", CounterScript(), library=str(build.path / "memory"))
    report = build_report(load_runs([tmp_path / "runs"]))
    table = report.table("model_transfer")
    [row] = table.where(model="b", library_model="a")
    assert row["tasks"] == 3
    assert row["with_library_pct"] == pytest.approx(100.0)
    assert row["without_pct"] == pytest.approx(200 / 3)
    assert row["delta_pct"] == pytest.approx(100 / 3)
    assert row["ci_low"] <= row["delta_pct"] <= row["ci_high"]
    plain = tmp_path / "plain"
    _stream(plain, hash_embedder, "none/b", "b", "task", CounterScript())
    assert "model_transfer" not in build_report(load_runs([plain / "runs"])).tables
