"""People apps: contacts (the phone book) and phone (text messages)."""

from __future__ import annotations

from typing import Any

from skilltransfer.envs.apps.api import ApiError, Db, api, check_date, login_api, paginate, register_app

register_app("contacts", "Phone book of the user's contacts: names, emails, phone numbers, relationships.")
register_app("phone", "Text messages (SMS) with phone numbers.")

# ---------------------------------------------------------------- contacts
login_api("contacts")

_RELATIONSHIPS = ("friend", "family", "coworker", "neighbor", "roommate", "classmate")


def _contact_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"contact_id": row["id"], "first_name": row["first_name"], "last_name": row["last_name"],
            "email": row["email"], "phone": row["phone"], "relationship": row["relationship"],
            "birthday": row["birthday"], "city": row["city"]}


@api("contacts")
def search_contacts(db: Db, query: str = "", relationship: str | None = None, page_index: int = 0,
                    page_limit: int = 5) -> list[dict[str, Any]]:
    """Search contacts by name, email or phone, optionally by relationship; sorted by last then first name.

    Args:
        query: case-insensitive text to find in the full name, email or phone ("" matches all).
        relationship: one of friend, family, coworker, neighbor, roommate, classmate.
        page_index: 0-based page number.
        page_limit: contacts per page (at most 20).

    Returns:
        list of {"contact_id", "first_name", "last_name", "email", "phone", "relationship", "birthday", "city"}.
    """
    if relationship is not None and relationship not in _RELATIONSHIPS:
        raise ApiError(f"relationship must be one of {', '.join(_RELATIONSHIPS)}.")
    q = query.lower().strip()
    rows = [r for r in db.all("SELECT * FROM contacts ORDER BY last_name, first_name, id")
            if (not q or q in f"{r['first_name']} {r['last_name']}".lower() or q in r["email"].lower()
                or q in r["phone"]) and (relationship is None or r["relationship"] == relationship)]
    return paginate([_contact_view(r) for r in rows], page_index, page_limit)


@api("contacts")
def show_contact(db: Db, contact_id: int) -> dict[str, Any]:
    """Show one contact.

    Args:
        contact_id: the contact's id.

    Returns:
        {"contact_id", "first_name", "last_name", "email", "phone", "relationship", "birthday", "city"}.
    """
    return _contact_view(db.get("contacts", contact_id, "contact"))


@api("contacts")
def show_relationships(db: Db) -> list[str]:
    """List the relationship labels a contact can have.

    Returns:
        list of str.
    """
    return list(_RELATIONSHIPS)


@api("contacts")
def add_contact(db: Db, first_name: str, last_name: str, email: str, phone: str, relationship: str = "friend",
                birthday: str | None = None, city: str | None = None) -> dict[str, Any]:
    """Add a new contact.

    Args:
        first_name: first name.
        last_name: last name.
        email: email address.
        phone: phone number like 555-123-4567.
        relationship: one of friend, family, coworker, neighbor, roommate, classmate.
        birthday: YYYY-MM-DD, optional.
        city: optional city.

    Returns:
        {"message": str, "contact_id": int}.
    """
    if relationship not in _RELATIONSHIPS:
        raise ApiError(f"relationship must be one of {', '.join(_RELATIONSHIPS)}.")
    if "@" not in email:
        raise ApiError(f"Invalid email address: {email!r}.")
    birthday = check_date(birthday, "birthday")
    if db.one("SELECT id FROM contacts WHERE lower(email) = ?", email.lower()):
        raise ApiError(f"A contact with email {email} already exists.")
    contact_id = db.run("INSERT INTO contacts (first_name, last_name, email, phone, relationship, birthday, city) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", first_name, last_name, email.lower(), phone, relationship,
                        birthday, city)
    return {"message": "Contact added.", "contact_id": contact_id}


