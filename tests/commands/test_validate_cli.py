"""``skilltransfer validate`` end to end on a small benchmark in SkillLearnBench's layout (tests/helpers_validate.py):
the table, the JSON/CSV and the figure, per-task and per-skill outcomes, the LLM rubric through the mock server with
failing replies (and its cache), and one error line for an outcomes file that names what it cannot match."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from helpers_cli import cli, main_cli
from helpers_validate import write_benchmark, write_skill

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.metrics.diagnostics import MODEL_FREE

FAST = ("--embedder", "hash:64", "--no-run-scripts", "--resamples", "300")


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))
    return write_benchmark(tmp_path)


def libraries(bench: dict[str, Path]) -> list[str]:
    return sorted(str(p) for p in bench["skills"].iterdir())


def test_validate_writes_the_table_json_csv_and_figure(bench: dict[str, Path], tmp_path: Path) -> None:
    out, figure = tmp_path / "v.json", tmp_path / "v.png"
    result = cli("validate", *libraries(bench), "--tasks", str(bench["tasks"]), "--outcomes", str(bench["outcomes"]),
                 *FAST, "--group", "method", "--tune-on", "family=a", "--external", "judged", "--key-points",
                 str(bench["key_points"]), "--out", str(out), "--figure", str(figure))
    text = result.output  # type: ignore[attr-defined]
    assert "8 libraries against pass_rate (outcomes.csv)" in text
    assert "best model-free diagnostic (chosen on tune)" in text
    assert "paired: rho(diagnostic) - rho(minus)" in text
    data = json.loads(out.read_text())
    assert data["units"] == [f"lib-{k}" for k in range(8)]
    assert list(data["diagnostics"]) == [*MODEL_FREE, "keypoint_coverage", "judged"]
    assert data["kinds"]["judged"] == "external"
    assert data["parts"]["tune"] == [f"lib-{k}" for k in range(0, 8, 2)]
    assert data["best"] in MODEL_FREE
    assert data["chosen_on"] == "tune"
    assert data["tasks"]["over_window"] == 1  # the ~400-word instance, read whole by 2 chunks
    assert {row["grouping"] for row in data["groups"]} == {"method"}
    assert data["definitions"]["own_coverage"]["scope"] == "own"
    coverage = next(r for r in data["correlations"]["all"] if r["diagnostic"] == "own_coverage")
    assert coverage["spearman"] > 0.5  # the outcomes were planted to follow the tasks a library covers
    assert figure.stat().st_size > 10_000
    table = tmp_path / "v.csv"
    cli("validate", *libraries(bench), "--tasks", str(bench["tasks"]), "--outcomes", str(bench["outcomes"]), *FAST,
        "--out", str(table))
    rows = list(csv.DictReader(table.open()))
    assert {r["part"] for r in rows} == {"all"}
    assert [r["diagnostic"] for r in rows] == list(MODEL_FREE)


def test_per_task_outcomes_resample_the_tasks(bench: dict[str, Path], tmp_path: Path) -> None:
    outcomes = tmp_path / "runs.csv"
    with outcomes.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["library", "task", "success"])
        for k in range(8):
            for task in ("invoice-totals", "poem-writer", "form-filler"):  # per task group
                for repeat in range(3):
                    writer.writerow([f"lib-{k}", task, int((k + repeat) % 3 != 0)])
    out = tmp_path / "t.json"
    cli("validate", *libraries(bench), "--tasks", str(bench["tasks"]), "--outcomes", str(outcomes), *FAST,
        "--out", str(out))
    data = json.loads(out.read_text())
    assert data["settings"]["task_bootstrap"] is True
    assert data["settings"]["tasks"] == 3
    assert data["outcomes"]["kind"] == "task"


def test_per_skill_outcomes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "cache"))
    bench = write_benchmark(tmp_path / "b")
    library = tmp_path / "lib"
    effects = tmp_path / "effects.json"
    rows = []
    for k, topic in enumerate(["invoices", "poems", "forms", "sourdough", "gardening", "tax"]):
        write_skill(library / topic, topic, f"How to handle {topic} quickly and well", f"Steps for {topic}.")
        rows.append({"skill": topic, "effect": 0.05 * k})
    effects.write_text(json.dumps(rows))
    out = tmp_path / "s.json"
    cli("validate", str(library), "--tasks", str(bench["tasks"]), "--outcomes", str(effects), *FAST, "--out", str(out))
    data = json.loads(out.read_text())
    assert data["units"] == ["invoices", "poems", "forms", "sourdough", "gardening", "tax"]
    assert "relevance" in data["diagnostics"]
    assert data["outcomes"]["kind"] == "skill"


def test_the_rubric_through_the_mock_server(bench: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cache = tmp_path / "judge.sqlite"
    args = [*libraries(bench), "--tasks", str(bench["tasks"]), "--outcomes", str(bench["outcomes"]), *FAST,
            "--key-points", str(bench["key_points"]), "--api-key", "x", "--cache", str(cache), "--price", "0.25,2",
            "--out", str(out)]
    with MockServer(RolePlay(fail_rate=0.3, seed=2)) as server:
        first = cli("validate", *args, "--model", f"mock@{server.url}")
        data = json.loads(out.read_text())
        usage = data["rubric"]["usage"]
        assert usage["calls"] > 30
        assert usage["unparsed"] >= 1  # replies a weak judge sends, re-asked once, then left out
        assert data["rubric"]["cost_usd"] > 0
        assert {"llm_coverage", "llm_executability", "llm_safety"} <= set(data["diagnostics"])
        assert "LLM rubric (openai:mock)" in first.output  # type: ignore[attr-defined]
        cli("validate", *args, "--model", f"mock@{server.url}")
    again = json.loads(out.read_text())["rubric"]["usage"]
    assert again["cached"] == again["calls"]
    assert again["paid_prompt_tokens"] == 0
    assert json.loads(out.read_text())["diagnostics"]["llm_coverage"] == data["diagnostics"]["llm_coverage"]


@pytest.mark.parametrize(("rows", "message"), [
    ("library,pass_rate\nlib-0,1\nlib-9,2\nnope,3\n",
     "--outcomes names 2 libraries it cannot match: 'lib-9', 'nope'"),
    ("library,task,success\nlib-0,invoice-totals,1\nlib-1,no-such-task,0\n",
     "--outcomes names 1 task it cannot match: 'no-such-task'"),
    ("library,x,y\nlib-0,1,2\n", "name the outcome column with --outcome; numeric columns: x, y"),
    ("library,pass_rate\nlib-0,high\n", "row 2, column pass_rate: 'high' is not a number"),
    ("name,pass_rate\nlib-0,1\n", "no key column"),
])
def test_an_outcomes_file_that_cannot_be_matched_is_one_error_line(
        bench: dict[str, Path], tmp_path: Path, rows: str, message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    outcomes = tmp_path / "bad.csv"
    outcomes.write_text(rows)
    code, out, err = main_cli(["validate", *libraries(bench)[:2], "--tasks", str(bench["tasks"]), "--outcomes",
                               str(outcomes), *FAST, "--out", str(tmp_path / "never.json")], monkeypatch, capsys)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert message in errors[0]
    assert not (tmp_path / "never.json").exists()


def test_bad_flags_are_refused_before_anything_is_measured(bench: dict[str, Path], tmp_path: Path) -> None:
    base = [*libraries(bench), "--tasks", str(bench["tasks"]), "--outcomes", str(bench["outcomes"]), *FAST]
    six = tmp_path / "six.csv"
    six.write_text("\n".join(bench["outcomes"].read_text().splitlines()[:7]) + "\n")
    with pytest.raises(InputError, match="3 units to tune on and 3 held out; each part needs 4"):
        cli("validate", *libraries(bench)[:6], "--tasks", str(bench["tasks"]), "--outcomes", str(six), *FAST,
            "--tune-on", "family=a")
    with pytest.raises(InputError, match="--tune-on takes COLUMN=VALUE"):
        cli("validate", *base, "--tune-on", "family")
    with pytest.raises(InputError, match="--group 'model' is not a column"):
        cli("validate", *base, "--group", "model")
    with pytest.raises(InputError, match="--price 'cheap': give INPUT,OUTPUT dollars per million tokens"):
        cli("validate", *base, "--price", "cheap")
    skills = tmp_path / "skills.csv"
    skills.write_text("skill,effect\na,1\n")
    with pytest.raises(InputError, match="gives outcomes per skill: give exactly one library"):
        cli("validate", *libraries(bench)[:2], "--tasks", str(bench["tasks"]), "--outcomes", str(skills), *FAST)
