"""What ``score`` and ``library show`` put on a screen of any width and any library size: the columns the command was
asked for stay, columns that fit are not left out, the first 50 skills with a line saying how to see the rest, counts
in words, and the files saying what was scored against what."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from helpers_cli import main_cli

from skilltransfer.version import __version__

LONG_NAMES = {
    "schedule-team-meeting-from-email": "Read the meeting request email and create the calendar event for the team.",
    "web-artifacts-builder": "Build a web page artifact from a spec and save the HTML file.",
    "bob-quarterly-sales-report": "Sum the quarterly sales column of the Excel file and email the report to Bob.",
    "send-email-with-attachment": "Send an email with an attachment to a contact.",
    "sourdough-starter-care": "Feed a sourdough starter with flour and water and keep it warm.",
}
TASKS = ["Email the quarterly sales report to Bob as an attachment.", "Sum the Amount column in expenses.xlsx.",
         "Create a calendar event for the team meeting on Monday from the email.",
         "Write the totals into summary.docx and save it.", "Feed the starter before baking bread."]


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))


def write_library(folder: Path, skills: dict[str, str]) -> Path:
    for name, description in skills.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n1. Do it.\n")
    return folder


def write_tasks(path: Path, id_prefix: str = "t") -> Path:
    path.write_text("".join(json.dumps({"id": f"{id_prefix}{i}", "instruction": t}) + "\n"
                            for i, t in enumerate(TASKS)))
    return path


def run(args: list[str], columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = main_cli(args, monkeypatch, capsys)
    assert code == 0, err
    return out


def header(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.lstrip().startswith("rank")).split()


def test_domain_stays_at_80_columns(tmp_path: Path, monkeypatch, capsys):
    lib, tasks = write_library(tmp_path / "lib", LONG_NAMES), write_tasks(tmp_path / "tasks.jsonl")
    out = run(["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64"], 80, monkeypatch, capsys)
    assert "domain" in header(out)  # the summary's OFF / NULL counts name skills the table shows
    assert all(len(line) <= 80 for line in out.splitlines() if line.lstrip().startswith(("rank", "1 ", "2 ")))


def test_columns_that_fit_are_put_back(tmp_path: Path, monkeypatch, capsys):
    """Columns are left out from the least important, then each that fits again is put back: a long best-task id
    stays out while a narrower, less important column (level) comes back."""
    lib = write_library(tmp_path / "lib", LONG_NAMES)
    tasks = write_tasks(tmp_path / "tasks.jsonl", id_prefix="a-task-id-as-long-as-the-folder-paths-some-sets-use-")
    out = run(["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64"], 150, monkeypatch, capsys)
    shown = header(out)
    assert "task" not in shown  # best task: left out
    assert {"level", "nn", "cos", "domain"} <= set(shown)  # level (least important but one) put back
    note = next(line for line in out.splitlines() if line.startswith("left out at 150 columns"))
    left = [name.strip() for name in note.split(":", 1)[1].split("(")[0].split(",")]
    assert "best task" in left
    assert "level" not in left


def test_the_screen_shows_50_and_says_how_to_see_the_rest(tmp_path: Path, monkeypatch, capsys):
    skills = {f"skill-{i:02d}": f"Sum column {i} of the quarterly sales Excel file." for i in range(55)}
    lib, tasks = write_library(tmp_path / "lib", skills), write_tasks(tmp_path / "tasks.jsonl")
    args = ["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64"]
    out = run(args, 160, monkeypatch, capsys)
    rows = [line for line in out.splitlines() if re.match(r" *\d+  skill-", line)]
    assert len(rows) == 50
    assert "Skill ranking (50 of 55 skills)" in out
    assert "... 5 more skills not shown: --all prints every one, --top N the first N; --out FILE.csv" in out
    every = run([*args, "--all"], 160, monkeypatch, capsys)
    assert len([line for line in every.splitlines() if re.match(r" *\d+  skill-", line)]) == 55
    assert "not shown" not in every
    assert "53 more skills not shown" in run([*args, "--top", "2"], 160, monkeypatch, capsys)
    code, _, err = main_cli([*args, "--top", "2", "--all"], monkeypatch, capsys)
    assert code == 2
    assert "--top and --all" in err


def test_one_skill_is_one_skill_and_the_files_say_what_was_scored(tmp_path: Path, monkeypatch, capsys):
    lib = write_library(tmp_path / "lib", {"send-email-with-attachment": LONG_NAMES["send-email-with-attachment"]})
    tasks = write_tasks(tmp_path / "tasks.jsonl")
    out = run(["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(tmp_path / "r.json")],
              120, monkeypatch, capsys)
    flat = " ".join(out.split())
    assert "1 skills" not in flat
    assert "Skill ranking (1 of 1 skill)" in flat
    assert "1 skill x 5 tasks" in flat
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["library"], data["task_set"], data["toolkit_version"]) == (str(lib), str(tasks), __version__)
    assert data["embedder"].startswith("hash:")
    run(["score", str(lib), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(tmp_path / "r.csv")],
        120, monkeypatch, capsys)
    [row] = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert (row["library"], row["task_set"], row["toolkit_version"]) == (str(lib), str(tasks), __version__)


# --------------------------------------------------------------------------------------------- library show
LONG_DESCRIPTION = ("Read every sheet of the quarterly workbook, sum the sales column per region, chart the totals "
                    "and email them to the managers.")  # 126 characters


@pytest.mark.parametrize("columns", [60, 80, 200])
def test_library_show_follows_columns_and_says_unknown(tmp_path: Path, columns: int, monkeypatch, capsys):
    lib = write_library(tmp_path / "lib", {"quarterly-sales-digest": LONG_DESCRIPTION, **LONG_NAMES})
    out = run(["library", "show", str(lib)], columns, monkeypatch, capsys)
    lines = [line for line in out.splitlines()[1:] if line[:3].strip().isdigit() or line.startswith(" " * 5)]
    assert len(lines) >= 6
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    assert "unknown/unknown" in out  # what score calls unknown, not the skill model's task/text defaults
    assert "task/text" not in out
    if columns == 200:
        assert LONG_DESCRIPTION in out  # whole where it fits: no cut at a fixed 100 characters


def test_library_show_piped_keeps_descriptions_whole(tmp_path: Path, monkeypatch, capsys):
    lib = write_library(tmp_path / "lib", {"quarterly-sales-digest": LONG_DESCRIPTION})
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = main_cli(["library", "show", str(lib)], monkeypatch, capsys)
    assert code == 0
    assert LONG_DESCRIPTION in out
    code, one, _ = main_cli(["library", "show", str(lib), "--skill", "quarterly-sales-digest"], monkeypatch, capsys)
    assert "level unknown, format unknown" in one
