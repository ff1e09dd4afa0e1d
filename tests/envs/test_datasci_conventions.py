"""The datasci data says what it means.

Each domain's README.md (what the agent reads) must document every convention the data uses, and leave no reading
open that changes an answer: every date cell, read in every way the README allows, means the record's date; every
value cell, read by the README's number format and unit factors, means the record's value; and every task's
answer, recomputed from the files under every allowed reading of the dates, still scores success. A README that
says nothing about a date shape allows every common reading of it (e.g. ``03/04/2022`` day first), so undocumented
ambiguity fails here.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from skilltransfer.envs.datasci import DataSciEnv
from skilltransfer.envs.datasci.domains import DOMAINS, DomainSpec
from skilltransfer.envs.datasci.world import DomainData

CANDIDATE_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%m/%d/%Y", "%d/%m/%Y", "%m-%d-%Y", "%d-%m-%Y", "%d.%m.%Y",
                          "%Y%m%d", "%d%m%Y", "%m%d%Y", "%d %b %Y", "%b %d, %Y", "%B %d, %Y", "%d %B %Y")
"""Readings of a date an analyst may take when the documentation says nothing about its shape."""
PATTERN_TOKENS = {"YYYY": "%Y", "MM": "%m", "DD": "%d", "Month": "%B", "Mon": "%b"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> DataSciEnv:
    return DataSciEnv(seed=0, sandboxed=False, workdir=tmp_path_factory.mktemp("datasci-conventions"))


# ---- what a README documents -------------------------------------------------------------------------------

def documented_date_formats(readme: str) -> set[str]:
    """strptime formats of the date patterns the README writes in backticks (``YYYY-MM-DD``, ``Month DD, YYYY``)."""
    formats = set()
    for code in re.findall(r"`([^`]+)`", readme):
        if re.fullmatch(r"(?:YYYY|MM|DD|Month|Mon|[ ,/.\-])+", code) and re.search(r"[A-Z]", code):
            formats.add(re.sub(r"YYYY|MM|DD|Month|Mon", lambda m: PATTERN_TOKENS[m.group(0)], code))
    return formats


def column_row(readme: str, column: str) -> str:
    rows = [line for line in readme.splitlines() if line.startswith(f"| `{column}` |")]
    assert len(rows) == 1, f"README documents column {column!r} {len(rows)} times"
    return rows[0]


def documented_units(readme: str, spec: DomainSpec) -> dict[str, float]:
    """Unit spelling -> factor to the canonical unit, as the README's unit row states them."""
    row = column_row(readme, spec.unit_col).split(":", 1)[1]
    factors = {u: float(f) for u, f in re.findall(r"`([^`]+)` \(1 \1 = ([0-9.eE+-]+) ", row)}
    same, _, _ = row.partition(f"(all {spec.canonical_unit})")
    return factors | dict.fromkeys(re.findall(r"`([^`]+)`", same), 1.0)


def documented_missing(readme: str, spec: DomainSpec) -> set[str]:
    row = column_row(readme, spec.value_col)
    sentence = row[row.index("is written as"):].split(";")[0]
    return set(re.findall(r"`([^`]+)`", sentence)) | ({""} if "empty field" in sentence else set())


# ---- readings of a date cell -------------------------------------------------------------------------------

def _parse(cell: str, fmt: str) -> date | None:
    try:
        return datetime.strptime(cell, fmt).date()
    except ValueError:
        return None


def readings(cell: str, documented: set[str]) -> dict[str, date]:
    """Format -> date for each reading of ``cell`` the README allows: the documented formats that parse it, or,
    when none does, every candidate format that does."""
    allowed = {f: d for f in sorted(documented) if (d := _parse(cell, f)) is not None}
    return allowed or {f: d for f in CANDIDATE_DATE_FORMATS if (d := _parse(cell, f)) is not None}


def _shape(cell: str) -> str:
    return re.sub(r"\d", "9", re.sub(r"[A-Za-z]+", "a", cell))


def reading_policies(cells: set[str], documented: set[str]) -> list[dict[str, date]]:
    """Every consistent way to read the date column: one preferred format per date shape (cells the preferred
    format cannot parse take another allowed reading), as distinct cell -> date maps."""
    options = {cell: readings(cell, documented) for cell in cells}
    choices: dict[str, set[str]] = {}
    for cell, found in options.items():
        choices.setdefault(_shape(cell), set()).update(found)
    shapes = sorted(choices)
    policies: dict[tuple[Any, ...], dict[str, date]] = {}
    for picks in itertools.product(*(sorted(choices[s]) for s in shapes)):
        prefer = dict(zip(shapes, picks, strict=True))
        mapping = {cell: found.get(prefer[_shape(cell)], next(iter(found.values()), None))
                   for cell, found in options.items() if found}
        policies.setdefault(tuple(sorted(mapping.items())), mapping)
    return list(policies.values())


def main_rows(data: DomainData) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.files[data.main_path])))


def readme_of(data: DomainData) -> str:
    return data.files[f"{data.folder}/README.md"]


# ---- the data uses only what its README documents ----------------------------------------------------------

