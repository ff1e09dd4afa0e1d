"""``skilltransfer view`` in a real browser: Debian's chromium driven by Playwright (``executable_path``; Playwright's
own browser download is not used), against runs made through the mock server (``helpers_view``): every page renders,
trajectory <-> skill <-> source task links work, the transfer graph's edges are the run's transfer events, compare
shows both runs, agent output holding markup stays text (no dialog, no element), the static export shows the same
content from ``file://``, and a 300-task stream lists every task (its render time: benchmarks/view_render.py).

Skips with a reason when chromium or the playwright package is missing (``.ci/run`` installs both)."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_bench import load_benchmark
from helpers_view import ARGS, CHROMIUM, XSS, build_view_runs, large_run
from helpers_view import TARGETS as TARGETS_OF_STUDY

from skilltransfer.log import RunFolder
from skilltransfer.report.events import transfer_events
from skilltransfer.report.summary import summarize_run
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.view import Catalog, ViewServer, export_site

TASKS_300 = 300

pytestmark = [pytest.mark.slow]

if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (dev extra)")


# --------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view")
    out = build_view_runs(root)
    out["large"] = large_run(out["task+text"], root / "runs" / "large", TASKS_300)
    return out


@pytest.fixture(scope="module")
def root(runs: dict[str, Path]) -> Path:
    return runs["task"].parent.parent.parent / "runs"


@pytest.fixture(scope="module")
def server(root: Path, runs: dict[str, Path]) -> Iterator[ViewServer]:
    with ViewServer(Catalog([root, runs["lens"]])) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


class Page:
    """A browser tab on the viewer: every dialog, page error and created element is recorded."""

    def __init__(self, browser: Any, base: str) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.base = base
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.goto(base)
        self.wait(1)

    def wait(self, render: int) -> None:
        self.page.wait_for_selector(f'body[data-rendered="{render}"]', state="attached", timeout=20000)

    def go(self, route: str) -> Any:
        """Navigate to a route (``#/...``) and wait for it to render."""
        count = int(self.page.get_attribute("body", "data-rendered") or 0)
        self.page.evaluate("route => { location.hash = route; }", route)
        self.wait(count + 1)
        return self.page

    def click(self, locator: Any) -> None:
        count = int(self.page.get_attribute("body", "data-rendered") or 0)
        locator.click()
        self.wait(count + 1)

    def text(self) -> str:
        return str(self.page.inner_text("#main"))

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def tab(browser: Any, server: ViewServer) -> Iterator[Page]:
    page = Page(browser, server.url)
    yield page
    assert not page.dialogs, page.dialogs
    assert not page.errors, page.errors
    page.close()


def key_of(server: ViewServer, path: Path) -> str:
    return next(r.key for r in server.catalog.scan()[0] if r.path == path.resolve())



# --------------------------------------------------------------------------------------------- pages
def test_runs_page_lists_filters_sorts_and_picks_two_to_compare(tab, runs, server):
    rows = tab.page.locator("table.runs tbody tr")
    assert rows.count() == 6
    text = tab.text()
    for label in ("tiny/task+text", "tiny/subtask+code", "tiny/metaskill", "runs/large", "lens"):
        assert label in text
    tab.page.fill("input.filter", "tiny/task+text")
    assert rows.count() == 1
    tab.page.fill("input.filter", "")
    tab.page.locator("table.runs th", has_text="tokens/task").click()
    assert tab.page.get_attribute("table.runs th:nth-child(11)", "data-sorted") == "asc"
    a, b = key_of(server, runs["task"]), key_of(server, runs["task+text"])
    tab.page.check(f'input[data-key="{a}"]')
    tab.page.check(f'input[data-key="{b}"]')
    tab.click(tab.page.get_by_role("button", name="compare the 2 selected runs"))
    assert tab.page.locator(".pair.heads h2").all_inner_texts() == ["runs/tiny/task", "runs/tiny/task+text"]


def test_task_list_filters_by_outcome(tab, runs, server):
    tab.go(f"#/run/{key_of(server, runs['task+text'])}")
    rows = tab.page.locator("table.tasks tbody tr")
    assert rows.count() == 4
    tab.page.click('button[data-outcome="failure"]')
    assert rows.count() == 1
    assert "failure" in rows.first.inner_text()
    tab.page.click('button[data-outcome="success"]')
    assert rows.count() == 3


def test_cost_shows_on_the_runs_page_the_run_page_and_its_task_list(tab, runs, server):
    cost = summarize_run(runs["task+text"]).cost_usd
    assert cost is not None
    assert 0 < cost < 1
    tab.page.fill("input.filter", "tiny/task+text")
    assert f"${cost:.4f}" in tab.page.locator("table.runs tbody tr").first.inner_text()
    tab.go(f"#/run/{key_of(server, runs['task+text'])}")
    assert f"cost ${cost:.4f}" in tab.page.locator("p.lede").inner_text()
    rows = tab.page.locator("table.tasks tbody tr")
    for row, record in zip(rows.all(), RunFolder(runs["task+text"]).read_records(), strict=True):
        assert record.cost_usd is not None
        assert f"${record.cost_usd:.4f}" in row.inner_text()


def test_trajectory_skill_and_source_task_link_to_each_other(tab, runs, server):
    key = key_of(server, runs["task+text"])
    records = RunFolder(runs["task+text"]).read_records()
    event = transfer_events(records)[0]
    tab.go(f"#/run/{key}/task/{event.target_position + 1}")  # task numbers are 1-based
    retrieval = tab.page.locator('article[data-type="RetrievalStep"]')
    assert event.skill_name in retrieval.inner_text()
    tab.click(retrieval.locator("table a", has_text=f"#{event.source_position + 1}"))  # -> the source task
    assert tab.page.locator(".trajectory h1").inner_text() == f"#{event.source_position + 1} {event.source_task_id}"
    induction = tab.page.locator('article[data-type="InductionStep"]')
    tab.click(induction.get_by_role("link", name=event.skill_name))  # -> the skill it wrote
    assert tab.page.locator("section.skill h2").inner_text().startswith(event.skill_name)
    uses = tab.page.locator("table.uses tbody tr")
    assert uses.count() == len({e.target_position for e in transfer_events(records)})
    tab.click(tab.page.locator("section.skill p a", has_text=f"#{event.source_position + 1}"))  # -> source task again
    assert f"#{event.source_position + 1} {event.source_task_id}" in tab.text()
    tab.go(f"#/run/{key}/skill/{records[event.source_position].induced[0].skill_id}")
    tab.click(uses.first.get_by_role("link"))  # -> a later task that retrieved it
    assert tab.page.locator(".trajectory h1").inner_text() == f"#{event.target_position + 1} {event.target_task_id}"


def test_transfer_graph_has_one_edge_per_transfer_event(tab, runs, server):
    key = key_of(server, runs["task+text"])
    events = transfer_events(RunFolder(runs["task+text"]).read_records())
    tab.go(f"#/run/{key}/graph")
    edges = tab.page.locator("svg.transfer path.edge")
    assert edges.count() == len(events)
    drawn = sorted((int(e.get_attribute("data-source")), int(e.get_attribute("data-target"))) for e in edges.all())
    assert drawn == sorted((e.source_position, e.target_position) for e in events)
    colours = {int(e.get_attribute("data-target")): e.get_attribute("class") for e in edges.all()}
    assert colours == {e.target_position: "edge " + ("ok" if e.target_success else "fail") for e in events}
    assert tab.page.locator("svg.transfer circle").count() == 4
    target = events[-1].target_position
    count = int(tab.page.get_attribute("body", "data-rendered") or 0)
    edges.nth(len(events) - 1).dispatch_event("click")
    tab.wait(count + 1)
    assert tab.page.locator(".trajectory h1").inner_text().startswith(f"#{target + 1} ")


def test_library_transfer_events_are_listed_beside_the_graph(browser, runs, tmp_path):
    """A run over another run's frozen memory: the runs page counts its library transfers, the graph tab lists them
    (no arc: they come from outside the stream) and the task list marks each retrieval "<- library"."""
    from helpers_cli import run_tiny
    from helpers_tinyenv import TEXT_SKILL, CounterScript

    from skilltransfer.llm.testing.mock_server import MockServer

    frozen = tmp_path / "runs" / "frozen"
    with MockServer(replies=CounterScript(TEXT_SKILL)) as mock:
        run_tiny(mock, frozen, "task+text", (3, 5), "--library", str(runs["subtask+code"] / "memory"))
    folder = RunFolder(frozen)
    events = transfer_events(folder.read_records(), read_run_settings(folder).config.library_event_source())
    assert events
    assert {e.kind for e in events} == {"library"}
    with ViewServer(Catalog([tmp_path / "runs"])) as server:
        page = Page(browser, server.url)
        try:
            assert f"0 + {len(events)} library" in page.page.locator("table.runs").inner_text()
            key = key_of(server, frozen)
            page.go(f"#/run/{key}/graph")
            assert page.page.locator("svg.transfer path.edge").count() == 0
            assert f"{len(events)} library transfer events" in page.text()
            assert page.page.locator("table.library tbody tr").count() == len(events)
            page.go(f"#/run/{key}")
            assert page.page.locator("li.transfer", has_text="library").count() == len(events)
            assert not page.errors, page.errors
        finally:
            page.close()


def test_trajectory_pages_render_every_step_kind_and_prompts_on_demand(tab, runs, server):
    tab.go(f"#/run/{key_of(server, runs['subtask+code'])}/task/2")
    kinds = set(tab.page.locator("article.step").evaluate_all("els => els.map(e => e.dataset.type)"))
    assert kinds == {"PlanStep", "RetrievalStep", "ActionStep", "InductionStep", "SummaryStep"}
    assert tab.page.locator("pre.code span.tb").count() > 0  # highlighted code
    prompt = tab.page.locator('article[data-type="PlanStep"] details.prompt').first
    assert prompt.locator(".message").count() == 0  # collapsed, not built
    prompt.locator("summary").click()
    prompt.locator(".message.reply").wait_for()  # built when opened (the toggle event comes after the click)
    assert prompt.locator(".message").count() == 3  # system, user, reply
    assert "You are the PLANNER" in prompt.inner_text()
    ran = [hit.ran for hit in RunFolder(runs["subtask+code"]).read_records()[1].retrieved]
    shown = " ".join(tab.page.locator("table.retrieved").all_inner_texts())  # code skill use: the sandbox's record
    assert ran
    assert any(ran)
    assert all((f"ran ×{n} used" if n else "not run") in shown for n in ran)
    tab.go(f"#/run/{key_of(server, runs['lens'])}/task/1")
    log = json.loads(sorted((runs["lens"] / "trajectories").glob("tiny_0*.json"))[0].read_text())
    route = next(s for s in log["steps"] if s["type"] == "RetrievalStep")["route"]
    retrieval = tab.page.locator('article[data-type="RetrievalStep"]')
    assert retrieval.locator("table.visits tbody tr").count() == len(route["visits"])  # one row per routed unit
    routing = [c for c in log["calls"] if c["role"] in ("verifier", "rewriter", "decomposer")]
    assert retrieval.locator("details.prompt").count() == len(routing) > 0  # its routing calls' prompts
    tab.go(f"#/run/{key_of(server, runs['metaskill'])}/task/1")
    assert tab.page.locator("svg.plan g.plannode").count() == 4
    assert tab.page.locator("svg.plan path.dep").count() == 4  # v1->v2, v1->v3, v2->v4, v3->v4 (bindings on them)


def test_compare_shows_both_runs_side_by_side(tab, runs, server):
    a, b = key_of(server, runs["task"]), key_of(server, runs["task+text"])
    tab.go(f"#/compare/{a}/{b}")
    assert tab.page.locator("table.compare tbody tr").count() == 4
    tab.click(tab.page.locator("table.compare tbody tr a").first)
    sides = tab.page.locator(".pair .side")
    assert sides.count() == 2
    first = [side.locator(".trajectory h2").first.inner_text() for side in sides.all()]
    assert first[0] == first[1]
    assert sides.nth(0).locator('article[data-type="RetrievalStep"]').count() == 0  # task: no memory
    assert sides.nth(1).locator('article[data-type="RetrievalStep"]').count() == 1


def test_markup_in_agent_output_and_skills_is_shown_as_text(tab, runs, server):
    key = key_of(server, runs["task+text"])
    tab.page.evaluate("() => { window.__created = 0; new MutationObserver(ms => { for (const m of ms) for (const n of "
                      "m.addedNodes) if (n.nodeType === 1 && ['IMG', 'SCRIPT', 'B'].includes(n.tagName)) "
                      "window.__created++; }).observe(document, {childList: true, subtree: true}); }")
    tab.go(f"#/run/{key}/task/1")
    for prompt in tab.page.locator("details.prompt").all():
        prompt.locator("summary").click()
        prompt.locator(".message.reply").wait_for()
    tab.go(f"#/run/{key}/skills")
    tab.go(f"#/run/{key}/skill/{RunFolder(runs['task+text']).read_records()[0].induced[0].skill_id}")
    assert XSS in tab.text()
    tab.go(f"#/run/{key}/task/1")
    text = tab.text()
    assert XSS in text  # the observation
    assert "Look first <b>bold?</b>." in text
    assert tab.page.evaluate("window.__created") == 0  # no element made from the text
    assert tab.page.locator("main img, main script, main b").count() == 0
    assert tab.page.locator("script").count() == 1  # app.js only
    assert not tab.dialogs


def test_a_running_streams_new_tasks_appear_on_reload(browser, runs, tmp_path):
    live = tmp_path / "live"
    shutil.copytree(runs["task+text"], live)
    results = (live / "results.jsonl").read_text().splitlines(keepends=True)
    (live / "results.jsonl").write_text("".join(results[:2]))
    with ViewServer(Catalog([live])) as server:
        page = Page(browser, server.url)
        page.go(f"#/run/{key_of(server, live)}")
        assert page.page.locator("table.tasks tbody tr.ok, table.tasks tbody tr.fail").count() == 2
        assert page.page.locator("table.tasks tbody tr.pending").count() == 2
        (live / "results.jsonl").write_text("".join(results))
        page.page.reload()
        page.wait(1)
        assert page.page.locator("table.tasks tbody tr.pending").count() == 0
        page.close()


def test_a_300_task_stream_lists_every_task_and_its_graph(tab, runs, server):
    """Every row and graph node of a 300-task stream (how fast: ``benchmarks/view_render.py``)."""
    key = key_of(server, runs["large"])
    tab.go("#/")
    start = time.perf_counter()
    tab.go(f"#/run/{key}")
    seconds = time.perf_counter() - start
    assert tab.page.locator("table.tasks tbody tr").count() == TASKS_300
    timings = tab.page.evaluate("window.__stv.timings")
    print(f"300-task list: {seconds * 1000:.0f} ms from click to rendered (fetch {timings['page']:.0f} ms incl. "
          f"table build {timings['tasks']:.0f} ms)")
    tab.go(f"#/run/{key}/graph")
    assert tab.page.locator("svg.transfer circle").count() == TASKS_300


# --------------------------------------------------------------------------------------------- the export
def test_export_opens_from_disk_with_the_same_content(browser, runs, root, tmp_path):
    catalog = Catalog([root / "tiny"])
    done = export_site(catalog, tmp_path / "site")
    assert not done.problems
    server = ViewServer(catalog).start()
    a, b = key_of(server, runs["task"]), key_of(server, runs["task+text"])
    routes = ["#/", f"#/run/{b}", f"#/run/{b}/task/2", f"#/run/{b}/skills", f"#/run/{b}/graph",
              f"#/run/{key_of(server, runs['metaskill'])}/task/1", f"#/compare/{a}/{b}", f"#/compare/{a}/{b}/tiny%2F1"]
    served = Page(browser, server.url)
    exported = Page(browser, (tmp_path / "site" / "index.html").as_uri())
    try:
        for route in routes:
            texts = []
            for page in (served, exported):
                page.go(route) if route != "#/" else None
                texts.append(re.sub(r" · read \S+", "", page.text()))
            assert texts[0] == texts[1], route
            assert exported.page.locator("main .error").count() == 0
        assert exported.page.locator("svg.transfer path.edge").count() == 0  # last route was compare
        exported.go(f"#/run/{b}/graph")
        assert exported.page.locator("svg.transfer path.edge").count() == len(
            transfer_events(RunFolder(runs["task+text"]).read_records()))
        assert not exported.dialogs
        assert not exported.errors
    finally:
        served.close()
        exported.close()
        server.stop()


def test_a_single_file_export_opens_with_the_same_content_and_its_data_is_no_script(browser, runs, root, tmp_path):
    """``view --export-file``: one HTML file renders what the server shows (figures and data inside it), and a page
    beside it that loads it as a script gets nothing (its data is a JSON block)."""
    from skilltransfer.view.export import export_file

    catalog = Catalog([root / "tiny"])
    done = export_file(catalog, tmp_path / "runs.html")
    assert not done.problems
    server = ViewServer(catalog).start()
    b = key_of(server, runs["task+text"])
    served = Page(browser, server.url)
    single = Page(browser, done.path.as_uri())
    try:
        for route in ["#/", f"#/run/{b}", f"#/run/{b}/task/2", f"#/run/{b}/skills"]:
            texts = []
            for page in (served, single):
                page.go(route) if route != "#/" else None
                texts.append(re.sub(r" · read \S+", "", page.text()))
            assert texts[0] == texts[1], route
        assert not single.dialogs
        assert not single.errors
    finally:
        served.close()
        single.close()
        server.stop()
    spy = tmp_path / "spy.html"
    spy.write_text("<!doctype html><script>window.got = [];window.__stv_deliver = (k, d) => window.got.push(k);"
                   "</script><script src=\"runs.html\"></script>")
    page = browser.new_page()
    try:
        page.goto(spy.as_uri())
        page.wait_for_load_state("load")
        assert page.evaluate("window.got.length") == 0
    finally:
        page.close()


def test_a_masked_runs_skill_pages_show_each_skills_effect_and_its_draws(browser, tmp_path):
        
    world = load_benchmark("skill_effects", "skill_effects_bench_view")
    root = tmp_path / "runs"
    records = world.run_replicate(root, 0, groups=1, per_topic=40, mask_rate=0.5)
    with ViewServer(Catalog([root])) as running:
        page = Page(browser, running.url)
        try:
            key = key_of(running, root / "rep0")
            page.go(f"#/run/{key}/skills")
            assert "effect on success" in page.text()
            names = {r.skill_id: r.name for rec in records for r in rec.retrieved}
            harmful = next(i for i, n in names.items() if n == "alpha_two")  # planted -0.3
            page.go(f"#/run/{key}/skill/{harmful}")
            text = page.text()
            assert "Causal effect (randomised masking)" in text
            assert "95% CI" in text
            withheld = sum(not e.shown for rec in records for e in rec.exposures if e.skill_id == harmful)
            assert f"withheld in {withheld} of the 40 tasks" in text
            page.go(f"#/run/{key}/task/1")
            assert "use" in page.page.locator("table.retrieved thead").inner_text().split()  # skill use column
            mask = page.page.locator("div.masking")
            assert mask.count() == 1
            assert "candidates withheld" in mask.inner_text()
            assert page.page.locator("table.mask tbody tr").count() == 4
            assert not page.errors
            assert not page.dialogs
        finally:
            page.close()


def test_a_reasoning_models_replies_show_their_reasoning_folded_apart(browser, tmp_path, monkeypatch, capsys):
    """Issue 37: a run through an endpoint that reasons first (``<think>`` in content) shows each reply without its
    reasoning and the reasoning folded under it, marked as never sent back."""
    from helpers_cli import main_cli

    from skilltransfer.llm.testing.mock_server import REASONING_MARKER, MockServer
    from skilltransfer.llm.testing.roleplay import RolePlay

    run = tmp_path / "runs" / "think"
    with MockServer(RolePlay(), reasoning="think", reasoning_tokens=60) as endpoint:
        code, _, stderr = main_cli(
            ["run", "--env", "apps", "--limit", "1", "--condition", "subtask+text", "--model", f"mock@{endpoint.url}",
             "--api-key", "x", "--embedder", "hash:64", "--no-sandbox", "--no-progress", "--out", str(run)],
            monkeypatch, capsys)
    assert code == 0, stderr[-2000:]
    with ViewServer(Catalog([tmp_path / "runs"])) as running:
        page = Page(browser, running.url)
        try:
            page.go(f"#/run/{key_of(running, run)}/task/1")
            prompt = page.page.locator('article[data-type="PlanStep"] details.prompt').first
            prompt.locator("summary").click()
            prompt.locator(".message.reply").wait_for()
            reasoning = prompt.locator("details.message.reasoning")
            assert reasoning.count() == 1
            assert reasoning.get_attribute("open") is None  # folded
            assert "never sent back to the model" in reasoning.locator("summary").inner_text()
            reasoning.locator("summary").click()
            assert REASONING_MARKER in reasoning.inner_text()
            assert REASONING_MARKER not in prompt.locator(".message.reply").inner_text()
            assert "SUBTASK" in prompt.locator(".message.reply").inner_text()
            assert not page.errors
            assert not page.dialogs
        finally:
            page.close()


# --------------------------------------------------------------------------------------------- report figures
@pytest.fixture(scope="module")
def study_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers_view import build_study_report

    return build_study_report(tmp_path_factory.mktemp("studies"))


def _figure_shown(page: Page, name: str) -> Any:
    """The viewer's figure of that report file, once loaded: its image has decoded pixels."""
    figure = page.page.locator("div.figures figure", has_text=f"report/figures/{name}.png")
    assert figure.count() == 1, page.text()
    image = figure.locator("img")
    image.scroll_into_view_if_needed()
    page.page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle(),
                                timeout=20000)
    return image


