"""The office env's generated tasks, apps and checks (in-process; sandboxed episodes once the sandbox exists)."""

from __future__ import annotations

import collections
import contextlib
import io
from pathlib import Path

import pytest

from skilltransfer.agents.harness.worked_example import split_demonstration
from skilltransfer.envs.office import OfficeEnv, files
from skilltransfer.envs.office.checks import CheckContext, run_check, run_checks
from skilltransfer.envs.office.docs_example import EXAMPLES, example_for
from skilltransfer.envs.office.office_tools.apps import APPS, docs_overview, setup
from skilltransfer.envs.office.safe_lambda import UnsafeExpressionError, compile_lambda
from skilltransfer.envs.office.templates import TEMPLATES
from skilltransfer.errors import InputError

OCR = files.tesseract_available()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> OfficeEnv:
    return OfficeEnv(seed=0, sandboxed=False, workdir=tmp_path_factory.mktemp("office"))


def _run(env: OfficeEnv, task, code: str):
    with env.start(task) as episode:
        observation = episode.step(code)
        first, second = episode.evaluate(), episode.evaluate()
    assert first == second, "evaluation is not deterministic"
    return observation, first


def _needs_ocr(task) -> bool:
    return "tesseract" in task.metadata["requires"]


# ---------------------------------------------------------------- task list


def test_task_list_shape(env: OfficeEnv) -> None:
    tasks = env.tasks()
    assert len(tasks) >= 200
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.difficulty for t in tasks} == {1, 2, 3}
    assert all(t.difficulty == len(t.apps) for t in tasks)
    assert {t.split for t in tasks} == {"dev", "test"}
    assert len(env.tasks("dev")) + len(env.tasks("test")) == len(tasks)
    for task in tasks:
        assert task.metadata["subprocedures"]
        assert task.id.startswith(task.template + "/")
        solution = env.reference_solution(task)
        assert solution not in task.instruction
        assert solution not in str(task.metadata)
    with pytest.raises(InputError):
        env.tasks("train")


def test_subprocedures_are_shared_across_templates() -> None:
    users = collections.Counter(name for template in TEMPLATES for name in template.subprocedures)
    shared = {name for name, count in users.items() if count >= 2}
    assert {"read_excel_column", "send_email", "create_calendar_event", "write_docx_summary",
            "convert_docx_to_pdf", "find_email_by_subject"} <= shared
    assert len(TEMPLATES) >= 12
    for template in TEMPLATES:  # the reference code really exercises the apps it claims
        draft = template.make(__import__("random").Random(1))
        for app in template.apps:
            assert f"apis.{app}." in draft.solution, (template.name, app)


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first = OfficeEnv(seed=3, workdir=tmp_path / "a").tasks()
    assert first == OfficeEnv(seed=3, workdir=tmp_path / "b").tasks()
    assert [t.instruction for t in first] != [t.instruction for t in OfficeEnv(seed=4).tasks()]
    assert not (tmp_path / "a").exists()  # nothing is written before start()


def test_start_is_lazy_fresh_and_reproducible(env: OfficeEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "excel_to_docx_report")
    with env.start(task) as one, env.start(task) as two:
        assert one.workspace != two.workspace
        names = sorted(p.relative_to(one.workspace).as_posix() for p in one.workspace.rglob("*") if p.is_file())
        assert names == sorted(p.relative_to(two.workspace).as_posix() for p in two.workspace.rglob("*")
                               if p.is_file())
        xlsx = [n for n in names if n.endswith(".xlsx")]
        assert xlsx
        assert all(files.xlsx_text(one.workspace / n) == files.xlsx_text(two.workspace / n) for n in xlsx)
        one.step(env.reference_solution(task))
        assert list(one.workspace.glob("data/*_report.docx"))
        assert not list(two.workspace.glob("data/*_report.docx"))  # episodes do not share files
        workspace = one.workspace
    assert not workspace.exists()


def test_unknown_source_and_task(env: OfficeEnv) -> None:
    with pytest.raises(InputError, match="unknown office source"):
        OfficeEnv(source="nope")
    with pytest.raises(InputError, match="unknown office task"):
        env.task("nope/0")


# ---------------------------------------------------------------- solutions and checks


def _one_per_template(env: OfficeEnv) -> list:
    seen: dict[str, object] = {}
    for task in env.tasks():
        if task.template not in seen and not _needs_ocr(task):
            seen[task.template] = task
    return list(seen.values())


