"""Cutting over-long text for contexts and displays."""

from __future__ import annotations


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
