"""``score`` gives one answer: one ranking on screen, in JSON and in CSV; names never split at 80 columns; retrieval
counts (nearest skill, top-k) and best-matching task; unknown level/format; every JSON key documented."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_cli import main_cli

from skilltransfer.metrics.retrieval import retrieval_counts
from skilltransfer.metrics.scoring import score_library
from skilltransfer.skill import Skill

REPO = Path(__file__).resolve().parents[2]
LONG_NAMES = {  # kebab-case names as the public libraries write them, with descriptions sharing words with the tasks
    "schedule-team-meeting-from-email": "Read the meeting request email and create the calendar event for the team.",
    "web-artifacts-builder": "Build a web page artifact from a spec and save the HTML file.",
    "bob-quarterly-sales-report": "Sum the quarterly sales column of the Excel file and email the report to Bob.",
    "send-email-with-attachment": "Send an email with an attachment to a contact.",
    "export-contacts-to-excel": "Export the contacts to an Excel file with one row per contact.",
    "sourdough-starter-care": "Feed a sourdough starter with flour and water and keep it warm.",
}
TASKS = ["Email the quarterly sales report to Bob as an attachment.", "Sum the Amount column in expenses.xlsx.",
         "Create a calendar event for the team meeting on Monday from the email.",
         "Export all contacts to contacts.xlsx.", "Write the totals into summary.docx and save it.",
         "Build a web page listing the contacts and save it as contacts.html."]


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))


def write_library(folder: Path, skills: dict[str, str], extra: str = "") -> Path:
    for name, description in skills.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n"
                                                "1. Do it.\n")
    return folder


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return write_library(tmp_path / "lib", LONG_NAMES)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{i}", "instruction": t}) + "\n" for i, t in enumerate(TASKS)))
    return path


def score_cli(args: list[str], columns: int, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = main_cli(["score", *args], monkeypatch, capsys)
    assert code == 0, err
    return out


def screen_order(out: str, names: list[str]) -> list[str]:
    """The skill names in the order the table's rows show them (a row: rank, then the name)."""
    rows = [re.match(r"\s*(\d+)\.?\s+(\S+)", line) for line in out.splitlines()]
    return [m.group(2) for m in rows if m is not None and m.group(2) in names]


