"""What a trajectory shows, and whether a claim is grounded in it: the readers the guards share (the outputs the agent
saw, the code that ran, whether a subtask asks for completion) and the checks of an answer, a report, a summary line
or a skill against them (no policy of their own: the guards in `completion`, `planning` and `memory` use them).

Is a submitted answer grounded? The parts of a literal ``complete_task`` answer that no output of the task shows.

A small model often submits a value it never saw: it searches a note, sees only the title, and answers
``complete_task(answer="1")``. The executor refuses such a submission once per task (``refuse_ungrounded_answer``),
with the parts that appear nowhere, before the code runs; likewise, twice per subtask, a ``SUBTASK DONE`` report
with a number that neither an output nor the task message shows (``missing_numbers``). Only literal answers are
checked (a string or number written in the code); an answer computed in code (``complete_task(answer=len(events))``)
is not. The check reads what the agent itself saw (its observations), never the task's expected answer.

A report that claims a change ("removed", "updated", "sent" ...) while no code of the task that ran without an error
called a function named for a change (``delete_event``, ``set_cell``, ``send_email``: its first word a change verb) is
refused too (``unmade_change``): a small model reports the write its plan asked for after only reading.

An induced skill that names an API the env does not document (``apis.excel.load_workbook``: app or API name not a
word of the docs) and that no code of its trajectory ran is not stored (``undocumented_apis``,
``AgentConfig.ground_skills``): the small inducer writes the API its prior expects, not the one the trajectory used.

The summarizer's new lines get the same two checks (``ungrounded_lines``, ``AgentConfig.ground_summary``): a line with
a number no output shows, or claiming a change no code made, is dropped from the running summary.

An answer's parts are its numbers and its words of three or more letters (lower-cased, a few function words left
out); a number is found when an output holds the same number (``45.2`` matches ``$45.20``; thousands separators
are ignored; zero-padded digits such as the ``00038`` of ``PL-00038`` are matched as text), a word when an output
holds that word.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from skilltransfer.log import ActionStep
from skilltransfer.util import pyast

# --------------------------------------------------------------------------------------------- trajectory readers
_ASKS_COMPLETION = re.compile(r"complete_task|\bsubmit|\b(?:complete|finish|end) the task", re.IGNORECASE)


def outputs_of(steps: Sequence[ActionStep]) -> list[str]:
    """The observations of ``steps`` that sent code (a reply without code has no output)."""
    return [s.observation for s in steps if s.action is not None]


def ran_code(steps: Sequence[ActionStep]) -> list[str]:
    """The code of ``steps`` that ran without an error (refused replies never ran)."""
    return [s.action for s in steps if s.action is not None and not s.error and s.refused is None]


def asks_completion(subtask: str) -> bool:
    """Whether a subtask's text asks for ``complete_task``, a submission or the end of the task."""
    return _ASKS_COMPLETION.search(subtask) is not None


# --------------------------------------------------------------------------------------------- grounding checks
_PART = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]{3,}")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_FUNCTION_WORDS = frozenset({"the", "and", "are", "was", "were", "has", "have", "its", "his", "her", "their", "for",
                             "with", "from", "that", "this", "answer", "not"})


def literal_answers(code: str) -> list[str]:
    """The literal answers (strings, numbers) that ``code`` passes to ``complete_task``, as text; [] when the code
    does not parse or passes none."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return []
    answers: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "complete_task"):
            continue
        values = [kw.value for kw in node.keywords if kw.arg == "answer"] + node.args[:1]
        for value in values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str | int | float) \
                    and not isinstance(value.value, bool):
                answers.append(str(value.value))
    return answers


def calls_complete_task(code: str) -> bool:
    """Whether ``code`` calls ``complete_task`` (by its name; code that does not parse: whether it names a call)."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(r"\bcomplete_task\s*\(", code) is not None
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "complete_task"
               for node in ast.walk(tree))


_CHANGE_CLAIM = re.compile(
    r"\b(?:created|deleted|removed|added|appended|updated|written|wrote|sent|forwarded|moved|renamed|edited|inserted|"
    r"changed|modified|saved|replaced|emptied|cleared|cancell?ed)\b", re.IGNORECASE)
CHANGE_VERBS = frozenset({"create", "delete", "remove", "add", "append", "set", "update", "write", "send", "forward",
                          "move", "rename", "edit", "insert", "save", "replace", "reply", "cancel", "clear", "empty",
                          "change", "modify", "post", "upload", "put", "mark", "new"})
"""First words of function names that change the world (``delete_event``, ``setCell`` -> ``set``)."""


