"""OfficeBench check parity: skilltransfer's checks vs the benchmark's own ``evaluate.py`` on the real instances.

For every real instance and every check it runs skilltransfer's check (``skilltransfer.envs.office.checks``) and a
model of the benchmark's semantics (``zlwang-cs/OfficeBench`` at commit 40fca4b: ``evaluation.py`` and
``utils/evaluate.py`` with the app readers they call), written here from reading that code. The model's outcome is
``pass``, ``fail`` or ``crash``; the benchmark's ``evaluation.py`` turns a crash into a failed instance. Two states
are compared:

* ``initial``: the untouched testbed (as ``OfficeEnv.start`` lays it out);
* ``expected``: the testbed after applying, check by check, what each check asks for where that is derivable
  (keywords written into the named document or mailbox, cells set, the expected file copied to the result,
  files created or deleted); ``not_contain`` and ``calendar_no_overlap`` are left as found.

It prints the agreement per state and check function, then every differing check with the reason.

    python benchmarks/officebench_parity.py [--tasks ../shared/officebench/tasks] [--json parity.json] [--show 40]

Modelling notes. The benchmark's email listing reads the Docker path ``/testbed/emails/<user>``; it is modelled as
the instance's testbed. Its PDF text comes from PyPDF2, modelled with pypdf (PyPDF2's successor). Comparator
lambdas are interpreted with skilltransfer's restricted evaluator (the benchmark ``eval``-s them; data is never
``eval``-ed here), so comparator semantics agree by construction.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import difflib
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from email import policy
from email.parser import BytesParser
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer.envs.office import files
from skilltransfer.envs.office.checks import CheckContext, run_check
from skilltransfer.envs.office.officebench import RealTask, load_officebench
from skilltransfer.envs.office.safe_lambda import UnsafeExpressionError, compile_lambda

DEFAULT_TASKS = Path(__file__).resolve().parent.parent.parent / "shared" / "officebench" / "tasks"
STATES = ("initial", "expected")


class Crash(Exception):
    """The benchmark's check would raise (its evaluation then fails the whole instance)."""


# ------------------------------------------------------------------ the benchmark's semantics (model)


@dataclass(frozen=True)
class Where:
    """What an upstream check reads: the output testbed, the task folder and the pristine testbed."""

    workspace: Path
    task_dir: Path
    pristine: Path

    def join(self, raw: str) -> Path:
        """``os.path.join(testbed_dir, raw)``: reference/ and cache/<k>/testbed/ sit four levels above the output
        testbed in the benchmark's layout; an absolute path replaces the testbed; anything else stays relative."""
        parts = [p for p in PurePosixPath(raw).parts if p not in (".", "")]
        if parts[:4] == [".."] * 4:
            rest = parts[4:]
            if rest and rest[0] == "reference":
                return self.task_dir.joinpath(*rest)
            if len(rest) > 3 and rest[0] == "cache" and rest[2] == "testbed":
                return self.pristine.joinpath(*rest[3:])
        return Path(raw) if PurePosixPath(raw).is_absolute() else self.workspace / raw


def _guard(reader: Callable[[Path], Any], path: Path) -> Any:
    try:
        return reader(path)
    except Exception as exc:  # noqa: BLE001 - any exception is the benchmark crashing
        raise Crash(f"{type(exc).__name__} reading {path.name}") from exc


def up_xlsx_text(path: Path) -> str:
    import openpyxl

    sheet = openpyxl.load_workbook(path).active
    text = ""
    for row in sheet.iter_rows():
        for cell in row:
            text += f"({cell.row}, {cell.column}): {'[Empty Cell]' if cell.value is None else cell.value}\t"
        text += "\n"
    return text


def up_docx_text(path: Path) -> str:
    import docx

    return "\n".join(p.text for p in docx.Document(str(path)).paragraphs)  # paragraphs only, never tables


def up_pdf_text(path: Path) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() for page in PdfReader(str(path)).pages)


def up_plain_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")  # open(x).read(): strict decoding


def _up_reader(doc_type: str) -> Callable[[Path], str]:
    readers = {"xlsx": up_xlsx_text, "txt": up_plain_text, "ics": up_plain_text, "doc": up_docx_text,
               "docx": up_docx_text, "pdf": up_pdf_text}
    if doc_type not in readers:
        raise Crash(f"assert: doc type {doc_type!r} not implemented")
    return readers[doc_type]


