"""``skilltransfer export`` and ``skilltransfer.load_runs``: one row per finished task across runs, with
the settings that differ between them, outcome, tokens, cost and skills; csv, parquet and jsonl load into pandas."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers_cli import main_cli
from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer import load_runs
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.report.summary import summarize_run
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig


@pytest.fixture
def two_runs(tmp_path, hash_embedder):
    for name, steps in (("a", 50), ("b", 20)):
        env = TinyEnv([3, 5, 2], workdir=tmp_path / "ws" / name)
        config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task+text",
                              model={"name": "scripted", "price": {"input": 1.0, "output": 4.0}},
                              limits={"step_limit": steps})
        run_stream(env, ScriptedModel(CounterScript(TEXT_SKILL)), config, embedder=hash_embedder)
    return tmp_path / "runs"


def test_load_runs_is_one_row_per_task(two_runs):
    frame = load_runs(two_runs)
    assert len(frame) == 6
    assert list(frame.groupby("run").size()) == [3, 3]
    assert frame.set_index(["run", "position"]).index.is_unique
    assert set(frame["limits.step_limit"]) == {50, 20}  # the setting that differs between the runs
    assert "embedder" not in frame.columns  # the same in both: left out
    assert frame["cost_usd"].gt(0).all()
    assert frame["tokens"].equals(frame["prompt_tokens"] + frame["completion_tokens"])
    for run in ("a", "b"):
        summary = summarize_run(two_runs / run)
        rows = frame[frame.run == run]
        assert rows["success"].mean() == summary.success
        assert rows["cost_usd"].sum() == pytest.approx(summary.cost_usd)
        assert sum(len(t) for t in rows["transferred_skills"]) == len(summary.transfers)
    assert frame.loc[0, "induced_skills"]  # the first task induced the skill the later ones retrieve
    assert frame.loc[1, "retrieved_skills"] == frame.loc[0, "induced_skills"]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_export_formats_load_into_pandas(two_runs, tmp_path, monkeypatch, capsys, fmt):
    out = tmp_path / f"tasks.{fmt}"
    code, _, err = main_cli(["export", str(two_runs), "--format", fmt, "--out", str(out)], monkeypatch, capsys)
    assert code == 0
    assert "6 tasks of 2 runs" in err
    loaded = {"csv": pd.read_csv, "parquet": pd.read_parquet,
              "jsonl": lambda p: pd.read_json(p, lines=True)}[fmt](out)
    assert len(loaded) == 6
    expected = load_runs(two_runs)
    assert list(loaded.columns) == list(expected.columns)
    assert list(loaded["task_id"]) == list(expected["task_id"])
    skills = loaded["retrieved_skills"].map(json.loads) if fmt == "csv" else loaded["retrieved_skills"].map(list)
    assert list(skills) == list(expected["retrieved_skills"])
    if fmt == "jsonl":  # one JSON object per line, no blank line (pandas >= 3 ends its text with a newline)
        assert all(json.loads(line) for line in out.read_text().splitlines())


def test_export_of_nothing_is_one_error_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = main_cli(["export", str(tmp_path / "empty")], monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1


def test_load_runs_is_the_packages_entry_point_and_loads_on_use():
    """``skilltransfer.load_runs`` is the report's reader, imported on first use: importing the package loads
    neither the report nor pandas (the package's face stays light for every process that imports a part of it)."""
    import subprocess
    import sys

    code = ("import sys, skilltransfer\n"
            "assert not [m for m in sys.modules if m.startswith(('pandas', 'skilltransfer.report'))]\n"
            "from skilltransfer.report.export import load_runs\n"
            "assert skilltransfer.load_runs is load_runs\n"
            "print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
    import skilltransfer

    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = skilltransfer.nothing
