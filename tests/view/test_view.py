"""``skilltransfer view`` without a browser: the payloads read from runs made through the mock server, the server's
read-only, local-only and traversal-proof answers, the static export and the command's one-line errors (the pages
themselves are tested in a real browser in ``test_view_browser.py``)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers_cli import cli
from helpers_view import DEMO_LIBRARY, XSS, build_library_study, build_view_runs

from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder
from skilltransfer.memory.library import read_library
from skilltransfer.report.events import transfer_events
from skilltransfer.report.summary import summarize_run
from skilltransfer.report.trajectory import format_trajectory, load_task
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.view import Catalog, ViewServer, export_site
from skilltransfer.view.export import MARKER
from skilltransfer.view.highlight import python_tokens


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_view_runs(tmp_path_factory.mktemp("view"))


def _key(catalog: Catalog, path: Path) -> str:
    return next(r.key for r in catalog.scan()[0] if r.path == path.resolve())


def _get(url: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_payloads_follow_the_run_log(runs):
    root = runs["task"].parent.parent
    catalog = Catalog([root])
    index = catalog.index()
    assert {r["condition"] for r in index["runs"]} == {"task+text", "task", "subtask+code", "task[metaskill]"}
    assert not index["problems"]
    run = catalog.run(_key(catalog, runs["task+text"]))
    records = RunFolder(runs["task+text"]).read_records()
    events = transfer_events(records)
    assert len(run["transfers"]) == len(events) > 0  # the same events as `show`
    assert [(e["source"], e["target"]) for e in run["transfers"]] == [(e.source_position, e.target_position)
                                                                     for e in events]
    skill = run["skills"][0]
    assert XSS in skill["description"]  # untrusted text is carried as text
    assert [u["position"] for u in skill["retrieved_by"] if u["transfer"]] == [e.target_position for e in events]
    assert skill["induced_at"]["position"] == events[0].source_position
    priced = next(r for r in index["runs"] if r["key"] == run["key"])  # cost at the model's price, as `show` sums it
    assert priced["cost_usd"] == run["cost_usd"] == summarize_run(runs["task+text"]).cost_usd > 0
    assert [t["cost_usd"] for t in run["tasks"]] == [r.cost_usd for r in records]
    assert all(t["cost_usd"] > 0 for t in run["tasks"])
    assert next(r for r in index["runs"] if r["condition"] == "task")["cost_usd"] is None  # no price, no cost
    task = catalog.task(run["key"], 1)
    assert task["prompts_recorded"]
    calls = task["trajectory"]["calls"]
    assert all(isinstance(task["messages"][i], dict) for c in calls for i in c["messages"])
    action = next(i for i, s in enumerate(task["trajectory"]["steps"]) if s["type"] == "ActionStep")
    assert task["step_calls"][str(action)] == [0]
    assert "".join(t for _, t in task["code"][str(action)]) == task["trajectory"]["steps"][action]["action"]
    assert "contexts" not in task["trajectory"]  # the prompts hold them


def test_the_task_page_reads_a_trajectory_where_show_does(runs):
    """One reading of a trajectory (`skilltransfer.report.trajectory`) for ``view`` and ``show --task``: each retrieved
    skill's use in the same words, in the same places (the page prints the payload's words, never its own)."""
    catalog = Catalog([runs["subtask+code"], runs["task+text"]])
    labels = []
    for name in ("subtask+code", "task+text"):
        key = _key(catalog, runs[name])
        for record in RunFolder(runs[name]).read_records():
            task = catalog.task(key, record.position)
            expected = []
            for index, step in enumerate(task["trajectory"]["steps"]):
                if step["type"] == "RetrievalStep":
                    uses = task["uses"].get(str(index), {})
                    expected += [f"    - {s['name']} [{s['format']}] score {s['score']:.3f}"
                                 + (f" ... - {uses[s['id']]}" if s["id"] in uses else "") for s in step["skills"]]
                    labels += uses.values()
            shown = format_trajectory(*load_task(runs[name], record.task_id))
            lines = [line for line in shown.splitlines() if line.startswith("    - ") and "] score " in line]
            assert [line[:line.index(" from ")] + (f" ... - {line.rsplit(' - ', 1)[1]}" if " - " in line[6:] else "")
                    for line in lines] == expected
    assert "ran ×1 used" in labels  # the code skills the tasks ran


def test_a_crafted_retrieval_step_reads_as_no_use(runs, tmp_path):
    run = tmp_path / "crafted"
    shutil.copytree(runs["subtask+code"], run)
    record = next(r for r in RunFolder(run).read_records() if r.retrieved)
    path = run / record.trajectory
    data = json.loads(path.read_text())
    step = next(s for s in data["steps"] if s["type"] == "RetrievalStep" and s["skills"])
    step["skills"] = [{"name": "no id"}, {"id": ["a", "list"]}, {"id": 7}, *step["skills"]]  # a non-object: refused
    path.write_text(json.dumps(data))
    catalog = Catalog([run])
    task = catalog.task(_key(catalog, run), record.position)
    assert all(isinstance(k, str) and isinstance(v, str) for uses in task["uses"].values() for k, v in uses.items())


def test_python_tokens_join_to_the_code():
    code = "def f(x):\n    # note\n    return '<b>' + str(x)  \n"
    tokens = python_tokens(code)
    assert "".join(t for _, t in tokens) == code
    assert ["k", "def"] in tokens
    assert ["s", "'<b>'"] in tokens


def test_server_is_read_only_local_and_refuses_paths_out_of_the_run(runs, tmp_path):
    evil = tmp_path / "evil"
    shutil.copytree(runs["task"], evil)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"task_id": "x", "position": 0, "instruction": "SECRET", "steps": [], "calls": [],
                                  "contexts": []}))
    lines = (evil / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["trajectory"] = "../secret.json"
    (evil / "results.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    link = json.loads(lines[1])
    (evil / "trajectories" / "link.json").symlink_to(secret)
    link["trajectory"] = "trajectories/link.json"
    (evil / "results.jsonl").write_text("\n".join([json.dumps(first), json.dumps(link), *lines[2:]]) + "\n")
    catalog = Catalog([evil])
    key = _key(catalog, evil)
    with ViewServer(catalog) as server:
        status, headers, body = _get(server.url)
        assert status == 200
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert b"<script src=\"assets/app.js\"></script>" in body
        for position in (0, 1):  # a path out of the folder, a link out of it
            status, _, body = _get(f"{server.url}api/task/{key}/{position}")
            assert status == 403
            assert b"SECRET" not in body
        assert _get(f"{server.url}api/task/{key}/2")[0] == 200
        assert _get(f"{server.url}assets/..%2F..%2Fdata.py")[0] == 404
        assert _get(f"{server.url}api/run/..%2F..%2Fetc")[0] == 404
        assert _get(f"{server.url}figure/nope.png")[0] == 404
        request = urllib.request.Request(f"{server.url}api/index", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405
        assert _get(f"{server.url}api/index", host="attacker.example:80")[0] == 421  # DNS rebinding
    assert (evil / "results.jsonl").read_text().count("\n") == len(lines)  # nothing written


def test_export_writes_a_site_that_names_only_its_own_files(runs, tmp_path):
    root = runs["task"].parent.parent
    done = export_site(Catalog([root]), tmp_path / "site")
    assert done.runs == 4
    assert done.tasks == 13
    assert not done.problems
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    assert (site / MARKER).is_file()
    text = (site / "index.html").read_text()
    assert "http" not in text.replace("http-equiv", "")  # no network asset
    data = next((site / "data" / "task").rglob("*.js")).read_text()
    assert data.startswith("window.__stv_deliver(")
    assert "<" not in data  # written as \\u003c: no "</script>" even if a file were inlined
    # re-export over an earlier export is allowed; over another folder it is refused
    export_site(Catalog([root]), site)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="not an earlier export"):
        export_site(Catalog([root]), other)


def test_view_command_errors_and_export(runs, tmp_path):
    with pytest.raises(InputError, match="no such run folder"):
        cli("view", str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no runs found"):
        cli("view", str(empty), "--port", "0")
    out = cli("view", str(runs["task+text"]), "--export", str(tmp_path / "site")).output
    assert "1 runs, 4 trajectories" in out


def test_view_command_serves_until_stopped(runs):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "skilltransfer", "view", str(runs["task+text"]), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert "skilltransfer view: 1 runs at http://localhost:" in line, line
        url = line.split(" at ")[1].split(" ")[0]
        deadline = time.monotonic() + 20
        while True:
            status, _, body = _get(url + "api/index")
            if status == 200 or time.monotonic() > deadline:
                break
        assert json.loads(body)["runs"][0]["condition"] == "task+text"
    finally:
        process.terminate()
        process.wait(10)


def test_grid_status_and_report_figures_are_found(runs, tmp_path):
    from PIL import Image

    grid = tmp_path / "grid-x"
    shutil.copytree(runs["task"], grid / "tiny" / "mock" / "task")
    (grid / "grid.json").write_text(json.dumps({"spec": {"name": "my-grid"}}))
    (grid / "status.json").write_text(json.dumps({"updated": "now", "streams": {"tiny/mock/task": {"state": "done"}}}))
    (grid / "report" / "figures").mkdir(parents=True)
    Image.new("RGB", (4, 4), "white").save(grid / "report" / "figures" / "fig6_transfer_density.png")
    (grid / "report" / "figures" / "fake.png").write_text("<svg onload=alert(1)>")
    catalog = Catalog([grid])
    index = catalog.index()
    assert [r["grid"] for r in index["runs"]] == ["grid-x"]
    assert index["grids"] == [{"label": "grid-x", "name": "my-grid", "streams": {"tiny/mock/task": "done"},
                               "updated": "now"}]
    figures = {f["label"]: f["key"] for f in index["figures"]}
    assert set(figures) == {"grid-x/report/figures/fig6_transfer_density.png"}  # fake.png is not a PNG
    with ViewServer(catalog) as server:
        key = figures["grid-x/report/figures/fig6_transfer_density.png"]
        status, headers, body = _get(f"{server.url}figure/{key}.png")
        assert (status, headers["Content-Type"]) == (200, "image/png")
        assert body.startswith(b"\x89PNG")


def test_the_page_never_parses_markup_from_data():
    """The page's script builds elements itself: no HTML-parsing sink, no string evaluated as code."""
    from skilltransfer.view.assets import asset_bytes, page

    script = asset_bytes("app.js").decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "DOMParser", "createContextualFragment", "srcdoc"):
        assert sink not in script, sink
    for mode in ("server", "static"):
        html = page(mode)
        assert html.count("<script") == 1  # app.js, no inline script
        assert 'src="assets/app.js"' in html


