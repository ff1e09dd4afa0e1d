"""Action templates: the agent must change the world; the evaluator checks the state (and nothing else changed)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from skilltransfer.envs.apps.template_base import (
    FIND_EVENT,
    TODAY,
    Instance,
    attendees,
    contacts,
    events_on,
    full,
    future_unique_events,
    inbox,
    month_name,
    month_range,
    pretty_date,
    q,
    template,
)
from skilltransfer.envs.apps.world import CITIES, FIRST, LAST, SPEND_CATEGORIES, TODO_LISTS, World

SUBJECTS = (("Dinner on Friday", "Are you free for dinner on Friday at 7pm?"),
            ("Book club", "The next book club meets on Tuesday; I am bringing snacks."),
            ("Your ladder", "Thanks for lending me your ladder, I will return it this weekend."),
            ("Trip photos", "I uploaded the trip photos to the shared album."),
            ("Project Atlas", "Can we move the Project Atlas review to Thursday?"),
            ("Happy birthday", "Happy birthday! Hope you have a wonderful day."),
            ("Moving help", "Could you help me move some boxes on Saturday morning?"),
            ("Concert tickets", "I got two tickets for the concert on the 28th."))
TEXTS = ("Running 10 minutes late, sorry!", "Can you call me when you get a chance?", "See you at the cafe at 6.",
         "Don't forget to bring the charger.", "Happy birthday! Drinks on me tonight.", "Thanks for yesterday!")
NEW_TODOS = ("Schedule annual checkup", "Buy a birthday card", "Clean the fridge", "Update resume",
             "Backup laptop", "Order new glasses", "Plan weekend hike", "Call grandma")
FUTURE_DAYS = [f"2024-{m:02d}-{d:02d}" for m in (6, 7) for d in range(1, 31) if f"2024-{m:02d}-{d:02d}" > TODAY]


@template("send_email", ("contacts", "email"), 1, "action")
def send_email(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        subject, body = rng.choice(SUBJECTS)
        yield Instance(f"Send an email to {full(c)} with the subject \"{subject}\" and the body \"{body}\"",
                       f"send_email_to_contact({q(full(c))}, {q(subject)}, {q(body)})\ncomplete_task()",
                       ("send_email_to_contact",), params={"contact": full(c)})


@template("email_spending", ("payments", "contacts", "email"), 3, "action")
def email_spending(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        cat, m = rng.choice(tuple(SPEND_CATEGORIES)), rng.randint(1, 5)
        start, end = month_range(m)
        subject = f"{cat.title()} spending in {month_name(m)}"
        yield Instance(f"Send {full(c)} an email with the total I spent on {cat} in {month_name(m)} 2024: subject "
                       f"\"{subject}\", and the amount (just the number, like 123.45) in the body.", f"""
total = sum_transactions_in_period({q(start)}, {q(end)}, category={q(cat)})
send_email_to_contact({q(full(c))}, {q(subject)}, f"{{total:.2f}}")
complete_task()""", ("sum_transactions_in_period", "send_email_to_contact"),
                       params={"contact": full(c), "category": cat, "month": m})


@template("schedule_meeting", ("contacts", "calendar"), 2, "action")
def schedule_meeting(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        day, hour = rng.choice(FUTURE_DAYS), rng.randint(9, 17)
        title = rng.choice(("Coffee with {}", "Catch-up with {}", "Planning session with {}")).format(c["first_name"])
        yield Instance(f"Schedule an event called \"{title}\" on {pretty_date(day)} from {hour}:00 to {hour + 1}:00 "
                       f"and invite {full(c)}.", f"""
create_calendar_event({q(title)}, "{day}T{hour:02d}:00:00", "{day}T{hour + 1:02d}:00:00",
                      attendees=[find_contact_email({q(full(c))})])
