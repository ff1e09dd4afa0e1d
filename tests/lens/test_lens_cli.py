"""``skilltransfer library decompose`` and ``library route`` end to end with the scripted model (a test double)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_cli import main_cli as run

from skilltransfer.lens.graph import SkillGraph
from skilltransfer.memory.embedders import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "data" / "demo_library"
DECOMPOSE_RULES = [
    {"match": "Name: send-email-with-attachment",
     "reply": "POLICY: Email a file to a contact.\nSTRATEGY: Find the address.\nPRIMITIVE: Search the contacts.\n"
              "STRATEGY: Send it.\nPRIMITIVE: Attach the file."},
    {"match": "Name: create-calendar-event",
     "reply": "POLICY: Add an event to the calendar.\nPROCEDURE: Turn relative dates into YYYY-MM-DD.\n"
              "PRIMITIVE: Search the contacts."},
    {"match": ".", "reply": "Sorry, I cannot split this skill."},
]




@pytest.fixture(autouse=True)
def embedding_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' embedding cache goes to the test's folder, never the working directory."""
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "decompose.jsonl"
    path.write_text("".join(json.dumps(rule) + "\n" for rule in DECOMPOSE_RULES))
    return path


def test_decompose_then_route_through_the_cli(tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "graph"
    code, _, err = run(["library", "decompose", str(DEMO), "--out", str(out), "--model", f"scripted:{rules}",
                       "--embedder", "hash:64", "--merge-threshold", "0.99", "--retries", "1"],
                       monkeypatch, capsys)
    assert code == 0, err
    assert "send-email-with-attachment: model, 5 units, 1 call(s)" in err
    assert "sourdough-starter-care: fallback, " in err
    assert "2 call(s) (no line starts with a layer tag)" in err
    assert "2 of 10 skills by the model, 8 by the fallback" in err
    graph = SkillGraph.load(out, HashEmbedder(64))
    search = [u for u in graph if u.text == "Search the contacts."]
    assert len(search) == 1  # identical primitives of two skills merged into one shared unit
    assert len(graph.parents(search[0].id)) == 2
    assert graph.info["model"] == "scripted"
    assert len(graph.info["records"]) == 10

    verify = tmp_path / "verify.jsonl"
    verify.write_text(json.dumps({"match": "Adapted for this task", "reply": "Attach report.pdf"}) + "\n"
                      + json.dumps({"match": "(?s)Unit \\(policy", "reply": "DECISION: DECOMPOSE"}) + "\n"
                      + json.dumps({"match": ".", "reply": "DECISION: REWRITE"}) + "\n")
    code, stdout, err = run(["library", "route", str(out), "--query", "email the report to Alice", "--model",
                            f"scripted:{verify}", "--embedder", "hash:64", "--json"],
                            monkeypatch, capsys)
    assert code == 0, err
    log = json.loads(stdout)
    assert log["visits"]
    assert set(log["rewrites"].values()) == {"Attach report.pdf"}
    assert log["adaptation_cost"] == len(log["visits"]) + len(log["rewrites"])
    code, stdout, _ = run(["library", "route", str(out), "--query", "email the report", "--model",
                          f"scripted:{verify}", "--embedder", "hash:64", "--reuse", "no-walk"],
                          monkeypatch, capsys)
    assert code == 0
    assert "(adapted to this task)" in stdout
    assert "visited " in stdout


@pytest.mark.parametrize(("argv", "message"), [
    (["--out", "{tmp}/a-file"], "--out: exists and is not a folder"),
    (["--out", "{tmp}"], "refusing to overwrite: not a saved skill graph (no manifest.json)"),
    (["--out", "{tmp}/new", "--model", "scripted:"], "--model 'scripted:': give a file after 'scripted:'"),
    (["--out", "{tmp}/new", "--model", "gpt-4o"], "--model 'gpt-4o' is not a model string; write one of: openai/<id>"),
    (["--out", "{tmp}/new", "--merge-threshold", "0"], "--merge-threshold must be > 0"),
    (["--out", "{tmp}/new", "--embedder", "nonsense"], "Unknown embedder 'nonsense'"),
])
def test_decompose_refuses_bad_input_with_one_line_and_writes_nothing(
        argv: list[str], message: str, tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("x")
    args = ["library", "decompose", str(DEMO), "--model", f"scripted:{rules}", "--embedder", "hash:64",
            *[a.replace("{tmp}", str(tmp_path)) for a in argv]]
    code, _, err = run(args, monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()


def test_route_refuses_a_graph_of_another_embedder(tmp_path: Path, rules: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "graph"
    assert run(["library", "decompose", str(DEMO), "--limit", "2", "--out", str(out), "--model", f"scripted:{rules}",
               "--embedder", "hash:64"], monkeypatch, capsys)[0] == 0
    code, _, err = run(["library", "route", str(out), "--query", "q", "--model", f"scripted:{rules}",
                        "--embedder", "hash:32"], monkeypatch, capsys)
    assert code == 2
    assert "built with embedder 'hash:dim=64:char=1'" in err
    code, _, err = run(["library", "route", str(out), "--query", "q", "--reuse", "flat", "--model",
                       f"scripted:{rules}", "--embedder", "hash:64"], monkeypatch, capsys)
    assert code == 2
    assert "Invalid value for '--reuse': Value error, 'flat' is not one of 'lens', 'rewrite-all', 'no-walk'" in err