def test_skill_scores_from_a_score_report_in_the_run_folder(runs, tmp_path):
    run = tmp_path / "scored"
    shutil.copytree(runs["task+text"], run)
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("Set the counter to 3.\nSet the counter to 5.\nBake bread for the team.\n")
    cli("score", str(run / "memory"), "--tasks", str(tasks), "--embedder", "hash:64", "--no-embed-cache",
        "--out", str(run / "scores.json"))
    report = json.loads((run / "scores.json").read_text())
    catalog = Catalog([run])
    skills = catalog.run(_key(catalog, run))["skills"]
    assert [s["scores"]["utility"] for s in skills] == [row["utility"] for row in report["skills"]]
    assert set(skills[0]["scores"]) == {"utility", "specificity", "abstractness", "best_match", "off_domain"}
    utility = catalog.index()["runs"][0]["library_utility"]  # the runs page: the library's mean utility
    assert utility["source"] == "scores.json"
    assert utility["skills"] == len(report["skills"])
    assert utility["tasks"] == 3
    assert utility["mean"] == pytest.approx(sum(row["utility"] for row in report["skills"]) / len(report["skills"]))


def test_a_memory_with_two_skills_of_one_name_shows_both(runs, tmp_path):
    run = tmp_path / "twins"
    shutil.copytree(runs["task+text"], run)
    skills = run / "memory" / "skills.jsonl"
    first = json.loads(skills.read_text().splitlines()[0])
    twin = {**first, "id": "sk-twin", "body": "another body"}
    skills.write_text(skills.read_text() + json.dumps(twin) + "\n")
    catalog = Catalog([run])
    shown = catalog.run(_key(catalog, run))
    assert shown["skills_error"] is None
    assert [s["id"] for s in shown["skills"]] == [first["id"], "sk-twin"]


