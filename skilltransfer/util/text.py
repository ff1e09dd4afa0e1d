"""Cutting over-long text for contexts and displays; text from outside made safe where it is shown: on a terminal
(`terminal_safe`) and in a prompt (`as_plain_lines`, `fence_for`)."""

from __future__ import annotations

import re


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of a text longer than ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters truncated] ...\n{text[-half:]}"


_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_TERMINAL_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7f, *range(0x80, 0xa0)]
                     if code not in (0x09, 0x0a)}
_TERMINAL_ESCAPES.update({ord(c): f"\\u{ord(c):04x}" for c in _BIDI})


def terminal_safe(text: str) -> str:
    """``text`` with every control character a terminal would act on shown as an escape (``\\x1b``, ``\\x9b``,
    ``\\x07``, ``\\r``, ``\\u202e``...): untrusted text (an agent's output, a file name) printed to a terminal can then
    not write the clipboard (OSC 52), set the title, clear the screen or reorder what is shown. Newlines and tabs
    stay."""
    return text.translate(_TERMINAL_ESCAPES)


_OPENS_STRUCTURE = re.compile(r"^( {0,3})(#{1,6}(?=[ \t]|$)|`{3,}|~{3,}|(?:=+|-{2,})[ \t]*$)", re.MULTILINE)
"""A line that opens Markdown structure: an ATX heading, a code fence, a setext underline."""


def as_plain_lines(text: str) -> str:
    """``text`` with every line that would open Markdown structure of its own where it is put in a prompt (a
    heading, a code fence, a setext underline) escaped with a backslash, so it reads as the text it is."""
    return _OPENS_STRUCTURE.sub(r"\1\\\2", text)


def fence_for(text: str, info: str = "") -> str:
    """An opening code fence (with ``info``) that no line of ``text`` can close: a run of backticks longer than any
    in it, at least three (CommonMark closes a fence only with at least as many)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1) + info
