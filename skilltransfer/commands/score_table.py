"""The table ``skilltransfer score`` prints: the report's one ranking, fitted to the terminal without splitting a
skill name or cutting a header.

The columns are the report's (`skilltransfer.metrics.scoring.ScoreReport.columns`, each with a screen priority).
When the whole table is wider than the terminal, the columns of the largest priority are left out first (the files
keep them), those that then fit again are put back, and a note names the rest; when even the columns that always
stay do not fit (a very long name on a narrow terminal), each skill is printed as a name line and a line of values
instead. The table is measured on one row of each column's widest cell, so its layout costs the same for 50 rows as
for 5. Under the relevance ranking a
dashed line separates the skills inside the embedder's null (ranked last, whatever their relevance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.cells import cell_len
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


def _widest(columns: Sequence[ScoreColumn], rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per column, its widest text (header or cell): a one-row table of these is as wide as the whole table."""
    out = []
    for column in columns:
        cells = [terminal_safe(column.cell(row[column.key])) for row in rows]
        out.append(max([column.header, *cells], key=cell_len))
    return out


def _width(console: Console, columns: Sequence[ScoreColumn], widest: dict[str, str]) -> int:
    """The width the table of ``columns`` takes unconstrained, measured on one row of each column's widest text
    (a table's width does not depend on how many rows it has)."""
    table = Table(box=_BOX, pad_edge=False, show_edge=False, collapse_padding=True)
    for column in columns:
        table.add_column(Text(column.header), no_wrap=True)
    table.add_row(*(Text(widest[column.key]) for column in columns))
    return Measurement.get(console, console.options.update_width(1_000_000), table).maximum


def fit_table(report: ScoreReport, rows: Sequence[dict[str, Any]], console: Console) -> Fitted:
    """The widest table of ``rows`` that fits ``console.width``: columns left out from the largest screen priority
    (the rightmost first among equals) until the table fits, then each left-out column that still fits put back,
    the most important first; priority-0 columns (rank, name, the ranked measure, and what the command was asked
    for: the effect with ``--effects``, else the domain flags) always stay."""
    candidates = [column for column in report.columns() if column.priority is not None]
    widest = dict(zip([c.key for c in candidates], _widest(candidates, rows), strict=True))
    order = {column.key: i for i, column in enumerate(candidates)}

    def fits(columns: list[ScoreColumn]) -> bool:
        return _width(console, columns, widest) <= console.width

    columns = list(candidates)
    while not fits(columns):
        droppable = [c for c in columns if c.priority]
        if not droppable:
            return Fitted(columns, [], None)
        worst = max(range(len(droppable)), key=lambda i: (droppable[i].priority or 0, i))
        columns = [c for c in columns if c is not droppable[worst]]
    for column in sorted((c for c in candidates if c not in columns), key=lambda c: (c.priority or 0, order[c.key])):
        trial = sorted([*columns, column], key=lambda c: order[c.key])
        if fits(trial):
            columns = trial
    left_out = [c.header for c in candidates if c not in columns]
    return Fitted(columns, left_out, _table(columns, rows, null_start(report, rows)))


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
