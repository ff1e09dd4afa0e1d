"""Question templates: the agent must find something out and answer with ``complete_task(answer=...)``."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from skilltransfer.envs.apps.template_base import (
    TODAY,
    Instance,
    by_email,
    contacts,
    events_on,
    full,
    inbox,
    month_name,
    month_range,
    pretty_date,
    q,
    spent,
    template,
)
from skilltransfer.envs.apps.world import SPEND_CATEGORIES, TODO_LISTS, World


@template("contact_phone", ("contacts",), 1, "question")
def contact_phone(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        yield Instance(rng.choice((f"What is {full(c)}'s phone number?", f"I need to call {full(c)}. What's their "
                                   "phone number?")),
                       f"complete_task(answer=find_contact_phone({q(full(c))}))", ("find_contact_phone",),
                       answer=c["phone"], params={"contact": full(c)})


@template("contact_email", ("contacts",), 1, "question")
def contact_email(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        yield Instance(f"What is the email address of my {c['relationship']} {full(c)}?",
                       f"complete_task(answer=find_contact_email({q(full(c))}))", ("find_contact_email",),
                       answer=c["email"], params={"contact": full(c)})


@template("count_contacts", ("contacts",), 1, "question")
def count_contacts(w: World, rng: random.Random) -> Iterator[Instance]:
    pairs = sorted({(c["relationship"], c["city"]) for c in contacts(w)})
    for rel, city in rng.sample(pairs, len(pairs)):
        n = sum(c["relationship"] == rel and c["city"] == city for c in contacts(w))
        yield Instance(f"How many of my contacts with the relationship {rel!r} live in {city}?", f"""
token = login_to_app("contacts")
people = list_all_pages(apis.contacts.search_contacts, access_token=token, relationship={q(rel)})
complete_task(answer=sum(1 for c in people if c["city"] == {q(city)}))""", ("login_to_app", "list_all_pages"),
                       answer=n, params={"relationship": rel, "city": city})


@template("count_unread_from", ("contacts", "email"), 2, "question")
def count_unread_from(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        n = sum(not e["read"] for e in inbox(w, c["email"]))
        if n:
            yield Instance(f"How many unread emails from {full(c)} are in my inbox?", f"""
token = login_to_app("email")
mails = list_all_pages(apis.email.search_emails, access_token=token, sender=find_contact_email({q(full(c))}),
                       folder="inbox")
complete_task(answer=sum(1 for m in mails if not m["read"]))""", ("login_to_app", "list_all_pages",
                                                                  "find_contact_email"),
                           answer=n, params={"contact": full(c)})


@template("latest_email_subject", ("contacts", "email"), 2, "question")
def latest_email_subject(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        mails = inbox(w, c["email"])
        if mails:
            yield Instance(f"What is the subject of the most recent email {full(c)} sent me?",
                           f"complete_task(answer=find_latest_email_from(find_contact_email({q(full(c))}))"
                           "['subject'])", ("find_contact_email", "find_latest_email_from"),
                           answer=mails[0]["subject"], params={"contact": full(c)})


@template("spent_in_month", ("payments",), 2, "question")
def spent_in_month(w: World, rng: random.Random) -> Iterator[Instance]:
    combos = [(cat, m) for cat in SPEND_CATEGORIES for m in range(1, 6)]
    for cat, m in rng.sample(combos, len(combos)):
        start, end = month_range(m)
        yield Instance(f"How much did I spend on {cat} in {month_name(m)} 2024 in total?",
                       f"complete_task(answer=sum_transactions_in_period({q(start)}, {q(end)}, category={q(cat)}))",
                       ("sum_transactions_in_period",), answer=spent(w, start, end, category=cat),
                       params={"category": cat, "month": m})


@template("received_from_person", ("contacts", "payments"), 2, "question")
def received_from_person(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        total = spent(w, "2024-01-01", TODAY, direction="in", counterparty=c["email"])
        if total:
            yield Instance(f"How much money has {full(c)} sent me on the payments app this year, in total?",
                           f"complete_task(answer=sum_transactions_in_period('2024-01-01', {q(TODAY)}, direction='in', "
                           f"counterparty=find_contact_email({q(full(c))})))",
                           ("sum_transactions_in_period", "find_contact_email"), answer=total,
                           params={"contact": full(c)})


@template("events_on_day", ("calendar",), 1, "question")
def events_on_day(w: World, rng: random.Random) -> Iterator[Instance]:
    days = sorted({e["start"][:10] for e in w.tables["events"]})
    for day in rng.sample(days, len(days)):
        yield Instance(f"How many events do I have on my calendar on {pretty_date(day)}?",
                       f"complete_task(answer=len(find_events_on({q(day)})))", ("find_events_on",),
                       answer=len(events_on(w, day)), params={"date": day})


@template("next_event_with", ("contacts", "calendar"), 2, "question")
def next_event_with(w: World, rng: random.Random) -> Iterator[Instance]:
    now = TODAY + "T09:00:00"
    for c in rng.sample(contacts(w), len(contacts(w))):
        upcoming = sorted(e["start"] for e in w.tables["events"]
                          if c["email"] in json.loads(e["attendees"]) and e["start"] > now)
        if upcoming:
            yield Instance(f"When is my next calendar event with {full(c)}? Answer with the date as YYYY-MM-DD.", f"""
