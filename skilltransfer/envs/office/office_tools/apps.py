"""The office apps an agent calls as ``apis.<app>.<api>(...)``: calendar, email, excel, word, pdf, ocr.

They mirror OfficeBench's apps, run in-process on the files of the episode workspace (paths are relative to it and
may not leave it), return JSON-like values and raise ``ValueError``/``FileNotFoundError`` with a clear message on a
bad call. Emails sent are written as ``.eml`` into ``emails/<recipient>/`` (and a copy into the sender's folder),
events into ``calendar/<user>.ics``. :func:`setup` builds the namespace (in the sandbox worker, where this package
is ``office_tools``, or in-process).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
from pathlib import Path
from typing import Any

from . import files


class App:
    """Base of an office app: the workspace and the simulated clock."""

    description = ""

    def __init__(self, workspace: Path, now: dt.datetime) -> None:
        self._workspace = Path(workspace).resolve()
        self._now = now

    def _path(self, raw: str, *, must_exist: bool = False) -> Path:
        """Resolve a workspace-relative path, refusing ones that leave the workspace."""
        if not isinstance(raw, str | Path) or not str(raw).strip():
            raise ValueError(f"expected a file path relative to the workspace, got {raw!r}")
        path = (self._workspace / str(raw).strip()).resolve()
        if path != self._workspace and self._workspace not in path.parents:
            raise ValueError(f"path {raw!r} is outside the workspace")
        if must_exist and not path.is_file():
            raise FileNotFoundError(f"file {raw!r} does not exist")
        return path

    def _owner(self, name: Any, kind: str, *, must_exist: bool) -> str:
        """The owner of a mailbox (``kind="emails"``: ``emails/<owner>/``) or calendar (``"calendar"``:
        ``calendar/<owner>.ics``) named by ``name`` (a user name or address, in any case: ``"quinn@example.com"`` is
        Quinn's). A name that matches no existing owner is kept as given (a new mailbox or calendar), or, with
        ``must_exist``, refused with the existing owners listed."""
        user = _user(name)
        root = self._path(kind)
        if kind == "emails":
            owners = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
        else:
            owners = sorted(p.stem for p in root.glob("*.ics")) if root.is_dir() else []
        if user in owners:
            return user
        matches = [owner for owner in owners if owner.lower() == user.lower()]
        if len(matches) == 1:
            return matches[0]
        if must_exist:
            what = "mailbox" if kind == "emails" else "calendar"
            listed = ", ".join(repr(owner) for owner in owners) or "none"
            raise FileNotFoundError(f"no {what} for user {name!r}; users with a {what}: {listed}")
        return user

    @classmethod
    def api_names(cls) -> list[str]:
        return [name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")
                and name != "api_names"]


def _user(name: Any) -> str:
    """A mailbox/calendar owner from a name or address (``"bob@example.com"`` -> ``"bob"``)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"expected one user name as a string, got {name!r} (send one email per recipient)")
    user = name.strip().split("@")[0]
    if "/" in user or "\\" in user or user.startswith("."):
        raise ValueError(f"invalid user name {name!r}")
    return user


class CalendarApp(App):
    description = "Each user's calendar (calendar/<user>.ics): create, delete and list events."

    def create_event(self, user: str, summary: str, time_start: str, time_end: str, location: str | None = None,
                     description: str | None = None) -> str:
        """Add an event to a user's calendar. Times are 'YYYY-MM-DD HH:MM:SS' local (a bare date means midnight);
        append 'Z' (e.g. '2024-05-31 13:00:00Z') for a UTC time."""
        user = self._owner(user, "calendar", must_exist=False)
        start, end = files.parse_event_time(time_start), files.parse_event_time(time_end)
        if end < start:
            raise ValueError(f"time_end {time_end!r} is before time_start {time_start!r}")
        path = self._path(f"calendar/{user}.ics")
        calendar = files.read_calendar(path)
        uid = hashlib.sha1(f"{user}|{summary}|{start}|{end}".encode()).hexdigest()[:16] + "@skilltransfer"
        calendar.add_component(files.make_event(str(summary), start, end, self._now, uid=uid, location=location,
                                                description=description))
        files.write_calendar(path, calendar)
        return f"Created event {summary!r} in {user}'s calendar."

    def delete_event(self, user: str, summary: str) -> str:
        """Delete the first event of a user's calendar whose summary equals ``summary``."""
        user = self._owner(user, "calendar", must_exist=True)
        path = self._path(f"calendar/{user}.ics")
        calendar = files.read_calendar(path)
        for component in list(calendar.subcomponents):
            if component.name == "VEVENT" and str(component.get("summary")) == summary:
                calendar.subcomponents.remove(component)
                files.write_calendar(path, calendar)
                return f"Deleted event {summary!r} from {user}'s calendar."
        raise ValueError(f"no event with summary {summary!r} in {user}'s calendar")

    def list_events(self, username: str) -> list[dict[str, Any]]:
        """All events of a user's calendar: summary, start, end ('YYYY-MM-DD HH:MM:SS', 'Z' if UTC), location,
        description."""
        owner = self._owner(username, "calendar", must_exist=True)
        calendar = files.read_calendar(self._path(f"calendar/{owner}.ics"))
        events = []
        for event in files.calendar_events(calendar):
            row: dict[str, Any] = {"summary": files.event_value(event, "summary")}
            for key in ("dtstart", "dtend"):
                value = files.event_value(event, key)
                if isinstance(value, dt.datetime):
                    value = value.strftime(files.EVENT_TIME_FORMAT) + ("Z" if value.tzinfo is not None else "")
                elif isinstance(value, dt.date):
                    value = value.isoformat()
                row["start" if key == "dtstart" else "end"] = value
            row["location"] = files.event_value(event, "location")
            row["description"] = files.event_value(event, "description")
            events.append(row)
        return events


