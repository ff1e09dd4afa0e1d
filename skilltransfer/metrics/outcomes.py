"""Outcomes files for ``validate`` (docs/commands/validate.md): what libraries or skills did, measured elsewhere.

Three shapes, told apart by their key columns:

- ``library`` -> outcome (one row per library; e.g. SkillLearnBench's pass rate per library);
- ``library``, ``task`` -> outcome (one row per run of a library on a task, 0/1 success or any number; several rows
  of one pair are averaged): the tasks then enter the bootstrap;
- ``skill`` -> outcome (one row per skill of one library; e.g. its effect on success).

A CSV file has a header row; a JSON file is a list of objects with the same keys, or an object mapping each library
to its number. The outcome is the column ``--outcome`` names, else the one numeric column that is no key (or, of
several, the first of pass_rate, success, effect, outcome). Every other column is kept per library (or skill): a
group a correlation can be taken within (``--group``), a split (``--tune-on``) or a diagnostic someone else measured
(``--external``); it must be the same on every row of a library. Empty outcome cells are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.util.files import read_text

KEYS = ("library", "task", "skill")
PREFERRED = ("pass_rate", "success", "effect", "outcome")
MAX_OUTCOME_BYTES = 64 << 20


@dataclass
class Outcomes:
    """An outcomes file as read."""

    path: Path
    kind: str
    """``library``, ``task`` (library x task) or ``skill``."""
    column: str
    values: dict[str, float] = field(default_factory=dict)
    """library (or skill) -> its outcome; for ``task``, the mean over its tasks' runs."""
    runs: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """``task`` only: (library, task) -> its runs' outcomes."""
    columns: dict[str, dict[str, str]] = field(default_factory=dict)
    """Other column -> library (or skill) -> its value."""

    @property
    def unit(self) -> str:
        return "skill" if self.kind == "skill" else "library"

    def tasks(self) -> list[str]:
        """The tasks of a ``task`` file, in first-seen order."""
        return list(dict.fromkeys(task for _, task in self.runs))


def _number(value: Any, where: str, path: Path) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(str(value).strip().rstrip("%")) if not isinstance(value, int | float) else float(value)
    except ValueError:
        raise InputError(f"{where}: {str(value)[:40]!r} is not a number", path=path) from None
    if not math.isfinite(number):
        raise InputError(f"{where}: {value!r} is not a finite number", path=path)
    return number


