"""Report folders for the viewer's report page: a folder ``skilltransfer report`` wrote (``report.json`` beside its
CSV tables) found under the viewer's paths, and its tables as text, read through `skilltransfer.util.untrusted`
(regular files inside the folder, no link followed, size-capped; a CSV is parsed, never rendered as markup).

The page shows the tables in the report's section order (`skilltransfer.experiments.report.writer.SECTIONS`), the
``utility_effects`` pair (diagnostics against randomised effects, issue 49) first, and the report's figures (the
index lists them already).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.experiments.report.writer import FIGURE_DIR, SECTIONS
from skilltransfer.util import trees, untrusted

REPORT_FILE = "report.json"
MAX_REPORTS = 20
MAX_TABLE_BYTES = 8 << 20
MAX_ROWS = 500
"""Rows of one table sent to the page (the rest: a count, and the CSV)."""
FIRST = ("utility_effects", "utility_effects_skills", "skill_effects")
"""Tables shown first: the causal and correlational answers side by side."""


@dataclass(frozen=True)
class ReportEntry:
    key: str
    label: str
    path: Path


def find_reports(paths: list[Path]) -> list[ReportEntry]:
    """The report folders under ``paths`` (folders holding a ``report.json``), at most `MAX_REPORTS`."""
    found: dict[Path, ReportEntry] = {}
    for given in paths:
        root = given.resolve()
        if not root.is_dir():
            continue
        for marker in trees.find(root, lambda name: name == REPORT_FILE):
            folder = marker.parent.resolve()
            if folder in found or not folder.is_relative_to(root) or len(found) >= MAX_REPORTS:
                continue
            label = folder.relative_to(root.parent).as_posix()
            found[folder] = ReportEntry("p" + hashlib.sha1(str(folder).encode()).hexdigest()[:10], label, folder)
    return list(found.values())


def _table_order() -> list[str]:
    names = list(FIRST)
    for _, tables, _ in SECTIONS:
        names += [name for name in tables if name not in names]
    return names


def _read_table(folder: Path, name: str) -> dict[str, Any] | None:
    """One CSV table as ``{name, columns, rows, total}`` (None when absent or unreadable)."""
    try:
        text = untrusted.read_text(f"{name}.csv", root=folder, max_bytes=MAX_TABLE_BYTES)
    except untrusted.UntrustedFileError:
        return None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        return None
    rows: list[list[str]] = []
    total = 0
    for row in reader:
        total += 1
        if len(rows) < MAX_ROWS:
            rows.append(row[:len(header)] + [""] * (len(header) - len(row)))
    return {"name": name, "columns": header, "rows": rows, "total": total}


def report_payload(entry: ReportEntry) -> dict[str, Any]:
    """The report page's data: its settings, the runs it read, and its tables in section order.

    Raises:
        InputError: its ``report.json`` cannot be read.
    """
    try:
        meta = untrusted.read_json(REPORT_FILE, root=entry.path, max_bytes=MAX_TABLE_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise InputError(str(exc)) from None
    meta = meta if isinstance(meta, dict) else {}
    tables = [table for name in _table_order() if (table := _read_table(entry.path, name)) is not None]
    listed = meta.get("runs")
    runs: list[Any] = listed if isinstance(listed, list) else []
    return {"key": entry.key, "label": entry.label, "settings": meta.get("settings") or {},
            "runs": [{"run": str(r.get("run", "")), "condition": str(r.get("condition", "")),
                      "tasks": r.get("tasks")} for r in runs if isinstance(r, dict)],
            "figures_prefix": f"{entry.label}/{FIGURE_DIR}/", "tables": tables}
