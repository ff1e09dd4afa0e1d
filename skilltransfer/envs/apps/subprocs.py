"""Shared sub-procedures of the reference solutions: small Python functions over ``apis``.

Task templates compose these, and record the names in ``TaskSpec.metadata["subprocedures"]``; the same
sub-procedure recurring across templates is what makes subtask-level skills transferable. ``solution(body, names)``
assembles a reference program: the needed helpers (dependencies first) followed by the task-specific body.
"""

from __future__ import annotations

SUBPROCEDURES: dict[str, tuple[tuple[str, ...], str]] = {
    "login_to_app": ((), '''
def login_to_app(app_name):
    """Log in to an app with the supervisor's stored credentials; returns the access token."""
    accounts = {a["account_name"]: a for a in apis.supervisor.show_account_passwords()}
    account = accounts[app_name]
    return getattr(apis, app_name).login(username=account["username"], password=account["password"])["access_token"]
'''),
    "list_all_pages": ((), '''
def list_all_pages(api_function, **kwargs):
    """Call a paginated API page by page until an empty page; returns all items."""
    items, page = [], 0
    while True:
        batch = api_function(page_index=page, page_limit=20, **kwargs)
        if not batch:
            return items
        items.extend(batch)
        page += 1
'''),
    "find_contact_by_name": (("login_to_app", "list_all_pages"), '''
def find_contact_by_name(full_name):
    """The contact record whose first + last name equals full_name."""
    token = login_to_app("contacts")
    matches = [c for c in list_all_pages(apis.contacts.search_contacts, access_token=token, query=full_name)
               if f"{c['first_name']} {c['last_name']}".lower() == full_name.lower()]
    return matches[0]
'''),
    "find_contact_by_email": (("login_to_app", "list_all_pages"), '''
def find_contact_by_email(email):
    """The contact record with this email address."""
    token = login_to_app("contacts")
    matches = [c for c in list_all_pages(apis.contacts.search_contacts, access_token=token, query=email)
               if c["email"].lower() == email.lower()]
    return matches[0]
'''),
    "find_contact_email": (("find_contact_by_name",), '''
def find_contact_email(full_name):
    """A contact's email address, by full name."""
    return find_contact_by_name(full_name)["email"]
'''),
    "find_contact_phone": (("find_contact_by_name",), '''
def find_contact_phone(full_name):
    """A contact's phone number, by full name."""
    return find_contact_by_name(full_name)["phone"]
'''),
    "find_latest_email_from": (("login_to_app",), '''
def find_latest_email_from(sender_email):
    """The newest received email from sender_email, with its body."""
    token = login_to_app("email")
    newest = apis.email.search_emails(access_token=token, sender=sender_email, folder="inbox", page_limit=1)[0]
    return apis.email.show_email(access_token=token, email_id=newest["email_id"])
'''),
    "sum_transactions_in_period": (("login_to_app", "list_all_pages"), '''
def sum_transactions_in_period(start_date, end_date, direction="out", category=None, counterparty=None):
    """Total amount of the matching transactions between two dates (inclusive), rounded to cents."""
    token = login_to_app("payments")
    transactions = list_all_pages(apis.payments.show_transactions, access_token=token, start_date=start_date,
                                  end_date=end_date, direction=direction, category=category,
                                  counterparty=counterparty)
    return round(sum(t["amount"] for t in transactions), 2)
'''),
    "send_email_to_contact": (("login_to_app", "find_contact_email"), '''
def send_email_to_contact(full_name, subject, body):
    """Email one contact, by full name."""
    token = login_to_app("email")
    return apis.email.send_email(access_token=token, recipients=[find_contact_email(full_name)], subject=subject,
                                 body=body)
'''),
    "pay_person": (("login_to_app",), '''
def pay_person(email, amount, description):
    """Send money to a person's email address on the payments app."""
    token = login_to_app("payments")
    return apis.payments.send_money(access_token=token, receiver_email=email, amount=amount, description=description)
'''),
    "request_money_from": (("login_to_app",), '''
def request_money_from(email, amount, description):
    """Send a payment request to a person's email address."""
    token = login_to_app("payments")
    return apis.payments.request_money(access_token=token, requestee_email=email, amount=amount,
                                       description=description)
'''),
    "create_calendar_event": (("login_to_app",), '''
def create_calendar_event(title, start, end, attendees=None, location=""):
    """Create a calendar event (start/end like 2024-06-20T14:00:00, attendees as emails)."""
    token = login_to_app("calendar")
    return apis.calendar.create_event(access_token=token, title=title, start=start, end=end, location=location,
                                      attendees=attendees or [])
'''),
    "find_events_on": (("login_to_app", "list_all_pages"), '''
def find_events_on(date):
    """All calendar events starting on a date (YYYY-MM-DD)."""
    token = login_to_app("calendar")
    return list_all_pages(apis.calendar.show_events, access_token=token, start_date=date, end_date=date)
'''),
    "add_todo": (("login_to_app",), '''
def add_todo(list_name, title, due_date=None):
    """Add an item to a todo list."""
    token = login_to_app("todo")
    return apis.todo.add_todo_item(access_token=token, list_name=list_name, title=title, due_date=due_date)
'''),
    "find_file_by_name": (("login_to_app",), '''
def find_file_by_name(file_name):
    """The file (path, content) whose name is exactly file_name."""
    token = login_to_app("file_system")
    page = 0
    while True:
        batch = apis.file_system.search_files(access_token=token, query=file_name, page_index=page, page_limit=20)
        for entry in batch:
            if entry["path"].rsplit("/", 1)[-1] == file_name:
                return apis.file_system.show_file(access_token=token, path=entry["path"])
        if not batch:
            raise ValueError(f"no file named {file_name}")
        page += 1
'''),
    "find_note_by_title": (("login_to_app", "list_all_pages"), '''
def find_note_by_title(title):
    """The note (with content) whose title is exactly title."""
    token = login_to_app("notes")
    for note in list_all_pages(apis.notes.search_notes, access_token=token, query=title):
        if note["title"].lower() == title.lower():
            return apis.notes.show_note(access_token=token, note_id=note["note_id"])
    raise ValueError(f"no note titled {title}")
'''),
    "create_note": (("login_to_app",), '''
def create_note(title, content):
    """Create a note."""
    token = login_to_app("notes")
    return apis.notes.create_note(access_token=token, title=title, content=content)
'''),
    "text_contact": (("login_to_app",), '''
def text_contact(phone_number, message):
    """Send a text message to a phone number."""
    token = login_to_app("phone")
    return apis.phone.send_text_message(access_token=token, phone_number=phone_number, message=message)
'''),
}


def closure(names: tuple[str, ...] | list[str]) -> list[str]:
    """``names`` plus everything they depend on, dependencies first."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for dep in SUBPROCEDURES[name][0]:
            visit(dep)
        order.append(name)

    for name in names:
        visit(name)
    return order


def solution(body: str, names: tuple[str, ...]) -> str:
    """A reference program: the helper definitions ``names`` need, then ``body``."""
    helpers = "".join(SUBPROCEDURES[n][1] for n in closure(names))
    return f"{helpers.strip()}\n\n\n{body.strip()}\n"