def _records(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, what="outcomes file", max_bytes=MAX_OUTCOME_BYTES)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
        except RecursionError:
            raise InputError(f"nests more than {untrusted.MAX_DEPTH} levels deep", path=path) from None
        if (problem := untrusted.depth_problem(data)) is not None:
            raise InputError(f"not accepted: {problem}", path=path)
        if isinstance(data, dict) and all(not isinstance(v, dict | list) for v in data.values()):
            return [{"library": key, "outcome": value} for key, value in data.items()]
        if isinstance(data, list) and all(isinstance(item, dict) for item in data):
            return [{str(k): v for k, v in item.items()} for item in data]
        raise InputError("an outcomes JSON file is a list of objects or an object library -> number", path=path)
    if path.suffix.lower() not in (".csv", ".tsv"):
        raise InputError(f"unknown outcomes file type {path.suffix!r}: use .csv, .tsv or .json", path=path)
    reader = csv.DictReader(io.StringIO(text), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    if not reader.fieldnames:
        raise InputError("the outcomes file has no header row", path=path)
    return [{k.strip(): v for k, v in row.items() if k is not None} for row in reader]


def read_outcomes(path: str | Path, *, outcome: str | None = None) -> Outcomes:
    """Read an outcomes file (module docstring).

    Raises:
        InputError: unreadable file, no key column, no or an ambiguous outcome column, a value that is no number, a
            column that differs between rows of one library, no outcome at all.
    """
    path = Path(path)
    rows = _records(path)
    if not rows:
        raise InputError("the outcomes file has no rows", path=path)
    names = list(dict.fromkeys(k for row in rows for k in row))
    if "skill" in names:
        kind = "skill"
    elif "library" in names:
        kind = "task" if "task" in names else "library"
    else:
        raise InputError(f"no key column: name one column library (with task for per-task outcomes) or skill; "
                         f"columns: {', '.join(names)}", path=path)
    keys = ("skill",) if kind == "skill" else ("library", "task") if kind == "task" else ("library",)
    others = [n for n in names if n not in KEYS]
    if outcome is not None:
        if outcome not in others:
            raise InputError(f"--outcome {outcome!r} is not a column; columns: {', '.join(others) or '(none)'}",
                             path=path)
        column = outcome
    else:
        numeric = [n for n in others if all(_is_number(row.get(n)) for row in rows)
                   and any(row.get(n) not in (None, "") for row in rows)]
        preferred = [n for n in PREFERRED if n in numeric] or [n for n in PREFERRED if n in others]
        if len(numeric) == 1 or preferred:
            column = preferred[0] if preferred else numeric[0]  # a preferred column that is not numeric: named below
        else:
            raise InputError("name the outcome column with --outcome; numeric columns: "
                             f"{', '.join(numeric) or '(none)'}", path=path)
    out = Outcomes(path, kind, column)
    unit_key = keys[0]
    sums: dict[str, list[float]] = {}
    for number, row in enumerate(rows, start=2 if path.suffix.lower() != ".json" else 1):
        where = f"row {number}"
        unit = str(row.get(unit_key) or "").strip()
        if not unit:
            raise InputError(f"{where}: empty {unit_key}", path=path)
        value = _number(row.get(column), f"{where}, column {column}", path)
        for name in others:
            if name == column or row.get(name) in (None, ""):
                continue
            seen = out.columns.setdefault(name, {})
            text = str(row[name]).strip()
            if seen.setdefault(unit, text) != text:
                raise InputError(f"{where}: column {name} is {text!r} here and {seen[unit]!r} on an earlier row of "
                                 f"{unit_key} {unit!r} (a library's columns must agree)", path=path)
        if value is None:
            continue
        if kind == "task":
            task = str(row.get("task") or "").strip()
            if not task:
                raise InputError(f"{where}: empty task", path=path)
            out.runs.setdefault((unit, task), []).append(value)
        sums.setdefault(unit, []).append(value)
    if kind == "task":
        by_library: dict[str, list[float]] = {}
        for (library, _), values in out.runs.items():
            by_library.setdefault(library, []).append(sum(values) / len(values))
        out.values = {lib: sum(v) / len(v) for lib, v in by_library.items()}
    else:
        out.values = {unit: sum(v) / len(v) for unit, v in sums.items()}
    if not out.values:
        raise InputError(f"no row has an outcome in column {column}", path=path)
    return out


def _is_number(value: Any) -> bool:
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    if isinstance(value, bool | int | float):
        return True
    try:
        float(str(value).strip().rstrip("%"))
    except ValueError:
        return False
    return True


def load_key_points(path: str | Path) -> dict[str, list[str]]:
    """Key points per task: a JSON object task id -> list of strings (or of objects with ``key_point``), or a folder
    in SkillLearnBench's ``eval_keypoints`` layout (``<task>/<instance>/skill-key-points.generated.json``, the task
    id its folder's path below ``path``).

    Raises:
        InputError: a file that is not such JSON, a folder with no key-point file.
    """
    path = Path(path)

    def points(data: Any, where: Path) -> list[str]:
        if not isinstance(data, list):
            raise InputError("key points must be a JSON list", path=where)
        out = []
        for item in data:
            text = item.get("key_point") if isinstance(item, dict) else item
            if isinstance(text, str) and text.strip():
                out.append(text.strip())
        return out

    def load(file: Path) -> Any:
        try:
            return json.loads(read_text(file, what="key points"))
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=file, line=exc.lineno) from None
        except RecursionError:
            raise InputError("nests too deep", path=file) from None

    if not path.exists():
        raise InputError("key points not found", path=path)
    if path.is_dir():
        files = sorted(path.rglob("skill-key-points.generated.json"))
        if not files:
            raise InputError("no skill-key-points.generated.json below this folder", path=path)
        return {file.parent.relative_to(path).as_posix(): points(load(file), file) for file in files}
    data = load(path)
    if not isinstance(data, dict):
        raise InputError("a key-points file is a JSON object task id -> list of key points", path=path)
    return {str(task): points(value, path) for task, value in data.items()}