def _up_body(message: Any) -> str:
    """Top-level text/plain and text/html parts only (nested multiparts are not entered); a part without a charset
    makes ``bytes.decode(None)`` raise, which the listing turns into its error text."""
    if message.is_multipart():
        return "\n".join(part.get_payload(decode=True).decode(part.get_content_charset(), errors="replace")
                         for part in message.iter_parts()
                         if part.get_content_type() in ("text/plain", "text/html"))
    return message.get_payload(decode=True).decode(message.get_content_charset(), errors="replace")


def up_mailbox_text(where: Where, username: str) -> str:
    root = where.workspace / "emails"
    if (root / username).exists():
        folder = root / username
    elif (root / username.lower()).exists():
        folder = root / username.lower()
    else:  # the fallback loop iterates over os.path.basename(<its own loop variable>) before it is bound
        raise Crash(f"UnboundLocalError: no mailbox folder {username!r} or {username.lower()!r}")
    try:
        listing = ""
        for path in sorted(folder.glob("*.eml")):
            message = BytesParser(policy=policy.default).parsebytes(path.read_bytes())
            listing += (f"Email ID: {path.name}\nFrom: {message['From']}\nTo: {message['To']}\n"
                        f"Subject: {message['Subject']}\nContent: {_up_body(message)}\n" + "-" * 50 + "\n")
    except Exception:  # noqa: BLE001 - the listing swallows every error into one message
        return "Error: Failed to list emails."
    return listing or "No emails found."


def up_contain_text(content: str, keywords: list[Any]) -> bool:
    """Lower-cased substring search; once a keyword parses as a float, thousands commas leave the content."""
    content = content.lower()
    for keyword in keywords:
        if not isinstance(keyword, str):
            raise Crash(f"AttributeError: keyword {keyword!r} has no lower()")
        try:
            float(keyword.lower())
            content = content.replace(",", "")
        except ValueError:
            pass
        if keyword.lower() not in content:
            return False
    return True


def up_contain(where: Where, args: dict[str, Any]) -> bool:
    if args["doc_type"] == "email":
        return up_contain_text(up_mailbox_text(where, args["username"]), args["keywords"])
    path = where.join(args["file"])
    if not path.is_file():
        return False
    return up_contain_text(_guard(_up_reader(args["doc_type"]), path), args["keywords"])


def up_diff_contain_text(where: Where, args: dict[str, Any]) -> bool:
    doc_type = args["doc_type"]
    if doc_type not in ("xlsx", "doc"):
        raise Crash(f"assert: diff of doc type {doc_type!r} not implemented")
    before_path, after_path = where.join(args["input_file"]), where.join(args["output_file"])
    if doc_type == "doc":  # word_read_file returns the paragraph objects, which have no split()
        before, after = _guard(_paragraph_objects, before_path), _guard(_paragraph_objects, after_path)
        if before == after:
            return False
        raise Crash("AttributeError: a list of paragraphs has no split()")
    before, after = _guard(up_xlsx_text, before_path), _guard(up_xlsx_text, after_path)
    if before == after:
        return False
    diff = "\n".join(difflib.unified_diff(before.split("\n"), after.split("\n"), n=0))
    for keyword in args["keywords"]:
        if not isinstance(keyword, str):
            raise Crash(f"TypeError: keyword {keyword!r} is not a string")
        if keyword not in diff:
            return False
    return True


def _paragraph_objects(path: Path) -> list[Any]:
    import docx

    return list(docx.Document(str(path)).paragraphs)


def up_excel_cell_value(where: Where, args: dict[str, Any]) -> bool:
    if "file" not in args:
        raise Crash("KeyError: 'file'")
    path = where.join(args["file"])
    if not path.exists():
        return False
    content = _guard(up_xlsx_text, path)
    return all(f"({m['row']}, {m['col']}): {m['value']}" in content for m in args["matches"])


def up_excel_cell_comparator(where: Where, args: dict[str, Any]) -> bool:
    if "file" not in args:
        raise Crash("KeyError: 'file'")
    content = _guard(up_xlsx_text, where.join(args["file"]))  # no existence check upstream
    for match in args["matches"]:
        found = re.search(rf"\({match['row']}, {match['col']}\): (\w+)\t", content)
        if not found:
            return False
        try:
            comparator = compile_lambda(match["comparator"])
        except UnsafeExpressionError as exc:
            raise Crash(f"comparator outside the modelled subset: {exc}") from exc
        if not comparator(found.group(1)):
            return False
    return True


