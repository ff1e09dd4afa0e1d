"""Provenance in ``config.json``: the software a run ran on, the seed sent, what the endpoint served; ``report``
names runs whose provenance differs and clears its own earlier files."""

from __future__ import annotations

import json

from helpers_tinyenv import TEXT_SKILL, CounterScript, TinyEnv

from skilltransfer.llm import make_model
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log.provenance import merged, provenance_differences, software
from skilltransfer.report import make_report
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig


def run_mock(tmp_path, name, targets=(3, 5)):
    env = TinyEnv(list(targets), workdir=tmp_path / "ws" / name)
    config = StreamConfig(run=name, runs_dir=str(tmp_path / "runs"), condition="task",
                          model={"name": "openai", "model": "mock", "params": {"seed": 7}})
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        client = make_model("openai", base_url=server.url, model="mock", api_key="x", params={"seed": 7})
        return run_stream(env, client, config)


def test_config_json_records_software_seed_and_what_was_served(tmp_path):
    summary = run_mock(tmp_path, "r")
    provenance = json.loads((summary.path / "config.json").read_text())["provenance"]
    assert provenance["toolkit_version"] == software()["toolkit_version"]
    assert provenance["python"].count(".") == 2
    assert "pandas" in provenance["packages"]
    assert "numpy" in provenance["packages"]
    assert provenance["seed"] == 7
    assert provenance["served_models"] == ["mock"]
    assert provenance["system_fingerprints"] == ["fp_mock"]
    assert set(provenance) >= {"git_commit", "git_dirty"}  # None outside a checkout


def test_a_resume_on_other_software_is_recorded():
    before = {**software(), "served_models": ["a"], "system_fingerprints": []}
    now = {**software(), "git_commit": "other", "served_models": ["b"], "system_fingerprints": ["fp"]}
    out = merged(before, now)
    assert out["served_models"] == ["a", "b"]
    assert out["system_fingerprints"] == ["fp"]
    assert out["resumed_with"] == [{"git_commit": "other"}]
    assert out["git_commit"] == before["git_commit"]


def test_differences_name_the_runs():
    base = {"toolkit_version": "0.1.0", "packages": {"pandas": "2.2.0"}, "served_models": ["m"]}
    lines = provenance_differences({"x": base, "y": {**base, "packages": {"pandas": "3.0.0"}}, "z": {}})
    assert lines == ["provenance differs: packages.pandas: 2.2.0 (x); 3.0.0 (y)"]
    assert provenance_differences({"x": base, "y": dict(base)}) == []


def test_report_names_differing_provenance_and_clears_its_old_files(tmp_path):
    first = run_mock(tmp_path, "a")
    second = run_mock(tmp_path, "b", targets=(4, 1))
    config = json.loads((second.path / "config.json").read_text())
    config["provenance"]["packages"]["pandas"] = "0.0-other"
    (second.path / "config.json").write_text(json.dumps(config))
    out = tmp_path / "report"
    make_report([first.path, second.path], out, utility=False)
    text = (out / "report.md").read_text()
    assert "provenance differs: packages.pandas:" in text
    assert "0.0-other (b)" in text
    (out / "stale_table.csv").write_text("x\n1\n")
    (out / "notes.txt").write_text("mine")
    make_report([first.path], out, utility=False)
    assert not (out / "stale_table.csv").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert "provenance differs" not in (out / "report.md").read_text()