def called_names(code: str) -> set[str]:
    """The names of the functions ``code`` calls (``apis.calendar.delete_event(...)`` -> ``delete_event``); by a
    pattern when the code does not parse."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", code))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                names.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
    return names


def _changes(name: str) -> bool:
    first = re.split(r"_|(?<=[a-z])(?=[A-Z])", name.strip("_"), maxsplit=1)[0].lower()
    return first in CHANGE_VERBS


def called_listing(codes: Iterable[str], ignore: frozenset[str] = frozenset({"print"})) -> str:
    """The functions ``codes`` call, sorted and comma-separated, less ``ignore`` ("nothing" when none is left)."""
    called = sorted({name for code in codes for name in called_names(code)} - ignore)
    return ", ".join(called) if called else "nothing"


def makes_change(codes: Iterable[str]) -> bool:
    """Whether any of ``codes`` calls a function named for a change (`CHANGE_VERBS`)."""
    return any(_changes(name) for code in codes for name in called_names(code))


def unmade_change(report: str, codes: Iterable[str]) -> str | None:
    """The change ``report`` claims ("removed"), when none of ``codes`` called a function named for a change; None
    when it claims none or one was called."""
    claim = _CHANGE_CLAIM.search(report)
    if claim is None or makes_change(codes):
        return None
    return claim.group(0)


_AMBIGUOUS_IN_INSTRUCTIONS = frozenset({"set", "clear", "empty", "post", "upload", "put", "mark", "new"})
"""Change verbs that an instruction also uses as a noun or adjective ("a data set", "the new place")."""
_CHANGE_REQUEST = re.compile(rf"\b(?:{'|'.join(sorted(CHANGE_VERBS - _AMBIGUOUS_IN_INSTRUCTIONS))})\b",
                             re.IGNORECASE)


def requested_change(instruction: str) -> str | None:
    """The first verb of ``instruction`` that asks for a change ("change", "Forward", "Remove"); None when it has
    none (a question: "Which product has the highest Units?")."""
    match = _CHANGE_REQUEST.search(instruction)
    return None if match is None else match.group(0).lower()


def _parts(text: str) -> list[str]:
    return [p for p in _PART.findall(_THOUSANDS.sub("", text.lower())) if p not in _FUNCTION_WORDS]


def _number(part: str) -> float | None:
    """The part's value; None for a word, and for zero-padded digits (``00038`` of ``PL-00038``: an id, matched as
    text)."""
    if not part[0].isdigit() or (len(part) > 1 and part[0] == "0" and part[1] != "."):
        return None
    return float(part)


def missing_numbers(report: str, outputs: Iterable[str]) -> list[str]:
    """The numbers of ``report`` (a ``SUBTASK DONE`` report: prose, so its words are not checked) that none of
    ``outputs`` holds, in report order."""
    return [part for part in missing_parts(report, outputs) if part[0].isdigit()]


def missing_parts(answer: str, outputs: Iterable[str]) -> list[str]:
    """The parts of ``answer`` (see the module docs) that none of ``outputs`` holds, in answer order."""
    seen = {p for text in outputs for p in _parts(text)}
    numbers = {n for n in map(_number, seen) if n is not None}
    missing: list[str] = []
    for part in dict.fromkeys(_parts(answer)):
        value = _number(part)
        found = part in seen if value is None else any(abs(value - n) < 1e-9 for n in numbers)
        if not found:
            missing.append(part)
    return missing


def ungrounded_lines(summary: str, previous: str, outputs: Sequence[str],
                     codes: Sequence[str]) -> tuple[str, list[str]]:
    """``summary`` without its new lines (those not in ``previous``) that hold a number none of ``outputs`` shows or
    claim a change none of ``codes`` made (``unmade_change``), and the dropped lines."""
    earlier = {line.strip() for line in previous.splitlines()}
    kept: list[str] = []
    dropped: list[str] = []
    for line in summary.splitlines():
        text = line.strip()
        fresh = bool(text) and text not in earlier
        if fresh and (missing_numbers(text, outputs) or unmade_change(text, codes) is not None):
            dropped.append(text)
        else:
            kept.append(line)
    return "\n".join(kept).strip(), dropped


_API_CALL = re.compile(r"\bapis\.(\w+)\.(\w+)")


def undocumented_apis(text: str, docs: str, codes: Sequence[str]) -> list[str]:
    """The ``apis.<app>.<api>`` names ``text`` (a skill) mentions whose app or API name is not a word of ``docs`` and
    that none of ``codes`` (code that ran without an error) names, in text order."""
    ran = {match.group(0) for code in codes for match in _API_CALL.finditer(code)}
    words = set(re.findall(r"\w+", docs))
    return [name for name in dict.fromkeys(m.group(0) for m in _API_CALL.finditer(text))
            if name not in ran and not set(name.split(".")[1:]) <= words]
