"""``skilltransfer score`` end to end (hash embedder), task-text loading, and report outputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_cli import main_cli

from skilltransfer.commands.score import score
from skilltransfer.errors import InputError
from skilltransfer.metrics import load_task_texts, score_library, write_report
from skilltransfer.metrics.scoring import ScoreReport
from skilltransfer.skill import Skill

REPO = Path(__file__).resolve().parents[2]
DEMO_LIBRARY = REPO / "data" / "demo_library"
DEMO_TASKS = REPO / "data" / "demo_tasks.jsonl"
SKILL_KEYS = {"id", "name", "description", "specificity", "abstractness", "utility", "best_match", "off_domain"}

TASKS = ["Email the quarterly report to Alice.", "Sum the Amount column in expenses.xlsx.",
         "Create a calendar event for the team meeting on Monday.", "Write the totals into summary.docx."]


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))


def write_skill(folder: Path, name: str, description: str, extra: str = "") -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n1. Do it.\n")


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "lib"
    write_skill(folder, "send-email", "Send an email with an attachment to a contact.", "level: subtask\n")
    write_skill(folder, "sum-column", "Sum a numeric column of an Excel file.", "level: subtask\n")
    write_skill(folder, "bake-bread", "Knead dough and bake a loaf of sourdough bread.")
    return folder


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": i, "instruction": t}) + "\n" for i, t in enumerate(TASKS)))
    return path


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str,
                                                                                                          str]:
    """Run the console entry point in-process; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "180")
    return main_cli(["score", *args], monkeypatch, capsys)


def test_cli_prints_ranked_table(library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64"], monkeypatch, capsys)
    assert code == 0, err
    for header in ("rank", "name", "relevance", "pair utility", "nearest", "top-5", "best cos", "best task",
                   "specificity", "abstractness", "level", "format", "domain"):
        assert header in out
    for name in ("send-email", "sum-column", "bake-bread"):
        assert name in out
    assert "3 skills x 4 tasks" in out
    assert "tau 0.1" in out
    assert "mean relevance / pair utility by level: subtask" in out
    assert "left out" not in out  # 180 columns hold every column
    assert "off-domain (OFF):" in out


def test_off_domain_marked_in_table_json_and_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "similar.txt"  # four variants of one task: every task's 2nd-nearest task is close
    tasks.write_text("".join(f"Email the quarterly report to {name}.\n" for name in ("Alice", "Bob", "Carol", "Dan")))
    bread = tmp_path / "bread"  # one skill sharing no word with the tasks, one matching them
    write_skill(bread, "bake-bread", "Knead dough, proof overnight, bake a sourdough loaf in a Dutch oven.")
    write_skill(bread, "email-report", "Email the quarterly report to Alice.")
    for mode in ("pairs", "nearest", "knn"):
        out_json, out_csv = tmp_path / f"{mode}.json", tmp_path / f"{mode}.csv"
        for out_file in (out_json, out_csv):
            code, out, err = run_cli([str(bread), "--tasks", str(tasks), "--embedder", "hash:64", "--specificity",
                                      mode, "--out", str(out_file)], monkeypatch, capsys)
            assert code == 0, err
        assert "OFF" in out
        data = json.loads(out_json.read_text())
        rule = data["off_domain_rule"]
        assert rule["k"] == 2  # 4 tasks: ceil(sqrt 4)
        assert rule["quantile"] == 0.05
        flags = {row["name"]: row["off_domain"] for row in data["skills"]}
        assert flags == {"bake-bread": True, "email-report": False}
        for row in data["skills"]:
            assert row["off_domain"] == (row["best_match"] < rule["threshold"])
        assert data["summary"]["n_off_domain"] == 1
        rows = {row["name"]: row for row in csv.DictReader(out_csv.open())}
        assert rows["bake-bread"]["off_domain"] == "true"
        assert rows["email-report"]["off_domain"] == "false"
        assert float(rows["bake-bread"]["off_domain_threshold"]) == pytest.approx(rule["threshold"])


def test_cli_top_limits_table(library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--top", "1"],
                           monkeypatch, capsys)
    assert code == 0
    assert "1 of 3 skills" in out


def test_json_output_schema(library: Path, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "report.json"
    code, _, err = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--tau", "0.2",
                            "--specificity", "nearest", "--skill-text", "description+body", "--out", str(out_file)],
                           monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out_file.read_text())
    assert {"embedder", "tau", "specificity_mode", "skill_text", "n_tasks", "skills", "summary"} <= set(data)
    assert data["embedder"] == "hash:dim=64:char=1"
    assert data["tau"] == 0.2
    assert data["specificity_mode"] == "nearest"
    assert data["skill_text"] == "description+body"
    assert data["n_tasks"] == 4
    assert len(data["skills"]) == 3
    for row in data["skills"]:
        assert SKILL_KEYS <= set(row)
        assert 0 <= row["specificity"] <= 1
        assert 0 < row["abstractness"] <= 1
        assert row["utility"] == pytest.approx(row["specificity"] * row["abstractness"])
    utilities = [row["utility"] for row in data["skills"]]
    assert [row["rank"] for row in data["skills"]] == [1, 2, 3]
    assert data["ranking"]["by"] == "relevance"
    keys = [(row["null_off_domain"], -row["relevance"], row["name"]) for row in data["skills"]]
    assert keys == sorted(keys)  # the default ranking: inside the null last, then relevance
    summary = data["summary"]
    assert summary["n_skills"] == 3
    assert summary["mean_utility"] == pytest.approx(sum(utilities) / 3)
    assert summary["by_level"]["subtask"]["n"] == 2
    assert summary["by_level"]["unknown"]["n"] == 1  # bake-bread's SKILL.md gives no level
    assert not list(tmp_path.glob(".report.json.*"))  # no temp file left behind


