"""Deterministic generation of the apps world: the main user, ~60 contacts and their records, as SQLite tables.

The world is plain data (``World``: table name -> list of row dicts) built from ``random.Random(seed)``;
``world_bytes`` turns it into the SQLite database every episode's harness-side ``WorldDb`` starts from. Task
templates read the same ``World`` to pick their parameters and compute expected answers, independently of the APIs.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

NOW = datetime(2024, 6, 15, 9, 0, 0)
"""The world's fixed "current time" (nothing reads the wall clock)."""


FIRST = ("Alice Bruno Carmen Daniel Elena Farid Grace Hiro Ines Jamal Kira Luca Maya Nikhil Olga Pedro Quinn Rosa "
         "Samir Tara Umar Vera Walter Xena Yusuf Zoe Aaron Bianca Caleb Dana Emil Fiona Gustavo Hana Ivan Julia Kenji "
         "Lena Marco Nadia Oscar Priya Rafael Sofia Tomas Uma Victor Wendy Yara Zane").split()
LAST = ("Moreno Schmidt Okafor Tanaka Rossi Novak Patel Laurent Silva Kowalski Haddad Jensen Costa Murphy Ivanova "
        "Nguyen Fischer Alvarez Dubois Larsen Mendes Sato Kaplan Romero Weber Fontaine Bakker Horvat Lindqvist Quispe "
        "Reyes Brennan Castillo Ortiz Petrov Varga Yilmaz Zhou Abara Keller").split()
CITIES = ("Seattle Portland Denver Austin Boston Chicago Atlanta Phoenix Madison Raleigh").split()
RELATIONSHIPS = ("friend", "family", "coworker", "neighbor", "roommate", "classmate")
DOMAINS = ("mailbox.com", "inbox.net", "postmail.org", "fastmail.io")

SPEND_CATEGORIES: dict[str, tuple[str, ...]] = {
    "groceries": ("Whole Foods", "Trader Joe's", "Safeway", "Green Basket Market"),
    "dining": ("Luigi's Trattoria", "Sushi Zen", "Blue Door Cafe", "Taco Fiesta", "Burger Barn"),
    "transport": ("Metro Transit", "RideNow", "City Fuel", "ParkRight Garage"),
    "entertainment": ("Cinema City", "StreamFlix", "Arcade Planet", "Concert Hall"),
    "utilities": ("City Power", "AquaWater", "FiberNet Internet"),
    "health": ("CarePlus Pharmacy", "Downtown Dental", "FitLife Gym"),
    "clothing": ("Urban Threads", "Denim Depot", "Shoe Palace"),
}
MONTHS = ("January", "February", "March", "April", "May", "June")

EMAIL_TOPICS = ("Dinner plans for {day}", "Photos from {place}", "Quick question about {thing}", "Re: {thing} update",
                "Invitation: {event}", "Reminder: {thing} deadline", "Thoughts on {thing}?", "Trip to {place}",
                "Happy belated birthday!", "Borrowed {item}", "Weekend hike near {place}", "Notes from {event}")
THINGS = ("the budget", "the quarterly report", "the lease", "project Atlas", "the book club", "the garden",
          "the migration plan", "the fundraiser", "the design review", "the move")
PLACES = ("Lisbon", "the lake", "Kyoto", "Yosemite", "the coast", "Prague", "the farmers market", "Montreal")
EVENTS = ("the team offsite", "the workshop", "Sam's party", "the conference", "the open house", "the recital")
ITEMS = ("ladder", "camping stove", "board game", "projector", "tent", "bike pump")
DAYS = ("Friday", "Saturday", "Sunday", "next week", "Thursday")

EVENT_TITLES = ("Team sync", "Dentist appointment", "Lunch", "Project review", "Yoga class", "Coffee chat",
                "Budget planning", "Book club", "Car service", "Parent-teacher meeting", "1:1", "Design workshop",
                "Haircut", "Climbing session", "Dinner", "Piano lesson")
LOCATIONS = ("Office room 3B", "Blue Door Cafe", "Zoom", "Downtown", "Home", "Community center", "Library")

