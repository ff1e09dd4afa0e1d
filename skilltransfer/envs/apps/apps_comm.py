"""Communication apps: supervisor (the main user's own data) and email."""

from __future__ import annotations

import json
from typing import Any

from skilltransfer.envs.apps.api import ApiError, Db, api, check_date, loads, login_api, paginate, register_app

register_app("supervisor", "The main user's own profile, app account passwords and payment cards (no login needed).")
register_app("email", "Email client: inbox, sent mail, search, send, reply, forward, delete.")



@api("supervisor", auth=False)
def show_profile(db: Db) -> dict[str, Any]:
    """Show the main user's profile.

    Returns:
        {"first_name", "last_name", "email", "phone", "birthday", "city"}.
    """
    return db.user()


@api("supervisor", auth=False)
def show_account_passwords(db: Db) -> list[dict[str, str]]:
    """Show the username and password of the user's account on every app.

    Returns:
        list of {"account_name": app name, "username": str, "password": str}.
    """
    return [{"account_name": r["app"], "username": r["username"], "password": r["password"]}
            for r in db.all("SELECT * FROM accounts ORDER BY app")]


@api("supervisor", auth=False)
def show_payment_cards(db: Db) -> list[dict[str, Any]]:
    """Show the user's payment cards (used by shopping.place_order).

    Returns:
        list of {"payment_card_id", "card_name", "last_four", "expiry"}.
    """
    return [{"payment_card_id": r["id"], "card_name": r["card_name"], "last_four": r["last_four"],
             "expiry": r["expiry"]} for r in db.all("SELECT * FROM payment_cards ORDER BY id")]


# ---------------------------------------------------------------- email
login_api("email")


def _email_view(row: dict[str, Any], full: bool = False) -> dict[str, Any]:
    view = {"email_id": row["id"], "folder": row["folder"], "sender": row["sender"],
            "recipients": loads(row["recipients"]), "subject": row["subject"], "sent_at": row["sent_at"],
            "read": bool(row["read"])}
    if full:
        view["body"] = row["body"]
        view["in_reply_to"] = row["in_reply_to"]
    return view