@pytest.mark.parametrize("spec", DOMAINS, ids=lambda s: s.name)
def test_every_date_cell_means_the_record_date_under_every_documented_reading(env: DataSciEnv,
                                                                              spec: DomainSpec) -> None:
    data = env.world.domains[spec.name]
    documented = documented_date_formats(readme_of(data))
    assert documented, "the README documents no date format"
    days = {r.id: r.day for r in data.records}
    for row in main_rows(data):
        cell = row[spec.date_col].strip()
        allowed = {f: d for f in documented if (d := _parse(cell, f)) is not None}
        assert allowed, f"{cell!r} is in no documented date format"
        assert set(allowed.values()) == {days[row[spec.id_col]]}, (cell, allowed)
        assert cell == row[spec.date_col], "dates carry no surrounding spaces"


@pytest.mark.parametrize("spec", DOMAINS, ids=lambda s: s.name)
def test_every_value_cell_means_the_record_value_by_the_documented_units(env: DataSciEnv, spec: DomainSpec) -> None:
    data = env.world.domains[spec.name]
    readme = readme_of(data)
    units, missing = documented_units(readme, spec), documented_missing(readme, spec)
    assert missing >= {"", "NA"}
    assert units == {u: f for u, f in spec.units}, "the README's unit factors are the ones the answers use"
    values = {r.id: r.value for r in data.records}
    for row in main_rows(data):
        text, unit = row[spec.value_col].strip(), row[spec.unit_col].strip()
        expected = values[row[spec.id_col]]
        if text in missing:
            assert expected is None
            assert unit == "" or unit in units
            continue
        assert re.fullmatch(r"-?(\d+|\d{1,3}(,\d{3})+)(\.\d+)?", text), f"{text!r} is not in the documented format"
        assert unit in units, f"unit {unit!r} is not documented"
        assert float(text.replace(",", "")) * units[unit] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("spec", DOMAINS, ids=lambda s: s.name)
def test_categories_and_keys_are_spelled_as_documented(env: DataSciEnv, spec: DomainSpec) -> None:
    data = env.world.domains[spec.name]
    readme = readme_of(data)
    categories = set(re.findall(r"`([^`]+)`", column_row(readme, spec.cat_col).split("one of", 1)[1]))
    keys = {r.id: r.key for r in data.records}
    for row in main_rows(data):
        assert row[spec.cat_col].strip().casefold() in {c.casefold() for c in categories}
        assert row[spec.key_col].strip().upper() == keys[row[spec.id_col]]
    assert f"`{spec.lookup_key}`" in readme
    assert "no time zone" in column_row(readme, spec.date_col)


# ---- every answer is the same under every reading the README allows -----------------------------------------

def _date_parser(mapping: dict[str, date]) -> Callable[..., pd.DataFrame]:
    def parse_mixed_dates(df: pd.DataFrame, col: str, out: str = "date") -> pd.DataFrame:
        df = df.copy()
        df[out] = pd.to_datetime(df[col].str.strip().map(mapping))
        return df

    return parse_mixed_dates


def answer_under(env: DataSciEnv, task: Any, parser: Callable[..., pd.DataFrame]) -> Any:
    """The task's reference pipeline, run on the files with ``parser`` in place of its date parsing."""
    code = env.reference_solution(task).replace("def parse_mixed_dates(", "def _replaced_parse_mixed_dates(")
    captured: dict[str, Any] = {}
    namespace: dict[str, Any] = {"parse_mixed_dates": parser,
                                 "complete_task": lambda answer=None: captured.setdefault("answer", answer)}
    exec(compile(code, task.id, "exec"), namespace)
    return captured["answer"]


def changed_answers(env: DataSciEnv, root: Path, readme_for: Callable[[DomainData], str]) -> tuple[int, list[str]]:
    """(date-dependent tasks, ids of those whose recomputed answer fails under some allowed reading)."""
    env.world.write(root)
    tasks = [t for t in env.tasks() if "parse_mixed_dates" in t.metadata["subprocedures"]]
    failed: list[str] = []
    for spec in DOMAINS:
        data = env.world.domains[spec.name]
        cells = {row[spec.date_col].strip() for row in main_rows(data)}
        for mapping in reading_policies(cells, documented_date_formats(readme_for(data))):
            parser = _date_parser(mapping)
            failed += [t.id for t in tasks if t.metadata["domain"] == spec.name and t.id not in failed
                       and not env.score(t, answer_under(env, t, parser)).success]
    return len(tasks), failed


def test_every_date_dependent_answer_holds_under_every_documented_reading(env: DataSciEnv, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    n, failed = changed_answers(env, tmp_path, readme_of)
    assert n >= 60
    assert failed == []


@pytest.mark.slow
def test_undocumented_slash_dates_change_answers(env: DataSciEnv, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: with the date formats left out of the README, reading slash dates day first
    (an allowed reading then) changes many answers."""
    monkeypatch.chdir(tmp_path)

    def silent(data: DomainData) -> str:
        return re.sub(r"Written in any of these formats:.*?\|", "|", readme_of(data))

    assert not documented_date_formats(silent(env.world.domains["crime"]))
    n, failed = changed_answers(env, tmp_path, silent)
    assert len(failed) >= 10, (len(failed), n)  # 14 of the 72 at seed 0