NOTE_FACTS = (("Home wifi", "password"), ("Gym locker", "locker code"), ("Bike lock", "combination"),
              ("Garage door", "code"), ("Library card", "card number"), ("Parking spot", "spot number"),
              ("Insurance policy", "policy number"), ("Passport", "passport number"), ("Frequent flyer", "member id"),
              ("Mailbox", "key number"), ("Office badge", "badge id"), ("Alarm system", "pin"),
              ("Storage unit", "unit number"), ("Vet clinic", "client id"), ("Water meter", "meter id"))
NOTE_PLAIN = ("Book recommendations", "Packing list", "Gift ideas", "Recipe: lentil soup", "Meeting takeaways",
              "Plant watering schedule", "Movies to watch", "Running log", "Podcast list", "Ideas for the garden")

TODO_LISTS = ("Home", "Work", "Errands", "Travel", "Groceries")
TODO_ITEMS = {
    "Home": ("Fix the leaking tap", "Clean the gutters", "Replace smoke detector battery", "Paint the fence",
             "Organize the closet", "Vacuum the car", "Water the plants", "Call the plumber", "Sort the mail"),
    "Work": ("Prepare slides", "Review pull request", "Update the roadmap", "Book meeting room", "Send weekly report",
             "Write design doc", "Plan the offsite", "Answer survey", "Renew certificate"),
    "Errands": ("Pick up dry cleaning", "Return library books", "Renew passport", "Buy stamps", "Drop off package",
                "Get a haircut", "Pay parking ticket"),
    "Travel": ("Book flights", "Reserve hotel", "Buy travel adapter", "Check visa rules", "Print boarding pass",
               "Exchange currency"),
    "Groceries": ("Buy oat milk", "Buy eggs", "Buy coffee beans", "Buy apples", "Buy pasta", "Buy spinach",
                  "Buy rice", "Buy yogurt"),
}

PRODUCT_CATEGORIES: dict[str, tuple[str, ...]] = {
    "headphones": ("Wireless Headphones", "Noise-Cancelling Headphones", "Earbuds"),
    "backpacks": ("Travel Backpack", "Laptop Backpack", "Hiking Daypack"),
    "coffee": ("Espresso Beans", "Dark Roast Coffee", "Cold Brew Pack"),
    "books": ("Cookbook", "Sci-Fi Novel", "History Book", "Travel Guide"),
    "lamps": ("Desk Lamp", "Floor Lamp", "Reading Light"),
    "shoes": ("Running Shoes", "Hiking Boots", "Sneakers"),
    "kitchen": ("Chef Knife", "Cast Iron Pan", "Blender"),
}
BRANDS = ("Acme", "Nimbus", "Vertex", "Orbit", "Pinecrest", "Lumen", "Sola", "Kestrel", "Tundra", "Harbor")

FILE_DIRS = ("/home/documents", "/home/documents/receipts", "/home/documents/work", "/home/photos",
             "/home/downloads", "/home/music")


@dataclass
class World:
    """All tables of one world: table name -> rows (dicts, ``id`` primary key where the table has one)."""

    seed: int
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def user(self) -> dict[str, Any]:
        return self.tables["profile"][0]

    def contact(self, contact_id: int) -> dict[str, Any]:
        return next(c for c in self.tables["contacts"] if c["id"] == contact_id)


