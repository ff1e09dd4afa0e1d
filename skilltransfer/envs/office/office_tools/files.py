"""Reading and writing the office documents of a testbed: xlsx, docx, pdf, ics, eml, images.

Text renderings follow OfficeBench's (``(row, col): value<TAB>`` lines for spreadsheets, paragraph lines for
Word files, extracted page text for PDFs), so the benchmark's check functions see the same text it would.
Every write goes to a temporary file first and is moved into place with ``os.replace``. Readers take a path or the
file's bytes (the harness reads workspace files defensively first, see ``skilltransfer.envs.workspace_files``).
"""

from __future__ import annotations

import datetime as dt
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from functools import partial
from pathlib import Path
from typing import Any

EVENT_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

Source = Path | str | bytes
"""A document to read: its path, or its content."""


def _opened(source: Source) -> Any:
    """What the document libraries accept: a path string, or a stream over the bytes."""
    return io.BytesIO(source) if isinstance(source, bytes) else str(source)


def _bytes(source: Source) -> bytes:
    return source if isinstance(source, bytes) else Path(source).read_bytes()


def atomic_write(path: Path, writer: Callable[[Path], object]) -> None:
    """Call ``writer(tmp_path)`` then move the temporary file onto ``path`` (same folder, same suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Atomically write a text file."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """Atomically write a binary file."""
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def copy_tree(src: Path, dst: Path) -> None:
    """Copy a folder's content into ``dst`` (created)."""
    shutil.copytree(src, dst, dirs_exist_ok=True)


# ---------------------------------------------------------------- spreadsheets


def _cell_json(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return value


def xlsx_rows(path: Source, sheet: str | None = None) -> list[list[Any]]:
    """The used range of a sheet (the active one by default) as rows of JSON-like values (None when empty)."""
    import openpyxl

    book = openpyxl.load_workbook(_opened(path))
    ws = book.active if sheet is None else book[sheet]
    return [[_cell_json(cell.value) for cell in row] for row in ws.iter_rows()]


def xlsx_text(path: Source, sheet: str | None = None) -> str:
    """OfficeBench's rendering: one line per row of ``(row, col): value<TAB>`` with ``[Empty Cell]`` for blanks."""
    import openpyxl

    book = openpyxl.load_workbook(_opened(path))
    ws = book.active if sheet is None else book[sheet]
    lines = []
    for row in ws.iter_rows():
        parts = [f"({c.row}, {c.column}): {'[Empty Cell]' if c.value is None else c.value}\t" for c in row]
        lines.append("".join(parts))
    return "".join(line + "\n" for line in lines)


def coerce_cell_text(text: Any) -> Any:
    """Numbers given as text are stored as numbers (as OfficeBench's command-line apps did); other text as is."""
    if isinstance(text, str):
        if re.fullmatch(r"-?(0|[1-9]\d*)", text.strip()):
            return int(text.strip())
        if re.fullmatch(r"-?(0|[1-9]\d*)\.\d+", text.strip()):
            return float(text.strip())
    return text


def write_xlsx(path: Path, rows: list[list[Any]], sheet_title: str = "Sheet1") -> None:
    """Write rows to a new single-sheet workbook."""
    import openpyxl

    book = openpyxl.Workbook()
    ws = book.active
    ws.title = sheet_title
    for row in rows:
        ws.append(row)
    atomic_write(path, lambda tmp: book.save(tmp))


# ---------------------------------------------------------------- word


def docx_paragraphs(path: Source) -> list[str]:
    """Paragraph texts of a Word file, then its table rows (cells joined by tabs)."""
    import docx

    document = docx.Document(_opened(path))
    lines = [p.text for p in document.paragraphs]
    for table in document.tables:
        for row in table.rows:
            lines.append("\t".join(cell.text for cell in row.cells))
    return lines


def docx_text(path: Source) -> str:
    """A Word file's text, one paragraph (or table row) a line."""
    return "\n".join(docx_paragraphs(path))


def write_docx(path: Path, paragraphs: list[str], title: str | None = None) -> None:
    """Write a new Word file with an optional title heading and plain paragraphs."""
    import docx

    document = docx.Document()
    if title:
        document.add_heading(title, 0)
    for text in paragraphs:
        document.add_paragraph(text)
    atomic_write(path, lambda tmp: document.save(str(tmp)))


# ---------------------------------------------------------------- pdf and images


def pdf_pages_text(path: Source) -> list[str]:
    """The extracted text of each page."""
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(_opened(path)).pages]


