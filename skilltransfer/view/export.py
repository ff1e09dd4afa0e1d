"""The viewer as a static site that opens from disk (``file://``) and can be shared: the page, its assets, and every
payload of the `Catalog` as a small script (``data/index.js``, ``data/run/<key>.js``, ``data/task/<key>/<n>.js``)
that hands its JSON to the page; report figures are copied to ``figures/``. The JSON is ASCII and inside a function
call, so no string in it can end the script or become markup."""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError, check_output_path
from skilltransfer.util.files import atomic_write_text
from skilltransfer.view.assets import ASSETS, asset_bytes, page, single_page
from skilltransfer.view.data import Catalog, read_figure

MARKER = ".skilltransfer-view"
"""The file that marks a folder as an export (one may be replaced by a new export)."""


@dataclass(frozen=True)
class ExportSummary:
    path: Path
    runs: int
    tasks: int
    files: int
    bytes: int
    problems: list[str]


def data_script(key: str, data: Any) -> str:
    """A data file: the payload handed to the page under ``key`` (ASCII JSON, ``<`` escaped too)."""
    text = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c")
    return f"window.__stv_deliver({json.dumps(key)}, {text});\n"


EXPOSURE_NOTE = ("anyone who can read this folder can read every trajectory, prompt and skill in it, and so can any "
                 "page opened from disk in your browser (its data files are scripts a file:// page may load); to "
                 "share or keep a run private, export one self-contained file instead: view --export-file FILE.html")
"""What a folder export exposes (printed by ``view --export`` and written beside the page as README.txt)."""


def _payloads(catalog: Catalog, problems: list[str]) -> Iterator[tuple[str, Any]]:
    """Every payload of the catalog as (key, JSON data): each run, each started task, each report folder, then the
    index (last: it lists what could not be exported)."""
    index = catalog.index()
    problems.extend(f"{p['path']}: {p['error']}" for p in index["problems"])  # runs that could not be read, said
    unread = len(problems)
    for row in index["runs"]:
        key = row["key"]
        try:
            run = catalog.run(key)
        except InputError as exc:
            problems.append(f"{row['label']}: {exc}")
            continue
        yield f"run/{key}", run
        for task in run["tasks"]:
            if not task["finished"] and task.get("status") == "pending":
                continue
            position = task["position"]
            try:
                payload = catalog.task(key, position)
            except InputError as exc:
                problems.append(f"{row['label']} task {position}: {exc}")
                continue
            yield f"task/{key}/{position}", payload
    for entry in index["reports"]:
        try:
            yield f"report/{entry['key']}", catalog.report(entry["key"])
        except InputError as exc:
            problems.append(f"{entry['label']}: {exc}")
    index["problems"] += [{"path": "export", "error": p} for p in problems[unread:]]
    yield "index", index


def export_file(catalog: Catalog, out: str | Path) -> ExportSummary:
    """Write the viewer as one self-contained HTML file: the app, its style, every payload and the figures inside
    it (`single_page`). Its data is a JSON block, not a script, so no other page can load it; it is as readable as
    the file itself.

    Raises:
        InputError: ``out`` is a folder or cannot be written.
    """
    out = check_output_path(out, flag="--export-file")
    if out.is_dir():
        raise InputError("--export-file: a folder; give a file name such as runs.html", path=out)
    problems: list[str] = []
    bundle: dict[str, Any] = {}
    runs = tasks = 0
    _, figures = catalog.scan()
    for figure in figures:
        bundle[f"figure/{figure.key}"] = "data:image/png;base64," + base64.b64encode(read_figure(figure.path)).decode()
    for key, data in _payloads(catalog, problems):
        bundle[key] = data
        runs += key.startswith("run/")
        tasks += key.startswith("task/")
    text = single_page(json.dumps(bundle, ensure_ascii=True).replace("<", "\\u003c"))
    atomic_write_text(out, text)
    return ExportSummary(out, runs, tasks, 1, len(text.encode("utf-8")), problems)


def export_site(catalog: Catalog, out: str | Path) -> ExportSummary:
    """Write the static site for ``catalog`` into ``out`` (created, or replaced if it is an earlier export); its
    data files are scripts, readable by any page opened from disk (`EXPOSURE_NOTE`; `export_file` is the private
    form).

    Raises:
        InputError: ``out`` is a file, or a non-empty folder that is not an earlier export, or not writable.
    """
    out = check_output_path(out, flag="--export")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError("--export: a non-empty folder that is not an earlier export; give a new folder", path=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    files = size = tasks = runs = 0
    problems: list[str] = []

    def write(relative: str, data: str | bytes) -> None:
        nonlocal files, size
        path = tmp / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        path.write_bytes(raw)
        files += 1
        size += len(raw)

    try:
        write("index.html", page("static"))
        write("README.txt", f"A skilltransfer view export: open index.html.\n\nPrivacy: {EXPOSURE_NOTE}.\n")
        for name in ASSETS:
            write(f"assets/{name}", asset_bytes(name))
        _, figures = catalog.scan()
        for figure in figures:
            write(f"figures/{figure.key}.png", read_figure(figure.path))
        for key, data in _payloads(catalog, problems):
            write(f"data/{key}.js", data_script(key, data))
            runs += key.startswith("run/")
            tasks += key.startswith("task/")
        write(MARKER, "a skilltransfer view export: open index.html\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportSummary(out, runs, tasks, files, size, problems)
