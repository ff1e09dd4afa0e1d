"""The table value type every report section produces (written as CSV and Markdown, drawn by the figures)."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    """One report table.

    Attributes:
        name: file stem of its CSV (``<name>.csv``).
        title: heading in the Markdown/HTML report.
        columns: column names, in order.
        rows: one dict per row (keys = columns).
        note: how the numbers are computed (printed under the table).
    """

    name: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow([_csv_cell(row.get(column)) for column in self.columns])
        return buffer.getvalue()

    def where(self, **match: Any) -> list[dict[str, Any]]:
        """Rows whose fields equal all of ``match``."""
        return [row for row in self.rows if all(row.get(k) == v for k, v in match.items())]


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return value


def natural_key(text: str) -> list[Any]:
    """Sort key that orders embedded numbers by value (``model-2`` before ``model-10``)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]


def fmt(value: Any, digits: int = 1) -> str:
    """A table cell for humans: floats rounded, missing/NaN as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)