SCHEMA = {
    "profile": "first_name TEXT, last_name TEXT, email TEXT, phone TEXT, birthday TEXT, city TEXT",
    "accounts": "app TEXT PRIMARY KEY, username TEXT, password TEXT",
    "payment_cards": "id INTEGER PRIMARY KEY, card_name TEXT, last_four TEXT, expiry TEXT",
    "tokens": "token TEXT PRIMARY KEY, app TEXT",
    "meta": "key TEXT PRIMARY KEY, value TEXT",
    "contacts": ("id INTEGER PRIMARY KEY, first_name TEXT, last_name TEXT, email TEXT, phone TEXT, "
                 "relationship TEXT, birthday TEXT, city TEXT"),
    "emails": ("id INTEGER PRIMARY KEY, folder TEXT, sender TEXT, recipients TEXT, subject TEXT, body TEXT, "
               "sent_at TEXT, read INTEGER, in_reply_to INTEGER"),
    "events": ("id INTEGER PRIMARY KEY, title TEXT, start TEXT, end TEXT, location TEXT, attendees TEXT, "
               "description TEXT"),
    "directories": "path TEXT PRIMARY KEY",
    "files": "id INTEGER PRIMARY KEY, path TEXT UNIQUE, content TEXT, created_at TEXT",
    "notes": "id INTEGER PRIMARY KEY, title TEXT, content TEXT, created_at TEXT, updated_at TEXT",
    "todo_lists": "id INTEGER PRIMARY KEY, name TEXT UNIQUE",
    "todo_items": "id INTEGER PRIMARY KEY, list_id INTEGER, title TEXT, due_date TEXT, done INTEGER, created_at TEXT",
    "wallet": "id INTEGER PRIMARY KEY, balance REAL",
    "transactions": ("id INTEGER PRIMARY KEY, direction TEXT, amount REAL, category TEXT, counterparty TEXT, "
                     "description TEXT, created_at TEXT"),
    "payment_requests": ("id INTEGER PRIMARY KEY, requester TEXT, requestee TEXT, amount REAL, description TEXT, "
                         "status TEXT, created_at TEXT"),
    "products": "id INTEGER PRIMARY KEY, name TEXT, category TEXT, price REAL, rating REAL, stock INTEGER",
    "cart": "product_id INTEGER PRIMARY KEY, quantity INTEGER",
    "orders": "id INTEGER PRIMARY KEY, items TEXT, total REAL, status TEXT, payment_card_id INTEGER, created_at TEXT",
    "texts": "id INTEGER PRIMARY KEY, direction TEXT, phone TEXT, message TEXT, sent_at TEXT",
}
"""Column definitions per table (the same for every seed)."""


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