def _up_utc(value: Any) -> dt.datetime:
    if not isinstance(value, dt.datetime):  # a date has no tzinfo: pytz/proc_dt raise
        raise Crash(f"AttributeError: {type(value).__name__} value has no tzinfo")
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value


def up_calendar_no_overlap(where: Where, args: dict[str, Any]) -> bool:
    import icalendar

    path = where.workspace / "calendar" / f"{args['username']}.ics"
    calendar = _guard(lambda p: icalendar.Calendar.from_ical(p.read_bytes()), path)

    def start_of(component: Any) -> dt.datetime:
        value = component.get("dtstart")
        if value is None:
            raise Crash(f"AttributeError: {component.name} without DTSTART")
        return _up_utc(value.dt)

    calendar.subcomponents.sort(key=start_of)  # every top-level component, VTIMEZONE included
    events = [c for c in calendar.walk() if c.name == "VEVENT"]
    for first, second in zip(events, events[1:], strict=False):
        end = first.get("dtend")
        if end is None:
            raise Crash("AttributeError: VEVENT without DTEND")
        if _up_utc(end.dt) > start_of(second):
            return False
    return True


def up_exact_match(where: Where, args: dict[str, Any]) -> bool:
    result = where.join(args["result_file"])
    if not result.exists():
        return False
    expected = where.join(args["expected_file"])
    doc_type = args["doc_type"]
    if doc_type == "xlsx":
        import openpyxl

        got = _guard(lambda p: openpyxl.load_workbook(p).active, result)
        want = _guard(lambda p: openpyxl.load_workbook(p).active, expected)
        for sheet, other in ((got, want), (want, got)):
            for row in sheet.iter_rows():
                for cell in row:
                    if cell.value != other.cell(row=cell.row, column=cell.column).value:
                        return False
        return True
    if doc_type in ("txt", "ics"):
        return _guard(up_plain_text, result) == _guard(up_plain_text, expected)
    if doc_type == "doc":  # lists of paragraph objects compare by identity: equal only when both are empty
        return not _guard(_paragraph_objects, result) and not _guard(_paragraph_objects, expected)
    if doc_type == "pdf":  # two page-list objects never compare equal
        from pypdf import PdfReader

        _guard(PdfReader, result)
        _guard(PdfReader, expected)
        return False
    raise Crash(f"assert: exact_match of doc type {doc_type!r} not implemented")


UPSTREAM: dict[str, Callable[[Where, dict[str, Any]], bool]] = {
    "evaluate_contain": up_contain,
    "evaluate_not_contain": lambda where, args: not up_contain(where, args),
    "evaluate_file_exist": lambda where, args: where.join(args["file"]).exists(),
    "evaluate_file_not_exist": lambda where, args: not where.join(args["file"]).exists(),
    "evaluate_diff_contain_text": up_diff_contain_text,
    "evaluate_excel_cell_value": up_excel_cell_value,
    "evaluate_excel_cell_comparator": up_excel_cell_comparator,
    "evaluate_calendar_no_overlap": up_calendar_no_overlap,
    "evaluate_exact_match": up_exact_match,
}


def upstream_check(where: Where, item: dict[str, Any]) -> tuple[str, str]:
    """The benchmark's outcome for one evaluation item: ("pass" | "fail" | "crash", why it crashed)."""
    function = UPSTREAM.get(str(item.get("function")))
    if function is None:
        return "crash", f"NameError: {item.get('function')}"
    try:
        return ("pass" if function(where, dict(item.get("args") or {})) else "fail"), ""
    except Crash as exc:
        return "crash", str(exc)
    except KeyError as exc:
        return "crash", f"KeyError: {exc}"


# ------------------------------------------------------------------ the "expected" state


