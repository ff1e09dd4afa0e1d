"""Cutting over-long text for contexts and displays."""

from __future__ import annotations


def truncate(text: str, limit: int) -> str:
    """Keep the head and tail of a text longer than ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters truncated] ...\n{text[-half:]}"