class _Clock:
    """Hands out unique timestamps in a period (so "latest" is always well defined)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[datetime] = set()

    def between(self, start: datetime, end: datetime) -> str:
        span = int((end - start).total_seconds() // 60)
        while True:
            moment = start + timedelta(minutes=self.rng.randrange(span))
            moment = moment.replace(hour=7 + moment.hour % 14)
            if moment not in self.used and moment < end:
                self.used.add(moment)
                return _stamp(moment)


def _people(rng: random.Random, count: int) -> list[dict[str, Any]]:
    names: list[tuple[str, str]] = []
    while len(names) < count:
        pair = (rng.choice(FIRST), rng.choice(LAST))
        if pair not in names:
            names.append(pair)
    phones = rng.sample(range(1000000, 9999999), count)
    people = []
    for i, (first, last) in enumerate(names):
        people.append({
            "id": i, "first_name": first, "last_name": last,
            "email": f"{first.lower()}.{last.lower()}@{rng.choice(DOMAINS)}",
            "phone": f"555-{phones[i] // 10000:03d}-{phones[i] % 10000:04d}",
            "relationship": rng.choice(RELATIONSHIPS),
            "birthday": f"{rng.randint(1960, 2002)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "city": rng.choice(CITIES),
        })
    return people


def generate_world(seed: int = 0) -> World:
    """Build the whole world deterministically from ``seed``."""
    rng = random.Random(seed)
    clock = _Clock(rng)
    people = _people(rng, 61)
    me, contacts = people[0], people[1:]
    for i, contact in enumerate(contacts, start=1):
        contact["id"] = i
    user = {k: me[k] for k in ("first_name", "last_name", "email", "phone", "birthday", "city")}
    w = World(seed=seed)
    t = w.tables
    t["profile"] = [user]
    apps = ("email", "contacts", "phone", "calendar", "file_system", "notes", "todo", "payments", "shopping")
    t["accounts"] = [{"app": app, "username": user["phone"] if app == "phone" else user["email"],
                      "password": "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10))}
                     for app in apps]
    t["payment_cards"] = [{"id": 1, "card_name": "Visa Everyday", "last_four": f"{rng.randint(1000, 9999)}",
                           "expiry": "2027-09"},
                          {"id": 2, "card_name": "Mastercard Travel", "last_four": f"{rng.randint(1000, 9999)}",
                           "expiry": "2026-03"}]
    t["tokens"], t["meta"] = [], [{"key": "clock", "value": "0"}]
    t["contacts"] = contacts
    start, today = datetime(2024, 1, 1), NOW
    # emails: inbox from contacts, sent to contacts
    emails: list[dict[str, Any]] = []
    for _ in range(330):
        c = rng.choice(contacts)
        topic = rng.choice(EMAIL_TOPICS).format(day=rng.choice(DAYS), place=rng.choice(PLACES),
                                                thing=rng.choice(THINGS), event=rng.choice(EVENTS),
                                                item=rng.choice(ITEMS))
        emails.append({"folder": "inbox", "sender": c["email"], "recipients": json.dumps([user["email"]]),
                       "subject": topic, "body": f"Hi {user['first_name']},\n\n{_email_body(rng, topic)}\n\n"
                       f"Best,\n{c['first_name']}", "sent_at": clock.between(start, today),
                       "read": int(rng.random() < 0.7), "in_reply_to": None})
    for _ in range(110):
        chosen = rng.sample(contacts, rng.choice((1, 1, 1, 2)))
        topic = rng.choice(EMAIL_TOPICS).format(day=rng.choice(DAYS), place=rng.choice(PLACES),
                                                thing=rng.choice(THINGS), event=rng.choice(EVENTS),
                                                item=rng.choice(ITEMS))
        emails.append({"folder": "sent", "sender": user["email"],
                       "recipients": json.dumps(sorted(c["email"] for c in chosen)), "subject": topic,
                       "body": f"Hi,\n\n{_email_body(rng, topic)}\n\n{user['first_name']}",
                       "sent_at": clock.between(start, today), "read": 1, "in_reply_to": None})
    emails.sort(key=lambda e: e["sent_at"])
    t["emails"] = [{"id": i, **e} for i, e in enumerate(emails, start=1)]
    # calendar events: past and upcoming
    events = []
    for _ in range(220):
        day = datetime(2024, 4, 1) + timedelta(days=rng.randrange(150))
        begin = day.replace(hour=rng.randint(8, 19), minute=rng.choice((0, 30)))
        attendees = sorted(c["email"] for c in rng.sample(contacts, rng.choice((0, 1, 1, 2, 3))))
        events.append({"title": rng.choice(EVENT_TITLES), "start": _stamp(begin),
                       "end": _stamp(begin + timedelta(minutes=rng.choice((30, 60, 60, 90, 120)))),
                       "location": rng.choice(LOCATIONS), "attendees": json.dumps(attendees), "description": ""})
    events.sort(key=lambda e: (e["start"], e["title"]))
    t["events"] = [{"id": i, **e} for i, e in enumerate(events, start=1)]
    _files(w, rng, clock)
    _notes_and_todos(w, rng, clock)
    _money(w, rng, clock)
    _shopping(w, rng, clock)
    texts = []
    for _ in range(260):
        c = rng.choice(contacts)
        inbound = rng.random() < 0.55
        texts.append({"direction": "in" if inbound else "out", "phone": c["phone"],
                      "message": rng.choice(("On my way!", "Running 10 min late", "Can you call me?", "Thanks!",
                                             "See you tomorrow", "Did you get my email?", "Lunch today?",
                                             "Happy birthday!", "Sounds good", "Where are you?")),
                      "sent_at": clock.between(start, today)})
    texts.sort(key=lambda x: x["sent_at"])
    t["texts"] = [{"id": i, **x} for i, x in enumerate(texts, start=1)]
    return w


def _email_body(rng: random.Random, topic: str) -> str:
    lines = ("Let me know what you think.", "Looking forward to hearing from you.", "No rush on this.",
             "I attached the details below.", "Can we talk about it this week?", "Thanks again for your help.")
    return f"Writing about: {topic.lower()}. {rng.choice(lines)}"


def _files(w: World, rng: random.Random, clock: _Clock) -> None:
    files: list[dict[str, Any]] = []
    start = datetime(2023, 9, 1)

    def add(path: str, content: str) -> None:
        files.append({"path": path, "content": content, "created_at": clock.between(start, NOW)})

    stores = [m for merchants in SPEND_CATEGORIES.values() for m in merchants]
    for i in range(30):
        store = rng.choice(stores)
        total = round(rng.uniform(5, 250), 2)
        date = f"2024-{rng.randint(1, 6):02d}-{rng.randint(1, 28):02d}"
        add(f"/home/documents/receipts/receipt_{i + 1:03d}.txt", f"Store: {store}\nDate: {date}\nTotal: {total:.2f}\n")
    for name in ("quarterly_report", "roadmap", "meeting_minutes", "budget_plan", "onboarding_guide", "retro_notes",
                 "vendor_list", "okr_draft"):
        add(f"/home/documents/work/{name}.txt", f"{name.replace('_', ' ').title()}\nOwner: "
            f"{rng.choice(w.tables['contacts'])['first_name']}\nStatus: {rng.choice(('draft', 'final', 'review'))}\n")
    for name in ("lease_agreement", "tax_return_2023", "car_insurance", "warranty_laptop", "resume", "cover_letter"):
        add(f"/home/documents/{name}.{rng.choice(('pdf', 'docx', 'txt'))}", f"{name.replace('_', ' ')} document")
    for i in range(28):
        add(f"/home/photos/IMG_{2400 + i * 7}.jpg", f"<jpeg image {rng.randint(800, 4000)}x{rng.randint(600, 3000)}>")
    exts = ("pdf", "zip", "jpg", "txt", "pdf", "mp3", "csv")
    words = ("invoice", "manual", "setup", "photo", "report", "statement", "ticket", "schedule", "export", "song")
    names: set[str] = set()
    while len(names) < 34:
        names.add(f"{rng.choice(words)}_{rng.randint(1, 99)}.{rng.choice(exts)}")
    for name in sorted(names):
        add(f"/home/downloads/{name}", f"downloaded file {name}")
    for i in range(12):
        add(f"/home/music/track_{i + 1:02d}.mp3", f"<mp3 audio {rng.randint(120, 400)}s>")
    files.sort(key=lambda f: f["path"])
    w.tables["files"] = [{"id": i, **f} for i, f in enumerate(files, start=1)]
    w.tables["directories"] = [{"path": p} for p in ("/home", *FILE_DIRS)]


def _notes_and_todos(w: World, rng: random.Random, clock: _Clock) -> None:
    notes = []
    for title, key in NOTE_FACTS:
        value = f"{rng.choice('ABCDEFGHJK')}{rng.randint(1000, 99999)}"
        body = f"{key}: {value}\nadded for reference"
        stamp = clock.between(datetime(2023, 6, 1), NOW)
        notes.append({"title": title, "content": body, "created_at": stamp, "updated_at": stamp})
    for title in NOTE_PLAIN:
        stamp = clock.between(datetime(2023, 6, 1), NOW)
        notes.append({"title": title, "content": f"{title}: first draft, more later.", "created_at": stamp,
                      "updated_at": stamp})
    notes.sort(key=lambda n: n["created_at"])
    w.tables["notes"] = [{"id": i, **n} for i, n in enumerate(notes, start=1)]
    w.tables["todo_lists"] = [{"id": i, "name": n} for i, n in enumerate(TODO_LISTS, start=1)]
    items = []
    for list_id, name in enumerate(TODO_LISTS, start=1):
        for title in TODO_ITEMS[name]:
            due = f"2024-{rng.randint(5, 7):02d}-{rng.randint(1, 28):02d}" if rng.random() < 0.6 else None
            items.append({"list_id": list_id, "title": title, "due_date": due, "done": int(rng.random() < 0.35),
                          "created_at": clock.between(datetime(2024, 3, 1), NOW)})
    w.tables["todo_items"] = [{"id": i, **x} for i, x in enumerate(items, start=1)]


def _money(w: World, rng: random.Random, clock: _Clock) -> None:
    user, contacts = w.user, w.tables["contacts"]
    txs: list[dict[str, Any]] = []
    start = datetime(2024, 1, 1)
    for _ in range(420):
        category = rng.choice(tuple(SPEND_CATEGORIES))
        txs.append({"direction": "out", "amount": round(rng.uniform(3, 180), 2), "category": category,
                    "counterparty": rng.choice(SPEND_CATEGORIES[category]), "description": f"{category} purchase",
                    "created_at": clock.between(start, NOW)})
    for month in range(1, 7):
        txs.append({"direction": "out", "amount": 1850.0, "category": "rent", "counterparty": "Oakwood Apartments",
                    "description": "monthly rent", "created_at": clock.between(datetime(2024, month, 1),
                                                                               datetime(2024, month, 3))})
        txs.append({"direction": "in", "amount": 4200.0, "category": "salary", "counterparty": "Northwind Corp",
                    "description": "salary", "created_at": clock.between(datetime(2024, month, 1),
                                                                         datetime(2024, month, 3))})
    friends = rng.sample(contacts, 25)
    for _ in range(90):
        c = rng.choice(friends)
        inbound = rng.random() < 0.5
        txs.append({"direction": "in" if inbound else "out", "amount": round(rng.uniform(5, 120), 2),
                    "category": "transfer", "counterparty": c["email"],
                    "description": rng.choice(("dinner split", "concert tickets", "gas money", "birthday gift",
                                               "groceries share", "rent share", "movie night")),
                    "created_at": clock.between(start, NOW)})
    txs.sort(key=lambda x: x["created_at"])
    w.tables["transactions"] = [{"id": i, **x} for i, x in enumerate(txs, start=1)]
    w.tables["wallet"] = [{"id": 1, "balance": 3250.75}]
    requests = []
    for _ in range(36):
        c = rng.choice(friends)
        incoming = rng.random() < 0.7
        status = "pending" if rng.random() < 0.6 else rng.choice(("approved", "declined"))
        requests.append({"requester": c["email"] if incoming else user["email"],
                         "requestee": user["email"] if incoming else c["email"],
                         "amount": round(rng.uniform(8, 90), 2),
                         "description": rng.choice(("pizza night", "taxi", "museum tickets", "utilities share",
                                                    "brunch", "gift pool")),
                         "status": status, "created_at": clock.between(datetime(2024, 4, 1), NOW)})
    requests.sort(key=lambda x: x["created_at"])
    w.tables["payment_requests"] = [{"id": i, **x} for i, x in enumerate(requests, start=1)]


def _shopping(w: World, rng: random.Random, clock: _Clock) -> None:
    products = []
    for category, kinds in PRODUCT_CATEGORIES.items():
        for kind in kinds:
            for brand in rng.sample(BRANDS, 5):
                products.append({"name": f"{brand} {kind}", "category": category,
                                 "price": round(rng.uniform(9, 240), 2), "rating": round(rng.uniform(2.5, 5.0), 1),
                                 "stock": rng.choice((0, 3, 8, 15, 40))})
    rng.shuffle(products)
    w.tables["products"] = [{"id": i, **p} for i, p in enumerate(products, start=1)]
    w.tables["cart"] = []
    orders = []
    for _ in range(24):
        chosen = rng.sample(w.tables["products"], rng.choice((1, 1, 2, 3)))
        items = [{"product_id": p["id"], "name": p["name"], "quantity": rng.choice((1, 1, 2)), "price": p["price"]}
                 for p in chosen]
        orders.append({"items": json.dumps(items), "total": round(sum(i["price"] * i["quantity"] for i in items), 2),
                       "status": rng.choice(("delivered", "delivered", "shipped", "returned")),
                       "payment_card_id": rng.choice((1, 2)),
                       "created_at": clock.between(datetime(2024, 1, 1), NOW)})
    orders.sort(key=lambda o: o["created_at"])
    w.tables["orders"] = [{"id": i, **o} for i, o in enumerate(orders, start=1)]


def world_bytes(world: World) -> bytes:
    """``world`` as the bytes of an SQLite database (what each episode's in-memory ``WorldDb`` starts from)."""
    conn = sqlite3.connect(":memory:")
    try:
        for table, columns in SCHEMA.items():
            conn.execute(f"CREATE TABLE {table} ({columns})")
            rows = world.tables.get(table, [])
            if rows:
                names = list(rows[0])
                conn.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                                 [tuple(r[n] for n in names) for r in rows])
        conn.commit()
        return conn.serialize()
    finally:
        conn.close()