class EmailApp(App):
    description = "Each user's mailbox (emails/<user>/*.eml): send, list and read emails."

    def send_email(self, sender: str, recipient: str, subject: str, content: str) -> str:
        """Send an email to one recipient; it lands in the recipient's mailbox (and a copy in the sender's)."""
        sender_user = self._owner(sender, "emails", must_exist=False)
        recipient_user = self._owner(recipient, "emails", must_exist=False)
        if not str(subject).strip():
            raise ValueError("subject must not be empty")
        data = files.make_email(f"{sender_user}@example.com", f"{recipient_user}@example.com", str(subject),
                                str(content), self._now)
        name = files.safe_filename(str(subject))
        for user in dict.fromkeys((recipient_user, sender_user)):
            folder = self._path(f"emails/{user}")
            target, index = folder / f"{name}.eml", 1
            while target.exists():
                index += 1
                target = folder / f"{name} ({index}).eml"
            files.write_bytes(target, data)
        return f"Sent email {subject!r} to {recipient_user}."

    def list_emails(self, username: str) -> list[dict[str, str]]:
        """The emails in a user's mailbox: email_id, from, to, subject and the first 100 characters of content."""
        folder = self._path(f"emails/{self._owner(username, 'emails', must_exist=True)}")
        listing = []
        for path in sorted(folder.glob("*.eml")):
            mail = files.parse_email(path)
            preview = mail["content"].strip()
            preview = preview[:100] + ("..." if len(preview) > 100 else "")
            listing.append({"email_id": path.name, "from": mail["from"], "to": mail["to"],
                            "subject": mail["subject"], "preview": preview})
        return listing

    def read_email(self, username: str, email_id: str) -> dict[str, str]:
        """One email of a user's mailbox by its email_id (the .eml file name): from, to, subject, date, content."""
        name = str(email_id) if str(email_id).endswith(".eml") else f"{email_id}.eml"
        path = self._path(f"emails/{self._owner(username, 'emails', must_exist=True)}/{name}")
        if not path.is_file():
            raise FileNotFoundError(f"no email {email_id!r} in {username}'s mailbox (see list_emails)")
        return {"email_id": name, **files.parse_email(path)}


class ExcelApp(App):
    description = "Excel workbooks (.xlsx): read, set/delete cells (1-based row/column), create, convert to PDF."

    def read_file(self, file_path: str, sheet_name: str | None = None) -> list[list[Any]]:
        """The rows of a sheet (the active one by default); row 1 first, None for empty cells."""
        path = self._path(file_path, must_exist=True)
        try:
            return files.xlsx_rows(path, sheet_name)
        except KeyError as exc:
            raise ValueError(f"{file_path} has no sheet {sheet_name!r}") from exc

    def set_cell(self, file_path: str, row_idx: int, column_idx: int, text: Any, sheet_name: str | None = None) -> str:
        """Write a value to a cell (1-based indices: the column headed C is ``rows[0].index(C) + 1``). Numeric text
        is stored as a number.

        Returns which cell changed, its column's header and the value it held before."""
        import openpyxl

        path = self._path(file_path, must_exist=True)
        row, col = _index(row_idx, "row_idx"), _index(column_idx, "column_idx")
        book = openpyxl.load_workbook(path)
        sheet = book.active if sheet_name is None else (
            book[sheet_name] if sheet_name in book.sheetnames else book.create_sheet(sheet_name))
        before = _cell_context(sheet, row, col)
        value = files.coerce_cell_text(text)
        sheet.cell(row=row, column=col).value = value
        files.atomic_write(path, lambda tmp: book.save(tmp))
        return f"Set cell ({row}, {col}) of {file_path}{before} to {value!r}."

    def delete_cell(self, file_path: str, row_idx: int, column_idx: int, sheet_name: str | None = None) -> str:
        """Empty a cell (1-based indices: the column headed C is ``rows[0].index(C) + 1``).

        Returns which cell was emptied, its column's header and the value it held before."""
        import openpyxl

        path = self._path(file_path, must_exist=True)
        row, col = _index(row_idx, "row_idx"), _index(column_idx, "column_idx")
        book = openpyxl.load_workbook(path)
        sheet = book.active if sheet_name is None else book[sheet_name]
        before = _cell_context(sheet, row, col)
        sheet.cell(row=row, column=col).value = None
        files.atomic_write(path, lambda tmp: book.save(tmp))
        return f"Emptied cell ({row}, {col}) of {file_path}{before}."

    def create_new_file(self, file_path: str) -> str:
        """Create an empty workbook (fails if the file exists)."""
        path = self._path(file_path)
        if path.exists():
            raise ValueError(f"{file_path} already exists")
        files.write_xlsx(path, [])
        return f"Created {file_path}."

    def convert_to_pdf(self, file_path: str, pdf_file_path: str) -> str:
        """Render the active sheet as a PDF table (one tab-separated line per row)."""
        rows = files.xlsx_rows(self._path(file_path, must_exist=True))
        lines = ["\t".join("" if value is None else str(value) for value in row) for row in rows]
        files.write_text_pdf(self._path(pdf_file_path), lines)
        return f"Converted {file_path} to {pdf_file_path}."


