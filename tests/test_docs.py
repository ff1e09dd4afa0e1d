"""The documentation stays true to the command line: every ``skilltransfer ...`` line in the README and the docs site
names a command that exists, with options that command has; the README stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from skilltransfer.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.DOTALL)


def _command_lines(page: Path) -> list[str]:
    """Each ``skilltransfer`` invocation in the page's shell blocks (continuation lines joined, comments dropped)."""
    lines = []
    for block in _BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|;", line.split(" #")[0]):
                part = part.strip()
                if part.startswith("skilltransfer "):
                    lines.append(part)
    return lines


def _resolve(words: list[str]) -> tuple[object, list[str]]:
    """The click command a command line names, and the words after its name."""
    command = typer.main.get_command(app)
    rest = words[1:]
    while rest and hasattr(command, "commands") and rest[0] in command.commands:  # type: ignore[attr-defined]
        command = command.commands[rest[0]]  # type: ignore[attr-defined]
        rest = rest[1:]
    return command, rest


CASES = [(page, line) for page in PAGES for line in _command_lines(page)]


def test_the_docs_show_commands():
    assert len(CASES) >= 20


@pytest.mark.parametrize(("page", "line"), CASES, ids=[f"{p.relative_to(ROOT)}:{i}" for i, (p, _) in enumerate(CASES)])
def test_every_documented_command_line_names_real_options(page: Path, line: str):
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    command, rest = _resolve(words)
    assert not hasattr(command, "commands"), f"{page.name}: `{line}` names no command of {words[1]!r}"
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}  # type: ignore[attr-defined]
    used = {word.split("=")[0] for word in rest if word.startswith("-") and word not in ("-", "--")}
    assert used <= known, f"{page.relative_to(ROOT)}: `{line}` uses {sorted(used - known)}; options: {sorted(known)}"


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
