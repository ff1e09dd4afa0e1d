"""The datasci environment: task set, messy data, reference solutions, scoring, file API, sandbox."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from skilltransfer.envs.datasci import DataSciEnv
from skilltransfer.envs.datasci.api import setup
from skilltransfer.envs.datasci.domains import DOMAINS
from skilltransfer.envs.datasci.solutions import HELPERS
from skilltransfer.envs.datasci.templates import TEMPLATES
from skilltransfer.errors import InputError


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> DataSciEnv:
    return DataSciEnv(seed=0, sandboxed=False, workdir=tmp_path_factory.mktemp("datasci"))


def _wrong(key: dict[str, Any]) -> Any:
    expected = key["answer"]
    if key["answer_type"].startswith("numeric"):
        return float(expected) * 1.5 + 7
    if key["answer_type"].startswith("string"):
        return "zzz-not-an-answer"
    return [*expected[:-1], "zzz-not-an-answer"]


def _run(env: DataSciEnv, task: Any, code: str) -> tuple[Any, Any, Any]:
    with env.start(task) as episode:
        obs = episode.step(code)
        return obs, episode.evaluate(), episode.evaluate()


# ---- the task set ------------------------------------------------------------------------------------------

def test_task_set_covers_domains_types_difficulties_and_splits(env: DataSciEnv) -> None:
    tasks = env.tasks()
    assert len(tasks) >= 100
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.metadata["domain"] for t in tasks}) >= 4
    assert set(Counter(t.metadata["answer_type"] for t in tasks)) == {
        "numeric_exact", "numeric_approximate", "string_exact", "list_exact", "list_approximate",
        "string_approximate"}
    assert {t.difficulty for t in tasks} == {1, 2, 3}
    assert {t.split for t in tasks} == {"dev", "test"}
    assert env.tasks("dev")
    assert len(env.tasks("dev")) + len(env.tasks("test")) == len(tasks)


def test_subprocedures_are_shared_across_templates_and_domains(env: DataSciEnv) -> None:
    templates_using: dict[str, set[str]] = {}
    domains_using: dict[str, set[str]] = {}
    for task in env.tasks():
        assert task.metadata["subprocedures"], task.id
        assert set(task.metadata["subprocedures"]) <= set(HELPERS)
        for proc in task.metadata["subprocedures"]:
            templates_using.setdefault(proc, set()).add(task.template)
            domains_using.setdefault(proc, set()).add(task.metadata["domain"])
    assert set(templates_using) == set(HELPERS)
    assert all(len(t) >= 2 for t in templates_using.values()), templates_using
    assert all(len(d) >= 3 for d in domains_using.values()), domains_using


def test_difficulty_follows_pipeline_length(env: DataSciEnv) -> None:
    for task in env.tasks():
        n = len(task.metadata["subprocedures"])
        assert task.difficulty == (1 if n <= 3 else 2 if n <= 5 else 3)


def test_generation_is_deterministic_and_seeded() -> None:
    a, b, c = DataSciEnv(seed=3), DataSciEnv(seed=3), DataSciEnv(seed=4)
    assert a.tasks() == b.tasks()
    assert [a.answer_key(t) for t in a.tasks()] == [b.answer_key(t) for t in b.tasks()]
    assert all(a.world.domains[d.name].files == b.world.domains[d.name].files for d in DOMAINS)
    assert a.world.domains["crime"].files != c.world.domains["crime"].files
    assert [t.instruction for t in a.tasks()] != [t.instruction for t in c.tasks()]


def test_solutions_stay_out_of_the_agent_view(env: DataSciEnv) -> None:
    for task in env.tasks():
        key = env.answer_key(task)
        assert "answer" not in task.metadata
        assert "complete_task" not in json.dumps(task.metadata)
        if task.template in ("max_value_record", "busiest_month", "max_category_in_group"):
            assert str(key["answer"]).lower() not in task.instruction.lower(), task.id
    task = env.tasks()[0]
    with env.start(task) as episode:
        files = sorted(p.relative_to(episode.workspace).as_posix() for p in episode.workspace.rglob("*") if p.is_file())
        assert files
        assert all(f.startswith(f"data/{task.metadata['domain']}/") for f in files)
        text = "".join((episode.workspace / f).read_text(encoding="utf-8") for f in files)
        assert "complete_task" not in text
        assert "def dedupe_rows" not in text


def test_annotations_list_subtasks_with_answers(env: DataSciEnv) -> None:
    for task in env.tasks():
        notes = env.annotations(task)
        assert [n["question"] for n in notes] == task.metadata["subtask_questions"]
        assert len(notes) >= 2
        assert notes[-1]["answer"] == env.answer_key(task)["answer"]
        assert all(n["answer"] is not None for n in notes)


def test_unknown_task_or_split_is_an_input_error(env: DataSciEnv) -> None:
    with pytest.raises(InputError, match="unknown datasci task"):
        env.annotations("datasci-nope")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown split"):
        env.tasks("train")


# ---- the data is messy, and cleaning matters ---------------------------------------------------------------

@pytest.mark.parametrize("spec", DOMAINS, ids=lambda s: s.name)
def test_main_files_are_realistically_messy(env: DataSciEnv, spec: Any) -> None:
    data = env.world.domains[spec.name]
    rows = list(csv.DictReader(io.StringIO(data.files[data.main_path])))
    ids = Counter(r[spec.id_col] for r in rows)
    assert len(rows) > len(ids) == len(data.records)  # duplicated rows
    assert {r[spec.value_col] for r in rows} & {"", "NA", "n/a", "-"}  # missing values
    spellings = {r[spec.unit_col] for r in rows if r[spec.unit_col].strip()}
    assert len({u.strip().lower() for u in spellings}) >= 2  # mixed units
    assert len(spellings) >= 4  # and mixed spellings of them
    dates = {r[spec.date_col] for r in rows}
    assert any(re.fullmatch(r"\d{4}-\d\d-\d\d", d) for d in dates)
    assert any(re.fullmatch(r"\d\d/\d\d/\d{4}", d) for d in dates)
    assert any(re.fullmatch(r"[A-Z][a-z]+ \d\d, \d{4}", d) for d in dates)
    cats = {r[spec.cat_col] for r in rows}
    assert len(cats) > len({c.strip().lower() for c in cats})  # casing / whitespace variants
    assert {r[spec.key_col].strip().upper() for r in rows} - set(data.groups)  # keys missing from the lookup


@pytest.mark.slow
def test_naive_pipelines_mostly_fail(env: DataSciEnv) -> None:
    """Dropping dedupe, unit conversion, whitespace stripping and mixed-date parsing breaks most answers."""
    successes = 0
    for task in env.tasks():
        code = re.sub(r'df = dedupe_rows\(df, "\w+"\)', "pass", env.reference_solution(task))
        code = code.replace(".str.strip()", "").replace('format="mixed", ', "")
        code = re.sub(r"\{'[^}]*\}", lambda m: repr(dict.fromkeys(eval(m.group(0)), 1.0)), code)
        _, score, _ = _run(env, task, code)
        successes += score.success
    assert successes < 0.4 * len(env.tasks())


# ---- every task: reference solves it, doing nothing or answering wrong does not -----------------------------

def _solved(score: Any, key: dict[str, Any]) -> bool:
    """Success, with the full score except where the reference rounds a numeric answer to 2 decimals."""
    rounded = key["answer_type"] in ("numeric_approximate", "list_approximate")
    return score.success and (rounded or score.reward == 1.0)


@pytest.mark.slow
def test_every_reference_solution_succeeds(env: DataSciEnv) -> None:
    for task in env.tasks():
        obs, score, again = _run(env, task, env.reference_solution(task))
        assert not obs.error, (task.id, obs.output)
        assert obs.done
        assert _solved(score, env.answer_key(task)), (task.id, score)
        assert score == again


@pytest.mark.slow
def test_do_nothing_and_wrong_answers_fail_on_every_task(env: DataSciEnv) -> None:
    for task in env.tasks():
        _, nothing, again = _run(env, task, "complete_task()")
        assert (nothing.success, nothing.reward) == (False, 0.0), task.id
        assert nothing == again
        wrong = _wrong(env.answer_key(task))
        _, score, again = _run(env, task, f"complete_task(answer={wrong!r})")
        assert not score.success, (task.id, wrong, score)
        assert score.reward < 1.0
        assert score == again


def test_reference_solution_in_episode_for_each_template(env: DataSciEnv) -> None:
    seen: set[str] = set()
    for task in env.tasks():
        if task.template in seen:
            continue
        seen.add(task.template)
        obs, score, _ = _run(env, task, env.reference_solution(task))
        assert _solved(score, env.answer_key(task)), (task.id, obs.output, score)
    assert seen == set(TEMPLATES)


# ---- the file API ------------------------------------------------------------------------------------------

def test_file_api_lists_describes_and_reads(tmp_path: Path, env: DataSciEnv) -> None:
    env.world.write(tmp_path)
    apis = setup(tmp_path)["apis"]
    assert {d["domain"] for d in apis.files.list_domains()} == {d.name for d in DOMAINS}
    paths = [f["path"] for f in apis.files.list_files(domain="astronomy")]
    assert paths == ["data/astronomy/README.md", "data/astronomy/planets.csv", "data/astronomy/stars.csv"]
    info = apis.files.describe("data/astronomy/planets.csv")
    assert info["kind"] == "csv"
    assert info["columns"][0] == "planet_id"
    assert len(info["first_rows"]) == 5
    assert info["n_rows"] == env.world.domains["astronomy"].n_rows
    nested = apis.files.describe("data/air_quality/stations.json")
    assert nested["kind"] == "json"
    assert "location" in nested["first_record"]
    assert apis.files.read_text("data/crime/README.md", max_chars=7) == "# Munic"
    with pytest.raises(ValueError, match="outside data/"):
        apis.files.read_text("../secret.txt")
    with pytest.raises(FileNotFoundError, match="list_files"):
        apis.files.describe("data/crime/nope.csv")
    assert {a["name"] for a in apis.api_docs.show_app_descriptions()} == {"files", "api_docs"}
    assert "describe" in {a["name"] for a in apis.api_docs.show_api_descriptions(app_name="files")}
    doc = apis.api_docs.show_api_doc(app_name="files", api_name="read_text")
    assert "max_chars" in doc["signature"]
    with pytest.raises(ValueError, match="unknown api"):
        apis.api_docs.show_api_doc(app_name="files", api_name="delete")


def test_episode_docs_and_error_observations(env: DataSciEnv) -> None:
    task = env.tasks()[0]
    with env.start(task) as episode:
        assert "apis.files" in episode.docs()
        assert "complete_task" in episode.docs()
        obs = episode.step("print(apis.files.list_files())")
        assert not obs.error
        assert task.metadata["files"][0] in obs.output
        bad = episode.step("apis.files.describe('data/none.csv')")
        assert bad.error
        assert "FileNotFoundError" in bad.output
        assert not bad.done
        pandas = episode.step(f"import pandas as pd\nprint(len(pd.read_csv({task.metadata['files'][0]!r})))")
        assert pandas.output.strip().isdigit()


# ---- sandboxed episodes (run once skilltransfer.sandbox exists) --------------------------------------------

def test_sandboxed_reference_and_do_nothing(tmp_path: Path) -> None:
    pytest.importorskip("skilltransfer.sandbox")
    env = DataSciEnv(seed=0, workdir=tmp_path)
    picks = [next(t for t in env.tasks() if t.template == name) for name in ("top_groups_by_total", "count_missing")]
    for task in picks:
        obs, score, _ = _run(env, task, env.reference_solution(task))
        assert (score.success, score.reward) == (True, 1.0), (task.id, obs.output)
        _, nothing, _ = _run(env, task, "complete_task()")
        assert not nothing.success


def test_sandboxed_file_api(tmp_path: Path) -> None:
    pytest.importorskip("skilltransfer.sandbox")
    env = DataSciEnv(seed=0, workdir=tmp_path)
    task = env.tasks()[0]
    with env.start(task) as episode:
        obs = episode.step("print(apis.files.describe(apis.files.list_files()[1]['path'])['kind'])")
        assert not obs.error
        assert obs.output.strip() in {"csv", "json"}