def test_a_run_written_before_a_setting_was_renamed_still_reads(runs, tmp_path):
    run = tmp_path / "older"
    shutil.copytree(runs["task"], run)
    config = json.loads((run / "config.json").read_text())
    composition = config["config"]["composition"]
    composition["node_retries"] = composition.pop("retries")  # as written before the rename
    (run / "config.json").write_text(json.dumps(config))
    assert read_run_settings(RunFolder(run)).config.composition.retries == composition["node_retries"]
    assert not Catalog([run]).index()["problems"]


@pytest.mark.slow
def test_a_library_studys_runs_are_labelled_as_report_labels_them_with_the_utility_a_run_recorded(tmp_path):
    study = build_library_study(tmp_path)
    cli("report", str(tmp_path / "study"), "--out", str(tmp_path / "report"))
    with (tmp_path / "report" / "skills_per_run.csv").open() as table:  # the report's condition of each run
        reported = {Path(row["path"]).resolve(): (row["condition"], row["env"]) for row in csv.DictReader(table)}
    catalog = Catalog([tmp_path / "study"])
    runs, _ = catalog.scan()
    rows = {row["key"]: row for row in catalog.index()["runs"]}
    assert {entry.path: (rows[entry.key]["condition"], rows[entry.key]["env_label"]) for entry in runs} == reported
    assert len(reported) == 9
    assert len({condition for condition, _ in reported.values()}) == 9
    by_path = {entry.path: rows[entry.key] for entry in runs}
    assert by_path[study["demo"].resolve()]["condition"].startswith("task+text+library[library=")
    assert by_path[study["top"].resolve()]["condition"] == "task+text+library(top)"
    assert by_path[study["none"].resolve()]["library"] is None
    assert by_path[study["induced"].resolve()]["library"] == "own memory"
    assert by_path[study["demo"].resolve()]["env"].startswith("office {")  # its settings, folded on the page

    ranking = json.loads((study["top"] / "config.json").read_text())["library_utility"]  # recorded by the run
    memory = [skill.id for skill in read_library(study["top"] / "memory").skills]
    library = read_library(DEMO_LIBRARY).skills
    assert set(ranking["utility"]) == {skill.id for skill in library}
    assert ranking["kept"] == memory
    assert len(memory) == (len(library) + 1) // 2
    assert ranking["tasks"] == 3
    dropped = [v for i, v in ranking["utility"].items() if i not in memory]
    assert min(ranking["utility"][i] for i in memory) >= max(dropped)
    utility = by_path[study["top"].resolve()]["library_utility"]
    assert utility["source"] == "library_filter"
    assert utility["filter"] == "top"
    assert (utility["skills"], utility["library_skills"]) == (len(memory), len(library))
    assert utility["mean"] == pytest.approx(sum(ranking["utility"][i] for i in memory) / len(memory))
    run = catalog.run(by_path[study["top"].resolve()]["key"])
    assert run["condition"] == "task+text+library(top)"
    assert run["library_utility"] == utility
    assert {s["id"]: s["library_utility"] for s in run["skills"]} == {i: ranking["utility"][i] for i in memory}
    for name in ("none", "induced", "demo", "long"):  # only a filtered run ranks its library; the others record none
        assert "library_utility" not in json.loads((study[name] / "config.json").read_text())
        assert by_path[study[name].resolve()]["library_utility"] is None