def _ensure_document(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".xlsx":
        files.write_xlsx(path, [])
    elif suffix in (".docx", ".doc"):
        files.write_docx(path, [])
    elif suffix == ".pdf":
        files.write_text_pdf(path, [""])
    elif suffix == ".ics":
        files.write_calendar(path, files.new_calendar())
    elif suffix == ".eml":  # a sent message, as the email app writes it
        files.write_bytes(path, files.make_email("parity@example.com", path.parent.name, "parity", "parity"))
    else:
        files.write_text(path, "")


def _append_text(path: Path, doc_type: str, words: list[str]) -> None:
    """Make ``words`` occur in the document's text (a new row, paragraph, page line or text line)."""
    import openpyxl

    _ensure_document(path)
    if doc_type == "xlsx":
        book = openpyxl.load_workbook(path)
        book.active.append(words)
        book.save(path)
    elif doc_type in ("docx", "doc"):
        import docx

        document = docx.Document(str(path))
        document.add_paragraph(" ".join(words))
        document.save(str(path))
    elif doc_type == "pdf":
        files.write_text_pdf(path, [*files.pdf_text(path).split("\n"), " ".join(words)])
    elif doc_type == "ics":  # keyword lines as extension properties: still a valid calendar, no new event
        text = path.read_text(encoding="utf-8")
        lines = "".join(f"X-PARITY-{n}:{word}\r\n" for n, word in enumerate(words))
        files.write_text(path, text.replace("END:VCALENDAR", lines + "END:VCALENDAR", 1) if "END:VCALENDAR"
                         in text else text + lines)
    else:
        files.write_text(path, path.read_text(encoding="utf-8", errors="replace") + "\n" + " ".join(words) + "\n")


def _set_cells(path: Path, cells: list[tuple[int, int, Any]]) -> None:
    import openpyxl

    _ensure_document(path)
    book = openpyxl.load_workbook(path)
    for row, col, value in cells:
        book.active.cell(row=row, column=col).value = value
    book.save(path)


def _comparator_value(text: str) -> str | None:
    """A value the comparator accepts, tried from the literals it mentions."""
    comparator = compile_lambda(text)
    for candidate in re.findall(r"'([^']*)'|\"([^\"]*)\"|(-?\d+(?:\.\d+)?)", text):
        value = next(part for part in candidate if part)
        if re.fullmatch(r"\w+", value) and comparator(value):
            return value
    return None


def apply_expected(where: Where, evaluation: list[dict[str, Any]]) -> list[str]:
    """Change the workspace so that each derivable check is met; returns the functions left as found."""
    ctx = CheckContext(where.workspace, task_dir=where.task_dir, pristine=lambda: where.pristine)
    skipped = []
    for n, item in enumerate(evaluation):
        function, args = item.get("function"), item.get("args") or {}
        try:
            if function == "evaluate_contain" and args.get("doc_type") == "email":
                folder = where.workspace / "emails" / str(args["username"])
                files.write_bytes(folder / f"parity-{n}.eml", files.make_email(
                    "parity@example.com", str(args["username"]), "parity", " ".join(map(str, args["keywords"]))))
            elif function == "evaluate_contain":
                _append_text(ctx.path(args["file"]), args["doc_type"], [str(k) for k in args["keywords"]])
            elif function == "evaluate_file_exist":
                _ensure_document(ctx.path(args["file"]))
            elif function == "evaluate_file_not_exist":
                target = ctx.path(args["file"])
                if target.is_file():
                    target.unlink()
            elif function == "evaluate_exact_match":
                target = ctx.path(args["result_file"])
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ctx.path(args["expected_file"]), target)
            elif function == "evaluate_excel_cell_value" and "file" in args:
                _set_cells(ctx.path(args["file"]), [(int(m["row"]), int(m["col"]), m["value"])
                                                    for m in args["matches"]])
            elif function == "evaluate_excel_cell_comparator" and "file" in args:
                values = [(int(m["row"]), int(m["col"]), _comparator_value(m["comparator"])) for m in args["matches"]]
                _set_cells(ctx.path(args["file"]), values)
            elif function == "evaluate_diff_contain_text" and args.get("doc_type") == "xlsx":
                _append_text(ctx.path(args["output_file"]), "xlsx", [str(k) for k in args["keywords"]])
            else:
                skipped.append(str(function))
        except Exception as exc:  # noqa: BLE001 - e.g. a missing expected file: leave the state as it is
            skipped.append(f"{function} ({type(exc).__name__})")
    return skipped


# ------------------------------------------------------------------ comparison


@dataclass(frozen=True)
class CheckRow:
    """One check of one instance in one state, under both semantics."""

    state: str
    task_id: str
    index: int
    function: str
    doc_type: str
    ours: bool
    ours_detail: str
    upstream: str
    upstream_detail: str

    @property
    def differs(self) -> bool:
        return self.ours != (self.upstream == "pass")


