"""The generated office task templates (1-3 apps each), sharing named sub-procedures across templates.

Every template turns a task's ``random.Random`` into a :class:`Draft`: the instruction, the testbed plan, the
OfficeBench-format evaluation, a reference solution (an API-call program that reads the files and computes the
result, never a pasted answer) and a *decoy*: a plausible wrong solution that the tests use to show the checks
reject wrong work.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.envs.office.world import (
    FREE_SLOTS,
    PEOPLE,
    ROOMS,
    TABLES,
    TOPICS,
    VENDORS,
    FileSpec,
    base_day,
    calendar_events,
    ics_time,
    inbox,
    make_table,
    stamp,
)


@dataclass(frozen=True)
class Draft:
    """One generated task before it gets an id."""

    instruction: str
    user: str
    now: str
    plan: list[FileSpec]
    evaluation: list[dict[str, Any]]
    solution: str
    decoy: str
    requires: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Template:
    """A scenario: its apps, the sub-procedures its tasks use and the draft maker."""

    name: str
    apps: tuple[str, ...]
    subprocedures: tuple[str, ...]
    make: Callable[[random.Random], Draft]


def _check(function: str, **args: Any) -> dict[str, Any]:
    return {"function": function, "args": args}


def _setting(rng: random.Random) -> tuple[str, dt.date, str]:
    """The acting user, the day the task is about and the simulated now (the working day before, 9:00)."""
    user = rng.choice(PEOPLE)
    day = base_day(rng)
    return user, day, stamp(day - dt.timedelta(days=1), 9)


def _others(rng: random.Random, exclude: list[str], n: int) -> list[str]:
    return rng.sample([p for p in PEOPLE if p not in exclude], n)


READ_TABLE = ("rows = apis.excel.read_file(file_path={file!r})\n"
              "header, body = rows[0], [row for row in rows[1:] if row and row[0] is not None]\n"
              "col = header.index({metric!r})\n")


def _table_setup(rng: random.Random, kinds: tuple[str, ...] = tuple(TABLES)) -> tuple[Any, str, str]:
    table = make_table(rng, rng.choice(kinds))
    metric = rng.choice(table.header[1:])
    return table, metric, f"data/{table.kind}.xlsx"


def excel_top_item(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    highest = rng.random() < 0.5
    ranked = sorted(table.rows, key=lambda row: row[table.column(metric)], reverse=highest)
    best, worst = ranked[0][0], ranked[-1][0]
    word, pick, other = ("highest", "max", "min") if highest else ("lowest", "min", "max")
    code = (READ_TABLE.format(file=file, metric=metric)
            + "best = {}(body, key=lambda row: row[col])\ncomplete_task(answer=best[0])\n")
    return Draft(
        instruction=f"Which {table.entity} in {file} has the {word} {metric}? Answer with its name.",
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_answer_contain", keywords=[best]),
                    _check("evaluate_answer_not_contain", keywords=[worst])],
        solution=code.format(pick), decoy=code.format(other))


def excel_update_cell(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    index = rng.randrange(len(table.rows))
    item = table.rows[index][0]
    lo, hi = TABLES[table.kind]["metrics"][metric]
    value = rng.choice([v for v in range(lo, hi + 1) if v not in {row[table.column(metric)] for row in table.rows}])
    row_idx, col_idx = index + 2, table.column(metric) + 1
    code = (f"rows = apis.excel.read_file(file_path={file!r})\ncol = rows[0].index({metric!r}) + 1\n"
            f"row = next(i for i, r in enumerate(rows, start=1) if r[0] == {item!r})\n"
            "apis.excel.set_cell(file_path={file!r}, row_idx=row{shift}, column_idx=col, text={value!r})\n"
            "complete_task()\n")
    shift = " + 1" if index + 1 < len(table.rows) else " - 1"
    return Draft(
        instruction=f"In {file}, change the {metric} of {item} to {value}.",
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_excel_cell_value", file=file,
                           matches=[{"row": row_idx, "col": col_idx, "value": str(value)}]),
                    _check("evaluate_diff_contain_text", input_file=f"../../../../cache/0/testbed/{file}",
                           output_file=file, doc_type="xlsx", keywords=[str(value), item])],
        solution=code.format(file=file, shift="", value=str(value)),
        decoy=code.format(file=file, shift=shift, value=str(value)))


def excel_append_total(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    total = sum(row[table.column(metric)] for row in table.rows)
    new_row, col_idx = len(table.rows) + 2, table.column(metric) + 1
    code = (READ_TABLE.format(file=file, metric=metric) + "total = sum(row[col] for row in body{cut})\n"
            f"new_row = len(rows) + 1\napis.excel.set_cell(file_path={file!r}, row_idx=new_row, column_idx=1, "
            f"text='Total')\napis.excel.set_cell(file_path={file!r}, row_idx=new_row, column_idx=col + 1, "
            "text=total)\ncomplete_task()\n")
    return Draft(
        instruction=(f"At the bottom of {file}, add a row with 'Total' in the first column and the sum of the "
                     f"{metric} column in the {metric} column."),
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_excel_cell_value", file=file,
                           matches=[{"row": new_row, "col": 1, "value": "Total"},
                                    {"row": new_row, "col": col_idx, "value": str(total)}])],
        solution=code.format(cut=""), decoy=code.format(cut="[:-1]"))


def calendar_add_event(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    titles = rng.sample(TOPICS, 5)
    topic, existing = titles[0], titles[1:]
    events = calendar_events(rng, [day, day + dt.timedelta(days=1)], existing)
    start, end = rng.choice(FREE_SLOTS)
    room = rng.choice(ROOMS)
    code = ("apis.calendar.create_event(user={user!r}, summary={topic!r}, time_start={start!r}, "
            "time_end={end!r}, location={room!r})\ncomplete_task()\n")
    return Draft(
        instruction=(f"Add '{topic}' to {user}'s calendar on {day:%A, %B %d, %Y} from {start}:00 to {end}:00 "
                     f"in {room}."),
        user=user, now=now, plan=[FileSpec(f"calendar/{user}.ics", "ics", events)],
        evaluation=[_check("evaluate_contain", doc_type="ics", file=f"calendar/{user}.ics",
                           keywords=[topic, f"DTSTART:{ics_time(day, start)}", f"DTEND:{ics_time(day, end)}", room]),
                    _check("evaluate_calendar_no_overlap", username=user)],
        solution=code.format(user=user, topic=topic, start=stamp(day, start), end=stamp(day, end), room=room),
        decoy=code.format(user=user, topic=topic, start=stamp(day, start + 1), end=stamp(day, end + 1), room=room))


def calendar_cancel_event(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    titles = rng.sample(TOPICS, 4)
    events = calendar_events(rng, [day, day + dt.timedelta(days=1)], titles)
    target, keep = titles[0], titles[1:]
    code = ("events = apis.calendar.list_events(username={user!r})\n"
            "target = next(e for e in events if e['summary'] == {title!r})\n"
            "apis.calendar.delete_event(user={user!r}, summary=target['summary'])\ncomplete_task()\n")
    return Draft(
        instruction=f"{user} can no longer attend '{target}'. Remove that event from {user}'s calendar.",
        user=user, now=now, plan=[FileSpec(f"calendar/{user}.ics", "ics", events)],
        evaluation=[_check("evaluate_not_contain", doc_type="ics", file=f"calendar/{user}.ics", keywords=[target]),
                    _check("evaluate_contain", doc_type="ics", file=f"calendar/{user}.ics", keywords=keep)],
        solution=code.format(user=user, title=target), decoy=code.format(user=user, title=keep[0]))


FIND_EMAIL = ("emails = apis.email.list_emails(username={user!r})\n"
              "target = next(e for e in emails if {key!r} in e['subject'])\n"
              "mail = apis.email.read_email(username={user!r}, email_id=target['email_id'])\n")


def email_forward(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    senders = _others(rng, [user], 3)
    recipient = _others(rng, [user, *senders], 1)[0]
    topics = rng.sample(TOPICS, 3)
    codes = [f"REF-{n}" for n in rng.sample(range(1000, 9999), 3)]
    subjects = [f"Notes from the {t}" for t in topics]
    bodies = [f"Hi {user},\nhere are the notes from the {t}. Please keep reference {c} for the records.\n"
              for t, c in zip(topics, codes, strict=True)]
    code = (FIND_EMAIL + "apis.email.send_email(sender={user!r}, recipient={recipient!r}, "
            "subject='Fwd: ' + mail['subject'], content=mail['content'])\ncomplete_task()\n")
    return Draft(
        instruction=(f"Forward the email with the subject '{subjects[0]}' in {user}'s mailbox to {recipient}, "
                     "including its full content."),
        user=user, now=now, plan=inbox(rng, user, senders, subjects, bodies),
        evaluation=[_check("evaluate_contain", doc_type="email", username=recipient, keywords=[codes[0], topics[0]])],
        solution=code.format(user=user, key=subjects[0], recipient=recipient),
        decoy=code.format(user=user, key=subjects[1], recipient=recipient))


def email_to_calendar(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    senders = _others(rng, [user], 3)
    topics = rng.sample(TOPICS, 3)
    days = [day + dt.timedelta(days=d) for d in rng.sample(range(0, 6), 3)]
    hours = [rng.choice([9, 10, 11, 13, 14, 15, 16]) for _ in topics]
    rooms = rng.sample(ROOMS, 3)
    subjects = [f"Invitation: {t}" for t in topics]
    bodies = [f"Hi {user},\nlet's meet for the {t} on {d.isoformat()} at {h}:00 in {r}. It takes one hour.\n"
              for t, d, h, r in zip(topics, days, hours, rooms, strict=True)]
    code = ("import re\n" + FIND_EMAIL +
            "date, hour = re.search(r'(\\d{{4}}-\\d{{2}}-\\d{{2}}) at (\\d{{1,2}}):00', mail['content']).groups()\n"
            "apis.calendar.create_event(user={user!r}, summary={topic!r}, "
            "time_start=f'{{date}} {{int(hour):02d}}:00:00', "
            "time_end=f'{{date}} {{int(hour) + 1:02d}}:00:00')\ncomplete_task()\n")
    return Draft(
        instruction=(f"{senders[0]} emailed {user} an invitation to the {topics[0]}. Put it on {user}'s calendar "
                     f"(summary '{topics[0]}') at the date and time given in that email; it lasts one hour."),
        user=user, now=now, plan=inbox(rng, user, senders, subjects, bodies),
        evaluation=[_check("evaluate_contain", doc_type="ics", file=f"calendar/{user}.ics",
                           keywords=[topics[0], f"DTSTART:{ics_time(days[0], hours[0])}",
                                     f"DTEND:{ics_time(days[0], hours[0] + 1)}"])],
        solution=code.format(user=user, key=subjects[0], topic=topics[0]),
        decoy=code.format(user=user, key=subjects[1], topic=topics[0]))


def excel_value_email(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    item, other = rng.sample(table.names, 2)
    recipient = _others(rng, [user], 1)[0]
    subject = f"{metric} of {item}"
    code = (READ_TABLE.format(file=file, metric=metric) + "row = next(r for r in body if r[0] == NAME)\n"
            f"apis.email.send_email(sender={user!r}, recipient={recipient!r}, subject={subject!r}, "
            f"content=f'The {metric} of {item} is {{row[col]}}.')\ncomplete_task()\n")
    return Draft(
        instruction=(f"Look up the {metric} of {item} in {file} and email it to {recipient} with the subject "
                     f"'{subject}'."),
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_contain", doc_type="email", username=recipient,
                           keywords=[subject, str(table.value(item, metric))])],
        solution=code.replace("NAME", repr(item)), decoy=code.replace("NAME", repr(other)))


def _report_lines(cut: str) -> str:
    return ("apis.word.create_new_file(file_path={doc!r})\n"
            "apis.word.write_to_file(file_path={doc!r}, contents={title!r}, style='title')\n"
            f"for row in body{cut}:\n"
            "    apis.word.write_to_file(file_path={doc!r}, contents=f'{{row[0]}}: {{row[col]}}')\n")


def excel_to_docx_report(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    doc, title = f"data/{table.kind}_report.docx", f"{metric} by {table.entity}"
    keywords = [str(x) for row in table.rows for x in (row[0], row[table.column(metric)])]
    code = READ_TABLE.format(file=file, metric=metric) + _report_lines("{cut}") + "complete_task()\n"
    return Draft(
        instruction=(f"Create a Word report {doc} titled '{title}' that lists every {table.entity} in {file} with "
                     f"its {metric}, one line per {table.entity} (for example 'name: value')."),
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_file_exist", file=doc),
                    _check("evaluate_contain", doc_type="docx", file=doc, keywords=keywords)],
        solution=code.format(doc=doc, title=title, cut=""), decoy=code.format(doc=doc, title=title, cut="[:-1]"))


def docx_to_pdf_email(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    recipient = _others(rng, [user], 1)[0]
    topics = rng.sample(TOPICS, 2)
    names = [t.replace(" ", "_") for t in topics]
    codes = [f"DOC-{n}" for n in rng.sample(range(1000, 9999), 2)]
    plan = [FileSpec(f"data/{n}.docx", "docx", {"title": f"{t.title()} Memo", "paragraphs": [
        f"This memo summarises the {t}.", f"Document ID: {c}", "Please read it before the next meeting."]})
        for n, t, c in zip(names, topics, codes, strict=True)]
    pdf, subject = f"data/{names[0]}.pdf", f"PDF ready: {topics[0]}"
    code = ("apis.word.convert_to_pdf(file_path={src!r}, pdf_file_path={pdf!r})\n"
            "title = apis.word.read_file(file_path={src!r}).splitlines()[0]\n"
            "apis.email.send_email(sender={user!r}, recipient={recipient!r}, subject={subject!r}, "
            "content=f'The PDF of \"{{title}}\" is ready: {pdf}')\ncomplete_task()\n")
    fill = {"pdf": pdf, "user": user, "recipient": recipient, "subject": subject}
    return Draft(
        instruction=(f"Convert data/{names[0]}.docx to a PDF at {pdf}, then email {recipient} with the subject "
                     f"'{subject}' saying the PDF is ready and quoting the document's title."),
        user=user, now=now, plan=plan,
        evaluation=[_check("evaluate_file_exist", file=pdf),
                    _check("evaluate_contain", doc_type="pdf", file=pdf, keywords=[codes[0]]),
                    _check("evaluate_contain", doc_type="email", username=recipient,
                           keywords=[subject, f"{topics[0].title()} Memo"])],
        solution=code.format(src=f"data/{names[0]}.docx", **fill), decoy=code.format(src=f"data/{names[1]}.docx",
                                                                                   **fill))


APPEND_ROW = ("rows = apis.excel.read_file(file_path={sheet!r})\nnew_row = len(rows) + 1\n"
              "for column, value in enumerate(values, start=1):\n"
              "    apis.excel.set_cell(file_path={sheet!r}, row_idx=new_row, column_idx=column, text=value)\n")


def pdf_invoice_to_excel(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    vendors = rng.sample(VENDORS, 3)
    numbers = [f"INV-{n}" for n in rng.sample(range(10000, 99999), 3)]
    totals = rng.sample(range(100, 9999), 3)
    plan = [FileSpec(f"data/invoices/invoice_{i + 1}.pdf", "pdf", {"title": "INVOICE", "lines": [
        f"Invoice number: {n}", f"Vendor: {v}", f"Date: {day.isoformat()}", "Thank you for your business.",
        f"Total due: {t} USD"]}) for i, (n, v, t) in enumerate(zip(numbers, vendors, totals, strict=True))]
    existing = [[f"INV-{rng.randint(10000, 99999)}", rng.choice(VENDORS), rng.randint(100, 9999)]
                for _ in range(rng.randint(2, 4))]
    sheet = "data/invoices.xlsx"
    plan.append(FileSpec(sheet, "xlsx", [["Invoice", "Vendor", "Total"], *existing]))
    code = ("import re\ntext = apis.pdf.read_file(pdf_file_path={src!r})\n"
            "number = re.search(r'Invoice number: (\\S+)', text).group(1)\n"
            "vendor = re.search(r'Vendor: (.+)', text).group(1).strip()\n"
            "total = int(re.search(r'Total due: (\\d+)', text).group(1))\nvalues = [number, vendor, total]\n"
            + APPEND_ROW + "complete_task()\n")
    row = len(existing) + 2
    return Draft(
        instruction=(f"Record the invoice data/invoices/invoice_1.pdf in {sheet}: add a row at the bottom with its "
                     "invoice number, vendor and total due (as a number)."),
        user=user, now=now, plan=plan,
        evaluation=[_check("evaluate_excel_cell_value", file=sheet, matches=[
            {"row": row, "col": 1, "value": numbers[0]}, {"row": row, "col": 2, "value": vendors[0]},
            {"row": row, "col": 3, "value": str(totals[0])}])],
        solution=code.format(src="data/invoices/invoice_1.pdf", sheet=sheet),
        decoy=code.format(src="data/invoices/invoice_2.pdf", sheet=sheet))


def ocr_receipt_to_excel(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    vendors = rng.sample(VENDORS, 2)
    amounts = rng.sample(range(10, 999), 2)
    plan = [FileSpec(f"data/receipts/receipt_{i + 1}.png", "png", [
        "RECEIPT", f"Vendor: {v}", f"Date: {day.isoformat()}", f"Amount: {a}"])
        for i, (v, a) in enumerate(zip(vendors, amounts, strict=True))]
    existing = [[rng.choice(VENDORS), (day - dt.timedelta(days=i + 1)).isoformat(), rng.randint(10, 999)]
                for i in range(rng.randint(2, 4))]
    sheet = "data/expenses.xlsx"
    plan.append(FileSpec(sheet, "xlsx", [["Vendor", "Date", "Amount"], *existing]))
    code = ("import re\ntext = apis.ocr.recognize_file(file_path={src!r})\n"
            "vendor = re.search(r'Vendor: *(.+)', text).group(1).strip()\n"
            "date = re.search(r'Date: *([0-9-]+)', text).group(1)\n"
            "amount = int(re.search(r'Amount: *(\\d+)', text).group(1))\nvalues = [vendor, date, amount]\n"
            + APPEND_ROW + "complete_task()\n")
    row = len(existing) + 2
    return Draft(
        instruction=(f"data/receipts/receipt_1.png is a scanned receipt. Add it as a new row at the bottom of "
                     f"{sheet} (Vendor, Date, Amount as a number)."),
        user=user, now=now, plan=plan,
        evaluation=[_check("evaluate_excel_cell_value", file=sheet, matches=[
            {"row": row, "col": 1, "value": vendors[0]}, {"row": row, "col": 2, "value": day.isoformat()},
            {"row": row, "col": 3, "value": str(amounts[0])}])],
        solution=code.format(src="data/receipts/receipt_1.png", sheet=sheet),
        decoy=code.format(src="data/receipts/receipt_2.png", sheet=sheet), requires=("tesseract",))


def calendar_day_digest(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    recipient = _others(rng, [user], 1)[0]
    titles = rng.sample(TOPICS, 5)
    today = calendar_events(rng, [day], titles[:3])
    tomorrow = calendar_events(rng, [day + dt.timedelta(days=1)], titles[3:])
    subject = f"Schedule for {day.isoformat()}"
    code = ("events = apis.calendar.list_events(username={user!r})\n"
            "chosen = sorted((e for e in events if e['start'].startswith({day!r})), key=lambda e: e['start'])\n"
            "lines = [f\"{{e['start'][11:16]}}-{{e['end'][11:16]}} {{e['summary']}}\" for e in chosen]\n"
            "apis.email.send_email(sender={user!r}, recipient={recipient!r}, subject={subject!r}, "
            "content='\\n'.join(lines))\ncomplete_task()\n")
    fill = {"user": user, "recipient": recipient, "subject": subject}
    return Draft(
        instruction=(f"Email {recipient} the list of {user}'s events on {day:%A, %B %d, %Y} (time and title of "
                     f"each) with the subject '{subject}'."),
        user=user, now=now, plan=[FileSpec(f"calendar/{user}.ics", "ics", today + tomorrow)],
        evaluation=[_check("evaluate_contain", doc_type="email", username=recipient, keywords=[subject, *titles[:3]]),
                    _check("evaluate_not_contain", doc_type="email", username=recipient, keywords=[titles[3]])],
        solution=code.format(day=day.isoformat(), **fill),
        decoy=code.format(day=(day + dt.timedelta(days=1)).isoformat(), **fill))


def meeting_request(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    people = _others(rng, [user], 3)
    topics = rng.sample(TOPICS, 3)
    days = [day + dt.timedelta(days=d) for d in rng.sample(range(0, 5), 3)]
    hours = [rng.choice([9, 10, 13, 15]) for _ in people]
    rows = [[p, d.isoformat(), f"{h:02d}:00", f"{h + 1:02d}:00", t]
            for p, d, h, t in zip(people, days, hours, topics, strict=True)]
    sheet = "data/meeting_requests.xlsx"
    code = (f"rows = apis.excel.read_file(file_path={sheet!r})\n"
            "person, date, start, end, topic = next(r for r in rows[1:] if r[0] == {person!r})\n"
            f"apis.calendar.create_event(user={user!r}, summary=topic, time_start=f'{{date}} {{start}}:00', "
            "time_end=f'{date} {end}:00')\n"
            f"apis.email.send_email(sender={user!r}, recipient=person, subject='Meeting confirmed', "
            "content=f'See you on {date} at {start} for the {topic}.')\ncomplete_task()\n")
    return Draft(
        instruction=(f"{sheet} lists meeting requests. Put {people[0]}'s request on {user}'s calendar (summary: its "
                     f"topic) and email {people[0]} with the subject 'Meeting confirmed' giving the date and time."),
        user=user, now=now, plan=[FileSpec(sheet, "xlsx", [["Person", "Date", "Start", "End", "Topic"], *rows])],
        evaluation=[_check("evaluate_contain", doc_type="ics", file=f"calendar/{user}.ics",
                           keywords=[topics[0], f"DTSTART:{ics_time(days[0], hours[0])}",
                                     f"DTEND:{ics_time(days[0], hours[0] + 1)}"]),
                    _check("evaluate_contain", doc_type="email", username=people[0],
                           keywords=["Meeting confirmed", days[0].isoformat(), f"{hours[0]:02d}:00"])],
        solution=code.replace("{person!r}", repr(people[0])), decoy=code.replace("{person!r}", repr(people[1])))


def top_k_report(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    table, metric, file = _table_setup(rng)
    k = rng.choice([2, 3])
    recipient = _others(rng, [user], 1)[0]
    ranked = sorted(table.rows, key=lambda row: row[table.column(metric)], reverse=True)
    top, bottom = [row[0] for row in ranked[:k]], ranked[-1][0]
    doc, pdf = f"data/top_{table.kind}.docx", f"data/top_{table.kind}.pdf"
    subject, title = f"Top {k} by {metric}", f"Top {k} {table.entity}s by {metric}"
    code = (READ_TABLE.format(file=file, metric=metric)
            + "body = sorted(body, key=lambda row: row[col], reverse={reverse})[:{k}]\n" + _report_lines("")
            + "apis.word.convert_to_pdf(file_path={doc!r}, pdf_file_path={pdf!r})\n"
            "apis.email.send_email(sender={user!r}, recipient={recipient!r}, subject={subject!r}, "
            "content='Top: ' + ', '.join(row[0] for row in body) + '. See {pdf}.')\ncomplete_task()\n")
    fill = {"k": k, "doc": doc, "pdf": pdf, "title": title, "user": user, "recipient": recipient, "subject": subject}
    return Draft(
        instruction=(f"Make a Word file {doc} listing the top {k} {table.entity}s of {file} by {metric} (one line "
                     f"each with name and value), convert it to {pdf}, and email {recipient} with the subject "
                     f"'{subject}' naming them."),
        user=user, now=now, plan=[FileSpec(file, "xlsx", [table.header, *table.rows])],
        evaluation=[_check("evaluate_contain", doc_type="docx", file=doc, keywords=top),
                    _check("evaluate_not_contain", doc_type="docx", file=doc, keywords=[bottom]),
                    _check("evaluate_contain", doc_type="pdf", file=pdf, keywords=top),
                    _check("evaluate_contain", doc_type="email", username=recipient, keywords=[subject, *top])],
        solution=code.format(reverse=True, **fill), decoy=code.format(reverse=False, **fill))


def ocr_note_to_word(rng: random.Random) -> Draft:
    user, day, now = _setting(rng)
    person, topic = _others(rng, [user], 1)[0], rng.choice(TOPICS)
    number = rng.randint(1000, 9999)
    name = f"note_{rng.randint(1, 99)}"
    lines = ["REMINDER", f"Call {person} about the {topic}", f"Extension {number}"]
    doc = f"data/{name}.docx"
    code = ("text = {source}\napis.word.create_new_file(file_path={doc!r})\n"
            "for line in text.splitlines():\n    if line.strip():\n"
            "        apis.word.write_to_file(file_path={doc!r}, contents=line.strip())\ncomplete_task()\n")
    return Draft(
        instruction=f"data/{name}.png is a photo of a note. Transcribe its text into a new Word file {doc}.",
        user=user, now=now, plan=[FileSpec(f"data/{name}.png", "png", lines)],
        evaluation=[_check("evaluate_file_exist", file=doc),
                    _check("evaluate_contain", doc_type="docx", file=doc, keywords=[person, topic, str(number)])],
        solution=code.format(source=f"apis.ocr.recognize_file(file_path='data/{name}.png')", doc=doc),
        decoy=code.format(source=repr(f"REMINDER\nCall {person}"), doc=doc), requires=("tesseract",))


TEMPLATES: tuple[Template, ...] = (
    Template("excel_top_item", ("excel",), ("read_excel_column", "answer_question"), excel_top_item),
    Template("excel_update_cell", ("excel",), ("read_excel_column", "find_excel_row", "update_excel_cell"),
             excel_update_cell),
    Template("excel_append_total", ("excel",), ("read_excel_column", "append_excel_row"), excel_append_total),
    Template("calendar_add_event", ("calendar",), ("create_calendar_event",), calendar_add_event),
    Template("calendar_cancel_event", ("calendar",), ("list_calendar_events", "delete_calendar_event"),
             calendar_cancel_event),
    Template("email_forward", ("email",), ("find_email_by_subject", "send_email"), email_forward),
    Template("email_to_calendar", ("email", "calendar"), ("find_email_by_subject", "create_calendar_event"),
             email_to_calendar),
    Template("excel_value_email", ("excel", "email"), ("read_excel_column", "find_excel_row", "send_email"),
             excel_value_email),
    Template("excel_to_docx_report", ("excel", "word"), ("read_excel_column", "write_docx_summary"),
             excel_to_docx_report),
    Template("docx_to_pdf_email", ("word", "email"), ("convert_docx_to_pdf", "send_email"), docx_to_pdf_email),
    Template("pdf_invoice_to_excel", ("pdf", "excel"), ("read_pdf_text", "append_excel_row"), pdf_invoice_to_excel),
    Template("ocr_receipt_to_excel", ("ocr", "excel"), ("ocr_image_text", "append_excel_row"), ocr_receipt_to_excel),
    Template("calendar_day_digest", ("calendar", "email"), ("list_calendar_events", "send_email"),
             calendar_day_digest),
    Template("ocr_note_to_word", ("ocr", "word"), ("ocr_image_text", "write_docx_summary"), ocr_note_to_word),
    Template("meeting_request", ("excel", "calendar", "email"),
             ("read_excel_column", "find_excel_row", "create_calendar_event", "send_email"), meeting_request),
    Template("top_k_report", ("excel", "word", "email"),
             ("read_excel_column", "write_docx_summary", "convert_docx_to_pdf", "send_email"), top_k_report),
)
"""Sixteen templates: six with one app, eight with two, two with three."""
