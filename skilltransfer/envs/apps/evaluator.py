"""State-based evaluation, AppWorld style: the answer is right, the required changes happened, nothing else changed.

The required changes are the difference between the initial world and the world after the task's reference
program ran (computed on the harness side). The agent's difference from the initial world must match it: the same
rows removed, the same rows modified to the same values, and added rows matching the reference's added rows
(ignoring ids and timestamps; free-text fields such as an email body need only *contain* the reference text).
Any other changed, added or removed row, in any table, is collateral damage.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.protocols import Check, Score

Row = dict[str, Any]
Snapshot = dict[str, tuple[tuple[str, ...], dict[int, tuple[Any, ...]]]]

IGNORED_TABLES = frozenset({"tokens", "meta"})
"""Session bookkeeping (access tokens, the world clock): never part of the comparison."""
IGNORED_COLUMNS = frozenset({"updated_at"})
ADDED_VOLATILE = frozenset({"id", "created_at", "sent_at"})
"""Columns of *new* rows that legitimately differ between the reference run and the agent's."""
FREE_TEXT = frozenset({"body", "content", "message", "description", "location"})
"""Columns where the agent's text must contain the reference text (after normalisation)."""


def snapshot(conn: sqlite3.Connection) -> Snapshot:
    """Every row of every compared table of a world database: table -> (column names, {rowid: values})."""
    out: Snapshot = {}
    cursor = conn.cursor()
    cursor.row_factory = None
    try:
        tables = [r[0] for r in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            if table in IGNORED_TABLES:
                continue
            columns = tuple(r[1] for r in cursor.execute(f"PRAGMA table_info({table})")
                            if r[1] not in IGNORED_COLUMNS)
            rows = cursor.execute(f"SELECT rowid, {', '.join(columns)} FROM {table}").fetchall()
            out[table] = (columns, {r[0]: tuple(r[1:]) for r in rows})
        return out
    finally:
        cursor.close()


@dataclass
class TableDiff:
    added: list[Row] = field(default_factory=list)
    removed: set[int] = field(default_factory=set)
    modified: dict[int, Row] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.modified)

    def summary(self) -> str:
        return f"{len(self.added)} added, {len(self.removed)} removed, {len(self.modified)} modified"


def diff(before: Snapshot, after: Snapshot) -> dict[str, TableDiff]:
    """Per-table changes from ``before`` to ``after`` (only tables that changed)."""
    out: dict[str, TableDiff] = {}
    for table in sorted(set(before) | set(after)):
        columns, old = before.get(table, after.get(table, ((), {})))
        new = after.get(table, (columns, {}))[1]
        if old == new:
            continue

        def row(values: tuple[Any, ...], columns: tuple[str, ...] = columns) -> Row:
            return dict(zip(columns, values, strict=True))

        out[table] = TableDiff(added=[row(new[k]) for k in sorted(set(new) - set(old))], removed=set(old) - set(new),
                               modified={k: row(new[k]) for k in sorted(set(old) & set(new)) if old[k] != new[k]})
    return out


_NUMBER = re.compile(r"(?<![\d.])(\d+)\.(\d*?)0+(?!\d)")


def normalize_text(value: Any) -> str:
    """Lower-case, collapse whitespace, drop currency signs and thousands separators, canonical decimals."""
    text = str(value).lower().replace("$", "")
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    text = _NUMBER.sub(lambda m: m.group(1) + (f".{m.group(2)}" if m.group(2) else ""), text)
    return " ".join(text.split()).strip(" .!\"'")


def _value_matches(column: str, expected: Any, actual: Any) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            return abs(float(expected) - float(actual)) < 0.005
        except (TypeError, ValueError):
            return False
    if isinstance(expected, str) and isinstance(actual, str):
        if column in FREE_TEXT:
            return normalize_text(expected) in normalize_text(actual)
        return normalize_text(expected) == normalize_text(actual)
    return bool(expected == actual)


def rows_match(expected: Row, actual: Row, skip: frozenset[str] = frozenset()) -> bool:
    return all(_value_matches(c, v, actual.get(c)) for c, v in expected.items() if c not in skip)


def compare_changes(required: dict[str, TableDiff], actual: dict[str, TableDiff]) -> list[Check]:
    """One check per table the task must change, plus one "no collateral damage" check."""
    checks: list[Check] = []
    unexplained: list[str] = []
    for table in sorted(set(required) | set(actual)):
        need, got = required.get(table, TableDiff()), actual.get(table, TableDiff())
        problems: list[str] = []
        missing_removed = need.removed - got.removed
        if missing_removed:
            problems.append(f"rows {sorted(missing_removed)} should have been removed")
        for key, row in need.modified.items():
            if key not in got.modified or not rows_match(row, got.modified[key]):
                problems.append(f"row {key} was not changed as required")
        spare = list(got.added)
        for row in need.added:
            hit = next((i for i, cand in enumerate(spare) if rows_match(row, cand, ADDED_VOLATILE)), None)
            if hit is None:
                problems.append(f"missing new row like {_short(row)}")
            else:
                spare.pop(hit)
        if need:
            checks.append(Check(f"required changes in {table}", not problems,
                                "; ".join(problems) if problems else need.summary()))
        extra = len(got.removed - need.removed) + len(set(got.modified) - set(need.modified)) + len(spare)
        if extra:
            unexplained.append(f"{table}: {extra} unexpected change(s)")
    checks.append(Check("no collateral damage", not unexplained, "; ".join(unexplained)))
    return checks


def _short(row: Row) -> str:
    shown = {k: v for k, v in row.items() if k not in ADDED_VOLATILE}
    return truncate_text(json.dumps(shown, default=str), 160)


def truncate_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def answer_matches(expected: Any, given: Any) -> bool:
    """Compare answers strictly but sensibly: numbers to the cent, strings case/space/punctuation-insensitive."""
    if given is None:
        return False
    if isinstance(expected, bool):
        return normalize_text(given) in (("true", "yes") if expected else ("false", "no"))
    if isinstance(expected, int | float):
        try:
            number = float(normalize_text(given)) if isinstance(given, str) else float(given)
        except (TypeError, ValueError):
            return False
        return abs(number - float(expected)) < 0.005
    if isinstance(expected, list):
        items = given if isinstance(given, list) else str(given).split(",")
        return sorted(normalize_text(x) for x in items) == sorted(normalize_text(x) for x in expected)
    return normalize_text(given) == normalize_text(expected)


def score(completed: bool, answer_check: Check | None, change_checks: list[Check]) -> Score:
    """Combine the checks: reward is the fraction passed, success needs all of them."""
    checks = [Check("task marked complete", completed, "" if completed else "complete_task() was never called")]
    if answer_check is not None:
        checks.append(answer_check)
    checks.extend(change_checks)
    passed = sum(c.passed for c in checks)
    return Score(reward=passed / len(checks), success=passed == len(checks), checks=tuple(checks))