@pytest.mark.parametrize("rank", ["relevance", "utility"])
@pytest.mark.parametrize("specificity", ["pairs", "knn"])
def test_one_order_on_screen_in_json_and_csv(rank: str, specificity: str, library: Path, tasks: Path,
                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    base = [str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--rank", rank, "--specificity",
            specificity]
    out = score_cli([*base, "--out", str(tmp_path / "r.json")], 160, monkeypatch, capsys)
    score_cli([*base, "--out", str(tmp_path / "r.csv")], 160, monkeypatch, capsys)
    data = json.loads((tmp_path / "r.json").read_text())
    json_order = [row["name"] for row in data["skills"]]
    csv_rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert screen_order(out, list(LONG_NAMES)) == json_order == [row["name"] for row in csv_rows]
    assert [row["rank"] for row in csv_rows] == [str(n) for n in range(1, len(LONG_NAMES) + 1)]
    assert {row["ranked_by"] for row in csv_rows} == {rank}
    assert data["ranking"]["by"] == rank
    assert f"by {rank}:" in out.splitlines()[0]  # the header names the measure
    measure = [row[rank] for row in data["skills"]]
    if rank == "utility":
        assert measure == sorted(measure, reverse=True)
    else:  # inside the null last, then by relevance
        keys = [(row["null_off_domain"], -row["relevance"]) for row in data["skills"]]
        assert keys == sorted(keys)
    header = next(line for line in out.splitlines() if line.lstrip().startswith("rank"))
    utility_header = {"pairs": "pair utility", "knn": "knn utility"}[specificity]
    first, second = ("relevance", utility_header) if rank == "relevance" else (utility_header, "relevance")
    assert header.index(first) < header.index(second)  # the ranked measure is the first measure column


def test_80_columns_split_no_name_and_cut_no_header(library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64"], 80, monkeypatch, capsys)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert screen_order(out, list(LONG_NAMES))
    assert len(screen_order(out, list(LONG_NAMES))) == len(LONG_NAMES)
    header = next(line for line in lines if line.lstrip().startswith("rank"))
    assert header.split()[:4] == ["rank", "name", "relevance", "pair"]
    assert "\u2026" not in out  # no cut header or cell
    note = next(line for line in lines if line.startswith("left out at 80 columns:"))
    assert "specificity" in out[out.index(note):]  # the note names what the table leaves out
    wide = score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64"], 160, monkeypatch, capsys)
    assert "nn cos" in out  # crowding: each skill's nearest neighbour's cosine at 80 columns, and its name at 160
    assert "nearest skill" in wide
    assert all(len(line) <= 160 for line in wide.splitlines())
    wide = score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64"], 200, monkeypatch, capsys)
    assert "left out" not in wide
    assert all(len(line) <= 200 for line in wide.splitlines())


def test_a_name_too_long_for_any_table_gets_its_own_line(tmp_path: Path, tasks: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    name = "-".join(["extract-the-quarterly-totals-from-every-sheet"] * 2)[:64].rstrip("-")
    lib = write_library(tmp_path / "lib", {name: "Sum the quarterly sales column.", "sum-column": "Sum a column."})
    out = score_cli([str(lib), "--tasks", str(tasks), "--embedder", "hash:64"], 60, monkeypatch, capsys)
    assert any(line.endswith(name) and line.lstrip().split(". ", 1)[1] == name for line in out.splitlines())
    assert "relevance " in out  # the values line names each value
    assert sorted(screen_order(out, [name, "sum-column"])) == sorted([name, "sum-column"])
    assert all(len(line) <= 60 for line in out.splitlines() if name not in line)


class FixedEmbedder:
    """A test double: each known text has a fixed vector; any other text (the null texts) points elsewhere."""

    id = "fixed:4"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors.get(text, [0.0, 0.0, 0.0, 1.0]) for text in texts], dtype=np.float32)


SKILL_VECS = {"alpha": [1, 0, 0, 0], "beta": [0, 1, 0, 0], "gamma": [0.6, 0.8, 0, 0]}
TASK_VECS = {"t1": [1, 0, 0, 0], "t2": [0, 1, 0, 0], "t3": [0.8, 0.6, 0, 0], "t4": [0, 0, 1, 0]}
# cosines      alpha beta gamma
#   t1          1    0    .6    nearest alpha; top-2 alpha, gamma
#   t2          0    1    .8    nearest beta;  top-2 beta, gamma
#   t3          .8   .6   .96   nearest gamma; top-2 gamma, alpha
#   t4          0    0    0     a tie: library order, nearest alpha; top-2 alpha, beta


def test_retrieval_counts_by_hand() -> None:
    skills = np.array(list(SKILL_VECS.values()), dtype=np.float32)
    tasks = np.array(list(TASK_VECS.values()), dtype=np.float32)
    for block in (1, 3, 1 << 20):  # block-wise over tasks gives the same counts
        counts = retrieval_counts(skills, tasks, k=2, block_elems=block)
        assert counts.nearest.tolist() == [2, 1, 1]
        assert counts.in_top_k.tolist() == [3, 2, 3]
        assert counts.best_task.tolist() == [0, 1, 2]
        assert counts.best_cosine == pytest.approx([1.0, 1.0, 0.96], abs=1e-6)
        assert counts.tasks_without_hit == 0
    floored = retrieval_counts(skills, tasks, k=2, min_score=0.5)  # t4 retrieves nothing
    assert floored.nearest.tolist() == [1, 1, 1]
    assert floored.in_top_k.tolist() == [2, 1, 3]
    assert floored.tasks_without_hit == 1
    everything = retrieval_counts(skills, tasks, k=5)  # k above the library size: every skill for every task
    assert everything.in_top_k.tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="k must be"):
        retrieval_counts(skills, tasks, k=0)


def _brute_force(skills: np.ndarray, tasks: np.ndarray, k: int, floor: float | None) -> tuple[list[int], list[int]]:
    """Per task, skills sorted by (-cosine, library index): the definition, one task at a time."""
    cosines = (tasks / np.linalg.norm(tasks, axis=1, keepdims=True)).astype(np.float32) @ (
        skills / np.linalg.norm(skills, axis=1, keepdims=True)).astype(np.float32).T
    nearest, top = [0] * len(skills), [0] * len(skills)
    for row in cosines:
        ranked = [j for j in sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]
                  if floor is None or row[j] >= np.float32(floor)]
        for j in ranked:
            top[j] += 1
        if ranked:
            nearest[ranked[0]] += 1
    return nearest, top


@pytest.mark.parametrize("floor", [None, 0.0])
def test_retrieval_counts_equal_one_task_at_a_time_with_many_ties(floor: float | None) -> None:
    rng = np.random.default_rng(3)
    skills = rng.integers(-1, 2, size=(37, 3)).astype(np.float32)  # few distinct directions: many exact ties
    skills[np.all(skills == 0, axis=1)] = [1, 0, 0]
    tasks = rng.integers(-1, 2, size=(23, 3)).astype(np.float32)
    tasks[np.all(tasks == 0, axis=1)] = [0, 1, 0]
    expected = _brute_force(skills, tasks, 5, floor)
    for block in (1, 7, 40, 1 << 20):  # tiles of 1 skill, a few skills, ..., everything at once
        counts = retrieval_counts(skills, tasks, k=5, min_score=floor, block_elems=block)
        assert (counts.nearest.tolist(), counts.in_top_k.tolist()) == expected, block
    embedder = FixedEmbedder({f"s{i}": [*v, 0.0] for i, v in enumerate(skills.tolist())}
                             | {f"t{i}": [*v, 0.0] for i, v in enumerate(tasks.tolist())})
    library = [Skill(name=f"s{i}", description=f"s{i}", body="b") for i in range(len(skills))]
    report = score_library(library, [f"t{i}" for i in range(len(tasks))], embedder, top_k=5, min_score=floor)
    by_id = {row.name: row for row in report.skills}  # the utility pass's tiles give the same counts
    assert ([by_id[f"s{i}"].nearest_tasks for i in range(len(skills))],
            [by_id[f"s{i}"].top_k_tasks for i in range(len(skills))]) == expected