@api("contacts")
def update_contact(db: Db, contact_id: int, email: str | None = None, phone: str | None = None,
                   relationship: str | None = None, city: str | None = None) -> dict[str, str]:
    """Change some fields of a contact (fields left as None are kept).

    Args:
        contact_id: the contact's id.
        email: new email address.
        phone: new phone number.
        relationship: new relationship label.
        city: new city.

    Returns:
        {"message": str}.
    """
    db.get("contacts", contact_id, "contact")
    if relationship is not None and relationship not in _RELATIONSHIPS:
        raise ApiError(f"relationship must be one of {', '.join(_RELATIONSHIPS)}.")
    if email is not None and "@" not in email:
        raise ApiError(f"Invalid email address: {email!r}.")
    for column, value in (("email", email), ("phone", phone), ("relationship", relationship), ("city", city)):
        if value is not None:
            db.run(f"UPDATE contacts SET {column} = ? WHERE id = ?", value, contact_id)
    return {"message": f"Contact {contact_id} updated."}


@api("contacts")
def delete_contact(db: Db, contact_id: int) -> dict[str, str]:
    """Delete a contact.

    Args:
        contact_id: the contact's id.

    Returns:
        {"message": str}.
    """
    db.get("contacts", contact_id, "contact")
    db.run("DELETE FROM contacts WHERE id = ?", contact_id)
    return {"message": f"Contact {contact_id} deleted."}


# ---------------------------------------------------------------- phone
login_api("phone")


def _text_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"message_id": row["id"], "direction": row["direction"], "phone_number": row["phone"],
            "message": row["message"], "sent_at": row["sent_at"]}


@api("phone")
def show_text_messages(db: Db, phone_number: str | None = None, direction: str | None = None, page_index: int = 0,
                       page_limit: int = 5) -> list[dict[str, Any]]:
    """List text messages, newest first, optionally only those with one phone number or in one direction.

    Args:
        phone_number: the other party's number, e.g. 555-123-4567.
        direction: "in" (received) or "out" (sent).
        page_index: 0-based page number.
        page_limit: messages per page (at most 20).

    Returns:
        list of {"message_id", "direction", "phone_number", "message", "sent_at"}.
    """
    if direction not in (None, "in", "out"):
        raise ApiError("direction must be 'in' or 'out'.")
    rows = [r for r in db.all("SELECT * FROM texts ORDER BY sent_at DESC, id DESC")
            if (phone_number is None or r["phone"] == phone_number) and (direction is None
                                                                        or r["direction"] == direction)]
    return paginate([_text_view(r) for r in rows], page_index, page_limit)


@api("phone")
def search_text_messages(db: Db, query: str, page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """Find text messages containing some text, newest first.

    Args:
        query: case-insensitive text to find.
        page_index: 0-based page number.
        page_limit: messages per page (at most 20).

    Returns:
        list of {"message_id", "direction", "phone_number", "message", "sent_at"}.
    """
    rows = [r for r in db.all("SELECT * FROM texts ORDER BY sent_at DESC, id DESC")
            if query.lower() in r["message"].lower()]
    return paginate([_text_view(r) for r in rows], page_index, page_limit)


@api("phone")
def send_text_message(db: Db, phone_number: str, message: str) -> dict[str, Any]:
    """Send a text message.

    Args:
        phone_number: the recipient's number, e.g. 555-123-4567.
        message: the text.

    Returns:
        {"message": str, "message_id": int}.
    """
    digits = phone_number.replace("-", "")
    if not digits.isdigit() or len(digits) != 10:
        raise ApiError(f"Invalid phone number {phone_number!r}; use the form 555-123-4567.")
    if not str(message).strip():
        raise ApiError("message must not be empty.")
    message_id = db.run("INSERT INTO texts (direction, phone, message, sent_at) VALUES ('out', ?, ?, ?)",
                        phone_number, str(message), db.now())
    return {"message": "Text message sent.", "message_id": message_id}


@api("phone")
def delete_text_message(db: Db, message_id: int) -> dict[str, str]:
    """Delete a text message.

    Args:
        message_id: the message's id.

    Returns:
        {"message": str}.
    """
    db.get("texts", message_id, "text message")
    db.run("DELETE FROM texts WHERE id = ?", message_id)
    return {"message": f"Text message {message_id} deleted."}
