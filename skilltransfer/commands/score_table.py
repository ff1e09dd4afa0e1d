"""The table ``skilltransfer score`` prints: the report's one ranking, fitted to the terminal without splitting a
skill name or cutting a header.

The columns are the report's (`skilltransfer.metrics.scoring.ScoreReport.columns`, each with a screen priority).
When the whole table is wider than the terminal, the columns of the largest priority are left out first (the files
keep them) and a note names them; when even rank, name and the ranked measure do not fit (a very long name on a
narrow terminal), each skill is printed as a name line and a line of values instead. Under the relevance ranking a
dashed line separates the skills inside the embedder's null (ranked last, whatever their relevance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from skilltransfer.metrics.scoring import ScoreColumn, ScoreReport
from skilltransfer.util.terminal import Console
from skilltransfer.util.text import terminal_safe

_BOX = box.Box("    \n"
               "    \n"
               " ── \n"  # under the header
               "    \n"
               " ╌╌ \n"  # a section's end: before the skills inside the null
               "    \n"
               "    \n"
               "    \n")
"""Rich's SIMPLE_HEAD with a dashed line where a section ends."""


@dataclass(frozen=True)
class Fitted:
    """The columns shown and the headers left out at one width."""

    columns: list[ScoreColumn]
    left_out: list[str]
    table: Table | None
    """None: not even the fixed columns fit; print `record_lines` instead."""


def null_start(report: ScoreReport, rows: Sequence[dict[str, Any]]) -> int | None:
    """Under the relevance ranking, the index of the first row inside the embedder's null (they are ranked last);
    None when no row is, or under another ranking."""
    if report.rank_by != "relevance":
        return None
    return next((i for i, row in enumerate(rows) if row["null_off_domain"]), None)


def _table(columns: Sequence[ScoreColumn], rows: Sequence[dict[str, Any]], split: int | None) -> Table:
    table = Table(box=_BOX, pad_edge=False, show_edge=False, collapse_padding=True)
    for column in columns:
        table.add_column(Text(column.header), justify="right" if column.numeric else "left", no_wrap=True)
    for index, row in enumerate(rows):
        table.add_row(*(Text(terminal_safe(column.cell(row[column.key]))) for column in columns),
                      end_section=split is not None and index == split - 1)
    return table


def _width(console: Console, table: Table) -> int:
    """The width ``table`` takes unconstrained (measured as if the terminal were unbounded)."""
    return Measurement.get(console, console.options.update_width(1_000_000), table).maximum


def fit_table(report: ScoreReport, rows: Sequence[dict[str, Any]], console: Console) -> Fitted:
    """The widest table of ``rows`` that fits ``console.width``: columns left out from the largest screen priority
    (the rightmost first among equals); rank, name and the ranked measure (priority 0) always stay."""
    columns = [column for column in report.columns() if column.priority is not None]
    left_out: list[ScoreColumn] = []
    split = null_start(report, rows)
    while True:
        table = _table(columns, rows, split)
        if _width(console, table) <= console.width:
            return Fitted(columns, [c.header for c in left_out], table)
        droppable = [c for c in columns if c.priority]
        if not droppable:
            return Fitted(columns, [c.header for c in left_out], None)
        worst = max(range(len(droppable)), key=lambda i: (droppable[i].priority or 0, i))
        left_out.insert(0, droppable[worst])
        columns = [c for c in columns if c is not droppable[worst]]


def record_lines(report: ScoreReport, rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each skill as (``rank. name``, its ``header value`` pairs), for terminals too narrow for a table row."""
    columns = [c for c in report.columns() if c.priority is not None and c.key not in ("rank", "name")]
    return [(f"{row['rank']:>3}. {terminal_safe(row['name'])}",
             "  ".join(f"{c.header} {terminal_safe(c.cell(row[c.key]))}" for c in columns if c.cell(row[c.key])))
            for row in rows]


def print_ranking(report: ScoreReport, rows: Sequence[dict[str, Any]], console: Console) -> None:
    """Print ``rows`` (the first of the report's ranking) as a table fitted to the console, with a note of the
    columns left out."""
    fitted = fit_table(report, rows, console)
    if fitted.table is None:
        for name_line, values in record_lines(report, rows):
            console.print(Text(name_line), soft_wrap=True)  # never broken by us, however long
            console.print(Padding(Text(values), (0, 0, 0, 5)))
        return
    console.print(fitted.table)
    split = null_start(report, rows)
    if split is not None and "domain" in fitted.left_out:
        console.print(Text("below the dashed line: skills inside the embedder's null (NULL), ranked last" if split
                           else "every skill shown lies inside the embedder's null (NULL)"))
    if fitted.left_out:
        console.print(Text(f"left out at {console.width} columns: {', '.join(fitted.left_out)} (a wider terminal "
                           "shows them; --out writes every column)"))