def pdf_text(path: Source) -> str:
    """All pages' text, concatenated as OfficeBench does."""
    return "".join(pdf_pages_text(path))


def write_text_pdf(path: Path, lines: list[str], title: str | None = None) -> None:
    """Render text lines (wrapped, paginated) into a PDF with a real text layer."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfgen import canvas

    def render(tmp: Path) -> None:
        pdf = canvas.Canvas(str(tmp), pagesize=A4, invariant=1)
        width, height = A4
        margin, size, leading = 56, 11, 15
        y = height - margin

        def emit(text: str, font: str, font_size: int) -> None:
            nonlocal y
            if y < margin:
                pdf.showPage()
                y = height - margin
            pdf.setFont(font, font_size)
            pdf.drawString(margin, y, text)
            y -= leading + (font_size - size)

        if title:
            emit(title, "Helvetica-Bold", 14)
        for line in lines:
            words, current = line.replace("\t", "    ").split(" "), ""
            for word in words:
                candidate = f"{current} {word}" if current else word
                if stringWidth(candidate, "Helvetica", size) > width - 2 * margin and current:
                    emit(current, "Helvetica", size)
                    current = word
                else:
                    current = candidate
            emit(current, "Helvetica", size)
        pdf.save()

    atomic_write(path, render)


def render_pdf_images(pdf_path: Path, image_path: Path, scale: float = 2.0) -> list[Path]:
    """Rasterise each page (pdfium); one page -> ``image_path``, more -> ``<stem>_<n><suffix>``."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(pdf_path))
    try:
        count = len(document)
        outputs = []
        for index in range(count):
            name = f"{image_path.stem}_{index + 1}{image_path.suffix}"
            target = image_path if count == 1 else image_path.with_name(name)
            image = document[index].render(scale=scale).to_pil().convert("RGB")
            atomic_write(target, partial(_save_image, image))
            outputs.append(target)
        return outputs
    finally:
        document.close()


def _save_image(image: Any, path: Path) -> None:
    image.save(path)


def image_to_pdf(image_path: Path, pdf_path: Path) -> None:
    """Wrap an image into a one-page PDF (no text layer, as a scan)."""
    from PIL import Image

    with Image.open(image_path) as image:
        rgb = image.convert("RGB")
    atomic_write(pdf_path, lambda tmp: rgb.save(tmp, format="PDF"))


def write_text_image(path: Path, lines: list[str], font_size: int = 32) -> None:
    """Draw black text lines on a white image (a photographed note or receipt), for OCR tasks."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=font_size)
    pad, leading = 40, int(font_size * 1.5)
    width = max(int(font.getlength(line)) for line in lines) + 2 * pad
    image = Image.new("RGB", (max(width, 400), 2 * pad + leading * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((pad, pad + index * leading), line, fill="black", font=font)
    atomic_write(path, lambda tmp: image.save(tmp))


def tesseract_available() -> bool:
    """Whether OCR can run: the pytesseract binding and Debian's ``tesseract`` binary are both present."""
    try:
        import pytesseract
    except ImportError:
        return False
    try:
        pytesseract.get_tesseract_version()
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False
    return True


def ocr_image(path: Path) -> str:
    """Recognise the text of an image with Tesseract."""
    import pytesseract
    from PIL import Image

    with Image.open(path) as image:
        return str(pytesseract.image_to_string(image))


