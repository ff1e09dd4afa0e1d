"""OfficeBench's nine check functions (reimplemented from their description), plus skilltransfer's answer checks.

A task's ``evaluation`` is a list of ``{"function": name, "args": {...}}``; every check must pass. Checks read the
episode workspace only (harness side). Paths are relative to the workspace; OfficeBench's paths that climb out of
its output folder (``../../../../reference/x`` and ``../../../../cache/<k>/testbed/x``) are mapped to the task
folder's ``reference/`` and to the pristine testbed. Any other path leaving the workspace fails the check.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer.envs.office import files
from skilltransfer.envs.office.safe_lambda import UnsafeExpressionError, compile_lambda
from skilltransfer.protocols import Check, Score


class CheckError(Exception):
    """A check could not run (missing file, bad argument); the check fails with this message."""


class MissingFileError(CheckError):
    """The file a check reads does not exist (or is not a regular file)."""


@dataclass(frozen=True)
class CheckContext:
    """Where a check reads from.

    Attributes:
        workspace: the episode's testbed after the agent acted.
        answer: the value passed to ``complete_task`` (None if none).
        task_dir: the OfficeBench task folder (holds ``reference/``); None for generated tasks.
        pristine: a callable returning the untouched testbed folder (for ``evaluate_diff_contain_text``).
    """

    workspace: Path
    answer: Any = None
    task_dir: Path | None = None
    pristine: Callable[[], Path] | None = None

    def path(self, raw: str) -> Path:
        """Resolve a check's file argument (see module docs)."""
        if PurePosixPath(str(raw)).is_absolute() or re.match(r"^[A-Za-z]:", str(raw)):
            raise CheckError(f"path {raw!r} is absolute; check paths are relative to the workspace")
        parts = [p for p in PurePosixPath(str(raw)).parts if p not in (".", "")]
        ups = 0
        while ups < len(parts) and parts[ups] == "..":
            ups += 1
        rest = parts[ups:]
        if ups == 0:
            if ".." in rest:
                raise CheckError(f"path {raw!r} leaves the workspace")
            return self.workspace.joinpath(*rest)
        if rest and rest[0] == "reference" and self.task_dir is not None and ".." not in rest:
            return self.task_dir.joinpath(*rest)
        if len(rest) > 3 and rest[0] == "cache" and rest[2] == "testbed" and self.pristine is not None:
            return self.pristine().joinpath(*rest[3:])
        raise CheckError(f"path {raw!r} leaves the workspace")


def _existing(ctx: CheckContext, raw: str) -> Path:
    path = ctx.path(raw)
    if not path.is_file():
        raise MissingFileError(f"file {raw} does not exist")
    return path


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _contains_all(content: str, keywords: list[Any]) -> tuple[bool, str]:
    """Case-insensitive keyword search; for numeric keywords thousands separators are ignored."""
    content = content.lower()
    for keyword in keywords:
        key = str(keyword).lower()
        if _is_number(key):
            content = content.replace(",", "")
        if key not in content:
            return False, f"missing {keyword!r}"
    return True, "all keywords found"


def mailbox_text(workspace: Path, username: str) -> str:
    """The full listing of a user's mailbox (From/To/Subject/Content of every .eml), as the benchmark reads it."""
    root = workspace / "emails"
    folder = root / username
    if not folder.is_dir() and (root / username.lower()).is_dir():
        folder = root / username.lower()
    if not folder.is_dir() and root.is_dir():
        matches = sorted(p for p in root.iterdir() if p.is_dir() and username.lower() in p.name.lower())
        folder = matches[0] if matches else folder
    if not folder.is_dir():
        return ""
    blocks = []
    for path in sorted(folder.glob("*.eml")):
        mail = files.parse_email(path)
        blocks.append(f"Email ID: {path.name}\nFrom: {mail['from']}\nTo: {mail['to']}\nSubject: {mail['subject']}\n"
                      f"Content: {mail['content']}\n" + "-" * 50 + "\n")
    return "".join(blocks)


