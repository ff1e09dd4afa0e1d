"""What a scenario template is, the template registry, and helpers that query the world's plain data.

A template is a generator ``fn(world, rng)`` yielding candidate ``Instance``s (instruction, reference program,
expected answer, ...); ``tasks.generate_tasks`` keeps the first distinct ones. Expected answers are computed here
from the world data in Python, independently of the APIs the reference programs call.
"""

from __future__ import annotations

import calendar as _calendar
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.envs.apps.subprocs import solution
from skilltransfer.envs.apps.world import NOW, World


@dataclass(frozen=True)
class Instance:
    """One generated task before it becomes a TaskSpec."""

    instruction: str
    body: str
    """Task-specific reference code, run after the helper definitions."""
    subprocedures: tuple[str, ...]
    answer: Any = None
    """The expected answer for question tasks; None when the task asks for changes only."""
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> str:
        return solution(self.body, self.subprocedures)


@dataclass(frozen=True)
class Template:
    id: str
    apps: tuple[str, ...]
    difficulty: int
    kind: str
    """"question" (checked on the answer) or "action" (checked on the state)."""
    make: Callable[[World, random.Random], Iterator[Instance]]


TEMPLATES: dict[str, Template] = {}


def template(tid: str, apps: tuple[str, ...], difficulty: int, kind: str) -> Callable[..., Any]:
    """Register a template generator."""

    def decorate(fn: Callable[[World, random.Random], Iterator[Instance]]) -> Callable[..., Any]:
        TEMPLATES[tid] = Template(tid, apps, difficulty, kind, fn)
        return fn

    return decorate


TODAY = NOW.strftime("%Y-%m-%d")


def full(contact: dict[str, Any]) -> str:
    return f"{contact['first_name']} {contact['last_name']}"


def month_range(month: int) -> tuple[str, str]:
    last = _calendar.monthrange(2024, month)[1]
    return f"2024-{month:02d}-01", f"2024-{month:02d}-{last:02d}"


def month_name(month: int) -> str:
    return _calendar.month_name[month]


def pretty_date(date: str) -> str:
    """2024-06-20 -> "June 20, 2024"."""
    year, month, day = (int(x) for x in date[:10].split("-"))
    return f"{_calendar.month_name[month]} {day}, {year}"


def contacts(world: World) -> list[dict[str, Any]]:
    return world.tables["contacts"]


def by_email(world: World) -> dict[str, dict[str, Any]]:
    return {c["email"]: c for c in contacts(world)}


def inbox(world: World, sender: str | None = None) -> list[dict[str, Any]]:
    """Received emails (newest first), optionally from one sender."""
    rows = [e for e in world.tables["emails"] if e["folder"] == "inbox" and (sender is None or e["sender"] == sender)]
    return sorted(rows, key=lambda e: (e["sent_at"], e["id"]), reverse=True)


def spent(world: World, start: str, end: str, direction: str = "out", category: str | None = None,
          counterparty: str | None = None) -> float:
    """Sum of matching transactions, like the sum_transactions_in_period sub-procedure."""
    return round(sum(float(t["amount"]) for t in world.tables["transactions"]
                     if start <= t["created_at"][:10] <= end and t["direction"] == direction
                     and (category is None or t["category"] == category)
                     and (counterparty is None or t["counterparty"] == counterparty)), 2)


def events_on(world: World, date: str) -> list[dict[str, Any]]:
    return [e for e in world.tables["events"] if e["start"][:10] == date]


def attendees(event: dict[str, Any]) -> list[str]:
    return list(json.loads(event["attendees"]))


def q(text: str) -> str:
    """A Python string literal for reference code."""
    return repr(text)


def future_unique_events(w: World, with_attendees: bool) -> list[dict[str, Any]]:
    """Upcoming events whose title is unique on their day (so "my X event on D" is unambiguous)."""
    found = []
    for e in w.tables["events"]:
        if e["start"][:10] > TODAY and (attendees(e) or not with_attendees):
            same = [x for x in events_on(w, e["start"][:10]) if x["title"] == e["title"]]
            if len(same) == 1:
                found.append(e)
    return found


FIND_EVENT = """
event = [e for e in find_events_on({day}) if e["title"] == {title}][0]"""
