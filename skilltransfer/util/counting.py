"""Counts in words: ``1 skill``, ``2 skills``, ``10,000 skills``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1 (``plural``, default ``noun + "s"``); thousands grouped."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"