def test_view_shows_the_forgetting_heat_map(browser, study_report):
    with ViewServer(Catalog([study_report])) as running:
        page = Page(browser, running.url)
        try:
            image = _figure_shown(page, "forgetting_matrix")
            assert image.evaluate("img => img.naturalWidth") > 400
            assert not page.errors
            assert not page.dialogs
        finally:
            page.close()


def test_view_and_the_report_page_show_the_capacity_curves_and_table(browser, study_report):
    with ViewServer(Catalog([study_report])) as running:
        page = Page(browser, running.url)
        try:
            _figure_shown(page, "capacity_curves")
            assert not page.errors
        finally:
            page.close()
    tab = browser.new_page()
    try:
        tab.goto((study_report / "report.html").as_uri())
        heading = tab.locator("h2", has_text="Growth under a budget")
        assert heading.count() == 1
        image = tab.locator('img[src="figures/capacity_curves.png"]')
        tab.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
        table = tab.locator("h3", has_text="Growth under a budget").locator("xpath=following-sibling::table[1]")
        cells = [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]
        header = table.locator("thead th").all_inner_texts()
        policies = [row[header.index("policy")] for row in cells]
        assert sorted(set(policies)) == ["fifo", "lru", "unbounded"]
        assert len(cells) == 3 * len(TARGETS_OF_STUDY)  # one bin per task of the 4-task stream
        sizes = [row[header.index("library_size")] for row in cells if row[header.index("policy")] == "lru"]
        assert sizes == ["1.0"] * len(TARGETS_OF_STUDY)  # capped at 1 from the first task on
    finally:
        tab.close()