def prepare_workspace(task: RealTask, workspace: Path) -> None:
    """The untouched testbed, laid out as ``OfficeEnv.start`` does."""
    if task.testbed.is_dir():
        files.copy_tree(task.testbed, workspace)
    for folder in ("data", "emails", "calendar"):
        (workspace / folder).mkdir(exist_ok=True)


def compare_task(task: RealTask, state: str) -> list[CheckRow]:
    """Run every check of ``task`` under both semantics on a fresh workspace in ``state``."""
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        workspace = Path(tmp)
        prepare_workspace(task, workspace)
        where = Where(workspace, task.folder, task.testbed)
        if state == "expected":
            apply_expected(where, task.evaluation)
        rows = []
        ctx = CheckContext(workspace, task_dir=task.folder, pristine=lambda: task.testbed)
        for index, item in enumerate(task.evaluation):
            ours = run_check(ctx, item)
            upstream, why = upstream_check(where, item)
            rows.append(CheckRow(state=state, task_id=task.spec.id, index=index, function=str(item["function"]),
                                 doc_type=str((item.get("args") or {}).get("doc_type", "")), ours=ours.passed,
                                 ours_detail=ours.detail, upstream=upstream, upstream_detail=why))
        return rows


def compare_all(tasks: list[RealTask], states: tuple[str, ...] = STATES) -> list[CheckRow]:
    return [row for state in states for task in tasks for row in compare_task(task, state)]


def summarize(rows: list[CheckRow]) -> dict[str, Any]:
    """Per state: checks, differing checks (by function and direction), instances whose success differs."""
    out: dict[str, Any] = {}
    for state in dict.fromkeys(row.state for row in rows):
        mine = [row for row in rows if row.state == state]
        by_task: dict[str, list[CheckRow]] = collections.defaultdict(list)
        for row in mine:
            by_task[row.task_id].append(row)
        ours_ok = {t for t, rs in by_task.items() if all(r.ours for r in rs)}
        up_ok = {t for t, rs in by_task.items() if all(r.upstream == "pass" for r in rs)}
        differing = [row for row in mine if row.differs]
        out[state] = {
            "instances": len(by_task), "checks": len(mine), "differing_checks": len(differing),
            "upstream_crashes": sum(row.upstream == "crash" for row in mine),
            "success_ours": len(ours_ok), "success_upstream": len(up_ok),
            "instances_differing": sorted(ours_ok ^ up_ok),
            "upstream_crash_reasons": dict(collections.Counter(
                f"{row.function}: {row.upstream_detail.split(':')[0]}" for row in mine if row.upstream == "crash")),
            "by_function": dict(collections.Counter(
                f"{row.function}[{row.doc_type or '-'}] ours={'pass' if row.ours else 'fail'} "
                f"upstream={row.upstream}" for row in differing)),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=DEFAULT_TASKS, help="OfficeBench tasks folder")
    parser.add_argument("--json", type=Path, help="write every compared check here")
    parser.add_argument("--show", type=int, default=60, help="differing checks to list")
    args = parser.parse_args()
    tasks = load_officebench(args.tasks)
    rows = compare_all(tasks)
    summary = summarize(rows)
    for state, info in summary.items():
        print(f"[{state}] {info['instances']} instances, {info['checks']} checks: {info['differing_checks']} differ "
              f"({info['upstream_crashes']} upstream crashes); success ours {info['success_ours']} vs upstream "
              f"{info['success_upstream']}; instances differing: {len(info['instances_differing'])}")
        for key, count in sorted(info["by_function"].items(), key=lambda kv: -kv[1]):
            print(f"    {count:4d}  {key}")
        print("  upstream crashes (all of them fail the instance upstream):")
        for key, count in sorted(info["upstream_crash_reasons"].items(), key=lambda kv: -kv[1]):
            print(f"    {count:4d}  {key}")
    print("\ndiffering checks:")
    for row in [r for r in rows if r.differs][:args.show]:
        print(f"  {row.state:8s} {row.task_id:7s} #{row.index} {row.function}[{row.doc_type}] ours="
              f"{'pass' if row.ours else 'fail'} ({row.ours_detail[:60]}) upstream={row.upstream} "
              f"{row.upstream_detail[:70]}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "checks": [asdict(r) for r in rows]}, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