# ---------------------------------------------------------------- calendars


def parse_event_time(text: str) -> dt.datetime:
    """Parse ``YYYY-MM-DD HH:MM:SS`` (also ``HH:MM`` or a bare date, read as midnight) as a naive local time;
    with a ``Z`` or ``+HH:MM`` suffix (ISO 8601) the time is timezone-aware (written as ``...Z`` in UTC)."""
    for fmt in (EVENT_TIME_FORMAT, "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            return dt.datetime.strptime(str(text).strip(), fmt)
        except ValueError:
            continue
    try:
        parsed = dt.datetime.fromisoformat(str(text).strip())
    except ValueError:
        parsed = None
    if parsed is not None and parsed.tzinfo is not None:
        return parsed.astimezone(dt.UTC)
    raise ValueError(f"time {text!r} is not in the format 'YYYY-MM-DD HH:MM:SS' (optionally ending in Z for UTC)")


def read_calendar(path: Source) -> Any:
    """Parse an .ics file (an empty calendar when the path does not exist)."""
    import icalendar

    if not isinstance(path, bytes) and not Path(path).exists():
        return new_calendar()
    return icalendar.Calendar.from_ical(_bytes(path))


def new_calendar() -> Any:
    import icalendar

    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//skilltransfer office//EN")
    calendar.add("version", "2.0")
    return calendar


def calendar_events(calendar: Any) -> Iterator[Any]:
    """The VEVENT components of a calendar."""
    for component in calendar.walk():
        if component.name == "VEVENT":
            yield component


def event_value(event: Any, key: str) -> Any:
    """A property's Python value (datetimes for DTSTART/DTEND, str otherwise); None when missing."""
    value = event.get(key)
    if value is None:
        return None
    if hasattr(value, "dt"):
        return value.dt
    return str(value)


def make_event(summary: str, start: dt.datetime, end: dt.datetime, stamp: dt.datetime, *, uid: str,
               location: str | None = None, description: str | None = None) -> Any:
    """A VEVENT with naive local times (serialised as ``DTSTART:YYYYMMDDTHHMMSS``, as OfficeBench's checks expect)."""
    import icalendar

    event = icalendar.Event()
    event.add("summary", summary)
    event.add("dtstart", start)
    event.add("dtend", end)
    event.add("dtstamp", stamp)
    event.add("uid", uid)
    if location:
        event.add("location", location)
    if description:
        event.add("description", description)
    return event


def write_calendar(path: Path, calendar: Any) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(calendar.to_ical()))


# ---------------------------------------------------------------- emails


def make_email(sender: str, recipient: str, subject: str, content: str, date: dt.datetime | None = None) -> bytes:
    """An RFC 5322 message as bytes."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = recipient
    message["Subject"] = subject
    if date is not None:
        message["Date"] = date.strftime("%a, %d %b %Y %H:%M:%S +0000")
    message.set_content(content)
    return message.as_bytes(policy=policy.SMTP)


def parse_email(path: Source) -> dict[str, str]:
    """From, To, Subject, Date and the text body (plain and html parts joined) of an .eml file."""
    message = BytesParser(policy=policy.default).parsebytes(_bytes(path))
    parts: list[str] = []
    for part in message.walk():
        if part.get_content_type() in ("text/plain", "text/html") and not part.is_multipart():
            payload = part.get_payload(decode=True)
            payload = payload if isinstance(payload, bytes) else b""
            parts.append(payload.decode(part.get_content_charset() or "utf-8", errors="replace"))
    return {
        "from": str(message["From"] or ""),
        "to": str(message["To"] or ""),
        "subject": str(message["Subject"] or ""),
        "date": str(message["Date"] or ""),
        "content": "\n".join(parts),
    }


def safe_filename(text: str, limit: int = 80) -> str:
    """A file-name-safe version of a subject line."""
    cleaned = re.sub(r"[^\w\- .,()]+", "_", text).strip(" ._") or "email"
    return cleaned[:limit]
