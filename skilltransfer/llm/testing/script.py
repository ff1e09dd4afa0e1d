"""Scripted replies from a JSONL file: strings served in order, or match/reply rules (the ``scripted`` test double
and the mock server read their scripts here)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from skilltransfer.errors import InputError
from skilltransfer.protocols import Message
from skilltransfer.util.files import iter_jsonl


@dataclass(frozen=True)
class ReplyRule:
    """Answer ``reply`` when ``match`` (a regex) is found in the last message; ``match=None`` matches anything."""

    reply: str
    match: str | None = None


def load_replies(path: str | Path) -> list[str] | list[ReplyRule]:
    """Read scripted replies from JSONL: each line a JSON string or {"text": ...} (served in order), or rules
    {"match": REGEX, "reply": TEXT} (first rule matching the last message wins; omit "match" for a default).

    Raises:
        InputError: on a missing, unreadable or non-UTF-8 file, a file without replies, or a bad line
            (names the file and line).
    """
    path = Path(path)
    replies: list[str] = []
    rules: list[ReplyRule] = []
    for number, line in iter_jsonl(path, what="replies file"):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON ({exc.msg})", path=path, line=number) from None
        if isinstance(item, str):
            replies.append(item)
        elif isinstance(item, dict) and "reply" in item:
            if item.get("match") is not None:
                try:
                    re.compile(item["match"])
                except re.error as exc:
                    raise InputError(f"bad regex in 'match' ({exc})", path=path, line=number) from None
            rules.append(ReplyRule(str(item["reply"]), item.get("match")))
        elif isinstance(item, dict) and "text" in item:
            replies.append(str(item["text"]))
        else:
            raise InputError("expected a JSON string, {\"text\": ...} or {\"match\": ..., \"reply\": ...}",
                             path=path, line=number)
    if replies and rules:
        raise InputError("mixes ordered replies and match rules; use one kind per file", path=path)
    if not replies and not rules:
        raise InputError("replies file holds no replies (one JSON string or rule per line)", path=path)
    return rules or replies


def rules_to_fn(rules: Sequence[ReplyRule]) -> Callable[[list[Message]], str]:
    """A reply function answering with the first rule whose regex matches the last message (LookupError: none)."""
    compiled = [(re.compile(r.match) if r.match is not None else None, r.reply) for r in rules]

    def answer(messages: list[Message]) -> str:
        last = str(messages[-1].get("content") or "") if messages else ""
        for pattern, reply in compiled:
            if pattern is None or pattern.search(last):
                return reply
        raise LookupError(f"no reply rule matches the last message: {last[:80]!r}")

    return answer


def script_replies(path: str | Path) -> list[str] | Callable[[list[Message]], str]:
    """The replies of a script file: the list of ordered replies, or a function answering by the rules.

    Raises:
        InputError: see `load_replies`.
    """
    loaded = load_replies(path)
    rules = [rule for rule in loaded if isinstance(rule, ReplyRule)]
    return rules_to_fn(rules) if rules else [str(reply) for reply in loaded]
