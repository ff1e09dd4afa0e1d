"""The viewer's task list of a large stream in a real browser: milliseconds from navigation to a rendered table.

Builds the viewer's test runs through the mock server (``tests/helpers_view.py``), repeats one run's records into an
N-task stream, serves it with ``skilltransfer view``'s server and opens the stream's task list in Debian's chromium
(Playwright with ``executable_path``) R times. Target: a 300-task stream's task list renders in under 1 s.

Usage: ``python benchmarks/view_render.py [--tasks 300] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers_view import build_view_runs, large_run  # noqa: E402

from skilltransfer.view import Catalog, ViewServer  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).is_file():
        raise SystemExit("error: chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        runs = build_view_runs(root)
        large = large_run(runs["task+text"], root / "runs" / "large", args.tasks)
        with ViewServer(Catalog([large])) as server, sync_playwright() as playwright:
            key = next(r.key for r in server.catalog.scan()[0] if r.path == large.resolve())
            browser = playwright.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            times = []
            for _ in range(args.repeats):
                page.goto(server.url + "#/")
                page.wait_for_selector("table.runs tbody tr", state="attached")
                start = time.perf_counter()
                page.evaluate("route => { location.hash = route; }", f"#/run/{key}")
                page.wait_for_selector(f"table.tasks tbody tr:nth-child({args.tasks})", state="attached")
                times.append((time.perf_counter() - start) * 1000)
            browser.close()
    print(f"{args.tasks}-task list, {args.repeats} renders: min {min(times):.0f} ms, median "
          f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms (target < 1000 ms)")


if __name__ == "__main__":
    main()
