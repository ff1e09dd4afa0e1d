"""OfficeBench's nine check functions (reimplemented from their description), plus skilltransfer's answer checks.

A task's ``evaluation`` is a list of ``{"function": name, "args": {...}}``; every check must pass. Checks read the
episode workspace only (harness side). Paths are relative to the workspace; OfficeBench's paths that climb out of
its output folder (``../../../../reference/x`` and ``../../../../cache/<k>/testbed/x``) are mapped to the task
folder's ``reference/`` and to the pristine testbed. Any other path leaving the workspace fails the check. Files are
read defensively (``skilltransfer.envs.workspace_files``: no links followed, regular files only, size caps, Office
zips checked before parsing); a file that cannot be read or parsed fails its check with the reason.
"""

from __future__ import annotations

import datetime as dt
import difflib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer.envs import workspace_files
from skilltransfer.envs.office.office_tools import files
from skilltransfer.envs.office.safe_lambda import UnsafeExpressionError, compile_lambda
from skilltransfer.envs.workspace_files import UnsafeFileError
from skilltransfer.protocols import Check, Score
from skilltransfer.sandbox.bounded import BoundedCallError, call_bounded
from skilltransfer.sandbox.values import Limits

MAX_MAILBOX_BYTES = 64 << 20
"""The most .eml bytes read from one mailbox."""


class CheckError(Exception):
    """A check could not run (missing file, bad argument); the check fails with this message."""


class MissingFileError(CheckError):
    """The file a check reads does not exist (nothing, not even a link, is at its path)."""


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

    def locate(self, raw: str) -> tuple[Path, PurePosixPath]:
        """Resolve a check's file argument (see module docs) to (the folder it lies in, the path inside it)."""
        if PurePosixPath(str(raw)).is_absolute() or re.match(r"^[A-Za-z]:", str(raw)):
            raise CheckError(f"path {raw!r} is absolute; check paths are relative to the workspace")
        parts = [p for p in PurePosixPath(str(raw)).parts if p not in (".", "")]
        ups = 0
        while ups < len(parts) and parts[ups] == "..":
            ups += 1
        rest = parts[ups:]
        if not rest:
            raise CheckError(f"path {raw!r} names no file")
        if ups == 0:
            if ".." in rest:
                raise CheckError(f"path {raw!r} leaves the workspace")
            return self.workspace, PurePosixPath(*rest)
        if rest[0] == "reference" and self.task_dir is not None and ".." not in rest and len(rest) > 1:
            return self.task_dir, PurePosixPath(*rest)
        if len(rest) > 3 and rest[0] == "cache" and rest[2] == "testbed" and self.pristine is not None \
                and ".." not in rest:
            return self.pristine(), PurePosixPath(*rest[3:])
        raise CheckError(f"path {raw!r} leaves the workspace")

    def path(self, raw: str) -> Path:
        """The check's file argument as a path (for display; read it with :meth:`read`)."""
        root, relative = self.locate(raw)
        return root / relative

    def read(self, raw: str) -> bytes:
        """The file's content, read defensively; CheckError saying why it cannot be read."""
        root, relative = self.locate(raw)
        try:
            return workspace_files.read_bytes(root, relative)
        except UnsafeFileError as exc:
            if workspace_files.kind(root, relative) is None:
                raise MissingFileError(f"file {raw} does not exist") from None
            raise CheckError(str(exc)) from None

    def kind(self, raw: str) -> str | None:
        """What is at the check's path, without following links ("file", "folder", "link", "other" or None)."""
        root, relative = self.locate(raw)
        return workspace_files.kind(root, relative)


def _office(data: bytes, raw: str) -> bytes:
    """An .xlsx/.docx file's bytes, after checking its zip does not expand beyond the limit."""
    try:
        workspace_files.check_zip(data, raw)
    except UnsafeFileError as exc:
        raise CheckError(str(exc)) from None
    return data


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
    folders = workspace_files.list_folders(workspace, "emails")
    folder = username
    if folder not in folders and username.lower() in folders:
        folder = username.lower()
    if folder not in folders:
        matches = [name for name in folders if username.lower() in name.lower()]
        folder = matches[0] if matches else folder
    if folder not in folders:
        return ""
    blocks, total = [], 0
    try:
        for name in workspace_files.list_files(workspace, f"emails/{folder}", ".eml"):
            data = workspace_files.read_bytes(workspace, f"emails/{folder}/{name}")
            total += len(data)
            if total > MAX_MAILBOX_BYTES:
                raise CheckError(f"mailbox emails/{folder} holds more than {MAX_MAILBOX_BYTES} bytes (not read)")
            mail = files.parse_email(data)
            blocks.append(f"Email ID: {name}\nFrom: {mail['from']}\nTo: {mail['to']}\nSubject: {mail['subject']}\n"
                          f"Content: {mail['content']}\n" + "-" * 50 + "\n")
    except UnsafeFileError as exc:
        raise CheckError(str(exc)) from None
    return "".join(blocks)


