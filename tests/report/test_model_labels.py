"""A model's name in tables: the shipped specs' generic ``default`` label gives way to the model id (``grid -c
models.default.model=...``); the run folders keep the label."""

from __future__ import annotations

import csv

import yaml
from helpers_cli import ALLOW_TINY, TINY, main_cli
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.settings.config import ModelSpec


def test_report_label_is_the_model_id_under_the_generic_label():
    assert ModelSpec(label="default", name="openai", model="qwen3").report_label == "qwen3"
    assert ModelSpec(label="default", name="local").report_label == "local"
    assert ModelSpec(label="qwen3-8b", name="openai", model="qwen3").report_label == "qwen3-8b"  # a chosen label
    assert ModelSpec(name="openai", model="qwen3").report_label == "qwen3"


def test_grid_with_the_default_model_labels_table_2_by_the_model_id(tmp_path, monkeypatch, capsys):
    spec = {"name": "labels", "out": str(tmp_path / "out"), "embedder": "hash:64", "conditions": ["task"],
            "envs": {"a": {"env": TINY, "args": {"targets": [3, 5]}}}, "models": {"default": {}}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        code, _, err = main_cli(["grid", str(tmp_path / "spec.yaml"), "-c", "models.default.model=mock", "-c",
                                 "models.default.name=openai", "-c", f"models.default.base_url={server.url}", "-c",
                                 "models.default.api_key=x", "--no-progress", *ALLOW_TINY], monkeypatch, capsys)
    assert code == 0, err
    assert (tmp_path / "out" / "a" / "default" / "task" / "results.jsonl").is_file()  # the folder keeps the label
    code, _, err = main_cli(["report", str(tmp_path / "out"), "--out", str(tmp_path / "report")], monkeypatch, capsys)
    assert code == 0, err
    with (tmp_path / "report" / "table2_success.csv").open(newline="") as handle:
        models = {row["model"] for row in csv.DictReader(handle)}
    assert "mock" in models
    assert "default" not in models
    code, _, err = main_cli(["export", str(tmp_path / "out"), "--format", "csv", "--out", str(tmp_path / "t.csv")],
                            monkeypatch, capsys)
    assert code == 0, err
    with (tmp_path / "t.csv").open(newline="") as handle:
        assert {row["model"] for row in csv.DictReader(handle)} == {"mock"}