def test_csv_output_schema(library: Path, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "report.csv"
    code, _, err = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(out_file)],
                           monkeypatch, capsys)
    assert code == 0, err
    rows = list(csv.DictReader(out_file.open()))
    assert len(rows) == 3
    assert SKILL_KEYS | {"rank", "tau", "specificity_mode"} <= set(rows[0])
    assert [row["rank"] for row in rows] == ["1", "2", "3"]
    assert all(row["tau"] == "0.1" for row in rows)


def test_command_function_returns_report(library: Path, tasks: Path) -> None:
    report = score(library, tasks, embedder="hash:64", tau=0.1, specificity="pairs", skill_text="description",
                   field=None, top=None, out=None, seed=0, embed_cache=False)
    assert isinstance(report, ScoreReport)
    assert [row.name for row in report.skills] == ["bake-bread", "send-email", "sum-column"]  # library order
    assert report.n_reference == 6  # 4 tasks -> 6 pairs


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize(("case", "needle"), [
    ("missing_library", "nope:"),
    ("missing_tasks", "missing.jsonl: task file or folder not found"),
    ("one_task", "one.jsonl: need at least 2 tasks"),
    ("broken_line", "broken.jsonl:2: invalid JSON"),
    ("missing_field", "nofield.jsonl:2: missing field 'instruction'; fields present: prompt"),
    ("no_known_field", "unknown.jsonl:1: none of the fields"),
    ("not_utf8", "latin1.txt:2: not UTF-8"),
    ("bad_out", "report.txt: unknown output type"),
    ("bad_suffix", "tasks.csv: unknown task file type"),
])
def test_bad_inputs_exit_2(case: str, needle: str, library: Path, tasks: Path, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lib, task_path, extra = str(library), str(tasks), []
    if case == "missing_library":
        lib = str(tmp_path / "nope")
    elif case == "missing_tasks":
        task_path = str(tmp_path / "missing.jsonl")
    elif case == "one_task":
        task_path = str(_write(tmp_path / "one.jsonl", '{"instruction": "only one"}\n'))
    elif case == "broken_line":
        task_path = str(_write(tmp_path / "broken.jsonl", '{"instruction": "a"}\n{"instruction": \n'))
    elif case == "missing_field":
        task_path = str(_write(tmp_path / "nofield.jsonl", '{"instruction": "a"}\n{"prompt": "b"}\n'))
    elif case == "no_known_field":
        task_path = str(_write(tmp_path / "unknown.jsonl", '{"prompt": "a"}\n{"prompt": "b"}\n'))
    elif case == "not_utf8":
        task_path = str(_write(tmp_path / "latin1.txt", "first task\ncaf\xe9 task\n".encode("latin-1")))
    elif case == "bad_out":
        extra = ["--out", str(tmp_path / "report.txt")]
    elif case == "bad_suffix":
        task_path = str(_write(tmp_path / "tasks.csv", "a\nb\n"))
    code, out, err = run_cli([lib, "--tasks", task_path, "--embedder", "hash:64", *extra], monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert needle in lines[0]
    assert "Skill utility" not in out


def test_an_unreadable_skill_is_named_and_the_rest_scored(library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (library / "broken").mkdir()
    (library / "broken" / "SKILL.md").write_text("no front matter here\n")
    code, out, err = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64"], monkeypatch, capsys)
    assert code == 0, err
    [named] = [line for line in err.splitlines() if "broken" in line]
    assert "SKILL.md:1: no YAML front matter" in named
    assert "(skill not read)" in named
    assert all(name in out for name in ("send-email", "sum-column", "bake-bread"))
    assert "broken" not in out


@pytest.mark.parametrize("args", [["--specificity", "median"], ["--skill-text", "body"], ["--tau", "0"],
                                  ["--embedder", "word2vec"], ["--top", "0"]])
def test_bad_options_exit_2(args: list[str], library: Path, tasks: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([str(library), "--tasks", str(tasks), "--embedder", "hash:64", *args], monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1


def test_load_task_texts_layouts(tmp_path: Path) -> None:
    txt = _write(tmp_path / "tasks.txt", "first task\n\n  second task  \n")
    assert load_task_texts(txt) == ["first task", "second task"]
    jsonl = _write(tmp_path / "t.jsonl", '{"query": "a", "text": "x"}\n\n{"query": "b"}\n')
    assert load_task_texts(jsonl) == ["a", "b"]  # query comes before text in the default order
    assert load_task_texts(_write(tmp_path / "u.jsonl", '{"goal": "a"}\n{"goal": "b"}\n'), field="goal") == ["a", "b"]
    as_list = _write(tmp_path / "list.json", json.dumps([{"task": "a"}, "b"]))
    assert load_task_texts(as_list) == ["a", "b"]
    folder = tmp_path / "tasks"
    for number in (2, 10, 1):
        (folder / f"1-{number}" / "subtasks").mkdir(parents=True)
        _write(folder / f"1-{number}" / "subtasks" / "0.json", json.dumps({"username": "Bob", "task": f"t{number}"}))
    assert load_task_texts(folder) == ["t1", "t2", "t10"]  # natural order
    _write(folder / "1-2" / "subtasks" / "1.json", json.dumps({"username": "Bob"}))
    with pytest.raises(InputError, match=r"1\.json: none of the fields .* fields present: username"):
        load_task_texts(folder)
    with pytest.raises(InputError, match="no \\*.json task files"):
        load_task_texts((tmp_path / "empty").mkdir() or tmp_path / "empty")
    with pytest.raises(InputError, match=r"v\.jsonl:1: field 'instruction' is int"):
        load_task_texts(_write(tmp_path / "v.jsonl", '{"instruction": 3}\n{"instruction": "b"}\n'))


def test_load_task_texts_hf_dataset(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"question": ["a", "b", "c"], "query": ["q1", "q2", "q3"]}).save_to_disk(tmp_path / "d")
    assert load_task_texts(tmp_path / "d") == ["q1", "q2", "q3"]
    assert load_task_texts(tmp_path / "d", field="question") == ["a", "b", "c"]
    with pytest.raises(InputError, match="missing field 'prompt'; fields present: question, query"):
        load_task_texts(tmp_path / "d", field="prompt")


def test_officebench_tasks(officebench_tasks: Path) -> None:
    texts = load_task_texts(officebench_tasks)
    assert len(texts) == 300
    assert all(isinstance(t, str) and t for t in texts)


def test_score_library_and_write_report(tmp_path: Path, hash_embedder: object) -> None:
    skills = [Skill(name="a", description="send an email", body="x", level="subtask"),
              Skill(name="b", description="sum the column", body="y", format="text")]
    report = score_library(skills, TASKS, hash_embedder, tau=0.5)
    assert report.summary["by_format"] == {"text": pytest.approx(report.summary["by_format"]["text"]),
                                           "unknown": pytest.approx(report.summary["by_format"]["unknown"])}
    assert report.summary["by_format"]["text"]["n"] == 1  # b says text; a says nothing
    assert report.summary["by_level"]["subtask"]["n"] == 1
    assert report.tau == 0.5
    with pytest.raises(InputError, match="unknown output type"):
        write_report(report, tmp_path / "r.yaml")
    assert json.loads(write_report(report, tmp_path / "r.json").read_text())["tau"] == 0.5
    with pytest.raises(ValueError, match="skill text"):
        score_library(skills, TASKS, hash_embedder, text="body")


@pytest.mark.slow
def test_minilm_on_demo_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    reports = {}
    for mode in ("pairs", "nearest"):
        out_file = tmp_path / f"{mode}.json"
        code, out, err = run_cli([str(DEMO_LIBRARY), "--tasks", str(DEMO_TASKS), "--specificity", mode,
                                  "--out", str(out_file)], monkeypatch, capsys)
        assert code == 0, err
        assert "all-MiniLM-L6-v2" in out
        reports[mode] = {row["name"]: row for row in json.loads(out_file.read_text())["skills"]}
    pairs, nearest = reports["pairs"], reports["nearest"]
    assert len(pairs) == 10
    # the off-domain skill matches no office task best, and "nearest" specificity gives it zero utility
    off = "sourdough-starter-care"
    assert pairs[off]["best_match"] == min(row["best_match"] for row in pairs.values())
    assert nearest[off]["specificity"] == 0.0
    assert nearest[off]["utility"] == 0.0
    assert pairs[off]["abstractness"] == max(row["abstractness"] for row in pairs.values())


def test_jsonl_tasks_with_unicode_line_separators_stay_one_record_each(tmp_path: Path) -> None:
    from skilltransfer.metrics import load_task_texts

    path = tmp_path / "tasks.jsonl"
    records = [{"instruction": "first\u2028still the first task"}, {"instruction": "second\x85task"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n", encoding="utf-8")
    assert load_task_texts(path) == [r["instruction"] for r in records]


def test_null_flag_and_relevance_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The absolute flag: a skill whose best match lies inside the embedder's null (off-topic texts against the same
    tasks) is NULL, listed last by relevance, and the JSON records the rule; a skill copying a task is not."""
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("".join(f"Email the quarterly report to {name}.\n" for name in ("Alice", "Bob", "Carol", "Dan")))
    lib = tmp_path / "lib"
    write_skill(lib, "zz-unrelated", "Zqx vbnm wrtp.")  # no word or trigram in common with any task
    write_skill(lib, "email-report", "Email the quarterly report to Alice.")
    out_json = tmp_path / "r.json"
    code, out, err = run_cli([str(lib), "--tasks", str(tasks), "--embedder", "hash:64", "--out", str(out_json)],
                             monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out_json.read_text())
    rule = data["null_rule"]
    assert rule["quantile"] == 0.95
    assert rule["null"] == "null-v1"
    rows = {row["name"]: row for row in data["skills"]}
    assert rows["zz-unrelated"]["null_off_domain"] is True
    assert rows["email-report"]["null_off_domain"] is False
    for row in rows.values():
        assert row["null_off_domain"] == (row["best_match"] <= rule["threshold"])
    assert out.index("email-report") < out.index("zz-unrelated")
    assert "NULL" in out
    assert "inside the null (NULL): 1 of 2" in out
    code, _, err = run_cli([str(lib), "--tasks", str(tasks), "--embedder", "hash:64", "--rank", "best"],
                           monkeypatch, capsys)
    assert code == 2


def test_relevance_is_the_knn_utility_under_every_mode(hash_embedder: object) -> None:
    from skilltransfer.metrics.null_texts import NULL_TEXTS
    from skilltransfer.metrics.utility import best_match, null_threshold

    skills = [Skill(name="a", description="send an email", body="x"), Skill(name="b", description="sum a column",
                                                                              body="y")]
    knn = {r.name: r for r in score_library(skills, TASKS, hash_embedder, specificity_mode="knn").skills}
    pairs = {r.name: r for r in score_library(skills, TASKS, hash_embedder, specificity_mode="pairs").skills}
    for name in ("a", "b"):
        assert pairs[name].relevance == pytest.approx(knn[name].utility)
    null = hash_embedder.embed(list(NULL_TEXTS))  # type: ignore[attr-defined]
    tasks = hash_embedder.embed(TASKS)  # type: ignore[attr-defined]
    best = best_match(null, tasks)
    assert null_threshold(null, tasks) == pytest.approx(float(np.quantile(best, 0.95)))
    assert (best <= null_threshold(null, tasks)).mean() >= 0.93  # 45 of 48 (interpolated quantile)