complete_task()""", ("create_calendar_event", "find_contact_email"), params={"contact": full(c), "date": day})


@template("add_todo_item", ("todo",), 1, "action")
def add_todo_item(w: World, rng: random.Random) -> Iterator[Instance]:
    while True:
        name, title, day = rng.choice(TODO_LISTS), rng.choice(NEW_TODOS), rng.choice(FUTURE_DAYS)
        yield Instance(f"Add \"{title}\" to my {name} todo list, due on {pretty_date(day)}.",
                       f"add_todo({q(name)}, {q(title)}, due_date={q(day)})\ncomplete_task()", ("add_todo",),
                       params={"list": name})


@template("todo_from_email", ("contacts", "email", "todo"), 3, "action")
def todo_from_email(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        if inbox(w, c["email"]):
            name = rng.choice(("Work", "Home"))
            yield Instance(f"Add an item to my {name} todo list whose title is exactly the subject of the most recent "
                           f"email {full(c)} sent me (no due date).", f"""
mail = find_latest_email_from(find_contact_email({q(full(c))}))
add_todo({q(name)}, mail["subject"])
complete_task()""", ("find_contact_email", "find_latest_email_from", "add_todo"), params={"contact": full(c)})


@template("note_from_file", ("file_system", "notes"), 2, "action")
def note_from_file(w: World, rng: random.Random) -> Iterator[Instance]:
    files = [f for f in w.tables["files"] if f["path"].endswith(".txt") and "/downloads/" not in f["path"]]
    for f in rng.sample(files, len(files)):
        name = f["path"].rsplit("/", 1)[-1]
        title = f"Copy of {name}"
        yield Instance(f"Create a note titled \"{title}\" whose content is the text of my file {name}.", f"""
create_note({q(title)}, find_file_by_name({q(name)})["content"])
complete_task()""", ("find_file_by_name", "create_note"), params={"file": name})


@template("mark_todos_done", ("todo",), 2, "action")
def mark_todos_done(w: World, rng: random.Random) -> Iterator[Instance]:
    lists = {x["name"]: x["id"] for x in w.tables["todo_lists"]}
    while True:
        name, cutoff = rng.choice(TODO_LISTS), rng.choice(("2024-06-01", "2024-06-15", "2024-07-01", "2024-07-15"))
        hits = [i for i in w.tables["todo_items"] if i["list_id"] == lists[name] and not i["done"]
                and i["due_date"] and i["due_date"] < cutoff]
        if hits:
            yield Instance(f"Mark every open item on my {name} todo list that is due before {pretty_date(cutoff)} as "
                           "done.", f"""
token = login_to_app("todo")
for item in list_all_pages(apis.todo.show_todo_items, access_token=token, list_name={q(name)}, done=False):
    if item["due_date"] and item["due_date"] < {q(cutoff)}:
        apis.todo.mark_todo_item(access_token=token, item_id=item["item_id"])
complete_task()""", ("login_to_app", "list_all_pages"), params={"list": name, "before": cutoff})


@template("text_contact", ("contacts", "phone"), 1, "action")
def text_contact(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        msg = rng.choice(TEXTS)
        yield Instance(f"Text {full(c)} the message \"{msg}\"",
                       f"text_contact(find_contact_phone({q(full(c))}), {q(msg)})\ncomplete_task()",
                       ("find_contact_phone", "text_contact"), params={"contact": full(c)})


@template("reply_latest_email", ("contacts", "email"), 2, "action")
def reply_latest_email(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        if inbox(w, c["email"]):
            msg = rng.choice(("Thanks, sounds good to me!", "Sorry, I can't make it this time.",
                              "Let me check and get back to you tomorrow."))
            yield Instance(f"Reply to the most recent email from {full(c)} with the text \"{msg}\"", f"""
