"""``skilltransfer view`` of ATIF trajectories in a real browser (Debian's chromium driven by Playwright, as
``tests/view/test_view_browser.py``): a Harbor job's trials and other writers' files show as runs; a trial's page shows
its steps, its subagent's and the system turn between them, and links the task's ATIF, which the server answers; the
static export opens from ``file://`` with the same page and the ATIF file beside it. No page error, no dialog.

Skips with a reason when chromium or the playwright package is missing (``.ci/run`` installs both)."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_atif import COUNT_WORDS, ESCAPES, harbor_job, hostile_cases, other_writers
from helpers_cli import cli

from skilltransfer.log.atif_files import read_atif
from skilltransfer.settings.imported import write_imported_runs
from skilltransfer.view import Catalog, ViewServer

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).is_file()), None)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.slow]

if CHROMIUM is None:
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (dev extra)")


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("atif-view")
    harbor_job(root / "jobs")
    other_writers(root / "other")
    control = hostile_cases(root / "hostile")["control characters"]
    (root / "other" / "control.json").write_bytes(control.read_bytes())
    shutil.rmtree(root / "hostile")
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _open(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("dialog", lambda d: (problems.append(f"dialog {d.message}"), d.dismiss()))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(url)
    page.wait_for_selector('body[data-rendered="1"]', state="attached", timeout=20000)
    return page, problems


def _go(page: Any, route: str) -> None:
    count = int(page.get_attribute("body", "data-rendered") or 0)
    page.evaluate("route => { location.hash = route; }", route)
    page.wait_for_selector(f'body[data-rendered="{count + 1}"]', state="attached", timeout=20000)


def test_imported_trajectories_show_as_runs_and_link_their_atif(browser: Any, sources: Path, tmp_path: Path) -> None:
    write_imported_runs(tmp_path / "atif", read_atif([sources]).trajectories)
    catalog = Catalog([tmp_path / "atif"])
    runs = {r.path.name: r.key for r in catalog.scan()[0]}
    terminus = runs["terminus-2-openai_gpt-test"]
    with ViewServer(catalog) as server:
        page, problems = _open(browser, server.url)
        assert page.locator("table.runs tbody tr").count() == len(runs) == 6
        _go(page, f"#/run/{terminus}/task/1")
        text = page.inner_text("#main")
        assert COUNT_WORDS in text
        assert page.locator('article[data-type="MessageStep"]').count() == 2  # the system turn, the summary's prompt
        assert "subagent 1" in text
        assert "bash_command(keystrokes=" in text
        link = page.locator("p.atif a")
        href = link.get_attribute("href")
        assert href == f"atif/{terminus}/0.json"
        with urllib.request.urlopen(server.url + href, timeout=20) as answer:
            document = json.loads(answer.read())
        assert document["steps"][0] == {"step_id": 1, "source": "user", "message": COUNT_WORDS}
        control = next(key for name, key in runs.items() if name.startswith("agent"))
        _go(page, f"#/run/{control}/task/1")
        assert "Count the words" in page.inner_text("#main")
        assert page.locator("script").count() == 1
        assert page.locator("img").count() == 0
        assert not problems, problems
        page.close()


def test_static_export_opens_from_disk_with_the_atif_beside_it(browser: Any, sources: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    cli("view", str(sources / "jobs"), "--export", str(site))
    page, problems = _open(browser, (site / "index.html").as_uri())
    page.locator("table.runs tbody tr a").first.click()
    page.wait_for_selector("table.tasks", timeout=20000)
    page.locator("table.tasks tbody tr a").first.click()
    page.wait_for_selector("p.atif a", timeout=20000)
    href = page.locator("p.atif a").get_attribute("href")
    assert href is not None
    assert (site / href).is_file()
    assert json.loads((site / href).read_text())["schema_version"] == "ATIF-v1.8"
    assert ESCAPES not in page.inner_text("#main")
    assert not problems, problems
    page.close()
