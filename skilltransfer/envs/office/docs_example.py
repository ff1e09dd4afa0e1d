# ruff: noqa: E501 (the examples' observations are API outputs, printed verbatim on one line)
"""The office env's worked examples of API use: one per app, the task's app's example ends its docs.

Each is in the format of ``skilltransfer.agents.harness.worked_example`` (the executor replays it as earlier chat turns),
with ``Report:`` lines closing its first and second subtasks, followed by its plan (``## Example plan``: the planner's subtasks
for the same task, shown to the planner only; after the first, they say what to do in terms of "the task", since the
1.5B planner copies an example plan, substituting names), and
on a task type that no generated template asks: empty a spreadsheet cell (excel), move an event (calendar), name an
email's sender (email). An episode's docs end with the example of the first of the task's apps that has one (a small
model copies the example's API calls, so an excel example on a calendar task does harm). Each example's
``prepare`` writes the files its observations were printed from; a test replays every code block on them and
compares each observation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.envs.office.office_tools import files


@dataclass(frozen=True)
class Example:
    """A worked example and the testbed it was printed from."""

    text: str
    plan: str
    prepare: Callable[[Path], None]
    username: str


def _todo_workbook(workspace: Path) -> None:
    files.write_xlsx(workspace / "data/todo.xlsx", [["Task", "Due", "Note"], ["pay rent", "2024-05-01", "by card"],
                                                    ["buy milk", "2024-05-02", "skim"]])


def _ivy_calendar(workspace: Path) -> None:
    calendar, stamp = files.new_calendar(), dt.datetime(2024, 5, 1, 9)
    for k, (summary, day, hour, room) in enumerate((("team lunch", 2, 12, None), ("budget review", 3, 10, "Room 2"))):
        calendar.add_component(files.make_event(summary, dt.datetime(2024, 5, day, hour),
                                                dt.datetime(2024, 5, day, hour + 1), stamp, uid=f"example-{k}",
                                                location=room))
    files.write_calendar(workspace / "calendar/Ivy.ics", calendar)


def _bob_mailbox(workspace: Path) -> None:
    folder = workspace / "emails/Bob"
    folder.mkdir(parents=True, exist_ok=True)
    mails = (("carol@example.com", "Lunch on Friday?", "Shall we try the new place on Main Street?"),
             ("dave@example.com", "Quarterly numbers", "Hi Bob, the Q1 sheet is ready. Please review it by Monday."))
    for k, (sender, subject, content) in enumerate(mails, start=1):
        files.write_bytes(folder / f"{k}.eml", files.make_email(sender, "bob@example.com", subject, content,
                                                                dt.datetime(2024, 5, k, 8)))


EXCEL = '''## Example (another task): "In data/todo.xlsx, clear the Note of the task 'buy milk'."
Thought: I read the sheet first to see its header and rows.
```python
rows = apis.excel.read_file('data/todo.xlsx')
print(rows)
```
Observation: [['Task', 'Due', 'Note'], ['pay rent', '2024-05-01', 'by card'], ['buy milk', '2024-05-02', 'skim']]
Report: data/todo.xlsx rows: [['Task', 'Due', 'Note'], ['pay rent', '2024-05-01', 'by card'], ['buy milk', '2024-05-02', 'skim']]
Thought: Sheet rows and columns are 1-based, so I take the list positions plus one, empty that cell and read it back.
```python
row_idx = [row[0] for row in rows].index('buy milk') + 1
col_idx = rows[0].index('Note') + 1
print(apis.excel.delete_cell('data/todo.xlsx', row_idx, col_idx))
print(apis.excel.read_file('data/todo.xlsx')[row_idx - 1])
```
Observation: Emptied cell (3, 3) of data/todo.xlsx (column 'Note', was 'skim').
['buy milk', '2024-05-02', None]
Report: emptied the Note of 'buy milk' (cell (3, 3) of data/todo.xlsx); its row is now ['buy milk', '2024-05-02', None].
Thought: The Note of 'buy milk' is now empty, so the task is finished.
```python
complete_task()
```
Observation: Task marked as complete.
'''

CALENDAR = '''## Example (another task): "Move Ivy's 'budget review' one hour later."
Thought: I list Ivy's events to find the 'budget review' and its times.
```python
events = apis.calendar.list_events(username)
print(events)
```
Observation: [{'summary': 'team lunch', 'start': '2024-05-02 12:00:00', 'end': '2024-05-02 13:00:00', 'location': None, 'description': None}, {'summary': 'budget review', 'start': '2024-05-03 10:00:00', 'end': '2024-05-03 11:00:00', 'location': 'Room 2', 'description': None}]
Report: 'budget review' is on 2024-05-03 from 10:00:00 to 11:00:00 in Room 2.
Thought: It runs 10:00-11:00 on 2024-05-03 in Room 2. There is no move API, so I delete it and create it again at 11:00-12:00 in the same room.
```python
print(apis.calendar.delete_event(username, 'budget review'))
print(apis.calendar.create_event(username, 'budget review', '2024-05-03 11:00:00', '2024-05-03 12:00:00', location='Room 2'))
print([e for e in apis.calendar.list_events(username) if e['summary'] == 'budget review'])
```
Observation: Deleted event 'budget review' from Ivy's calendar.
Created event 'budget review' in Ivy's calendar.
[{'summary': 'budget review', 'start': '2024-05-03 11:00:00', 'end': '2024-05-03 12:00:00', 'location': 'Room 2', 'description': None}]
Report: deleted 'budget review' and created it again in Room 2: it now runs from 2024-05-03 11:00:00 to 12:00:00.
Thought: The event now starts at 11:00, so the task is finished.
```python
complete_task()
```
Observation: Task marked as complete.
'''

EMAIL = '''## Example (another task): "Who sent Bob the email 'Quarterly numbers'?"
Thought: I list Bob's emails to find the one with that subject.
```python
emails = apis.email.list_emails(username)
print(emails)
```
Observation: [{'email_id': '1.eml', 'from': 'carol@example.com', 'to': 'bob@example.com', 'subject': 'Lunch on Friday?', 'preview': 'Shall we try the new place on Main Street?'}, {'email_id': '2.eml', 'from': 'dave@example.com', 'to': 'bob@example.com', 'subject': 'Quarterly numbers', 'preview': 'Hi Bob, the Q1 sheet is ready. Please review it by Monday.'}]
Report: the email 'Quarterly numbers' has email_id '2.eml'.
Thought: Its email_id is '2.eml'. I read it to see the sender and the full content.
```python
email = apis.email.read_email(username, '2.eml')
print(email)
```
Observation: {'email_id': '2.eml', 'from': 'dave@example.com', 'to': 'bob@example.com', 'subject': 'Quarterly numbers', 'date': 'Thu, 02 May 2024 08:00:00 +0000', 'content': 'Hi Bob, the Q1 sheet is ready. Please review it by Monday.\\r\\n'}
Report: the email '2.eml' ('Quarterly numbers') was sent by dave@example.com.
Thought: It was sent by dave@example.com, which is the answer.
```python
complete_task(answer='dave@example.com')
```
Observation: Task marked as complete.
'''

EXCEL_PLAN = """## Example plan (another task): "In data/todo.xlsx, clear the Note of the task 'buy milk'."
SUBTASK: Read data/todo.xlsx with apis.excel.read_file and print its rows.
SUBTASK: In those rows, find the row and the column the task is about, then make the change or find the value the \
task asks for with the apis.excel API that does it (rows and columns are 1-based), and read the sheet back to check it.
SUBTASK: call complete_task() (or complete_task(answer=<the value printed>) if the task asks a question)
"""

CALENDAR_PLAN = """## Example plan (another task): "Move Ivy's 'budget review' one hour later."
SUBTASK: List Ivy's events with apis.calendar.list_events(username) and print the start and end of 'budget review'.
SUBTASK: Make the change the task asks for to that event with the apis.calendar API that does it, then list Ivy's \
events to check it.
SUBTASK: call complete_task()
"""

EMAIL_PLAN = """## Example plan (another task): "Who sent Bob the email 'Quarterly numbers'?"
SUBTASK: List Bob's emails with apis.email.list_emails(username) and print the email_id of the one with the subject \
'Quarterly numbers'.
SUBTASK: Read that email with apis.email.read_email(username, <its email_id>), then do what the task asks with it: \
print the value it asks for, or send what it asks with the apis.email API that does it.
SUBTASK: call complete_task(answer=<the value printed>) (or complete_task() if the task asks no question)
"""

EXAMPLES: dict[str, Example] = {
    "excel": Example(EXCEL, EXCEL_PLAN, _todo_workbook, "Alice"),
    "calendar": Example(CALENDAR, CALENDAR_PLAN, _ivy_calendar, "Ivy"),
    "email": Example(EMAIL, EMAIL_PLAN, _bob_mailbox, "Bob"),
}


def example_for(apps: Sequence[str]) -> str | None:
    """The worked example of the first of ``apps`` that has one, followed by its plan (None if none has)."""
    example = next((EXAMPLES[app] for app in apps if app in EXAMPLES), None)
    return None if example is None else f"{example.text.rstrip()}\n\n{example.plan.rstrip()}"
