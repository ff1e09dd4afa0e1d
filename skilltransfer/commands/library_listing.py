"""``library show LIBRARY``'s listing: one line per skill — number, name, level/format as the library gives them
(``unknown`` where it does not, as ``score`` says), the task it was induced from, and its description — fitted to the
terminal's width (``COLUMNS``): a description is cut where the line ends, with an ellipsis, never at a fixed length;
on a terminal too narrow to give it 20 characters beside the name it goes on a line of its own. Output that is not a
terminal (a pipe, a file) keeps every description whole."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from rich.cells import cell_len

from skilltransfer.metrics.scoring import declared
from skilltransfer.skill import Skill
from skilltransfer.util.counting import counted
from skilltransfer.util.text import terminal_safe

MIN_DESCRIPTION = 20
"""Fewer columns than this beside the name: the description goes on its own line."""
INDENT = 5
MAX_NAME_PAD = 40
"""Names are padded to the longest up to this many cells (a longer name pushes only its own line)."""


def terminal_width() -> int | None:
    """``COLUMNS`` when set, else the terminal's width when stdout is one, else None (no limit)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _cut(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` terminal cells with an ellipsis (None or enough room: whole)."""
    if width is None or cell_len(text) <= width:
        return text
    out, used = [], 0
    for char in text:
        size = cell_len(char)
        if used + size > width - 1:
            break
        out.append(char)
        used += size
    return "".join(out).rstrip() + "\u2026"


def kind(skill: Skill) -> str:
    """``level/format`` as the skill's source gives them, ``unknown`` for what it does not say."""
    return f"{declared(skill, 'level')}/{declared(skill, 'format')}"


def listing(skills: list[Skill], folder: Path, width: int | None = None) -> str:
    """The listing of ``skills`` (read from ``folder``) fitted to ``width`` columns (None: no limit)."""
    lines = [f"{counted(len(skills), 'skill')} in {terminal_safe(str(folder))} (--skill NAME prints one whole)"]
    names = [terminal_safe(skill.name) for skill in skills]
    name_width = min(max((cell_len(name) for name in names), default=0), MAX_NAME_PAD)
    kinds = [kind(skill) for skill in skills]
    kind_width = max((len(k) for k in kinds), default=0)
    for number, (skill, name, what) in enumerate(zip(skills, names, kinds, strict=True), start=1):
        source = skill.provenance.source_task_id
        origin = terminal_safe(f" from {source}") if source else ""
        head = (f"{number:>3}. {name}{' ' * max(0, name_width - cell_len(name))}  "
                f"{what if origin else what.ljust(kind_width)}{origin}")
        description = terminal_safe(" ".join(skill.description.split()))
        room = None if width is None else width - cell_len(head) - 2
        if room is None or room >= MIN_DESCRIPTION:
            lines.append(f"{head}  {_cut(description, room)}")
        else:
            lines.append(head)
            lines.append(" " * INDENT + _cut(description, None if width is None else max(1, width - INDENT)))
    return "\n".join(lines) + "\n"
