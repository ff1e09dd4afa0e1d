"""Action templates on money: payments (send, request, approve) and shopping (buy, return)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from skilltransfer.envs.apps.template_base import (
    FIND_EVENT,
    TODAY,
    Instance,
    attendees,
    by_email,
    contacts,
    full,
    future_unique_events,
    month_name,
    month_range,
    pretty_date,
    q,
    spent,
    template,
)
from skilltransfer.envs.apps.world import SPEND_CATEGORIES, World

NOTES = ("gas money", "concert tickets", "dinner split", "birthday gift", "book club snacks", "parking")


@template("pay_person", ("contacts", "payments"), 2, "action")
def pay_person(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        amount, note = round(rng.uniform(10, 80), 2), rng.choice(NOTES)
        yield Instance(f"Send {full(c)} ${amount:.2f} on the payments app with the description \"{note}\".",
                       f"pay_person(find_contact_email({q(full(c))}), {amount}, {q(note)})\ncomplete_task()",
                       ("find_contact_email", "pay_person"), params={"contact": full(c)})


@template("split_bill", ("contacts", "payments"), 2, "action")
def split_bill(w: World, rng: random.Random) -> Iterator[Instance]:
    while True:
        a, b = rng.sample(contacts(w), 2)
        share = round(rng.uniform(12, 60), 2)
        total = round(share * 3, 2)
        what = rng.choice(("dinner", "the cabin", "concert tickets", "groceries", "the taxi"))
        yield Instance(f"I paid ${total:.2f} for {what} with {full(a)} and {full(b)}. Request an equal third of it "
                       f"from each of them on the payments app, with the description \"{what}\".", f"""
for name in ({q(full(a))}, {q(full(b))}):
    request_money_from(find_contact_email(name), round({total} / 3, 2), {q(what)})
complete_task()""", ("find_contact_email", "request_money_from"), params={"contacts": [full(a), full(b)]})


@template("approve_requests_from", ("contacts", "payments"), 2, "action")
def approve_requests_from(w: World, rng: random.Random) -> Iterator[Instance]:
    people, me = by_email(w), w.user["email"]
    for email in rng.sample(sorted(people), len(people)):
        if any(r["requester"] == email and r["requestee"] == me and r["status"] == "pending"
               for r in w.tables["payment_requests"]):
            name = full(people[email])
            yield Instance(f"Pay all the pending payment requests that {name} has sent me.", f"""
token = login_to_app("payments")
email = find_contact_email({q(name)})
for r in list_all_pages(apis.payments.show_payment_requests, access_token=token, incoming=True, status="pending"):
    if r["requester"] == email:
        apis.payments.approve_payment_request(access_token=token, request_id=r["request_id"])
complete_task()""", ("login_to_app", "list_all_pages", "find_contact_email"), params={"contact": name})


@template("handle_requests_by_amount", ("payments",), 2, "action")
def handle_requests_by_amount(w: World, rng: random.Random) -> Iterator[Instance]:
    me = w.user["email"]
    pending = [r["amount"] for r in w.tables["payment_requests"] if r["requestee"] == me and r["status"] == "pending"]
    while True:
        limit, decline = rng.choice((20, 25, 30, 40, 50, 60, 70, 80)), rng.random() < 0.5
        hits = [a for a in pending if (a > limit if decline else a < limit)]
        if hits:
            verb, cmp, api = ("Decline", ">", "decline") if decline else ("Pay", "<", "approve")
            yield Instance(f"{verb} every pending payment request I have received that is for "
                           f"{'more' if decline else 'less'} than ${limit}.", f"""
token = login_to_app("payments")
for r in list_all_pages(apis.payments.show_payment_requests, access_token=token, incoming=True, status="pending"):
    if r["amount"] {cmp} {limit}:
        apis.payments.{api}_payment_request(access_token=token, request_id=r["request_id"])
complete_task()""", ("login_to_app", "list_all_pages"), params={"limit": limit, "decline": decline})


@template("buy_cheapest", ("supervisor", "shopping"), 2, "action")
def buy_cheapest(w: World, rng: random.Random) -> Iterator[Instance]:
    kinds = sorted({p["name"].split(" ", 1)[1] for p in w.tables["products"]})
    cards = w.tables["payment_cards"]
    while True:
        kind, rating, qty, card = rng.choice(kinds), rng.choice((3.5, 4.0)), rng.choice((1, 2)), rng.choice(cards)
        ok = sorted((p["price"], p["id"]) for p in w.tables["products"] if p["name"].endswith(kind)
                    and p["rating"] >= rating and p["stock"] >= qty)
        if ok and (len(ok) == 1 or ok[0][0] != ok[1][0]):
            yield Instance(f"Buy {('one', 'two')[qty - 1]} of the cheapest \"{kind}\" product rated at least {rating} "
                           f"that has enough stock, paying with my {card['card_name']} card.", f"""
token = login_to_app("shopping")
found = list_all_pages(apis.shopping.search_products, access_token=token, query={q(kind)}, min_rating={rating},
                       sort_by="price")
