"""One definition of a transfer event (`skilltransfer.experiments.summary.transfer_events`, docs/metrics.md): ``show``,
``view`` and ``report`` count the same events on the same run."""

from __future__ import annotations

import csv
import json

from helpers_cli import main_cli, run_tiny
from helpers_tinyenv import TEXT_SKILL, CounterScript

from skilltransfer.experiments.runlog import RunFolder
from skilltransfer.llm.mock_server import MockServer
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