token = login_to_app("calendar")
events = list_all_pages(apis.calendar.search_events, access_token=token, attendee=find_contact_email({q(full(c))}))
upcoming = sorted(e["start"] for e in events if e["start"] > {q(now)})
complete_task(answer=upcoming[0][:10])""", ("login_to_app", "list_all_pages", "find_contact_email"),
                           answer=upcoming[0][:10], params={"contact": full(c)})


@template("receipt_total", ("file_system",), 1, "question")
def receipt_total(w: World, rng: random.Random) -> Iterator[Instance]:
    receipts = [f for f in w.tables["files"] if "/receipts/" in f["path"]]
    for f in rng.sample(receipts, len(receipts)):
        name = f["path"].rsplit("/", 1)[-1]
        total = float(f["content"].split("Total: ")[1].split()[0])
        yield Instance(f"What is the total amount on my receipt file {name}?", f"""
content = find_file_by_name({q(name)})["content"]
complete_task(answer=float(content.split("Total: ")[1].split()[0]))""", ("find_file_by_name",), answer=total,
                       params={"file": name})


@template("note_fact", ("notes",), 1, "question")
def note_fact(w: World, rng: random.Random) -> Iterator[Instance]:
    facts = [n for n in w.tables["notes"] if "added for reference" in n["content"]]
    for n in rng.sample(facts, len(facts)):
        key, _, value = n["content"].splitlines()[0].partition(": ")
        yield Instance(f"What is the {key} written in my note titled \"{n['title']}\"?", f"""
note = find_note_by_title({q(n['title'])})
complete_task(answer=note["content"].splitlines()[0].split(": ", 1)[1])""", ("find_note_by_title",), answer=value,
                       params={"note": n["title"]})


@template("todo_count", ("todo",), 1, "question")
def todo_count(w: World, rng: random.Random) -> Iterator[Instance]:
    lists = {x["id"]: x["name"] for x in w.tables["todo_lists"]}
    combos = [(name, done) for name in TODO_LISTS for done in (False, True)]
    for name, done in rng.sample(combos, len(combos)):
        n = sum(lists[i["list_id"]] == name and bool(i["done"]) == done for i in w.tables["todo_items"])
        state = "finished" if done else "still open"
        yield Instance(f"How many items on my {name} todo list are {state}?", f"""
token = login_to_app("todo")
complete_task(answer=len(list_all_pages(apis.todo.show_todo_items, access_token=token, list_name={q(name)},
                                        done={done})))""", ("login_to_app", "list_all_pages"), answer=n,
                       params={"list": name, "done": done})


@template("order_total", ("shopping",), 1, "question")
def order_total(w: World, rng: random.Random) -> Iterator[Instance]:
    orders = sorted(w.tables["orders"], key=lambda o: o["created_at"], reverse=True)
    ordinals = ("most recent", "second most recent", "third most recent", "fourth most recent", "fifth most recent",
                "sixth most recent", "seventh most recent", "eighth most recent", "ninth most recent",
                "tenth most recent")
    for k in rng.sample(range(len(ordinals)), len(ordinals)):
        yield Instance(f"How much did my {ordinals[k]} shopping order cost in total?", f"""
token = login_to_app("shopping")
complete_task(answer=list_all_pages(apis.shopping.show_orders, access_token=token)[{k}]["total"])""",
                       ("login_to_app", "list_all_pages"), answer=orders[k]["total"], params={"rank": k + 1})


@template("cheapest_product", ("shopping",), 2, "question")
def cheapest_product(w: World, rng: random.Random) -> Iterator[Instance]:
    cats = sorted({p["category"] for p in w.tables["products"]})
    combos = [(cat, r) for cat in cats for r in (3.5, 4.0, 4.5)]
    for cat, r in rng.sample(combos, len(combos)):
        good = sorted((p["price"], p["id"], p["name"]) for p in w.tables["products"]
                      if p["category"] == cat and p["rating"] >= r)
        if len(good) >= 2 and good[0][0] != good[1][0]:
            yield Instance(f"What is the name of the cheapest product in the {cat} category with a rating of at "
                           f"least {r}?", f"""
