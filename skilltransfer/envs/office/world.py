"""Building blocks of the generated office tasks: name pools, table makers and the file plan of a testbed.

A generated task's testbed is described by a *plan* (a list of :class:`FileSpec`, plain data made from the task's
own ``random.Random``) and written to disk only when an episode starts (:func:`materialize`), so listing all tasks
is cheap and every start of the same task yields byte-identical content.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.envs.office.office_tools import files

PEOPLE = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Ivy", "Jack", "Karen", "Liam",
          "Mia", "Noah", "Olivia", "Paul", "Quinn", "Rachel", "Sam", "Tina", "Uma", "Victor", "Wendy", "Yara")
PRODUCTS = ("stapler", "notebook", "monitor", "keyboard", "headset", "webcam", "printer", "desk lamp", "router",
            "projector", "whiteboard", "scanner")
DEPARTMENTS = ("Marketing", "Finance", "Research", "Legal", "Support", "Operations", "Design", "Sales", "Security",
               "Training")
ITEMS = ("printer paper", "toner", "pens", "folders", "sticky notes", "batteries", "coffee beans", "paper cups",
         "envelopes", "binders", "markers", "tape")
VENDORS = ("Bluebird Cafe", "Northwind Supply", "Acme Office", "Harbor Books", "Summit Print", "Maple Deli",
           "Orbit Electronics", "Cedar Hardware")
TOPICS = ("budget review", "design sync", "hiring panel", "quarterly planning", "client demo", "security audit",
          "product launch", "team retro", "vendor call", "training session", "roadmap review", "offsite prep")
ROOMS = ("Room 2A", "Room 3B", "Room 4C", "Lab 101", "Main Hall", "Studio 7")

TABLES: dict[str, dict[str, Any]] = {
    "sales": {"entity": "product", "names": PRODUCTS, "metrics": {"Units": (100, 999), "Revenue": (1000, 9999)}},
    "scores": {"entity": "student", "names": PEOPLE, "metrics": {"Points": (100, 999), "Bonus": (10, 99)}},
    "budget": {"entity": "department", "names": DEPARTMENTS, "metrics": {"Budget": (1000, 9999),
                                                                         "Spent": (1000, 9999)}},
    "inventory": {"entity": "item", "names": ITEMS, "metrics": {"Stock": (100, 999), "Price": (10, 99)}},
}
"""Spreadsheet kinds: what a row is, the name pool and each metric's value range (fixed digit count, so no value
is a substring of another)."""

SLOTS = ((9, 10), (11, 12), (14, 15), (16, 17))
FREE_SLOTS = ((12, 13), (17, 18), (8, 9))


@dataclass(frozen=True)
class FileSpec:
    """One file of a testbed: where, what kind (xlsx, docx, pdf, png, eml, ics, txt) and its content."""

    path: str
    kind: str
    content: Any


@dataclass(frozen=True)
class Table:
    """A generated spreadsheet: header row then one row per entity."""

    kind: str
    entity: str
    header: list[str]
    rows: list[list[Any]]

    def column(self, name: str) -> int:
        """0-based index of a header."""
        return self.header.index(name)

    def value(self, name: str, metric: str) -> Any:
        return next(row[self.column(metric)] for row in self.rows if row[0] == name)

    @property
    def names(self) -> list[str]:
        return [row[0] for row in self.rows]


def make_table(rng: random.Random, kind: str, n_rows: int | None = None) -> Table:
    """A table of ``kind`` with distinct names and distinct values per metric."""
    info = TABLES[kind]
    n = n_rows or rng.randint(5, 8)
    names = rng.sample(list(info["names"]), n)
    metrics = list(info["metrics"])
    columns = {m: rng.sample(range(lo, hi + 1), n) for m, (lo, hi) in info["metrics"].items()}
    rows = [[name, *(columns[m][i] for m in metrics)] for i, name in enumerate(names)]
    header = [info["entity"].title(), *metrics]
    return Table(kind=kind, entity=info["entity"], header=header, rows=rows)


def base_day(rng: random.Random) -> dt.date:
    """A working day in 2024 on which a task's events happen."""
    day = dt.date(2024, 3, 4) + dt.timedelta(days=rng.randrange(0, 200))
    while day.weekday() >= 5:
        day += dt.timedelta(days=1)
    return day


def stamp(day: dt.date, hour: int) -> str:
    """'YYYY-MM-DD HH:00:00'."""
    return f"{day.isoformat()} {hour:02d}:00:00"


def ics_time(day: dt.date, hour: int) -> str:
    """The DTSTART/DTEND value our calendar writes for a naive local time."""
    return f"{day:%Y%m%d}T{hour:02d}0000"


def calendar_events(rng: random.Random, days: list[dt.date], titles: list[str]) -> list[dict[str, Any]]:
    """Non-overlapping events spread over ``days`` (one title each, taken in order)."""
    slots = [(day, slot) for day in days for slot in SLOTS]
    chosen = sorted(rng.sample(slots, len(titles)))
    return [{"summary": title, "start": stamp(day, a), "end": stamp(day, b)}
            for title, (day, (a, b)) in zip(titles, chosen, strict=True)]


def inbox(rng: random.Random, user: str, senders: list[str], subjects: list[str], bodies: list[str]) -> list[FileSpec]:
    """Emails to ``user``, one per (sender, subject, body)."""
    specs = []
    for sender, subject, body in zip(senders, subjects, bodies, strict=True):
        specs.append(FileSpec(f"emails/{user}/{files.safe_filename(subject)}.eml", "eml",
                              {"from": f"{sender}@example.com", "to": f"{user}@example.com", "subject": subject,
                               "content": body}))
    return specs


def materialize(plan: list[FileSpec], workspace: Path, now: dt.datetime) -> None:
    """Write a testbed plan into ``workspace`` (data/ and emails/ and calendar/ always exist afterwards)."""
    workspace = Path(workspace)
    for folder in ("data", "emails", "calendar"):
        (workspace / folder).mkdir(parents=True, exist_ok=True)
    for spec in plan:
        path = workspace / spec.path
        content = spec.content
        if spec.kind == "xlsx":
            files.write_xlsx(path, content)
        elif spec.kind == "docx":
            files.write_docx(path, content["paragraphs"], title=content.get("title"))
        elif spec.kind == "pdf":
            files.write_text_pdf(path, content["lines"], title=content.get("title"))
        elif spec.kind == "png":
            files.write_text_image(path, content)
        elif spec.kind == "txt":
            files.write_text(path, content)
        elif spec.kind == "eml":
            data = files.make_email(content["from"], content["to"], content["subject"], content["content"],
                                    now - dt.timedelta(hours=2))
            files.write_bytes(path, data)
        elif spec.kind == "ics":
            calendar = files.new_calendar()
            for index, event in enumerate(content):
                calendar.add_component(files.make_event(
                    event["summary"], files.parse_event_time(event["start"]), files.parse_event_time(event["end"]),
                    now, uid=f"seed-{index}@skilltransfer", location=event.get("location")))
            files.write_calendar(path, calendar)
        else:
            raise ValueError(f"unknown file kind {spec.kind!r} for {spec.path}")