def _cell_context(sheet: Any, row: int, col: int) -> str:
    """" (column '<header>', was <value>)" for a cell about to change: a caller that wrote to the wrong column sees
    which one it hit (the 1.5B model wrote a Revenue value over the product name in column 1). The header is row 1's
    cell of that column; nothing is said of an empty header or, in row 1, of the header itself."""
    header = sheet.cell(row=1, column=col).value if row > 1 else None
    value = sheet.cell(row=row, column=col).value
    parts = ([f"column {header!r}"] if header is not None else []) + [f"was {value!r}"]
    return f" ({', '.join(parts)})"


def _index(value: Any, name: str) -> int:
    try:
        index = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive integer, got {value!r}") from None
    if index < 1:
        raise ValueError(f"{name} must be >= 1 (indices start from 1), got {value!r}")
    return index


class WordApp(App):
    description = "Word documents (.docx): read, append paragraphs, create, convert to PDF."

    def read_file(self, file_path: str) -> str:
        """The text of a Word file, one paragraph (or table row) per line."""
        return files.docx_text(self._path(file_path, must_exist=True))

    def write_to_file(self, file_path: str, contents: str, style: str = "pure-text") -> str:
        """Append ``contents`` to an existing Word file as a paragraph ('pure-text'), 'title' or 'subtitle'."""
        import docx

        path = self._path(file_path, must_exist=True)
        if style not in ("pure-text", "title", "subtitle"):
            raise ValueError(f"style must be 'pure-text', 'title' or 'subtitle', got {style!r}")
        document = docx.Document(str(path))
        if style == "pure-text":
            document.add_paragraph(str(contents))
        else:
            document.add_heading(str(contents), 0 if style == "title" else 1)
        files.atomic_write(path, lambda tmp: document.save(str(tmp)))
        return f"Wrote to {file_path}."

    def create_new_file(self, file_path: str) -> str:
        """Create an empty Word file (fails if the file exists)."""
        path = self._path(file_path)
        if path.exists():
            raise ValueError(f"{file_path} already exists")
        files.write_docx(path, [])
        return f"Created {file_path}."

    def convert_to_pdf(self, file_path: str, pdf_file_path: str) -> str:
        """Render a Word file's text as a PDF."""
        lines = files.docx_paragraphs(self._path(file_path, must_exist=True))
        files.write_text_pdf(self._path(pdf_file_path), lines)
        return f"Converted {file_path} to {pdf_file_path}."


class PdfApp(App):
    description = "PDF files: read text, convert to images or Word, make a PDF from an image."

    def read_file(self, pdf_file_path: str) -> str:
        """The text layer of a PDF (empty for scans: use ocr on an image of it)."""
        return files.pdf_text(self._path(pdf_file_path, must_exist=True))

    def convert_to_image(self, pdf_file_path: str, image_file_path: str) -> list[str]:
        """Rasterise a PDF; one page -> image_file_path, more -> '<stem>_<n>.<ext>'. Returns the image paths."""
        outputs = files.render_pdf_images(self._path(pdf_file_path, must_exist=True), self._path(image_file_path))
        return [str(path.relative_to(self._workspace)) for path in outputs]

    def convert_to_word(self, pdf_file_path: str, word_file_path: str) -> str:
        """Copy a PDF's text into a new Word file, one paragraph per line."""
        text = files.pdf_text(self._path(pdf_file_path, must_exist=True))
        files.write_docx(self._path(word_file_path), text.splitlines())
        return f"Converted {pdf_file_path} to {word_file_path}."

    def image_convert_to_pdf(self, image_file_path: str, pdf_file_path: str) -> str:
        """Wrap an image into a one-page PDF."""
        files.image_to_pdf(self._path(image_file_path, must_exist=True), self._path(pdf_file_path))
        return f"Converted {image_file_path} to {pdf_file_path}."


