"""``skilltransfer triggers`` (issue 55 §2): trigger evals in skill-creator's format through the mock endpoint,
isolated beside competitive, precision and recall per skill, resumable, one error line for a malformed eval file."""

from __future__ import annotations

import json
import re

import pytest
from helpers_cli import cli, main_cli

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.metrics.triggers import Ask, trigger_score
from skilltransfer.runner.triggers import read_eval_set

SKILLS = {"pdf-tools": "Use for anything with PDF files: merge, split, rotate, extract text from .pdf documents.",
          "sheet-tools": "Use when a spreadsheet (.xlsx, .csv) is read or written: columns, formulas, charts."}
EVALS = {"pdf-tools": [{"query": "merge a.pdf and b.pdf into one pdf", "should_trigger": True},
                       {"query": "rotate the pages of scan.pdf", "should_trigger": True},
                       {"query": "compute a probability density function in python", "should_trigger": False}],
         "sheet-tools": [{"query": "add a formula column to sales.xlsx", "should_trigger": True},
                         {"query": "explain what a database index is", "should_trigger": False}]}


def _library(tmp_path):
    root = tmp_path / "lib"
    for name, description in SKILLS.items():
        (root / name).mkdir(parents=True)
        front = f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n"
        (root / name / "SKILL.md").write_text(f"{front}# {name}\n\n1. Read the file.\n2. Do what was asked.\n")
    return root


class LoadsWhatTheQueryNames:
    """A scripted endpoint: loads the skill whose card shares a word with the request (pdf / xlsx), else finishes."""

    def __call__(self, messages):
        task = next(str(m["content"]) for m in messages if m["role"] == "user")
        said = " ".join(str(m["content"]) for m in messages[1:])
        if "Loaded skill" in said or "load_skill error" in said:
            return "Done.\n```python\ncomplete_task('ok')\n```"
        request = task.split("# Skills", 1)[0].lower()
        cards = re.findall(r"### Skill: (\S+)", task)
        for name, word in (("pdf-tools", "pdf"), ("sheet-tools", "xlsx")):
            if word in request and name in cards:
                return f"Load it.\n```python\nload_skill({name!r})\n```"
        return "Nothing fits.\n```python\ncomplete_task('answered')\n```"


def test_trigger_evals_through_the_endpoint_isolated_and_competitive_and_resumable(tmp_path):
    library = _library(tmp_path)
    evals = tmp_path / "evals.json"
    evals.write_text(json.dumps(EVALS))
    out = tmp_path / "out"
    args = ("triggers", str(library), "--evals", str(evals), "--runs", "2", "--out", str(out), "--embedder",
            "hash:64", "--no-sandbox", "--no-progress", "--api-key", "x")
    with MockServer(replies=LoadsWhatTheQueryNames()) as server:
        first = cli(*args, "--model", f"mock@{server.url}")
        assert "pdf-tools" in first.output
        assert "cost: 20 asks" in first.output
        document = json.loads((out / "triggers.json").read_text())
        rows = {(r["skill"], r["setting"]): r for r in document["skills"]}
        for setting in ("isolated", "competitive"):
            assert rows[("pdf-tools", setting)]["precision"] == 1.0
            assert rows[("pdf-tools", setting)]["recall"] == 1.0
            assert rows[("sheet-tools", setting)]["recall"] == 1.0
            assert rows[("pdf-tools", setting)]["asks"] == 6
        queries = (out / "queries.csv").read_text().splitlines()
        assert len(queries) == 1 + 2 * 5
        assert "trigger_rate" in queries[0]
        asked = len(server.requests)
        again = cli(*args, "--model", f"mock@{server.url}")  # resumes: no ask runs again
        assert "cost: 20 asks" in again.output
        assert len(server.requests) == asked
    for line in (out / "runs" / "isolated" / "results.jsonl").read_text().splitlines():
        record = json.loads(line)  # each ask's library: only its skill under test
        assert record["library_draw"]["size"] == 1
        assert [hit["name"] for hit in record["retrieved"]] == [record["task_id"].split("/")[0]]


def test_a_malformed_eval_file_is_one_error_line(tmp_path, monkeypatch, capsys):
    library = _library(tmp_path)
    bad = tmp_path / "bad.json"
    for text, message in (('[{"query": "merge pdfs", "should_trigger": "yes"}]', "item 1: should_trigger"),
                          ('[{"should_trigger": true}]', "item 1: query: missing"),
                          ('{"nope": [{"query": "q", "should_trigger": true}]}', "no skill named 'nope'"),
                          ('[{"query": "q", "should_trigger": true}', "invalid JSON"),
                          ("[]", "give a non-empty list")):
        bad.write_text(text)
        code, out, err = main_cli(["triggers", str(library), "--evals", str(bad), "--skill", "pdf-tools"]
                                  if text.startswith("[") else ["triggers", str(library), "--evals", str(bad)],
                                  monkeypatch, capsys)
        assert code == 2, err
        assert err.count("\n") == 1, err
        assert err.startswith("error: "), err
        assert message in err, err
    assert not (tmp_path / "triggers").exists()  # nothing half-written


def test_package_eval_sets_and_list_sets_need_a_skill(tmp_path):
    library = _library(tmp_path)
    (library / "pdf-tools" / "evals").mkdir()
    (library / "pdf-tools" / "evals" / "trigger_eval.json").write_text(json.dumps(EVALS["pdf-tools"]))
    from skilltransfer.runner.triggers import trigger_spec

    spec = trigger_spec(str(library), None, None, repeats=1, out=tmp_path / "o", steps=2, top_k=None)
    assert list(spec.sets) == ["pdf-tools"]
    assert len(spec.sets["pdf-tools"]) == 3
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(EVALS["pdf-tools"]))
    with pytest.raises(InputError, match="name the skill with --skill"):
        read_eval_set(listed, None, list(SKILLS))


def test_trigger_scores_by_hand():
    asks = [Ask(0, True, True), Ask(0, True, True), Ask(1, True, False), Ask(1, True, True),
            Ask(2, False, True), Ask(2, False, False)]
    score = trigger_score(asks, resamples=200)
    assert score.precision[0] == pytest.approx(3 / 4)
    assert score.recall[0] == pytest.approx(3 / 4)
    assert score.f1[0] == pytest.approx(3 / 4)
    assert [q.rate for q in score.queries] == [1.0, 0.5, 0.5]
    assert score.accuracy[0] == pytest.approx(2 / 3)  # query 2 (should not) at 0.5 fails