mail = find_latest_email_from(find_contact_email({q(full(c))}))
apis.email.reply_to_email(access_token=login_to_app("email"), email_id=mail["email_id"], body={q(msg)})
complete_task()""", ("login_to_app", "find_contact_email", "find_latest_email_from"), params={"contact": full(c)})


@template("sort_downloads", ("file_system",), 2, "action")
def sort_downloads(w: World, rng: random.Random) -> Iterator[Instance]:
    exts = sorted({f["path"].rsplit(".", 1)[1] for f in w.tables["files"] if "/downloads/" in f["path"]})
    while True:
        ext, folder = rng.choice(exts), rng.choice(("/home/documents/{}_files", "/home/downloads/{}",
                                                     "/home/documents/archive_{}"))
        target = folder.format(ext)
        yield Instance(f"Create the folder {target} and move every .{ext} file that is directly in /home/downloads "
                       "into it (keep the file names).", f"""
token = login_to_app("file_system")
apis.file_system.create_directory(access_token=token, path={q(target)})
for entry in list_all_pages(apis.file_system.show_directory, access_token=token, path="/home/downloads"):
    if entry["type"] == "file" and entry["path"].endswith(".{ext}"):
        name = entry["path"].rsplit("/", 1)[1]
        apis.file_system.move_file(access_token=token, source=entry["path"], destination={q(target)} + "/" + name)
complete_task()""", ("login_to_app", "list_all_pages"), params={"extension": ext})


@template("cancel_event_notify", ("calendar", "email"), 3, "action")
def cancel_event_notify(w: World, rng: random.Random) -> Iterator[Instance]:
    events = future_unique_events(w, with_attendees=True)
    for e in rng.sample(events, len(events)):
        day, title = e["start"][:10], e["title"]
        body = f"Sorry, I have to cancel {title} on {pretty_date(day)}."
        yield Instance(f"Cancel my \"{title}\" event on {pretty_date(day)}: first send one email to all of its "
                       f"attendees with the subject \"Cancelled: {title}\" and the body \"{body}\", then delete the "
                       "event.", f"""{FIND_EVENT.format(day=q(day), title=q(title))}
apis.email.send_email(access_token=login_to_app("email"), recipients=event["attendees"],
                      subject={q('Cancelled: ' + title)}, body={q(body)})
apis.calendar.delete_event(access_token=login_to_app("calendar"), event_id=event["event_id"])
complete_task()""", ("login_to_app", "find_events_on"), params={"date": day})


@template("update_contact_phone", ("contacts",), 1, "action")
def update_contact_phone(w: World, rng: random.Random) -> Iterator[Instance]:
    taken = {c["phone"] for c in contacts(w)}
    for c in rng.sample(contacts(w), len(contacts(w))):
        phone = f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        if phone not in taken:
            yield Instance(f"{full(c)} has a new phone number, {phone}. Update it in my contacts.", f"""
contact = find_contact_by_name({q(full(c))})
apis.contacts.update_contact(access_token=login_to_app("contacts"), contact_id=contact["contact_id"], phone={q(phone)})
complete_task()""", ("login_to_app", "find_contact_by_name"), params={"contact": full(c)})


@template("text_event_attendees", ("calendar", "contacts", "phone"), 3, "action")
def text_event_attendees(w: World, rng: random.Random) -> Iterator[Instance]:
    events = future_unique_events(w, with_attendees=True)
    for e in rng.sample(events, len(events)):
        day, title, msg = e["start"][:10], e["title"], rng.choice(TEXTS)
        yield Instance(f"Text everyone invited to my \"{title}\" event on {pretty_date(day)} the message \"{msg}\"",
                       f"""{FIND_EVENT.format(day=q(day), title=q(title))}
for email in event["attendees"]:
    text_contact(find_contact_by_email(email)["phone"], {q(msg)})
complete_task()""", ("find_events_on", "find_contact_by_email", "text_contact"), params={"date": day})


@template("forward_latest_email", ("contacts", "email"), 2, "action")
def forward_latest_email(w: World, rng: random.Random) -> Iterator[Instance]:
    while True:
        a, b = rng.sample(contacts(w), 2)
        if inbox(w, a["email"]):
            yield Instance(f"Forward the most recent email {full(a)} sent me to {full(b)}.", f"""
mail = find_latest_email_from(find_contact_email({q(full(a))}))
apis.email.forward_email(access_token=login_to_app("email"), email_id=mail["email_id"],
                         recipients=[find_contact_email({q(full(b))})])