def test_the_report_page_shows_the_model_transfer_matrix(browser, tmp_path):
    """Issue 39 §4's table on the report page that ``view`` opens: library model a used frozen by model b, against
    b without memory (b gives up on one task of three; a's library carries it)."""
    from helpers_view import build_model_transfer_report

    report = build_model_transfer_report(tmp_path)
    tab = browser.new_page()
    try:
        tab.goto((report / "report.html").as_uri())
        heading = tab.locator("h3", has_text="Libraries across models")
        assert heading.count() >= 1, tab.inner_text("body")[:2000]
        table = heading.first.locator("xpath=following-sibling::table[1]")
        header = table.locator("thead th").all_inner_texts()
        [row] = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
        assert (row[header.index("model")], row[header.index("library_model")]) == ("b", "a")
        assert float(row[header.index("delta_pct")]) == pytest.approx(100 / 3, abs=0.1)
    finally:
        tab.close()
    with ViewServer(Catalog([report])) as running:
        page = Page(browser, running.url)
        try:
            assert not page.errors
        finally:
            page.close()


def test_the_viewers_report_page_shows_diagnostics_against_randomised_effects(browser, tmp_path):
    """Issue 49: a masked stream of the planted world (``benchmarks/utility_effects.py``), ``report`` on it, and
    ``view`` on the lot: the index links the report folder, whose page shows the utility_effects tables (one row per
    diagnostic, one per masked skill) and the effect-against-utility figure; the static export shows the same page."""
        
    from skilltransfer.metrics.surrogate import DIAGNOSTICS
    from skilltransfer.report import make_report

    world = load_benchmark("utility_effects", "utility_effects_bench_view")
    root = tmp_path / "study"
    _, relevance = world.library(6)
    world.run_world(root / "runs", 0, {n: world.effect_of(r) for n, r in relevance.items()}, groups=6,
                    per_topic=40, mask_rate=0.5, tag="masked")
    made, _ = make_report([root / "runs"], root / "report")
    expected = made.table("utility_effects").where(diagnostic="utility")[0]
    catalog = Catalog([root])
    with ViewServer(catalog) as running:
        page = Page(browser, running.url)
        try:
            link = page.page.locator("ul.reports a", has_text="study/report")
            assert link.count() == 1, page.text()
            page.click(link)
            assert page.page.locator("main h1").inner_text() == "study/report"
            summary = page.page.locator('section[data-table="utility_effects"] table')
            header = summary.locator("thead th").all_inner_texts()
            rows = [r.locator("td").all_inner_texts() for r in summary.locator("tbody tr").all()]
            assert [r[header.index("diagnostic")] for r in rows] == list(DIAGNOSTICS)
            utility = rows[0]
            assert float(utility[header.index("rho")]) == pytest.approx(expected["rho"], abs=5e-4)
            assert float(utility[header.index("binned_rho")]) == pytest.approx(expected["binned_rho"], abs=5e-4)
            skills = page.page.locator('section[data-table="utility_effects_skills"] table tbody tr')
            assert skills.count() == 24
            sections = page.page.locator("section.report-table").evaluate_all("s => s.map(x => x.dataset.table)")
            assert sections[:2] == ["utility_effects", "utility_effects_skills"]
            image = page.page.locator("div.figures figure", has_text="study/report/figures/utility_effects.png")
            assert image.count() == 1
            handle = image.locator("img")
            handle.scroll_into_view_if_needed()
            page.page.wait_for_function("img => img.complete && img.naturalWidth > 400",
                                        arg=handle.element_handle(), timeout=20000)
            served_text = page.text()
            assert not page.errors
            assert not page.dialogs
        finally:
            page.close()
    export_site(catalog, tmp_path / "site")
    exported = Page(browser, (tmp_path / "site" / "index.html").as_uri())
    try:
        exported.click(exported.page.locator("ul.reports a", has_text="study/report"))
        assert exported.page.locator('section[data-table="utility_effects_skills"] table tbody tr').count() == 24
        assert exported.text() == served_text
        assert not exported.errors
    finally:
        exported.close()