@api("email")
def show_inbox(db: Db, unread_only: bool = False, page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """List received emails, newest first (without bodies).

    Args:
        unread_only: only list unread emails.
        page_index: 0-based page number.
        page_limit: emails per page (at most 20).

    Returns:
        list of {"email_id", "folder", "sender", "recipients", "subject", "sent_at", "read"}.
    """
    sql = "SELECT * FROM emails WHERE folder = 'inbox'" + (" AND read = 0" if unread_only else "")
    return paginate([_email_view(r) for r in db.all(sql + " ORDER BY sent_at DESC, id DESC")], page_index, page_limit)


@api("email")
def show_sent(db: Db, page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """List sent emails, newest first (without bodies).

    Args:
        page_index: 0-based page number.
        page_limit: emails per page (at most 20).

    Returns:
        list of {"email_id", "folder", "sender", "recipients", "subject", "sent_at", "read"}.
    """
    rows = db.all("SELECT * FROM emails WHERE folder = 'sent' ORDER BY sent_at DESC, id DESC")
    return paginate([_email_view(r) for r in rows], page_index, page_limit)


@api("email")
def search_emails(db: Db, query: str = "", sender: str | None = None, folder: str | None = None,
                  start_date: str | None = None, end_date: str | None = None, page_index: int = 0,
                  page_limit: int = 5) -> list[dict[str, Any]]:
    """Search emails by text in subject/body, sender address, folder and date range, newest first.

    Args:
        query: case-insensitive text to find in the subject or body ("" matches all).
        sender: exact sender email address.
        folder: "inbox", "sent" or "trash".
        start_date: earliest date, YYYY-MM-DD (inclusive).
        end_date: latest date, YYYY-MM-DD (inclusive).
        page_index: 0-based page number.
        page_limit: emails per page (at most 20).

    Returns:
        list of {"email_id", "folder", "sender", "recipients", "subject", "sent_at", "read"}.
    """
    check_date(start_date, "start_date")
    check_date(end_date, "end_date")
    if folder is not None and folder not in ("inbox", "sent", "trash"):
        raise ApiError("folder must be 'inbox', 'sent' or 'trash'.")
    q = query.lower()
    rows = [r for r in db.all("SELECT * FROM emails ORDER BY sent_at DESC, id DESC")
            if (not q or q in r["subject"].lower() or q in r["body"].lower())
            and (sender is None or r["sender"].lower() == sender.lower())
            and (folder is None or r["folder"] == folder)
            and (start_date is None or r["sent_at"][:10] >= start_date[:10])
            and (end_date is None or r["sent_at"][:10] <= end_date[:10])]
    return paginate([_email_view(r) for r in rows], page_index, page_limit)


@api("email")
def show_email(db: Db, email_id: int) -> dict[str, Any]:
    """Show one email with its body (does not change its read flag).

    Args:
        email_id: the email's id.

    Returns:
        {"email_id", "folder", "sender", "recipients", "subject", "sent_at", "read", "body", "in_reply_to"}.
    """
    return _email_view(db.get("emails", email_id, "email"), full=True)


def _recipients(recipients: list[str]) -> list[str]:
    if isinstance(recipients, str):
        recipients = [recipients]
    if not isinstance(recipients, list) or not recipients:
        raise ApiError("recipients must be a non-empty list of email addresses.")
    for address in recipients:
        if not isinstance(address, str) or "@" not in address or " " in address.strip():
            raise ApiError(f"Invalid email address: {address!r}.")
    return sorted({a.strip().lower() for a in recipients})


def _insert_email(db: Db, recipients: list[str], subject: str, body: str,
                  reply_to: int | None = None) -> dict[str, Any]:
    user = db.user()
    email_id = db.run("INSERT INTO emails (folder, sender, recipients, subject, body, sent_at, read, in_reply_to) "
                      "VALUES ('sent', ?, ?, ?, ?, ?, 1, ?)", user["email"], json.dumps(recipients), subject, body,
                      db.now(), reply_to)
    return {"message": "Email sent.", "email_id": email_id}


@api("email")
def send_email(db: Db, recipients: list[str], subject: str, body: str) -> dict[str, Any]:
    """Send a new email.

    Args:
        recipients: list of email addresses.
        subject: the subject line.
        body: the text of the email.

    Returns:
        {"message": str, "email_id": int}.
    """
    if not str(subject).strip():
        raise ApiError("subject must not be empty.")
    return _insert_email(db, _recipients(recipients), str(subject), str(body))


@api("email")
def reply_to_email(db: Db, email_id: int, body: str) -> dict[str, Any]:
    """Reply to the sender of an email (subject becomes "Re: <subject>").

    Args:
        email_id: the email to reply to.
        body: the reply text.

    Returns:
        {"message": str, "email_id": int} (the new email's id).
    """
    original = db.get("emails", email_id, "email")
    subject = original["subject"] if original["subject"].startswith("Re: ") else f"Re: {original['subject']}"
    return _insert_email(db, [original["sender"].lower()], subject, str(body), reply_to=email_id)


@api("email")
def forward_email(db: Db, email_id: int, recipients: list[str], body: str = "") -> dict[str, Any]:
    """Forward an email (its body is quoted below yours; subject becomes "Fwd: <subject>").

    Args:
        email_id: the email to forward.
        recipients: list of email addresses.
        body: optional text above the forwarded message.

    Returns:
        {"message": str, "email_id": int}.
    """
    original = db.get("emails", email_id, "email")
    text = f"{body}\n\n---------- Forwarded message ----------\n{original['body']}"
    return _insert_email(db, _recipients(recipients), f"Fwd: {original['subject']}", text, reply_to=email_id)


@api("email")
def delete_email(db: Db, email_id: int) -> dict[str, str]:
    """Move an email to the trash folder.

    Args:
        email_id: the email's id.

    Returns:
        {"message": str}.
    """
    db.get("emails", email_id, "email")
    db.run("UPDATE emails SET folder = 'trash' WHERE id = ?", email_id)
    return {"message": f"Email {email_id} moved to trash."}


@api("email")
def mark_email_read(db: Db, email_id: int, read: bool = True) -> dict[str, str]:
    """Mark an email as read (or unread with read=False).

    Args:
        email_id: the email's id.
        read: True for read, False for unread.

    Returns:
        {"message": str}.
    """
    db.get("emails", email_id, "email")
    db.run("UPDATE emails SET read = ? WHERE id = ?", int(bool(read)), email_id)
    return {"message": f"Email {email_id} marked as {'read' if read else 'unread'}."}