product = [p for p in found if p["in_stock"] >= {qty}][0]
card = [c for c in apis.supervisor.show_payment_cards() if c["card_name"] == {q(card['card_name'])}][0]
apis.shopping.add_to_cart(access_token=token, product_id=product["product_id"], quantity={qty})
apis.shopping.place_order(access_token=token, payment_card_id=card["payment_card_id"])
complete_task()""", ("login_to_app", "list_all_pages"), params={"product": kind})


@template("note_spending", ("payments", "notes"), 2, "action")
def note_spending(w: World, rng: random.Random) -> Iterator[Instance]:
    while True:
        cat, m = rng.choice(tuple(SPEND_CATEGORIES)), rng.randint(1, 5)
        start, end = month_range(m)
        title = f"{cat.title()} spending {month_name(m)}"
        yield Instance(f"Create a note titled \"{title}\" whose content is the total I spent on {cat} in "
                       f"{month_name(m)} 2024 (just the number, like 123.45).", f"""
total = sum_transactions_in_period({q(start)}, {q(end)}, category={q(cat)})
create_note({q(title)}, f"{{total:.2f}}")
complete_task()""", ("sum_transactions_in_period", "create_note"), params={"category": cat, "month": m})


@template("return_order", ("shopping",), 1, "action")
def return_order(w: World, rng: random.Random) -> Iterator[Instance]:
    orders = w.tables["orders"]
    counts: dict[str, int] = {}
    for o in orders:
        for item in json.loads(o["items"]):
            counts[item["name"]] = counts.get(item["name"], 0) + 1
    for o in rng.sample(orders, len(orders)):
        items = json.loads(o["items"])
        unique = [i["name"] for i in items if counts[i["name"]] == 1]
        if o["status"] == "delivered" and unique:
            name = unique[0]
            yield Instance(f"Return the shopping order in which I bought the {name}.", f"""
token = login_to_app("shopping")
for order in list_all_pages(apis.shopping.show_orders, access_token=token):
    if any(item["name"] == {q(name)} for item in order["items"]):
        apis.shopping.return_order(access_token=token, order_id=order["order_id"])
complete_task()""", ("login_to_app", "list_all_pages"), params={"product": name})


@template("pay_back", ("contacts", "payments"), 2, "action")
def pay_back(w: World, rng: random.Random) -> Iterator[Instance]:
    for c in rng.sample(contacts(w), len(contacts(w))):
        if spent(w, "2024-01-01", TODAY, direction="in", counterparty=c["email"]):
            yield Instance(f"Pay {full(c)} back: send them the same amount as their most recent payment to me on the "
                           "payments app, with the description \"paying you back\".", f"""
token = login_to_app("payments")
email = find_contact_email({q(full(c))})
latest = apis.payments.show_transactions(access_token=token, direction="in", counterparty=email, page_limit=1)[0]
pay_person(email, latest["amount"], "paying you back")
complete_task()""", ("login_to_app", "find_contact_email", "pay_person"), params={"contact": full(c)})


@template("thank_senders", ("payments", "contacts", "phone"), 3, "action")
def thank_senders(w: World, rng: random.Random) -> Iterator[Instance]:
    people = by_email(w)
    for m in rng.sample(range(1, 7), 6):
        start, end = month_range(m)
        senders = {t["counterparty"] for t in w.tables["transactions"] if t["category"] == "transfer"
                   and t["direction"] == "in" and start <= t["created_at"][:10] <= end and t["counterparty"] in people}
        msg = rng.choice(("Thanks for the money!", "Got your payment, thank you!"))
        if senders:
            yield Instance(f"Text every contact who sent me money on the payments app in {month_name(m)} 2024 the "
                           f"message \"{msg}\" (one text per person).", f"""
token = login_to_app("payments")
received = list_all_pages(apis.payments.show_transactions, access_token=token, start_date={q(start)},
                          end_date={q(end)}, direction="in", category="transfer")
for email in sorted({{t["counterparty"] for t in received}}):
    text_contact(find_contact_by_email(email)["phone"], {q(msg)})
complete_task()""", ("login_to_app", "list_all_pages", "find_contact_by_email", "text_contact"),
                           params={"month": m})


@template("request_from_attendees", ("calendar", "payments"), 3, "action")
def request_from_attendees(w: World, rng: random.Random) -> Iterator[Instance]:
    events = future_unique_events(w, with_attendees=True)
    for e in rng.sample(events, len(events)):
        day, title, guests = e["start"][:10], e["title"], attendees(e)
        share = round(rng.uniform(8, 40), 2)
        total = round(share * (len(guests) + 1), 2)
        yield Instance(f"I prepaid ${total:.2f} for my \"{title}\" event on {pretty_date(day)}. Split it equally "
                       "between me and everyone invited, and send each invitee a payment request for their share "
                       f"with the description \"{title}\".", f"""{FIND_EVENT.format(day=q(day), title=q(title))}
share = round({total} / (len(event["attendees"]) + 1), 2)
for email in event["attendees"]:
    request_money_from(email, share, {q(title)})
complete_task()""", ("find_events_on", "request_money_from"), params={"date": day})
