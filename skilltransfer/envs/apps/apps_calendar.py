"""Planning apps: calendar and todo."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from skilltransfer.envs.apps.api import ApiError, Db, api, check_date, loads, login_api, paginate, register_app

register_app("calendar", "Calendar events with times, locations and attendees (by email).")
register_app("todo", "Todo lists (Home, Work, ...) with items that can be marked done.")


# ---------------------------------------------------------------- calendar
login_api("calendar")


def _event_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": row["id"], "title": row["title"], "start": row["start"], "end": row["end"],
            "location": row["location"], "attendees": loads(row["attendees"]), "description": row["description"]}


def _datetime(value: str, name: str) -> str:
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%dT%H:%M:%S")
    except (TypeError, ValueError):
        raise ApiError(f"{name} must be a date-time like 2024-06-20T14:00:00, got {value!r}.") from None


@api("calendar")
def show_events(db: Db, start_date: str | None = None, end_date: str | None = None, page_index: int = 0,
                page_limit: int = 5) -> list[dict[str, Any]]:
    """List events that start within a date range, earliest first.

    Args:
        start_date: earliest start date, YYYY-MM-DD (inclusive).
        end_date: latest start date, YYYY-MM-DD (inclusive).
        page_index: 0-based page number.
        page_limit: events per page (at most 20).

    Returns:
        list of {"event_id", "title", "start", "end", "location", "attendees", "description"}.
    """
    check_date(start_date, "start_date")
    check_date(end_date, "end_date")
    rows = [r for r in db.all("SELECT * FROM events ORDER BY start, id")
            if (start_date is None or r["start"][:10] >= start_date[:10])
            and (end_date is None or r["start"][:10] <= end_date[:10])]
    return paginate([_event_view(r) for r in rows], page_index, page_limit)


@api("calendar")
def search_events(db: Db, query: str = "", attendee: str | None = None, page_index: int = 0,
                  page_limit: int = 5) -> list[dict[str, Any]]:
    """Find events by text in the title/location and/or by an attendee's email, earliest first.

    Args:
        query: case-insensitive text to find in the title or location ("" matches all).
        attendee: an attendee's exact email address.
        page_index: 0-based page number.
        page_limit: events per page (at most 20).

    Returns:
        list of {"event_id", "title", "start", "end", "location", "attendees", "description"}.
    """
    q = query.lower()
    rows = [r for r in db.all("SELECT * FROM events ORDER BY start, id")
            if (not q or q in r["title"].lower() or q in r["location"].lower())
            and (attendee is None or attendee.lower() in loads(r["attendees"]))]
    return paginate([_event_view(r) for r in rows], page_index, page_limit)


@api("calendar")
def show_event(db: Db, event_id: int) -> dict[str, Any]:
    """Show one event.

    Args:
        event_id: the event's id.

    Returns:
        {"event_id", "title", "start", "end", "location", "attendees", "description"}.
    """
    return _event_view(db.get("events", event_id, "event"))


def _attendees(attendees: list[str] | None) -> str:
    if attendees is None:
        return "[]"
    if not isinstance(attendees, list) or any(not isinstance(a, str) or "@" not in a for a in attendees):
        raise ApiError("attendees must be a list of email addresses.")
    return json.dumps(sorted({a.strip().lower() for a in attendees}))


@api("calendar")
def create_event(db: Db, title: str, start: str, end: str, location: str = "", attendees: list[str] | None = None,
                 description: str = "") -> dict[str, Any]:
    """Create an event.

    Args:
        title: the event title.
        start: start date-time, e.g. 2024-06-20T14:00:00.
        end: end date-time (after start).
        location: optional location.
        attendees: optional list of attendee email addresses.
        description: optional description.

    Returns:
        {"message": str, "event_id": int}.
    """
    begin, finish = _datetime(start, "start"), _datetime(end, "end")
    if finish <= begin:
        raise ApiError("end must be after start.")
    if not str(title).strip():
        raise ApiError("title must not be empty.")
    event_id = db.run("INSERT INTO events (title, start, end, location, attendees, description) VALUES "
                      "(?, ?, ?, ?, ?, ?)", title, begin, finish, location, _attendees(attendees), description)
    return {"message": "Event created.", "event_id": event_id}


@api("calendar")
def update_event(db: Db, event_id: int, title: str | None = None, start: str | None = None, end: str | None = None,
                 location: str | None = None) -> dict[str, str]:
    """Change an event's title, times or location (fields left as None are kept).

    Args:
        event_id: the event's id.
        title: new title.
        start: new start date-time.
        end: new end date-time.
        location: new location.

    Returns:
        {"message": str}.
    """
    row = db.get("events", event_id, "event")
    begin = _datetime(start, "start") if start is not None else row["start"]
    finish = _datetime(end, "end") if end is not None else row["end"]
    if finish <= begin:
        raise ApiError("end must be after start.")
    db.run("UPDATE events SET title = ?, start = ?, end = ?, location = ? WHERE id = ?",
           row["title"] if title is None else title, begin, finish, row["location"] if location is None else location,
           event_id)
    return {"message": f"Event {event_id} updated."}


@api("calendar")
def add_attendee(db: Db, event_id: int, email: str) -> dict[str, str]:
    """Invite one more attendee to an event.

    Args:
        event_id: the event's id.
        email: the attendee's email address.

    Returns:
        {"message": str}.
    """
    row = db.get("events", event_id, "event")
    db.run("UPDATE events SET attendees = ? WHERE id = ?", _attendees([*loads(row["attendees"]), email]), event_id)
    return {"message": f"{email} added to event {event_id}."}


@api("calendar")
def delete_event(db: Db, event_id: int) -> dict[str, str]:
    """Delete an event.

    Args:
        event_id: the event's id.

    Returns:
        {"message": str}.
    """
    db.get("events", event_id, "event")
    db.run("DELETE FROM events WHERE id = ?", event_id)
    return {"message": f"Event {event_id} deleted."}


# ---------------------------------------------------------------- todo
login_api("todo")


def _list_id(db: Db, list_name: str) -> int:
    row = db.one("SELECT id FROM todo_lists WHERE lower(name) = ?", str(list_name).lower())
    if row is None:
        names = ", ".join(r["name"] for r in db.all("SELECT name FROM todo_lists ORDER BY id"))
        raise ApiError(f"No todo list named {list_name!r}; lists: {names}.")
    return int(row["id"])


def _item_view(row: dict[str, Any], list_name: str) -> dict[str, Any]:
    return {"item_id": row["id"], "list_name": list_name, "title": row["title"], "due_date": row["due_date"],
            "done": bool(row["done"])}


@api("todo")
def show_todo_lists(db: Db) -> list[dict[str, Any]]:
    """List the todo lists.

    Returns:
        list of {"list_name", "open_items"}.
    """
    return [{"list_name": r["name"], "open_items": len(db.all("SELECT id FROM todo_items WHERE list_id = ? AND "
                                                              "done = 0", r["id"]))}
            for r in db.all("SELECT * FROM todo_lists ORDER BY id")]


@api("todo")
def show_todo_items(db: Db, list_name: str, done: bool | None = None, page_index: int = 0,
                    page_limit: int = 5) -> list[dict[str, Any]]:
    """List the items of one todo list in creation order, optionally only done or only open ones.

    Args:
        list_name: the list's name, e.g. "Home".
        done: True for finished items, False for open ones, None for all.
        page_index: 0-based page number.
        page_limit: items per page (at most 20).

    Returns:
        list of {"item_id", "list_name", "title", "due_date", "done"}.
    """
    list_id = _list_id(db, list_name)
    name = db.get("todo_lists", list_id, "todo list")["name"]
    rows = [r for r in db.all("SELECT * FROM todo_items WHERE list_id = ? ORDER BY id", list_id)
            if done is None or bool(r["done"]) == bool(done)]
    return paginate([_item_view(r, name) for r in rows], page_index, page_limit)


@api("todo")
def add_todo_item(db: Db, list_name: str, title: str, due_date: str | None = None) -> dict[str, Any]:
    """Add an item to a todo list.

    Args:
        list_name: the list's name.
        title: what to do.
        due_date: optional YYYY-MM-DD.

    Returns:
        {"message": str, "item_id": int}.
    """
    list_id = _list_id(db, list_name)
    due_date = check_date(due_date, "due_date")
    if not str(title).strip():
        raise ApiError("title must not be empty.")
    item_id = db.run("INSERT INTO todo_items (list_id, title, due_date, done, created_at) VALUES (?, ?, ?, 0, ?)",
                     list_id, title, due_date, db.now())
    return {"message": "Item added.", "item_id": item_id}


@api("todo")
def mark_todo_item(db: Db, item_id: int, done: bool = True) -> dict[str, str]:
    """Mark a todo item done (or open again with done=False).

    Args:
        item_id: the item's id.
        done: True for done, False for open.

    Returns:
        {"message": str}.
    """
    db.get("todo_items", item_id, "todo item")
    db.run("UPDATE todo_items SET done = ? WHERE id = ?", int(bool(done)), item_id)
    return {"message": f"Item {item_id} marked {'done' if done else 'open'}."}


@api("todo")
def delete_todo_item(db: Db, item_id: int) -> dict[str, str]:
    """Delete a todo item.

    Args:
        item_id: the item's id.

    Returns:
        {"message": str}.
    """
    db.get("todo_items", item_id, "todo item")
    db.run("DELETE FROM todo_items WHERE id = ?", item_id)
    return {"message": f"Item {item_id} deleted."}
