"""The viewer as a static site that opens from disk (``file://``) and can be shared: the page, its assets, and every
payload of the `Catalog` as a small script (``data/index.js``, ``data/run/<key>.js``, ``data/task/<key>/<n>.js``)
that hands its JSON to the page; report figures are copied to ``figures/``. The JSON is ASCII and inside a function
call, so no string in it can end the script or become markup."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError, check_output_path
from skilltransfer.view.assets import ASSETS, asset_bytes, page
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


def export_site(catalog: Catalog, out: str | Path) -> ExportSummary:
    """Write the static site for ``catalog`` into ``out`` (created, or replaced if it is an earlier export).

    Raises:
        InputError: ``out`` is a file, or a non-empty folder that is not an earlier export, or not writable.
    """
    out = check_output_path(out, flag="--export")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError("--export: a non-empty folder that is not an earlier export; give a new folder", path=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    files = size = tasks = 0
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
        index = catalog.index()
        write("index.html", page("static"))
        for name in ASSETS:
            write(f"assets/{name}", asset_bytes(name))
        _, figures = catalog.scan()
        for figure in figures:
            write(f"figures/{figure.key}.png", read_figure(figure.path))
        runs = 0
        for row in index["runs"]:
            key = row["key"]
            try:
                run = catalog.run(key)
            except InputError as exc:
                problems.append(f"{row['label']}: {exc}")
                continue
            write(f"data/run/{key}.js", data_script(f"run/{key}", run))
            runs += 1
            for task in run["tasks"]:
                if not task["finished"] and task.get("status") == "pending":
                    continue
                position = task["position"]
                try:
                    payload = catalog.task(key, position)
                except InputError as exc:
                    problems.append(f"{row['label']} task {position}: {exc}")
                    continue
                write(f"data/task/{key}/{position}.js", data_script(f"task/{key}/{position}", payload))
                tasks += 1
        index["problems"] += [{"path": "export", "error": p} for p in problems]
        write("data/index.js", data_script("index", index))
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
