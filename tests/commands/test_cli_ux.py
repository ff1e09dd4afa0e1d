"""The toolkit as a person uses it (issue 32), through the CLI and the mock OpenAI-compatible server: model strings
and the model id read from ``/v1/models``, reports that never pool unlike runs, ``report --compare``, ``library
show`` on any library, ``score --tasks ENV``, group-readable run folders, and judge's exit code."""

from __future__ import annotations

import csv
import json
import stat
from pathlib import Path

import pytest
from helpers_cli import TINY, cli, main_cli, records_of
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.errors import InputError
from skilltransfer.llm.config import OPENAI_URL, parse_model_string
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.report.compare import mcnemar_exact

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo_library"


def _run(out: Path, model: str, *extra: str, targets: tuple[int, ...] = (3, 5, 2)) -> None:
    cli("run", "--env", TINY, "--condition", "task+text", "-m", model, "--api-key", "x", "--embedder", "hash:64",
        "-o", str(out), "--env-arg", f"targets={json.dumps(list(targets))}", "--no-sandbox", "--no-progress", *extra)


@pytest.mark.parametrize(("text", "fields"), [
    ("local", {"name": "local"}),
    ("local:/m/q.gguf", {"name": "local", "model": "/m/q.gguf"}),
    ("scripted:r.jsonl", {"name": "scripted", "script": "r.jsonl"}),
    ("openai", {"name": "openai"}),
    ("openai/gpt-4o", {"name": "openai", "model": "gpt-4o"}),
    ("Qwen/Qwen2.5-7B@http://gpu:8000/v1", {"name": "openai", "model": "Qwen/Qwen2.5-7B",
                                            "base_url": "http://gpu:8000/v1"}),
    ("vllm/Qwen/Qwen2.5-7B@http://gpu:8000/v1", {"name": "openai", "model": "Qwen/Qwen2.5-7B",
                                                 "base_url": "http://gpu:8000/v1"}),
    ("http://gpu:8000/v1", {"name": "openai", "base_url": "http://gpu:8000/v1"}),
])
def test_model_strings(text: str, fields: dict[str, str]) -> None:
    assert parse_model_string(text) == fields


@pytest.mark.parametrize("text", ["mock", "gpt-4o", "scripted:", "local:", "@"])
def test_a_bad_model_string_lists_the_forms(text: str) -> None:
    with pytest.raises(InputError, match=r"--model"):
        parse_model_string(text)


def test_the_model_id_is_read_from_the_endpoint_and_recorded(tmp_path: Path) -> None:
    with MockServer(CounterScript(TEXT_SKILL), models=["served-7b"]) as server:
        _run(tmp_path / "r", server.url)  # a bare URL: its only model
    config = json.loads((tmp_path / "r" / "config.json").read_text())["config"]["model"]
    assert (config["name"], config["model"]) == ("openai", "served-7b")
    with MockServer(CounterScript(TEXT_SKILL), models=["a", "b"]) as server, \
            pytest.raises(InputError, match=r"serves several models \(a, b\); choose one: --model a@"):
        _run(tmp_path / "s", server.url)
    assert not (tmp_path / "s").exists()
    assert OPENAI_URL == "https://api.openai.com/v1"


def test_run_folders_are_readable_by_the_group(tmp_path: Path) -> None:
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        _run(tmp_path / "r", f"mock@{server.url}")
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert {"config.json", "results.jsonl", "skills.jsonl", "manifest.json"} <= {p.name for p in files}
    for path in files:
        assert path.stat().st_mode & stat.S_IRGRP, path


def test_report_never_pools_unlike_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        _run(runs / "a", f"model-a@{server.url}")
        _run(runs / "a-seed1", f"model-a@{server.url}", "--order-seed", "1")  # a repeat: pooled
        _run(runs / "b", f"model-b@{server.url}")  # another model
        _run(runs / "a-hot", f"model-a@{server.url}", "--temperature", "0.7")  # same label, other setting
    code, _, err = main_cli(["report", str(runs), "-o", str(tmp_path / "rep"), "--no-utility"], monkeypatch, capsys)
    assert code == 0, err
    with (tmp_path / "rep" / "table2_success.csv").open() as handle:
        rows = {row["model"]: row for row in csv.DictReader(handle)}
    assert rows["model-a (temperature=default)"]["n_runs"] == "2"
    assert rows["model-a (temperature=0.7)"]["n_runs"] == "1"
    assert rows["model-b"]["n_runs"] == "1"
    with (tmp_path / "rep" / "fig3_budget_curves.csv").open() as handle:
        curves = {(row["model"], row["condition"]) for row in csv.DictReader(handle)}
    assert len(curves) == 3  # one curve per setting, not one task+text curve over both models
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "only repeats of identical settings (order seeds) are pooled" in text
    assert "model-a (temperature=default) / task+text: 2 runs (order seeds 0, 1)" in text
    assert "labelled by every setting that differs: (temperature=0.7); (temperature=default)" in text


