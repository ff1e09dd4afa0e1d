"""The real OfficeBench instances: loading, the nine checks on real testbeds, and hand-solved instances.

Reads ``../shared/officebench/tasks`` (skipped cleanly when absent); nothing is copied into the repository.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from skilltransfer.envs.office import NoReferenceSolutionError, OfficeEnv
from skilltransfer.envs.office.checks import CheckContext
from skilltransfer.envs.office.officebench import PASSES_UNTOUCHED, load_officebench
from skilltransfer.errors import InputError

OFFICEBENCH_TASKS = Path(__file__).resolve().parents[3] / "shared" / "officebench" / "tasks"


@pytest.fixture(scope="module")
def real_env(tmp_path_factory: pytest.TempPathFactory) -> OfficeEnv:
    if not OFFICEBENCH_TASKS.is_dir():
        pytest.skip("../shared/officebench/tasks is absent")
    return OfficeEnv(source=f"officebench:{OFFICEBENCH_TASKS}", sandboxed=False,
                     workdir=tmp_path_factory.mktemp("officebench"))


def test_all_300_instances_load(real_env: OfficeEnv, officebench_tasks: Path) -> None:
    tasks = real_env.tasks()
    assert len(tasks) == 300
    assert len({t.id for t in tasks}) == 300
    assert collections.Counter(t.difficulty for t in tasks) == {1: 93, 2: 95, 3: 112}
    for task in tasks:
        folder, _, k = task.id.partition("/")
        assert task.template == folder
        assert int(folder.split("-")[0]) == task.difficulty
        assert (officebench_tasks / folder / "subtasks" / f"{k}.json").is_file()
        assert task.metadata["subprocedures"] is not None
        assert task.metadata["has_reference_solution"] is False
        assert task.metadata["now"]
        assert task.metadata["username"]
    assert real_env.task("1-10/3").metadata["known_broken"]
    assert len(real_env.tasks("dev")) + len(real_env.tasks("test")) == 300


def test_no_reference_solution(real_env: OfficeEnv) -> None:
    with pytest.raises(NoReferenceSolutionError, match="no reference solution"):
        real_env.reference_solution(real_env.task("1-1/0"))


def _reference_only(real_env: OfficeEnv) -> list:
    """Instances whose every check compares a result file with an expected file that exists."""
    chosen = []
    for task in real_env.tasks():
        evaluation = real_env._real[task.id].evaluation
        if task.metadata["known_broken"] or not all(i["function"] == "evaluate_exact_match" for i in evaluation):
            continue
        chosen.append(task)
    return chosen


def test_reference_outputs_pass_and_untouched_testbeds_fail(real_env: OfficeEnv) -> None:
    chosen = _reference_only(real_env)
    assert len(chosen) >= 12
    for task in chosen:
        real = real_env._real[task.id]
        with real_env.start(task) as episode:
            untouched = episode.evaluate()
            assert untouched.success == (task.id in PASSES_UNTOUCHED), (task.id, untouched)
            ctx = CheckContext(episode.workspace, task_dir=real.folder, pristine=lambda real=real: real.testbed)
            for item in real.evaluation:
                target = ctx.path(item["args"]["result_file"])
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ctx.path(item["args"]["expected_file"]), target)
            placed = episode.evaluate()
            assert placed.success, (task.id, placed)
            assert placed.reward == 1.0
            assert placed == episode.evaluate()


@pytest.mark.slow
def test_untouched_testbeds_fail_except_known(real_env: OfficeEnv) -> None:
    passing = []
    for task in real_env.tasks():
        with real_env.start(task) as episode:
            episode.step("complete_task()")
            if episode.evaluate().success:
                passing.append(task.id)
    assert set(passing) == PASSES_UNTOUCHED


def _ics_time(value: str) -> dt.datetime:
    fmt = "%Y%m%dT%H%M%S" if "T" in value else "%Y%m%d"
    return dt.datetime.strptime(value[:15] if "T" in value else value[:8], fmt)


def _oracle(evaluation: list[dict]) -> str | None:
    """Action code that satisfies a task's contain/file_exist checks through the apps (None: other checks).

    Builds, from the checks alone, the output files an agent would produce (emails sent, Word/Excel/PDF files,
    calendar events, answer files): it shows the checks read what the apps write, for the real tasks' own checks.
    """
    lines, written = [], set()
    for n, item in enumerate(evaluation):
        function, args = item["function"], item.get("args") or {}
        if function == "evaluate_file_exist":
            continue
        if function != "evaluate_contain":
            return None
        kind, file, text = args["doc_type"], args.get("file"), " ".join(str(k) for k in args["keywords"])
        written.add(file)
        if kind == "email":
            lines.append(f"apis.email.send_email(sender='oracle', recipient={args['username']!r}, subject='re', "
                         f"content={text!r})")
        elif kind == "txt":
            lines.append(f"os.makedirs(os.path.dirname({file!r}) or '.', exist_ok=True)\n"
                         f"open({file!r}, 'a').write({text!r})")
        elif kind in ("docx", "doc"):
            lines.append(f"if not os.path.exists({file!r}): apis.word.create_new_file(file_path={file!r})\n"
                         f"apis.word.write_to_file(file_path={file!r}, contents={text!r})")
        elif kind == "xlsx":
            lines.append(f"if not os.path.exists({file!r}): apis.excel.create_new_file(file_path={file!r})\n"
                         f"apis.excel.set_cell(file_path={file!r}, row_idx=len(apis.excel.read_file("
                         f"file_path={file!r})) + 1, column_idx=1, text={text!r})")
        elif kind == "pdf":
            lines.append(f"if os.path.exists({file!r}): raise SystemExit('input pdf')\n"
                         f"apis.word.create_new_file(file_path='oracle{n}.docx')\n"
                         f"apis.word.write_to_file(file_path='oracle{n}.docx', contents={text!r})\n"
                         f"apis.word.convert_to_pdf(file_path='oracle{n}.docx', pdf_file_path={file!r})")
        elif kind == "ics" and str(file).lstrip("./").startswith("calendar/"):
            words = [str(k) for k in args["keywords"]]
            stamps = {k.split(":")[0]: k.split(":", 1)[1] for k in words if k.startswith(("DTSTART:", "DTEND:"))}
            summary = " ".join(k for k in words if k.split(":")[0] not in stamps) or "event"
            start = _ics_time(stamps["DTSTART"]) if "DTSTART" in stamps else dt.datetime(2024, 1, 1, 9)
            end = _ics_time(stamps["DTEND"]) if "DTEND" in stamps else start + dt.timedelta(hours=1)
            utc = "Z" if stamps.get("DTSTART", "").endswith("Z") else ""
            user = str(file).rsplit("/", 1)[1][:-4]
            lines.append(f"apis.calendar.create_event(user={user!r}, summary={summary!r}, "
                         f"time_start='{start:%Y-%m-%d %H:%M:%S}{utc}', time_end='{end:%Y-%m-%d %H:%M:%S}{utc}')")
        else:
            return None
    for n, item in enumerate(evaluation):
        file = (item.get("args") or {}).get("file")
        if item["function"] != "evaluate_file_exist" or file in written:
            continue
        if file.endswith(".docx"):
            make = f"apis.word.create_new_file(file_path={file!r})"
        elif file.endswith(".xlsx"):
            make = f"apis.excel.create_new_file(file_path={file!r})"
        elif file.endswith(".pdf"):
            make = (f"apis.word.create_new_file(file_path='exist{n}.docx'); "
                    f"apis.word.convert_to_pdf(file_path='exist{n}.docx', pdf_file_path={file!r})")
        else:
            make = f"os.makedirs(os.path.dirname({file!r}) or '.', exist_ok=True); open({file!r}, 'a').close()"
        lines.append(f"if not os.path.exists({file!r}): {make}")
    return "import os\n" + "\n".join(lines) + "\ncomplete_task()"


@pytest.mark.slow
def test_checks_accept_outputs_built_through_the_apps(real_env: OfficeEnv) -> None:
    handled, failed = 0, []
    for task in real_env.tasks():
        code = _oracle(real_env._real[task.id].evaluation)
        if code is None or task.metadata["known_broken"]:
            continue
        with real_env.start(task) as episode:
            observation = episode.step(code)
            if "input pdf" in observation.output:
                continue
            handled += 1
            score = episode.evaluate()
            if not score.success:
                failed.append((task.id, observation.output[-200:], [c.detail for c in score.checks if not c.passed]))
    assert handled >= 200
    assert not failed


HAND_SOLUTIONS = {
    "1-1/0": "apis.calendar.create_event(user='Bob', summary='Meeting', time_start='2024-05-17 10:30:00', "
             "time_end='2024-05-17 11:00:00')",
    "1-6/0": "apis.excel.set_cell(file_path='data/class_member.xlsx', row_idx=1, column_idx=2, text='Class')\n"
             "for row in range(2, 7):\n"
             "    apis.excel.set_cell(file_path='data/class_member.xlsx', row_idx=row, column_idx=2,\n"
             "                        text=str(row - 1))",
    "3-3/0": "apis.word.convert_to_pdf(file_path='data/manual.docx', pdf_file_path='data/manual.pdf')\n"
             "text = apis.word.read_file(file_path='data/manual.docx')\n"
             "apis.email.send_email(sender='Alice', recipient='Alice', subject='Training manual', content=text)",
    "1-7/3": "rows = apis.excel.read_file(file_path='data/salary.xlsx')\n"
             "row = next(i for i, r in enumerate(rows, start=1) if r[0] == 'stock')\n"
             "for column in (1, 2):\n"
             "    apis.excel.delete_cell(file_path='data/salary.xlsx', row_idx=row, column_idx=column)",
}


@pytest.mark.parametrize("task_id", sorted(HAND_SOLUTIONS))
def test_hand_solved_real_instances(real_env: OfficeEnv, task_id: str) -> None:
    """The apps produce files the benchmark's checks accept (calendar, excel comparator, word->pdf + email, diff)."""
    task = real_env.task(task_id)
    with real_env.start(task) as episode:
        assert not episode.evaluate().success
        observation = episode.step(HAND_SOLUTIONS[task_id] + "\ncomplete_task()")
        assert not observation.error, observation.output
        score = episode.evaluate()
        assert score.success, score


def test_loader_errors(tmp_path: Path) -> None:
    folder = tmp_path / "1-1" / "subtasks"
    folder.mkdir(parents=True)
    (folder / "0.json").write_text("{not json")
    with pytest.raises(InputError, match=r"0\.json"):
        load_officebench(tmp_path)
    (folder / "0.json").write_text(json.dumps({"username": "A", "date": "2020-05-01", "time": "10:00 AM"}))
    with pytest.raises(InputError, match="missing field 'task'"):
        load_officebench(tmp_path)
    with pytest.raises(InputError, match="no OfficeBench tasks"):
        load_officebench(tmp_path / "1-1")
    with pytest.raises(InputError, match="does not exist"):
        OfficeEnv(source=f"officebench:{tmp_path / 'missing'}")


def test_default_root_from_environment(monkeypatch: pytest.MonkeyPatch, officebench_tasks: Path) -> None:
    monkeypatch.delenv("OFFICEBENCH_ROOT", raising=False)
    with pytest.raises(InputError, match="OFFICEBENCH_ROOT"):
        OfficeEnv(source="officebench")
    monkeypatch.setenv("OFFICEBENCH_ROOT", str(officebench_tasks))
    assert len(OfficeEnv(source="officebench").tasks()) == 300
