"""A library study in ``skilltransfer view``, in a real browser (Debian's chromium driven by Playwright, as in
``test_view_browser.py``) at 1,400 x 900: the runs page fits the window (no horizontal scroll, the env settings
folded), each run's condition is the one ``report`` gives it, a filtered library's utility shows, and the skills
table wraps a 64-character name and a 1,000-character description (``tests/data/long_skills``). The study
(`helpers_view.build_library_study`) is run through the mock server's role play.

A screenshot of each page is written to the test's folder, and to ``$STV_SCREENSHOTS`` when it is set."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_cli import cli
from helpers_view import ARGS, CHROMIUM, build_library_study

from skilltransfer.view import Catalog, ViewServer

pytestmark = [pytest.mark.slow]

if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (dev extra)")

WIDTH, HEIGHT = 1400, 900

OVERFLOW = """els => els.filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > innerWidth)
    .map(e => e.textContent.slice(0, 80))"""
"""The elements (of those given) whose content runs past their box or past the window."""


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path], dict[Path, str]]:
    root = tmp_path_factory.mktemp("study")
    runs = build_library_study(root)
    cli("report", str(root / "study"), "--out", str(root / "report"))
    with (root / "report" / "skills_per_run.csv").open() as table:
        reported = {Path(row["path"]).resolve(): row["condition"] for row in csv.DictReader(table)}
    return root, runs, reported


@pytest.fixture(scope="module")
def page(study: tuple[Path, dict[str, Path], dict[Path, str]]) -> Iterator[tuple[Any, ViewServer]]:
    root, _, _ = study
    with ViewServer(Catalog([root / "study"])) as server, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        tab = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.goto(server.url)
        tab.wait_for_selector('body[data-rendered="1"]', state="attached", timeout=20000)
        yield tab, server
        assert not errors, errors
        browser.close()


def go(tab: Any, route: str) -> None:
    count = int(tab.get_attribute("body", "data-rendered") or 0)
    tab.evaluate("route => { location.hash = route; }", route)
    tab.wait_for_selector(f'body[data-rendered="{count + 1}"]', state="attached", timeout=20000)


def screenshot(tab: Any, folder: Path, name: str) -> None:
    tab.screenshot(path=str(folder / name), full_page=True)
    if os.environ.get("STV_SCREENSHOTS"):
        tab.screenshot(path=str(Path(os.environ["STV_SCREENSHOTS"]) / name), full_page=True)


def no_horizontal_scroll(tab: Any, table: str) -> None:
    """Neither the page nor the table's own wrapper scrolls sideways, and every column ends inside the window."""
    page = tab.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    assert page[0] <= page[1], page
    wrap = tab.evaluate(f"(() => {{ const w = document.querySelector('{table}').parentElement; "
                        "return [w.scrollWidth, w.clientWidth]; })()")
    assert wrap[0] <= wrap[1], wrap
    rights = tab.locator(f"{table} th").evaluate_all("ths => ths.map(th => th.getBoundingClientRect().right)")
    assert max(rights) <= WIDTH, rights


def test_the_runs_page_of_a_library_study_fits_1400_pixels_with_reports_labels(study, page):
    root, runs, reported = study
    tab, server = page
    go(tab, "#/")
    entries = {entry.key: entry.path for entry in server.catalog.scan()[0]}
    rows = tab.locator("table.runs tbody tr")
    assert rows.count() == len(reported) == 9
    no_horizontal_scroll(tab, "table.runs")
    assert not tab.locator("table.runs td").evaluate_all(OVERFLOW)
    shown = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        key = row.locator("input[type=checkbox]").get_attribute("data-key")
        shown[entries[key]] = row.locator("td").nth(2).inner_text()
    assert shown == reported  # the condition of every run is report's (tags and library parts included)
    assert reported[runs["top"].resolve()] == "task+text+library(top)"
    assert reported[runs["demo"].resolve()].startswith("task+text+library[library=")

    env = tab.locator("table.runs tbody tr", has_text="office-demo").locator("details.env")  # settings folded
    assert env.locator("summary").inner_text() == "office"
    assert not env.locator(".path").is_visible()
    env.locator("summary").click()
    assert env.locator(".path").inner_text().startswith("office {")
    no_horizontal_scroll(tab, "table.runs")
    env.locator("summary").click()

    ranking = json.loads((runs["top"] / "config.json").read_text())["library_utility"]
    mean = sum(ranking["utility"][i] for i in ranking["kept"]) / len(ranking["kept"])
    top = tab.locator("table.runs tbody tr", has_text="office-top").locator(".utility")
    assert top.inner_text().startswith(f"utility {mean:.3f} (top {len(ranking['kept'])} of {len(ranking['utility'])}")
    assert tab.locator("table.runs .utility").count() == 1  # only the run that recorded its library's utility
    screenshot(tab, root, "runs.png")


def test_long_skill_names_and_descriptions_wrap_in_the_skills_table(study, page):
    root, runs, _ = study
    tab, server = page
    key = next(entry.key for entry in server.catalog.scan()[0] if entry.path == runs["long"].resolve())
    go(tab, f"#/run/{key}/skills")
    names = tab.locator("table.skills a.skillname")
    assert names.count() == 2
    no_horizontal_scroll(tab, "table.skills")
    cells = tab.locator("table.skills td")
    assert not cells.evaluate_all(OVERFLOW)
    longest = tab.locator("table.skills a.skillname", has_text="copy-every-calendar-event")
    assert longest.inner_text() == "copy-every-calendar-event-of-a-shared-team-calendar-into-a-sheet"  # 64 characters
    line = float(longest.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 18"))
    assert longest.bounding_box()["height"] > 1.5 * line  # it wraps
    tab.get_by_role("button", name="1,023 characters: show all").click()
    description = tab.locator("table.skills .desc", has_text="Reconcile the vendor invoices")
    assert "ledger.xlsm'" in description.inner_text()  # the whole description, its 113-character run included
    no_horizontal_scroll(tab, "table.skills")
    assert not cells.evaluate_all(OVERFLOW)
    screenshot(tab, root, "skills.png")

    top = next(entry.key for entry in server.catalog.scan()[0] if entry.path == runs["top"].resolve())
    go(tab, f"#/run/{top}/skills")  # a filtered library's skills with the utility the run ranked them by
    ranking = json.loads((runs["top"] / "config.json").read_text())["library_utility"]
    column = tab.locator("table.skills th").all_inner_texts().index("utility") + 1
    utilities = tab.locator(f"table.skills tbody tr td:nth-child({column})").all_inner_texts()
    assert sorted(utilities) == sorted(f"{ranking['utility'][i]:.3f}" for i in ranking["kept"])