def test_report_compare_writes_the_flip_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def rules(solved: set[int]) -> list[dict[str, str]]:
        good = [{"match": f"Set the counter to {n}\\b", "reply": f"```python\napis.counter.add({n})\ncomplete_task()"
                 "\n```"} for n in sorted(solved)]
        return [*good, {"reply": "```python\napis.counter.add(1)\ncomplete_task()\n```"}]

    for name, solved in (("a", {3, 5}), ("b", {5, 2})):
        rule_file = tmp_path / f"{name}.jsonl"
        rule_file.write_text("".join(json.dumps(r) + "\n" for r in rules(solved)))
        with MockServer(rule_file) as server:
            cli("run", "--env", TINY, "--condition", "task", "-m", f"model-{name}@{server.url}", "-o",
                str(tmp_path / name), "--env-arg", "targets=[3, 5, 2, 4]", "--no-sandbox", "--no-progress")
    solved = {r["task_id"]: r["success"] for r in records_of(tmp_path / "a")}  # tiny/i has target targets[i]
    assert solved == {"tiny/0": True, "tiny/1": True, "tiny/2": False, "tiny/3": False}
    code, out, err = main_cli(["report", "--compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o",
                               str(tmp_path / "cmp")], monkeypatch, capsys)
    assert code == 0, err
    assert "1 solved in both, 1 in A only, 1 in B only, 1 in neither; McNemar's exact p = 1" in out
    with (tmp_path / "cmp" / "compare_tasks.csv").open() as handle:
        outcomes = {row["task_id"]: row["outcome"] for row in csv.DictReader(handle)}
    assert outcomes == {"tiny/0": "A only", "tiny/1": "both", "tiny/2": "B only", "tiny/3": "neither"}
    position = next(r["position"] for r in records_of(tmp_path / "a") if r["task_id"] == "tiny/0") + 1
    assert f"Solved in A only: tiny/0 (task {position})" in (tmp_path / "cmp" / "compare.md").read_text()
    code, _, err = main_cli(["report", "--compare", str(tmp_path), str(tmp_path / "b")], monkeypatch, capsys)
    assert (code, err.strip()) == (2, f"error: {tmp_path}: --compare A: give one run folder (this holds 2 runs)")


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 1) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 2**6)
    assert mcnemar_exact(8, 1) == pytest.approx(2 * (1 + 9) / 2**9)


def test_library_show_reads_any_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main_cli(["library", "show", str(DEMO)], monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith(f"10 skills in {DEMO}")
    assert "convert-pdf-to-text" in out
    code, out, _ = main_cli(["library", "show", str(DEMO), "--skill", "convert-pdf-to-text"], monkeypatch, capsys)
    assert "### Skill: convert-pdf-to-text" in out
    assert "3. If the text is empty" in out  # the body
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        _run(tmp_path / "r", f"mock@{server.url}")
    code, out, _ = main_cli(["library", "show", str(tmp_path / "r" / "memory"), "--skill", "1"], monkeypatch, capsys)
    assert code == 0
    assert "set_counter_value" in out
    assert "induced from tiny/0 (task 1 of its stream)" in out
    code, _, err = main_cli(["library", "show", str(DEMO), "--skill", "nope"], monkeypatch, capsys)
    assert code == 2
    assert "--skill 'nope': no such skill" in err
    code, _, err = main_cli(["library", "show", str(DEMO), "--node", "x"], monkeypatch, capsys)
    assert "--node needs an organised library" in err


def test_score_tasks_takes_an_env(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main_cli(["score", str(DEMO), "--tasks", "office", "--split", "test", "--embedder", "hash:32",
                               "--no-embed-cache", "--top", "2"], monkeypatch, capsys)
    assert code == 0, err
    assert "10 skills x 176 tasks" in " ".join(out.split())
    code, _, err = main_cli(["score", str(DEMO), "--tasks", "nowhere", "--embedder", "hash:32"], monkeypatch, capsys)
    assert code == 2
    assert "--tasks 'nowhere': no such file or folder, and not an env (envs: apps, office" in err


def test_judge_fails_when_no_judgment_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        _run(tmp_path / "a", f"mock@{server.url}")
        _run(tmp_path / "b", f"mock@{server.url}")
    with MockServer(["I like both."] * 16) as judge:
        code, _, err = main_cli(["judge", str(tmp_path / "a"), str(tmp_path / "b"), "-m", f"j@{judge.url}", "-n", "1"],
                                monkeypatch, capsys)
    assert code == 1
    assert "error: no judgment could be parsed (3 replies without a verdict" in err  # 3 judgments per task


def test_report_html_escapes_what_runs_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The report page is built by string formatting with every run-provided text escaped (the reason it does not
    need a template engine): a model id with markup shows as text."""
    with MockServer(CounterScript(TEXT_SKILL)) as server:
        _run(tmp_path / "r", f"<img src=x onerror=alert(1)>@{server.url}")
    code, _, err = main_cli(["report", str(tmp_path / "r"), "-o", str(tmp_path / "rep"), "--no-utility"], monkeypatch,
                            capsys)
    assert code == 0, err
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img src=x" not in page