token = login_to_app("shopping")
found = list_all_pages(apis.shopping.search_products, access_token=token, category={q(cat)}, min_rating={r},
                       sort_by="price")
complete_task(answer=found[0]["name"])""", ("login_to_app", "list_all_pages"), answer=good[0][2],
                           params={"category": cat, "min_rating": r})


@template("texts_from_contact", ("contacts", "phone"), 2, "question")
def texts_from_contact(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        n = sum(t["phone"] == c["phone"] and t["direction"] == "in" for t in w.tables["texts"])
        if n:
            yield Instance(f"How many text messages have I received from {full(c)}?", f"""
token = login_to_app("phone")
complete_task(answer=len(list_all_pages(apis.phone.show_text_messages, access_token=token,
                                        phone_number=find_contact_phone({q(full(c))}), direction="in")))""",
                           ("login_to_app", "list_all_pages", "find_contact_phone"), answer=n,
                           params={"contact": full(c)})


@template("oldest_relative", ("contacts",), 1, "question")
def oldest_relative(w: World, rng: random.Random) -> Iterator[Instance]:
    combos = [(rel, oldest) for rel in sorted({c["relationship"] for c in contacts(w)}) for oldest in (True, False)]
    for rel, oldest in rng.sample(combos, len(combos)):
        group = sorted(contacts(w), key=lambda c: c["birthday"])
        group = [c for c in group if c["relationship"] == rel]
        if len(group) >= 2 and group[0]["birthday"] != group[1]["birthday"] and \
                group[-1]["birthday"] != group[-2]["birthday"]:
            pick = group[0] if oldest else group[-1]
            word, index = ("oldest", 0) if oldest else ("youngest", -1)
            yield Instance(f"Who is the {word} of my contacts marked as {rel}? Give their full name.", f"""
token = login_to_app("contacts")
people = sorted(list_all_pages(apis.contacts.search_contacts, access_token=token, relationship={q(rel)}),
                key=lambda c: c["birthday"])
complete_task(answer=people[{index}]["first_name"] + " " + people[{index}]["last_name"])""",
                           ("login_to_app", "list_all_pages"), answer=full(pick), params={"relationship": rel})


@template("largest_purchase", ("payments",), 2, "question")
def largest_purchase(w: World, rng: random.Random) -> Iterator[Instance]:
    combos = [(cat, m) for cat in SPEND_CATEGORIES for m in range(1, 6)]
    for cat, m in rng.sample(combos, len(combos)):
        start, end = month_range(m)
        txs = sorted((t["amount"], t["counterparty"]) for t in w.tables["transactions"]
                     if start <= t["created_at"][:10] <= end and t["category"] == cat and t["direction"] == "out")
        if len(txs) >= 2 and txs[-1][0] != txs[-2][0]:
            yield Instance(f"Where did I make my largest {cat} purchase in {month_name(m)} 2024? Answer with the "
                           "merchant's name.", f"""
token = login_to_app("payments")
txs = list_all_pages(apis.payments.show_transactions, access_token=token, start_date={q(start)}, end_date={q(end)},
                     category={q(cat)}, direction="out")
complete_task(answer=max(txs, key=lambda t: t["amount"])["counterparty"])""", ("login_to_app", "list_all_pages"),
                           answer=txs[-1][1], params={"category": cat, "month": m})


@template("pending_requested_by", ("contacts", "payments"), 2, "question")
def pending_requested_by(w: World, rng: random.Random) -> Iterator[Instance]:
    people = by_email(w)
    me = w.user["email"]
    for email in rng.sample(sorted(people), len(people)):
        pending = [r["amount"] for r in w.tables["payment_requests"]
                   if r["requester"] == email and r["requestee"] == me and r["status"] == "pending"]
        if pending:
            name = full(people[email])
            yield Instance(f"How much is {name} still waiting for me to pay, across all their pending payment "
                           "requests?", f"""
token = login_to_app("payments")
email = find_contact_email({q(name)})
requests = list_all_pages(apis.payments.show_payment_requests, access_token=token, incoming=True, status="pending")
complete_task(answer=round(sum(r["amount"] for r in requests if r["requester"] == email), 2))""",
                           ("login_to_app", "list_all_pages", "find_contact_email"), answer=round(sum(pending), 2),
                           params={"contact": name})