def test_sample_reference_decoy_and_nothing(env: OfficeEnv) -> None:
    for task in _one_per_template(env):
        observation, score = _run(env, task, env.reference_solution(task))
        assert not observation.error, (task.id, observation.output)
        assert observation.done
        assert score.success, (task.id, score)
        assert score.reward == 1.0
        _, wrong = _run(env, task, env.decoy_solution(task))
        assert not wrong.success, (task.id, wrong)
        _, nothing = _run(env, task, "complete_task()")
        assert not nothing.success, task.id
        assert nothing.reward < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("template", [t.name for t in TEMPLATES])
def test_every_task_reference_passes_and_wrong_work_fails(env: OfficeEnv, template: str) -> None:
    tasks = [t for t in env.tasks() if t.template == template]
    if any(_needs_ocr(t) for t in tasks) and not OCR:
        pytest.skip("tesseract-ocr is not installed")
    for task in tasks:
        observation, score = _run(env, task, env.reference_solution(task))
        assert not observation.error, (task.id, observation.output)
        assert score.success, (task.id, score)
        assert score.reward == 1.0
        assert not _run(env, task, env.decoy_solution(task))[1].success, task.id
        assert not _run(env, task, "complete_task()")[1].success, task.id


def test_wrong_answer_value_fails(env: OfficeEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "excel_top_item")
    _, score = _run(env, task, "complete_task(answer='nobody')")
    assert not score.success
    assert any("no answer" in c.detail or "missing" in c.detail for c in score.checks)


# ---------------------------------------------------------------- apps


@pytest.fixture
def apis(tmp_path: Path):
    (tmp_path / "data").mkdir()
    return setup(tmp_path, now="2024-05-01 09:00:00", username="Alice")["apis"]


def test_email_app_writes_eml_into_mailboxes(apis, tmp_path: Path) -> None:
    result = apis.email.send_email(sender="Alice", recipient="bob@example.com", subject="Hello", content="Hi 1,234")
    assert "bob" in result
    assert (tmp_path / "emails" / "bob" / "Hello.eml").is_file()
    assert (tmp_path / "emails" / "Alice" / "Hello.eml").is_file()
    listing = apis.email.list_emails(username="bob")
    assert listing[0]["subject"] == "Hello"
    assert apis.email.read_email(username="bob", email_id="Hello")["content"].strip() == "Hi 1,234"
    apis.email.send_email(sender="Alice", recipient="bob", subject="Hello", content="again")
    assert len(apis.email.list_emails(username="bob")) == 2
    with pytest.raises(ValueError, match="one user"):
        apis.email.send_email(sender="Alice", recipient=["a", "b"], subject="x", content="y")
    with pytest.raises(FileNotFoundError):
        apis.email.read_email(username="bob", email_id="missing")
    ctx = CheckContext(tmp_path)
    assert run_check(ctx, {"function": "evaluate_contain", "args": {"doc_type": "email", "username": "Bob",
                                                                    "keywords": ["hello", "1234"]}}).passed


def test_users_are_found_by_name_or_address_in_any_case(apis, tmp_path: Path) -> None:
    apis.email.send_email(sender="Quinn", recipient="Paul", subject="Notes", content="REF-1")
    assert apis.email.list_emails(username="quinn@example.com")[0]["subject"] == "Notes"
    apis.email.send_email(sender="QUINN@example.com", recipient="paul@example.com", subject="Fwd", content="x")
    assert sorted(p.name for p in (tmp_path / "emails").iterdir()) == ["Paul", "Quinn"]
    assert len(apis.email.list_emails(username="Paul")) == 2
    with pytest.raises(FileNotFoundError, match="no mailbox for user 'zoe'; users with a mailbox: 'Paul', 'Quinn'"):
        apis.email.list_emails(username="zoe")
    apis.calendar.create_event(user="Ivy", summary="a", time_start="2024-05-17 19:00", time_end="2024-05-17 20:00")
    assert [e["summary"] for e in apis.calendar.list_events(username="ivy@example.com")] == ["a"]
    apis.calendar.delete_event(user="IVY", summary="a")
    with pytest.raises(FileNotFoundError, match="no calendar for user 'Bob'; users with a calendar: 'Ivy'"):
        apis.calendar.list_events(username="Bob")