def document_text(ctx: CheckContext, doc_type: str, raw: str) -> str:
    """A document's text by OfficeBench doc type (xlsx, docx/doc, pdf, txt, ics)."""
    path = _existing(ctx, raw)
    if doc_type == "xlsx":
        return files.xlsx_text(path)
    if doc_type in ("doc", "docx"):
        return files.docx_text(path)
    if doc_type == "pdf":
        return files.pdf_text(path)
    if doc_type in ("txt", "ics"):
        return path.read_text(encoding="utf-8", errors="replace")
    raise CheckError(f"unknown doc_type {doc_type!r}")


def evaluate_contain(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """Every keyword occurs in the document (or in ``username``'s mailbox for doc_type email)."""
    if args["doc_type"] == "email":
        return _contains_all(mailbox_text(ctx.workspace, str(args["username"])), list(args["keywords"]))
    return _contains_all(document_text(ctx, args["doc_type"], args["file"]), list(args["keywords"]))


def evaluate_not_contain(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """The negation of :func:`evaluate_contain`, as in the benchmark: passes unless every keyword occurs.

    A missing document contains no keyword, so the check passes (the benchmark's ``evaluate_contain`` returns False
    for a missing file and ``evaluate_not_contain`` negates it). A path that leaves the workspace, an unknown
    doc_type or an unreadable file still fail the check.
    """
    try:
        passed, _ = evaluate_contain(ctx, args)
    except MissingFileError as exc:
        return True, f"{exc}: no keyword can occur"
    return not passed, "keywords absent" if not passed else "all keywords present"


def evaluate_file_exist(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    exists = ctx.path(args["file"]).exists()
    return exists, f"{args['file']} {'exists' if exists else 'is missing'}"


def evaluate_file_not_exist(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    exists = ctx.path(args["file"]).exists()
    return not exists, f"{args['file']} {'exists' if exists else 'is absent'}"


def evaluate_diff_contain_text(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """The keywords all occur in the line diff from the input version to the output version of a file."""
    doc_type = args["doc_type"]
    if doc_type not in ("xlsx", "doc", "docx"):
        raise CheckError(f"diff of doc_type {doc_type!r} is not supported")
    before = document_text(ctx, doc_type, args["input_file"])
    after = document_text(ctx, doc_type, args["output_file"])
    if before == after:
        return False, "the file is unchanged"
    diff = "\n".join(difflib.unified_diff(before.split("\n"), after.split("\n"), n=0))
    missing = [k for k in args["keywords"] if str(k) not in diff]
    return not missing, f"diff lacks {missing}" if missing else "diff has all keywords"


def _require_file(args: dict[str, Any]) -> str:
    if "file" not in args:
        raise CheckError("the check names no 'file' (broken ground truth in the task data)")
    return str(args["file"])


def evaluate_excel_cell_value(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """Each ``(row, col): value`` occurs in the sheet's rendering (values compared as text)."""
    content = files.xlsx_text(_existing(ctx, _require_file(args)))
    for match in args["matches"]:
        if f"({match['row']}, {match['col']}): {match['value']}" not in content:
            return False, f"cell ({match['row']}, {match['col']}) is not {match['value']!r}"
    return True, "all cells match"


def evaluate_excel_cell_comparator(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """Each cell's text satisfies its comparator lambda (interpreted safely, never ``eval``-ed)."""
    content = files.xlsx_text(_existing(ctx, _require_file(args)))
    for match in args["matches"]:
        try:
            comparator = compile_lambda(match["comparator"])
        except UnsafeExpressionError as exc:
            raise CheckError(f"rejected comparator {match['comparator']!r}: {exc}") from exc
        found = re.search(rf"\({match['row']}, {match['col']}\): (\w+)\t", content)
        if not found:
            return False, f"cell ({match['row']}, {match['col']}) is empty or not a word"
        if not comparator(found.group(1)):
            return False, f"cell ({match['row']}, {match['col']}) = {found.group(1)!r} fails {match['comparator']}"
    return True, "all comparators hold"


def _as_utc(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def evaluate_calendar_no_overlap(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """No two events of ``calendar/<username>.ics`` overlap (naive times read as UTC)."""
    raw = f"calendar/{args['username']}.ics"
    calendar = files.read_calendar(_existing(ctx, raw))
    spans = []
    for event in files.calendar_events(calendar):
        start, end = files.event_value(event, "dtstart"), files.event_value(event, "dtend")
        if start is None:
            continue
        spans.append((_as_utc(start), _as_utc(end if end is not None else start), str(event.get("summary"))))
    spans.sort(key=lambda span: span[0])
    latest: tuple[dt.datetime, str] | None = None
    for start, end, summary in spans:
        if latest is not None and latest[0] > start:
            return False, f"events {latest[1]!r} and {summary!r} overlap"
        if latest is None or end > latest[0]:
            latest = (end, summary)
    return True, f"{len(spans)} events, no overlap"


def evaluate_exact_match(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """The result file has the same content as the expected one (cell by cell for xlsx, text otherwise)."""
    result = _existing(ctx, args["result_file"])
    expected = _existing(ctx, args["expected_file"])
    doc_type = args["doc_type"]
    if doc_type == "xlsx":
        import openpyxl

        got, want = openpyxl.load_workbook(result).active, openpyxl.load_workbook(expected).active
        for sheet, other in ((got, want), (want, got)):
            for row in sheet.iter_rows():
                for cell in row:
                    if cell.value != other.cell(row=cell.row, column=cell.column).value:
                        return False, f"cell ({cell.row}, {cell.column}) differs"
        return True, "sheets match"
    if doc_type == "pdf":
        same = files.pdf_pages_text(result) == files.pdf_pages_text(expected)
    else:
        same = document_text(ctx, doc_type, args["result_file"]) == document_text(ctx, doc_type, args["expected_file"])
    return same, "contents match" if same else "contents differ"


def evaluate_answer_contain(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """skilltransfer extension: every keyword occurs in the ``complete_task`` answer."""
    if ctx.answer is None:
        return False, "no answer was given"
    return _contains_all(str(ctx.answer), list(args["keywords"]))


def evaluate_answer_not_contain(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """skilltransfer extension: none of the keywords occurs in the answer (a wrong candidate was not named)."""
    text = str(ctx.answer or "").lower()
    found = [k for k in args["keywords"] if str(k).lower() in text]
    return not found, f"answer names {found}" if found else "no forbidden keyword"


CHECKS: dict[str, Callable[[CheckContext, dict[str, Any]], tuple[bool, str]]] = {
    "evaluate_contain": evaluate_contain,
    "evaluate_not_contain": evaluate_not_contain,
    "evaluate_file_exist": evaluate_file_exist,
    "evaluate_file_not_exist": evaluate_file_not_exist,
    "evaluate_diff_contain_text": evaluate_diff_contain_text,
    "evaluate_excel_cell_value": evaluate_excel_cell_value,
    "evaluate_excel_cell_comparator": evaluate_excel_cell_comparator,
    "evaluate_calendar_no_overlap": evaluate_calendar_no_overlap,
    "evaluate_exact_match": evaluate_exact_match,
    "evaluate_answer_contain": evaluate_answer_contain,
    "evaluate_answer_not_contain": evaluate_answer_not_contain,
}
"""The nine OfficeBench checks and the two answer checks, by name."""


def run_check(ctx: CheckContext, item: dict[str, Any]) -> Check:
    """Run one evaluation item; a check that cannot run (missing file, bad args) fails with the reason."""
    name, args = item.get("function"), item.get("args") or {}
    label = f"{name}({', '.join(f'{k}={v!r}' for k, v in sorted(args.items()))})"
    if len(label) > 300:
        label = label[:297] + "..."
    function = CHECKS.get(str(name))
    if function is None:
        return Check(requirement=label, passed=False, detail=f"unknown check function {name!r}")
    try:
        passed, detail = function(ctx, args)
    except CheckError as exc:
        return Check(requirement=label, passed=False, detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - a corrupt file the agent wrote must fail the check, not crash
        return Check(requirement=label, passed=False, detail=f"{type(exc).__name__}: {exc}")
    return Check(requirement=label, passed=bool(passed), detail=detail)


def run_checks(ctx: CheckContext, evaluation: list[dict[str, Any]]) -> Score:
    """Success (the benchmark's pass/fail) needs every check to pass; the reward is the fraction that passed."""
    checks = tuple(run_check(ctx, item) for item in evaluation)
    success = bool(checks) and all(check.passed for check in checks)
    reward = sum(check.passed for check in checks) / len(checks) if checks else 0.0
    return Score(reward=reward, success=success, checks=checks)
