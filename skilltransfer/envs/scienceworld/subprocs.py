"""Sub-procedures of a ScienceWorld task, derived from its gold action sequence.

Each gold action is parsed into a verb and its objects (``move OBJ to OBJ``, ``use OBJ on OBJ``, ...); an object
phrase is reduced to its head (``substance in metal pot`` -> ``substance``, ``cup containing water`` -> ``cup``,
``thermometer in inventory`` -> ``thermometer``). An object keeps its name in the label only when it is *shared*:
it occurs in the gold paths of at least ``SHARED_MIN_TYPES`` task types (rooms, devices, tools: ``kitchen``,
``stove``, ``thermometer``, ``metal pot``); any other object (the variation's own substance, animal or plant) becomes
``object``. The labels are snake_case (``go_to_kitchen``, ``pick_up_thermometer``, ``activate_stove``,
``use_thermometer_on_object``, ``focus_on_object``), kept once each in order of first use; consecutive moves count as
one move to the last place. Looking (``look around``,
``look at``, ``look in``, ``examine``), ``inventory``, ``task``, ``wait1``, answering a disambiguation prompt and
``open door to X`` (part of going to X) carry no label.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

SHARED_MIN_TYPES = 3
"""An object name is kept in labels when the gold paths of at least this many task types use it."""

_TWO = [  # (pattern, verb, joiner): verb OBJ joiner OBJ
    (re.compile(r"^move (.+?) to (.+)$"), "move", "to"),
    (re.compile(r"^pour (.+) into (.+)$"), "pour", "into"),
    (re.compile(r"^pour (.+?) in (.+)$"), "pour", "into"),
    (re.compile(r"^dunk (.+) into (.+)$"), "dunk", "into"),
    (re.compile(r"^dunk (.+?) in (.+)$"), "dunk", "into"),
    (re.compile(r"^use (.+?) on (.+)$"), "use", "on"),
    (re.compile(r"^connect (.+?) to (.+)$"), "connect", "to"),
]
_ONE = [  # (prefix, verb)
    ("go to ", "go_to"), ("pick up ", "pick_up"), ("put down ", "put_down"), ("focus on ", "focus_on"),
    ("activate ", "activate"), ("deactivate ", "deactivate"), ("disconnect ", "disconnect"), ("open ", "open"),
    ("close ", "close"), ("read ", "read"), ("mix ", "mix"), ("eat ", "eat"), ("flush ", "flush"), ("use ", "use"),
]
_SILENT = ("look around", "look at ", "look in ", "examine ", "inventory", "task", "wait1")
_CONNECT_PART = re.compile(r"\s+(?:terminal \d+|anode|cathode)$")


def head(phrase: str) -> str:
    """The object an object phrase names: without its location (``in X``), contents (``containing X``) or an
    electrical terminal (``anode``, ``cathode``, ``terminal 1``)."""
    phrase = phrase.strip().lower()
    phrase = re.split(r" containing | in ", phrase, maxsplit=1)[0]
    return _CONNECT_PART.sub("", phrase).strip()


def parse(action: str) -> tuple[str, tuple[str, ...]] | None:
    """An action's verb and object heads, or None for actions that carry no sub-procedure."""
    action = " ".join(action.lower().split())
    if not action or action.isdigit() or action.startswith(_SILENT) or action == "look around":
        return None
    if action == "wait" or action.startswith("wait "):
        return "wait", ()
    if action.startswith("open door to ") or action.startswith("close door to "):
        return None
    for pattern, verb, _ in _TWO:
        match = pattern.match(action)
        if match:
            return verb, (head(match.group(1)), head(match.group(2)))
    for prefix, verb in _ONE:
        if action.startswith(prefix):
            return verb, (head(action[len(prefix):]),)
    return None


def shared_objects(gold_by_type: Mapping[str, Iterable[Sequence[str]]], min_types: int = SHARED_MIN_TYPES) -> set[str]:
    """Object heads that occur in the gold paths of at least ``min_types`` task types."""
    types_of: dict[str, set[str]] = defaultdict(set)
    for task_type, paths in gold_by_type.items():
        for path in paths:
            for action in path:
                parsed = parse(action)
                if parsed:
                    for obj in parsed[1]:
                        types_of[obj].add(task_type)
    return {obj for obj, types in types_of.items() if len(types) >= min_types}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def label(verb: str, objects: tuple[str, ...], shared: set[str]) -> str:
    """The snake_case sub-procedure label of one parsed action."""
    names = [obj if obj in shared else "object" for obj in objects]
    joiner = next((j for _, v, j in _TWO if v == verb), "")
    if len(names) == 2:
        return _slug(f"{verb} {names[0]} {joiner} {names[1]}")
    return _slug(" ".join([verb, *names]))


def subprocedures(gold: Sequence[str], shared: set[str]) -> list[str]:
    """The labels of a gold action sequence, each once, in order of first use. A run of moves (``go to`` one place
    after another, with only unlabelled actions between) counts as going to its last place: the hallway passed on
    the way to the kitchen is no sub-procedure of its own."""
    seen: dict[str, None] = {}
    pending: str | None = None
    for action in gold:
        parsed = parse(action)
        if parsed is None:
            continue
        if parsed[0] == "go_to":
            pending = label(*parsed, shared)
            continue
        if pending is not None:
            seen.setdefault(pending, None)
            pending = None
        seen.setdefault(label(*parsed, shared), None)
    if pending is not None:
        seen.setdefault(pending, None)
    return list(seen)