def test_calendar_app_round_trip(apis, tmp_path: Path) -> None:
    apis.calendar.create_event(user="Bob", summary="Dinner", time_start="2024-05-17 19:00:00",
                               time_end="2024-05-17 20:00:00", location="Cafe")
    apis.calendar.create_event(user="Bob", summary="Trip", time_start="2024-06-19", time_end="2024-06-23")
    text = (tmp_path / "calendar" / "Bob.ics").read_text()
    assert "DTSTART:20240517T190000" in text
    assert "DTSTART:20240619T000000" in text
    events = apis.calendar.list_events(username="Bob")
    assert [e["summary"] for e in events] == ["Dinner", "Trip"]
    assert events[0]["start"] == "2024-05-17 19:00:00"
    ctx = CheckContext(tmp_path)
    overlap = {"function": "evaluate_calendar_no_overlap", "args": {"username": "Bob"}}
    assert run_check(ctx, overlap).passed
    apis.calendar.create_event(user="Bob", summary="Call", time_start="2024-05-17 19:30", time_end="2024-05-17 21:00")
    assert not run_check(ctx, overlap).passed
    apis.calendar.delete_event(user="Bob", summary="Call")
    assert run_check(ctx, overlap).passed
    with pytest.raises(ValueError, match="no event"):
        apis.calendar.delete_event(user="Bob", summary="Call")
    with pytest.raises(ValueError, match="format"):
        apis.calendar.create_event(user="Bob", summary="x", time_start="tomorrow", time_end="later")
    apis.calendar.create_event(user="Ann", summary="UTC", time_start="2024-05-31 13:00:00Z",
                               time_end="2024-05-31T16:00:00+02:00")
    assert "DTSTART:20240531T130000Z" in (tmp_path / "calendar" / "Ann.ics").read_text()
    assert apis.calendar.list_events(username="Ann")[0]["end"] == "2024-05-31 14:00:00Z"


def test_excel_word_pdf_apps(apis, tmp_path: Path) -> None:
    apis.excel.create_new_file(file_path="data/t.xlsx")
    assert apis.excel.set_cell(file_path="data/t.xlsx", row_idx=1, column_idx=1, text="Name") == \
        "Set cell (1, 1) of data/t.xlsx (was None) to 'Name'."
    apis.excel.set_cell(file_path="data/t.xlsx", row_idx=1, column_idx=2, text="Units")
    apis.excel.set_cell(file_path="data/t.xlsx", row_idx=2, column_idx=2, text="200000")
    assert apis.excel.set_cell(file_path="data/t.xlsx", row_idx=2, column_idx=2, text="7") == \
        "Set cell (2, 2) of data/t.xlsx (column 'Units', was 200000) to 7."  # the header names the column hit
    assert apis.excel.read_file(file_path="data/t.xlsx") == [["Name", "Units"], [None, 7]]
    assert "(2, 2): 7\t" in files.xlsx_text(tmp_path / "data" / "t.xlsx")
    assert apis.excel.delete_cell(file_path="data/t.xlsx", row_idx=1, column_idx=1) == \
        "Emptied cell (1, 1) of data/t.xlsx (was 'Name')."
    assert apis.excel.read_file(file_path="data/t.xlsx")[0][0] is None
    with pytest.raises(FileNotFoundError):
        apis.excel.set_cell(file_path="data/none.xlsx", row_idx=1, column_idx=1, text="x")
    with pytest.raises(ValueError, match=">= 1"):
        apis.excel.set_cell(file_path="data/t.xlsx", row_idx=0, column_idx=1, text="x")
    apis.word.create_new_file(file_path="data/d.docx")
    apis.word.write_to_file(file_path="data/d.docx", contents="Report", style="title")
    apis.word.write_to_file(file_path="data/d.docx", contents="Total: 42")
    assert apis.word.read_file(file_path="data/d.docx").splitlines()[-2:] == ["Report", "Total: 42"]
    apis.word.convert_to_pdf(file_path="data/d.docx", pdf_file_path="data/d.pdf")
    assert "Total: 42" in apis.pdf.read_file(pdf_file_path="data/d.pdf")
    images = apis.pdf.convert_to_image(pdf_file_path="data/d.pdf", image_file_path="data/d.png")
    assert images == ["data/d.png"]
    assert (tmp_path / "data" / "d.png").stat().st_size > 0
    apis.pdf.image_convert_to_pdf(image_file_path="data/d.png", pdf_file_path="data/scan.pdf")
    assert (tmp_path / "data" / "scan.pdf").is_file()
    apis.pdf.convert_to_word(pdf_file_path="data/d.pdf", word_file_path="data/back.docx")
    assert "Total: 42" in apis.word.read_file(file_path="data/back.docx")
    apis.excel.convert_to_pdf(file_path="data/t.xlsx", pdf_file_path="data/t.pdf")
    assert "Units\n7" in apis.pdf.read_file(pdf_file_path="data/t.pdf")
    with pytest.raises(ValueError, match="outside the workspace"):
        apis.word.read_file(file_path="../../etc/passwd")