def document_text(ctx: CheckContext, doc_type: str, raw: str) -> str:
    """A document's text by OfficeBench doc type (xlsx, docx/doc, pdf, txt, ics)."""
    if doc_type not in ("xlsx", "doc", "docx", "pdf", "txt", "ics"):
        raise CheckError(f"unknown doc_type {doc_type!r}")
    data = ctx.read(raw)
    if doc_type == "xlsx":
        return files.xlsx_text(_office(data, raw))
    if doc_type in ("doc", "docx"):
        return files.docx_text(_office(data, raw))
    if doc_type == "pdf":
        return files.pdf_text(data)
    return data.decode("utf-8", errors="replace")


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
    """The file exists (a symbolic link does not count: it is never followed)."""
    kind = ctx.kind(args["file"])
    exists = kind in ("file", "folder")
    return exists, f"{args['file']} {'exists' if exists else 'is a symbolic link' if kind == 'link' else 'is missing'}"


def evaluate_file_not_exist(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """Nothing (not even a link) is at the path."""
    exists = ctx.kind(args["file"]) is not None
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
    raw = _require_file(args)
    content = files.xlsx_text(_office(ctx.read(raw), raw))
    for match in args["matches"]:
        if f"({match['row']}, {match['col']}): {match['value']}" not in content:
            return False, f"cell ({match['row']}, {match['col']}) is not {match['value']!r}"
    return True, "all cells match"


def evaluate_excel_cell_comparator(ctx: CheckContext, args: dict[str, Any]) -> tuple[bool, str]:
    """Each cell's text satisfies its comparator lambda (interpreted safely, never ``eval``-ed)."""
    raw = _require_file(args)
    content = files.xlsx_text(_office(ctx.read(raw), raw))
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
    calendar = files.read_calendar(ctx.read(raw))
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
    doc_type = args["doc_type"]
    if doc_type == "xlsx":
        import openpyxl

        result = _office(ctx.read(args["result_file"]), args["result_file"])
        expected = _office(ctx.read(args["expected_file"]), args["expected_file"])
        got = openpyxl.load_workbook(io.BytesIO(result)).active
        want = openpyxl.load_workbook(io.BytesIO(expected)).active
        for sheet, other in ((got, want), (want, got)):
            for row in sheet.iter_rows():
                for cell in row:
                    if cell.value != other.cell(row=cell.row, column=cell.column).value:
                        return False, f"cell ({cell.row}, {cell.column}) differs"
        return True, "sheets match"
    if doc_type == "pdf":
        same = files.pdf_pages_text(ctx.read(args["result_file"])) == \
            files.pdf_pages_text(ctx.read(args["expected_file"]))
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


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _label(name: Any, args: Any) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(args.items())) if isinstance(args, dict) else repr(args)
    label = f"{name}({shown})"
    return label if len(label) <= 300 else label[:297] + "..."


def run_check(ctx: CheckContext, item: dict[str, Any]) -> Check:
    """Run one evaluation item; a check that cannot run (missing file, bad args) fails with the reason."""
    name, args = item.get("function"), item.get("args") or {}
    label = _label(name, args)
    function = CHECKS.get(str(name))
    if function is None:
        return Check(requirement=label, passed=False, detail=f"unknown check function {name!r}")
    try:
        passed, detail = function(ctx, args)
    except (CheckError, UnsafeFileError) as exc:
        return Check(requirement=label, passed=False, detail=_short(str(exc)))
    except MemoryError:
        return Check(requirement=label, passed=False, detail="MemoryError: the check ran out of its memory limit")
    except Exception as exc:  # noqa: BLE001 - a corrupt file the agent wrote must fail the check, not crash
        return Check(requirement=label, passed=False, detail=_short(f"{type(exc).__name__}: {exc}"))
    return Check(requirement=label, passed=bool(passed), detail=detail)


def run_bounded_check(ctx: CheckContext, item: dict[str, Any], limits: Limits) -> Check:
    """`run_check` in a forked child under ``limits.evaluation_s`` and ``evaluation_memory_mb``
    (`skilltransfer.sandbox.bounded`): the task data and the files are untrusted, so a check that would hang or
    exhaust memory fails with the reason instead."""
    try:
        return call_bounded(lambda: run_check(ctx, item), timeout_s=limits.evaluation_s,
                            memory_mb=limits.evaluation_memory_mb, what="the check")
    except Exception as exc:  # noqa: BLE001 - task data that breaks a check fails that check, never the run
        detail = str(exc) if isinstance(exc, BoundedCallError) else \
            f"MemoryError: the check needed more than {limits.evaluation_memory_mb} MiB (stopped)" \
            if isinstance(exc, MemoryError) else f"{type(exc).__name__}: {exc}"
        return Check(requirement=_label(item.get("function"), item.get("args") or {}), passed=False,
                     detail=_short(detail))


def run_checks(ctx: CheckContext, evaluation: list[dict[str, Any]], limits: Limits | None = None) -> Score:
    """Success (the benchmark's pass/fail) needs every check to pass; the reward is the fraction that passed.

    With ``limits``, each check runs in a forked child under its time and memory limits (`run_bounded_check`)."""
    checks = tuple(run_check(ctx, item) if limits is None else run_bounded_check(ctx, item, limits)
                   for item in evaluation)
    success = bool(checks) and all(check.passed for check in checks)
    reward = sum(check.passed for check in checks) / len(checks) if checks else 0.0
    return Score(reward=reward, success=success, checks=checks)
