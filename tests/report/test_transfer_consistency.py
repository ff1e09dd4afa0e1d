"""One definition of a transfer event (`skilltransfer.report.events.transfer_events`, docs/metrics.md): ``show``,
``view`` and ``report`` count the same events on the same run."""

from __future__ import annotations

import csv
import json

from helpers_cli import main_cli, run_tiny
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import RunFolder
from skilltransfer.view import Catalog


def test_show_view_and_report_count_the_same_transfer_events(tmp_path, monkeypatch, capsys):
    run = tmp_path / "runs" / "tiny-subtask"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        run_tiny(server, run, "subtask+text", (3, 5, 2, 4))
    records = RunFolder(run).read_records()
    # the run has what two definitions could count differently: a skill retrieved by several subtasks of one task,
    # and one retrieved inside the task that induced it
    retrievals = [(hit.source_position, r.position) for r in records for hit in r.retrieved
                  if hit.source_position is not None and hit.source_position <= r.position]
    assert (0, 0) in retrievals
    assert len(retrievals) > len(set(retrievals))
    expected = sorted({(source, target) for source, target in retrievals if source < target})  # by hand
    assert len(expected) == 3

    code, out, _ = main_cli(["show", str(run), "--json"], monkeypatch, capsys)
    assert code == 0
    shown = [(e["source_position"], e["target_position"]) for e in json.loads(out)["transfers"]]
    code, out, _ = main_cli(["show", str(run)], monkeypatch, capsys)
    assert code == 0
    assert "3 events in 3 tasks" in out

    catalog = Catalog([tmp_path / "runs"])
    (entry,) = catalog.index()["runs"]
    edges = catalog.run(entry["key"])["transfers"]
    viewed = [(e["source"], e["target"]) for e in edges]
    tasks = catalog.run(entry["key"])["tasks"]
    marked = [t["position"] for t in tasks for hit in t["retrieved"]
              if (hit["skill_id"], t["position"]) in {(e["skill_id"], e["target"]) for e in edges}]

    report = tmp_path / "report"
    code, _, _ = main_cli(["report", str(run), "--out", str(report)], monkeypatch, capsys)
    assert code == 0
    with (report / "skills_per_run.csv").open(newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    with (report / "fig6_transfer_density.csv").open(newline="") as handle:
        (density,) = list(csv.DictReader(handle))

    assert shown == viewed == expected
    assert entry["transfers"] == int(row["transfer_events"]) == int(density["n_events"]) == len(expected)
    assert marked == [target for _, target in expected]  # the task list marks each event once


def test_library_transfer_events_are_counted_alike_by_show_view_report_and_export(tmp_path, monkeypatch, capsys):
    """A run over another run's frozen memory: every retrieval of one of its skills is a library transfer event
    (source: that run), counted the same by show, view, report and export; within-run events stay 0."""
    runs = tmp_path / "runs"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as server:
        run_tiny(server, runs / "source", "subtask+text", (3, 5, 2, 4))
        run_tiny(server, runs / "frozen", "task+text", (3, 5, 2), "--library", str(runs / "source" / "memory"))
    run = runs / "frozen"
    records = RunFolder(run).read_records()
    expected = sorted({(r.position, hit.skill_id) for r in records for hit in r.retrieved})  # by hand: per task, skill
    assert expected
    assert not any(item.status == "added" for r in records for item in r.induced)  # a frozen library: no induction

    code, out, _ = main_cli(["show", str(run), "--json"], monkeypatch, capsys)
    assert code == 0
    events = json.loads(out)["transfers"]
    assert {e["kind"] for e in events} == {"library"}
    assert {e["source"] for e in events} == {"run source"}  # the source run, relative to the runs folder
    shown = sorted((e["target_position"], e["skill_id"]) for e in events)
    assert all(e["source_position"] is None for e in events)
    code, out, _ = main_cli(["show", str(run)], monkeypatch, capsys)
    assert code == 0
    tasks = len({position for position, _ in expected})
    assert f"{len(expected)} library transfer events in {tasks} tasks" in " ".join(out.split())
    assert "no task retrieved a skill induced earlier in this run" in " ".join(out.split())

    catalog = Catalog([runs])
    entry = next(e for e in catalog.index()["runs"] if e["run"] == "frozen")
    payload = catalog.run(entry["key"])
    viewed = sorted((e["target"], e["skill_id"]) for e in payload["transfers"] if e["kind"] == "library")
    assert (entry["transfers"], entry["library_transfers"]) == (0, len(expected))
    marked = sorted((use["position"], skill["id"]) for skill in payload["skills"] for use in skill["retrieved_by"]
                    if use["transfer_kind"] == "library")

    report = tmp_path / "report"
    code, _, _ = main_cli(["report", str(run), "--out", str(report)], monkeypatch, capsys)
    assert code == 0
    with (report / "skills_per_run.csv").open(newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    exported = tmp_path / "rows.jsonl"
    code, _, _ = main_cli(["export", str(run), "--format", "jsonl", "--out", str(exported)], monkeypatch,
                          capsys)
    assert code == 0
    names = sum(len(json.loads(line)["library_transferred_skills"]) for line in exported.read_text().splitlines())

    assert shown == viewed == marked == expected
    assert int(row["library_transfer_events"]) == names == len(expected)
    assert int(row["library_transfer_tasks"]) == tasks
    assert int(row["transfer_events"]) == 0

    code, out, _ = main_cli(["show", str(runs / "source"), "--json"], monkeypatch, capsys)  # the source run: within
    assert {e["kind"] for e in json.loads(out)["transfers"]} == {"within-run"}