def test_ocr_app(apis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files.write_text_image(tmp_path / "data" / "note.png", ["Invoice 4821", "Bluebird Cafe"])
    if OCR:
        text = apis.ocr.recognize_file(file_path="data/note.png")
        assert "4821" in text
        assert "Bluebird" in text
    monkeypatch.setattr(files, "tesseract_available", lambda: False)
    with pytest.raises(RuntimeError, match="tesseract-ocr"):
        apis.ocr.recognize_file(file_path="data/note.png")


def test_api_docs(apis) -> None:
    names = [app["name"] for app in apis.api_docs.show_app_descriptions()]
    assert names == list(APPS)
    assert {a["name"] for a in apis.api_docs.show_api_descriptions(app_name="excel")} == {
        "read_file", "set_cell", "delete_cell", "create_new_file", "convert_to_pdf"}
    doc = apis.api_docs.show_api_doc(app_name="email", api_name="send_email")
    assert doc["signature"].startswith("send_email(sender")
    with pytest.raises(ValueError, match="no API"):
        apis.api_docs.show_api_doc(app_name="email", api_name="nope")
    overview = docs_overview()
    assert all(f"apis.{app}." in overview for app in APPS)
    assert "complete_task" in overview
    # an API's line is its docstring's whole first paragraph, not a first line that stops mid-sentence
    create = next(line for line in overview.splitlines() if "create_event(" in line)
    assert create.endswith("(a bare date means midnight); append 'Z' (e.g. '2024-05-31 13:00:00Z') for a UTC time.")
    assert overview.count("\n  apis.") == sum(len(cls.api_names()) for cls in APPS.values())


# ---------------------------------------------------------------- checks


def test_safe_comparator() -> None:
    member = compile_lambda("lambda x: x in ['1', '2', '3', '4', '5']")
    assert member("3")
    assert not member("7")
    assert compile_lambda("lambda x: float(x) >= 2.5 and x.strip().isdigit()")("3")
    assert compile_lambda("lambda a, b: abs(int(a) - int(b)) < 2")("3", "4")
    for bad in ("__import__('os').system('true')", "lambda x: x.__class__", "lambda x: open(x)",
                "lambda x: [y for y in x]", "lambda x: (lambda: 1)()", "lambda x: str", "lambda x: 2 ** 10000",
                "lambda x: x.lower", "lambda *a: 1", "lambda x: exec('1')", "not python ("):
        with pytest.raises(UnsafeExpressionError):
            compile_lambda(bad)(1) if "10000" in bad else compile_lambda(bad)


def test_check_semantics(tmp_path: Path) -> None:
    files.write_text(tmp_path / "data" / "answer.txt", "Total is 1,250 dollars")
    files.write_xlsx(tmp_path / "data" / "s.xlsx", [["Name", "Class"], ["Ann", 3], ["Bo", 9]])
    ctx = CheckContext(tmp_path)

    def check(function: str, **args) -> bool:
        return run_check(ctx, {"function": function, "args": args}).passed

    assert check("evaluate_contain", doc_type="txt", file="data/answer.txt", keywords=["1250", "TOTAL"])
    assert not check("evaluate_contain", doc_type="txt", file="data/answer.txt", keywords=["1250", "euros"])
    assert check("evaluate_not_contain", doc_type="txt", file="data/answer.txt", keywords=["euros"])
    assert not check("evaluate_contain", doc_type="txt", file="data/missing.txt", keywords=["x"])
    assert not check("evaluate_file_exist", file="../outside.txt")
    assert not check("evaluate_file_exist", file=str(tmp_path / "data" / "answer.txt"))  # absolute: refused
    assert not check("evaluate_file_exist", file="data/../../x")
    assert check("evaluate_excel_cell_value", file="data/s.xlsx", matches=[{"row": 2, "col": 2, "value": "3"}])
    comparator = "lambda x: x in ['1', '2', '3', '4', '5']"
    assert check("evaluate_excel_cell_comparator", file="data/s.xlsx",
                 matches=[{"row": "2", "col": "2", "comparator": comparator}])
    assert not check("evaluate_excel_cell_comparator", file="data/s.xlsx",
                     matches=[{"row": "3", "col": "2", "comparator": comparator}])
    rejected = run_check(ctx, {"function": "evaluate_excel_cell_comparator", "args": {
        "file": "data/s.xlsx", "matches": [{"row": 2, "col": 2, "comparator": "lambda x: __import__('os')"}]}})
    assert not rejected.passed
    assert "rejected comparator" in rejected.detail
    assert not check("evaluate_excel_cell_value", matches=[{"row": 1, "col": 1, "value": "Name"}])
    assert check("evaluate_exact_match", doc_type="xlsx", result_file="data/s.xlsx", expected_file="./data/s.xlsx")
    files.write_xlsx(tmp_path / "data" / "t.xlsx", [["Name", "Class"], ["Ann", 3]])
    assert not check("evaluate_exact_match", doc_type="xlsx", result_file="data/s.xlsx", expected_file="data/t.xlsx")
    assert not run_check(ctx, {"function": "evaluate_magic", "args": {}}).passed
    score = run_checks(ctx, [{"function": "evaluate_file_exist", "args": {"file": "data/s.xlsx"}},
                             {"function": "evaluate_file_exist", "args": {"file": "data/nope"}}])
    assert not score.success
    assert score.reward == 0.5


# ---------------------------------------------------------------- sandboxed episodes


def test_sandboxed_episodes(tmp_path: Path) -> None:
    pytest.importorskip("skilltransfer.sandbox")
    env = OfficeEnv(seed=0, workdir=tmp_path)
    picks = ["excel_value_email", "docx_to_pdf_email", "meeting_request"]
    for template in picks:
        task = next(t for t in env.tasks() if t.template == template)
        with env.start(task) as episode:
            observation = episode.step(env.reference_solution(task))
            assert not observation.error, observation.output
            assert episode.evaluate().success
        with env.start(task) as episode:
            episode.step("complete_task()")
            assert not episode.evaluate().success


# ---------------------------------------------------------------- worked examples


@pytest.mark.parametrize("app", sorted(EXAMPLES))
def test_docs_example_replays_on_its_testbed(app: str, tmp_path: Path) -> None:
    """Every code block of an app's worked example, run in order on the example's testbed, prints exactly the
    observation the example shows (so no example teaches a wrong API result)."""
    example = EXAMPLES[app]
    example.prepare(tmp_path)
    namespace = setup(tmp_path, username=example.username)
    namespace["complete_task"] = lambda answer=None: print("Task marked as complete.")
    _, demo = split_demonstration(f"docs\n\n{example_for([app])}")
    assert demo is not None
    assert f"apis.{app}." in example.text
    for reply, observation in demo.turns:
        code = reply.split("```python\n", 1)[1].split("```", 1)[0]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        assert printed.getvalue().strip() == observation


def test_episode_docs_end_with_the_tasks_app_example(tmp_path: Path) -> None:
    env = OfficeEnv(seed=0, sandboxed=False, workdir=tmp_path)
    plain = OfficeEnv(seed=0, sandboxed=False, workdir=tmp_path, docs_example=False)
    by_template = {task.template: task for task in env.tasks()}
    for template, app in (("excel_update_cell", "excel"), ("calendar_cancel_event", "calendar"),
                          ("email_forward", "email"), ("email_to_calendar", "email")):
        task = by_template[template]
        assert env.docs(task) == f"{docs_overview()}\n\n{EXAMPLES[app].text.rstrip()}\n\n{EXAMPLES[app].plan.rstrip()}"
        assert plain.docs(task) == docs_overview()
        with env.start(task) as episode:
            assert episode.docs() == env.docs(task)
    assert env.docs(by_template["ocr_note_to_word"]) == docs_overview()  # no example for its apps
    assert env.docs() == docs_overview()
