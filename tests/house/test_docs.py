"""The documentation stays true to the command line: every ``skilltransfer ...`` line in the README and the docs site
names a command that exists, with options that command has; the README stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main

from skilltransfer.cli import app

ROOT = Path(__file__).resolve().parents[2]
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


WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def test_the_main_jobs_figures_in_the_readme_and_view_page_are_the_newest_measured_row():
    """The README's "Last measured" figures and the view page's screenshot caption say what the newest dated row of
    docs/results.md's main-job table measured (date, commit, solved, transfer events as `show` counts them)."""
    results = (ROOT / "docs" / "results.md").read_text().split("## The main job", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in results.splitlines()
            if line.startswith("| 20")]
    date, commit, _, _, solved, transfers = rows[0][:6]
    events = int(transfers.split()[0])
    readme = re.search(r"Last measured \(([^,]+), (\w+),[^)]*\): [^()]*?(\d+/\d+) solved, (\d+) transfer events",
                       (ROOT / "README.md").read_text().replace("\n", " "))
    assert readme is not None
    assert readme.groups() == (date, commit, solved, str(events))
    view = re.search(r"transfer graph \((\w+) events", (ROOT / "docs" / "commands" / "view.md").read_text())
    assert view is not None
    assert WORDS.get(view[1], view[1]) == events