class OcrApp(App):
    description = "Optical character recognition of images (Tesseract)."

    def recognize_file(self, file_path: str) -> str:
        """The text recognised in an image file (png/jpg)."""
        path = self._path(file_path, must_exist=True)
        if not files.tesseract_available():
            raise RuntimeError("OCR is unavailable on this machine: Debian's tesseract-ocr (and pytesseract) "
                               "are not installed")
        return files.ocr_image(path)


APPS: dict[str, type[App]] = {"calendar": CalendarApp, "email": EmailApp, "excel": ExcelApp, "word": WordApp,
                              "pdf": PdfApp, "ocr": OcrApp}


def _signature(cls: type[App], name: str) -> str:
    signature = inspect.signature(getattr(cls, name))
    params = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
              for p in signature.parameters.values() if p.name != "self"]
    return f"{name}({', '.join(params)})"


class ApiDocs:
    """``apis.api_docs``: the apps' documentation."""

    def show_app_descriptions(self) -> list[dict[str, str]]:
        """Every app with a one-line description."""
        return [{"name": name, "description": cls.description} for name, cls in APPS.items()]

    def show_api_descriptions(self, app_name: str) -> list[dict[str, str]]:
        """The APIs of one app with one-line descriptions."""
        cls = _app_class(app_name)
        return [{"name": api, "description": _summary(getattr(cls, api))}
                for api in cls.api_names()]

    def show_api_doc(self, app_name: str, api_name: str) -> dict[str, str]:
        """The signature and full description of one API."""
        cls = _app_class(app_name)
        if api_name not in cls.api_names():
            raise ValueError(f"app {app_name!r} has no API {api_name!r}; choose from {cls.api_names()}")
        return {"app": app_name, "api": api_name, "signature": _signature(cls, api_name),
                "description": inspect.getdoc(getattr(cls, api_name)) or ""}


def _summary(api: object) -> str:
    """An API's one-line description: its docstring's first paragraph on one line (a first line alone can stop
    mid-sentence: "... local (a bare date means midnight);")."""
    return " ".join((inspect.getdoc(api) or "").split("\n\n")[0].split())


def _app_class(app_name: str) -> type[App]:
    if app_name not in APPS:
        raise ValueError(f"unknown app {app_name!r}; choose from {sorted(APPS)}")
    return APPS[app_name]


def docs_overview() -> str:
    """A compact overview of every app and API (what ``Episode.docs()`` returns)."""
    lines = ["Office apps, called as apis.<app>.<api>(...); file paths are relative to the workspace "
             "(data/, emails/<user>/, calendar/<user>.ics). Print results to see them. The variable `username` "
             "holds the user you act for. Plain text files (e.g. data/answer.txt) may be written with open(). "
             "Call complete_task(answer=None) when done (pass the answer if the task asks a question)."]
    for name, cls in APPS.items():
        lines.append(f"\n{name}: {cls.description}")
        for api in cls.api_names():
            lines.append(f"  apis.{name}.{_signature(cls, api)}: {_summary(getattr(cls, api))}")
    lines.append("\napis.api_docs.show_app_descriptions() / show_api_descriptions(app_name=...) / "
                 "show_api_doc(app_name=..., api_name=...): this documentation.")
    return "\n".join(lines)


class Apis:
    """The ``apis`` object: one attribute per app plus ``api_docs``."""

    def __init__(self, workspace: Path, now: dt.datetime) -> None:
        self.api_docs = ApiDocs()
        self.calendar = CalendarApp(workspace, now)
        self.email = EmailApp(workspace, now)
        self.excel = ExcelApp(workspace, now)
        self.word = WordApp(workspace, now)
        self.pdf = PdfApp(workspace, now)
        self.ocr = OcrApp(workspace, now)


def setup(workspace: Path, now: str = "2020-05-01 10:00:00", username: str = "Alice") -> dict[str, Any]:
    """Build an office episode's agent-side namespace: ``apis`` and the acting ``username`` (``complete_task`` is a
    harness service bound next to them).

    Args:
        workspace: the episode's testbed folder.
        now: the simulated current time ('YYYY-MM-DD HH:MM:SS'), stamped on sent emails and new events.
        username: the user the agent acts for (exposed as ``username``).
    """
    clock = files.parse_event_time(now)
    return {"apis": Apis(Path(workspace), clock), "username": username}