complete_task()""", ("login_to_app", "find_contact_email", "find_latest_email_from"),
                           params={"contacts": [full(a), full(b)]})


@template("invite_to_event", ("contacts", "calendar"), 2, "action")
def invite_to_event(w: World, rng: random.Random) -> Iterator[Instance]:
    events = future_unique_events(w, with_attendees=False)
    for e in rng.sample(events, len(events)):
        c = rng.choice([c for c in contacts(w) if c["email"] not in attendees(e)])
        day, title = e["start"][:10], e["title"]
        yield Instance(f"Add {full(c)} as an attendee of my \"{title}\" event on {pretty_date(day)}.",
                       f"""{FIND_EVENT.format(day=q(day), title=q(title))}
apis.calendar.add_attendee(access_token=login_to_app("calendar"), event_id=event["event_id"],
                           email=find_contact_email({q(full(c))}))
complete_task()""", ("login_to_app", "find_events_on", "find_contact_email"), params={"contact": full(c), "date": day})


@template("email_file", ("file_system", "contacts", "email"), 3, "action")
def email_file(w: World, rng: random.Random) -> Iterator[Instance]:
    files = [f for f in w.tables["files"] if f["path"].endswith(".txt") and "/downloads/" not in f["path"]]
    while True:
        f, c = rng.choice(files), rng.choice(contacts(w))
        name = f["path"].rsplit("/", 1)[-1]
        yield Instance(f"Email {full(c)} the text of my file {name} as the email body, with the subject \"{name}\".",
                       f"""
send_email_to_contact({q(full(c))}, {q(name)}, find_file_by_name({q(name)})["content"])
complete_task()""", ("find_file_by_name", "send_email_to_contact"), params={"contact": full(c), "file": name})


@template("clear_day", ("calendar",), 2, "action")
def clear_day(w: World, rng: random.Random) -> Iterator[Instance]:
    days = sorted({e["start"][:10] for e in w.tables["events"] if e["start"][:10] > TODAY
                   and len(events_on(w, e["start"][:10])) >= 2})
    for day in rng.sample(days, len(days)):
        yield Instance(f"Clear my calendar on {pretty_date(day)}: delete every event that starts that day.", f"""
token = login_to_app("calendar")
for event in find_events_on({q(day)}):
    apis.calendar.delete_event(access_token=token, event_id=event["event_id"])
complete_task()""", ("login_to_app", "find_events_on"), params={"date": day})


@template("mark_read_from", ("contacts", "email"), 2, "action")
def mark_read_from(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        if any(not e["read"] for e in inbox(w, c["email"])):
            yield Instance(f"Mark all unread emails from {full(c)} as read.", f"""
token = login_to_app("email")
for mail in list_all_pages(apis.email.search_emails, access_token=token, sender=find_contact_email({q(full(c))})):
    if not mail["read"]:
        apis.email.mark_email_read(access_token=token, email_id=mail["email_id"])
complete_task()""", ("login_to_app", "list_all_pages", "find_contact_email"), params={"contact": full(c)})


@template("add_contact", ("contacts",), 1, "action")
def add_contact(w: World, rng: random.Random) -> Iterator[Instance]:
    names = {full(c) for c in contacts(w)} | {f"{w.user['first_name']} {w.user['last_name']}"}
    while True:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        if f"{first} {last}" in names:
            continue
        email = f"{first[0].lower()}{last.lower()}@newmail.com"
        phone = f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        rel, city = rng.choice(("friend", "coworker", "neighbor")), rng.choice(CITIES)
        yield Instance(f"Add {first} {last} to my contacts as a {rel} living in {city}, with email {email} and phone "
                       f"{phone}.", f"""
apis.contacts.add_contact(access_token=login_to_app("contacts"), first_name={q(first)}, last_name={q(last)},
                          email={q(email)}, phone={q(phone)}, relationship={q(rel)}, city={q(city)})
complete_task()""", ("login_to_app",), params={"contact": f"{first} {last}"})