def test_score_library_reports_the_counts_and_best_task() -> None:
    embedder = FixedEmbedder({**SKILL_VECS, **TASK_VECS})
    skills = [Skill(name=name, description=name, body="b") for name in SKILL_VECS]
    report = score_library(skills, list(TASK_VECS), embedder, task_ids=["a/1", "a/2", "b/1", "b/2"], top_k=2)
    rows = {row["name"]: row for row in report.rows(files=True)}
    assert {name: (row["nearest_tasks"], row["top_k_tasks"], row["best_task_id"], row["best_task_instruction"])
            for name, row in rows.items()} == {"alpha": (2, 3, "a/1", "t1"), "beta": (1, 2, "a/2", "t2"),
                                                "gamma": (1, 3, "b/1", "t3")}
    assert report.summary["retrieval"] == {"n_nearest_for_some_task": 3, "n_in_no_top_k": 0, "n_tasks_without_hit": 0}
    assert report.to_dict()["retrieval_rule"]["top_k"] == 2


def test_top_k_and_min_score_flags(library: Path, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    out = score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--top-k", "2", "--min-score",
                     "0.99", "--out", str(out_file)], 160, monkeypatch, capsys)
    data = json.loads(out_file.read_text())
    assert data["retrieval_rule"]["top_k"] == 2
    assert data["retrieval_rule"]["min_score"] == 0.99
    assert all(row["top_k_tasks"] == 0 and row["nearest_tasks"] == 0 for row in data["skills"])  # no cosine >= .99
    assert data["summary"]["retrieval"]["n_tasks_without_hit"] == len(TASKS)
    assert "top-2" in out
    assert f"{len(TASKS)} of {len(TASKS)} tasks retrieve none" in out
    plain = score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--top-k", "2", "--out",
                       str(out_file)], 160, monkeypatch, capsys)
    assert "retrieve none" not in plain
    data = json.loads(out_file.read_text())
    assert sum(row["top_k_tasks"] for row in data["skills"]) == 2 * len(TASKS)
    assert sum(row["nearest_tasks"] for row in data["skills"]) == len(TASKS)
    best = {row["best_task_id"] for row in data["skills"]}
    assert best <= {f"t{i}" for i in range(len(TASKS))}  # the tasks file's ids


@pytest.mark.parametrize("bad", [["--top-k", "0"], ["--min-score", "2"]])
def test_bad_retrieval_flags_exit_2(bad: list[str], library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, _, err = main_cli(["score", str(library), "--tasks", str(tasks), "--embedder", "hash:64", *bad],
                            monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1


def test_level_and_format_unknown_unless_the_source_says(tmp_path: Path, tasks: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    lib = write_library(tmp_path / "lib", {"send-email-with-attachment": LONG_NAMES["send-email-with-attachment"]})
    write_library(lib, {"sum-column": "Sum a column."}, "level: subtask\nformat: text\n")
    out = score_cli([str(lib), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(tmp_path / "r.csv")],
                    200, monkeypatch, capsys)
    rows = {row["name"]: row for row in csv.DictReader((tmp_path / "r.csv").open())}
    assert (rows["send-email-with-attachment"]["level"], rows["send-email-with-attachment"]["format"]) == (
        "unknown", "unknown")
    assert (rows["sum-column"]["level"], rows["sum-column"]["format"]) == ("subtask", "text")
    line = next(line for line in out.splitlines() if "send-email-with-attachment" in line)
    assert line.split().count("unknown") == 2
    assert "by level: subtask" in out
    assert "unknown" in out.split("by level:", 1)[1].splitlines()[0]
    memory_skill = Skill.model_validate(json.loads(Skill(name="m", description="d", body="b").model_dump_json()))
    assert memory_skill.model_fields_set >= {"level", "format"}  # a saved memory's skill states both: known


def _keys(value: Any, out: set[str], parent: str = "") -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if parent not in ("by_level", "by_format"):  # those keys are the groups' names
                out.add(key)
            _keys(item, out, key)
    elif isinstance(value, list):
        for item in value:
            _keys(item, out, parent)
    return out


def test_every_json_key_is_documented(library: Path, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(out_file)], 160,
              monkeypatch, capsys)
    docs = (REPO / "docs" / "commands" / "score.md").read_text()
    missing = sorted(key for key in _keys(json.loads(out_file.read_text()), set()) if f"`{key}`" not in docs)
    assert not missing, f"keys of score --out x.json not documented in docs/commands/score.md: {missing}"
    score_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(tmp_path / "r.csv")], 160,
              monkeypatch, capsys)
    csv_columns = next(csv.reader((tmp_path / "r.csv").open()))
    assert not sorted(column for column in csv_columns if f"`{column}`" not in docs)
