"""The apps env: world scale, APIs (tokens, pagination, errors), docs, tasks, and state-based evaluation."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skilltransfer.envs.apps import AppsEnv
from skilltransfer.envs.apps.docs import REGISTRY, api_count
from skilltransfer.envs.apps.evaluator import answer_matches, normalize_text
from skilltransfer.protocols import TaskSpec

LOGIN = """
acc = {a["account_name"]: a for a in apis.supervisor.show_account_passwords()}
tok = apis.{app}.login(username=acc["{app}"]["username"], password=acc["{app}"]["password"])["access_token"]
"""


@pytest.fixture(scope="module")
def env() -> Iterator[AppsEnv]:
    # workspaces are small SQLite files written many times: a RAM disk (when there is one) keeps this file fast
    ram = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="test-apps-", dir=ram if ram.is_dir() else None) as workdir:
        yield AppsEnv(seed=0, sandboxed=False, workdir=Path(workdir))


def one_per_template(env: AppsEnv) -> list[TaskSpec]:
    first: dict[str, TaskSpec] = {}
    for task in sorted(env.tasks(), key=lambda t: t.id):
        first.setdefault(task.template, task)
    return list(first.values())


def wrong(expected: Any) -> Any:
    """A plausible but wrong answer."""
    if expected is None:
        return "done"
    if isinstance(expected, int | float):
        return expected + 1
    return f"{expected} x"


def run(env: AppsEnv, task: TaskSpec, code: str) -> tuple[Any, Any]:
    with env.start(task) as episode:
        obs = episode.step(code)
        first = episode.evaluate()
        assert episode.evaluate() == first, "evaluation must be deterministic"
        return obs, first


def test_world_is_large_enough(env: AppsEnv) -> None:
    t = env.world.tables
    assert len(t["contacts"]) >= 50
    assert len(t["emails"]) >= 300
    assert len(t["transactions"]) >= 300
    assert len(t["events"]) >= 100
    assert len(t["files"]) >= 100
    assert len(t["texts"]) >= 200
    real_apps = [a for a in REGISTRY if a not in ("api_docs", "supervisor")]
    assert len(real_apps) >= 8
    assert api_count() >= 60
    names = [f"{c['first_name']} {c['last_name']}" for c in t["contacts"]]
    assert len(set(names)) == len(names)


def test_tasks_are_many_deterministic_and_annotated(env: AppsEnv) -> None:
    tasks = env.tasks()
    assert len(tasks) >= 300
    assert len({t.template for t in tasks}) >= 30
    assert {t.difficulty for t in tasks} == {1, 2, 3}
    assert {t.split for t in tasks} == {"dev", "test"}
    assert len(env.tasks("dev")) + len(env.tasks("test")) == len(tasks)
    assert len({t.id for t in tasks}) == len(tasks)
    assert len({t.instruction for t in tasks}) == len(tasks)
    again = AppsEnv(seed=0, sandboxed=False, workdir=env.workdir)
    assert [(t.id, t.instruction) for t in again.tasks()] == [(t.id, t.instruction) for t in tasks]
    other = AppsEnv(seed=1, sandboxed=False, workdir=env.workdir)
    assert {t.instruction for t in other.tasks()} != {t.instruction for t in tasks}
    for task in tasks:
        assert task.metadata["subprocedures"]
        assert task.apps
        assert "solution" not in json.dumps(task.metadata)


def test_subprocedures_are_shared_across_templates(env: AppsEnv) -> None:
    templates_using: dict[str, set[str]] = {}
    for task in env.tasks():
        for name in task.metadata["subprocedures"]:
            templates_using.setdefault(name, set()).add(task.template)
    shared = {name for name, tids in templates_using.items() if len(tids) >= 3}
    assert {"login_to_app", "list_all_pages", "find_contact_email", "find_latest_email_from",
            "sum_transactions_in_period"} <= shared
    assert len(shared) >= 8


def test_reference_solutions_pass_one_per_template(env: AppsEnv) -> None:
    for task in one_per_template(env):
        obs, score = run(env, task, env.reference_solution(task))
        assert not obs.error, (task.id, obs.output)
        assert score.success, (task.id, score)
        assert score.reward == 1.0


def test_do_nothing_and_wrong_answers_fail(env: AppsEnv) -> None:
    for task in one_per_template(env):
        _, idle = run(env, task, "complete_task()")
        assert not idle.success, task.id
        assert idle.reward < 1.0
        _, bad = run(env, task, f"complete_task(answer={wrong(env.expected_answer(task))!r})")
        assert not bad.success, task.id


def test_not_completing_fails(env: AppsEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "send_email")
    code = env.reference_solution(task).replace("complete_task()", "")
    _, score = run(env, task, code)
    assert not score.success
    assert [c.requirement for c in score.checks if not c.passed] == ["task marked complete"]


def test_collateral_damage_is_detected(env: AppsEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "pay_person")
    extra = LOGIN.replace("{app}", "todo") + 'apis.todo.add_todo_item(access_token=tok, list_name="Home", title="x")\n'
    _, score = run(env, task, extra + env.reference_solution(task))
    failed = [c for c in score.checks if not c.passed]
    assert not score.success
    assert [c.requirement for c in failed] == ["no collateral damage"]
    assert "todo_items" in failed[0].detail


def test_partial_or_wrong_changes_fail(env: AppsEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "split_bill")
    code = env.reference_solution(task)
    only_one = re.sub(r"for name in \(('[^']*'), '[^']*'\)", r"for name in (\1,)", code)
    assert only_one != code
    _, score = run(env, task, only_one)
    assert not score.success
    assert [c.requirement for c in score.checks if not c.passed] == ["required changes in payment_requests"]
    task = next(t for t in env.tasks() if t.template == "send_email")
    head, call = env.reference_solution(task).rsplit("send_email_to_contact(", 1)
    _, score = run(env, task, head + "send_email_to_contact(" + call.replace(", '", ", 'Re: ", 1))
    failed = [c.requirement for c in score.checks if not c.passed]
    assert failed == ["required changes in emails", "no collateral damage"]


def test_free_text_fields_only_need_to_contain_the_required_text(env: AppsEnv) -> None:
    task = next(t for t in env.tasks() if t.template == "send_email")
    head, call = env.reference_solution(task).rsplit("send_email_to_contact(", 1)
    args, rest = call.split(")\n", 1)
    name, subject, body = (a.strip() for a in args.split(", ", 2))
    code = f"{head}send_email_to_contact({name}, {subject}, 'Hello!\\n\\n' + {body} + '\\nCheers')\n{rest}"
    _, score = run(env, task, code)
    assert score.success, score


API_ERROR_CASES = [
    ("apis.email.show_inbox()",
     "missing required argument(s): access_token"),
    ("apis.email.show_inbox(access_token='nope')",
     "Invalid or expired access token for email"),
    ("apis.email.login(username='x@y.z', password='p')",
     "No email account with username"),
    ("user = next(a for a in apis.supervisor.show_account_passwords() if a['account_name'] == 'email')['username']\n"
     "apis.email.login(username=user, password='p')",
     "use the password that apis.supervisor.show_account_passwords() lists for account_name 'email'"),
    (LOGIN.replace("{app}", "email") + "apis.email.show_inbox(access_token=tok, page_limit=50)",
     "page_limit must be an integer between 1 and 20"),
    ("apis.email.show_inbox(tok)",
     "keyword arguments only"),
    ("apis.email.show_inbox(access_token=tok, folder='x')",
     "unexpected argument(s) folder"),
    ("apis.email.send_mail(access_token=tok)",
     "has no API 'send_mail'"),
    ("apis.note.search_notes(access_token=tok)",
     "there is no app 'note'. Apps: supervisor, email, contacts, phone, calendar, todo, file_system, notes,"),
    ("apis.calendar.show_events(access_token=tok)",
     "Invalid or expired access token for calendar"),
    ("apis.email.show_email(access_token=tok, email_id=99999)",
     "No email with id 99999"),
    ("apis.email.logout(access_token=tok)\napis.email.show_inbox(access_token=tok)",
     "Invalid or expired access token"),
]
"""(action, text its error observation must contain); run in this order in one episode."""


def test_api_errors_are_clear(env: AppsEnv) -> None:
    task = env.tasks()[0]
    with env.start(task) as episode:
        for action, message in API_ERROR_CASES:
            obs = episode.step(action)
            assert obs.error, action
            assert message in obs.output, (action, obs.output)


def test_pagination_covers_everything_once(env: AppsEnv, tmp_path: Path) -> None:
    task = env.tasks()[0]
    code = LOGIN.replace("{app}", "email") + """
seen, page = [], 0
while True:
    batch = apis.email.show_inbox(access_token=tok, page_index=page, page_limit=20)
    assert len(batch) <= 20
    if not batch:
        break
    seen += [m["email_id"] for m in batch]
    page += 1
print(len(seen), len(set(seen)), len(apis.email.show_inbox(access_token=tok)))
"""
    with env.start(task) as episode:
        obs = episode.step(code)
    inbox = sum(e["folder"] == "inbox" for e in env.world.tables["emails"])
    assert obs.output.split() == [str(inbox), str(inbox), "5"]


def test_docs_overview_and_api_docs(env: AppsEnv) -> None:
    text = env.docs()
    for app in REGISTRY:
        assert f"## {app}:" in text
    assert "send_email(recipients, subject, body)" in text
    task = env.tasks()[0]
    with env.start(task) as episode:
        obs = episode.step("print(apis.api_docs.show_api_doc(app_name='payments', api_name='send_money'))")
        assert "receiver_email" in obs.output
        assert "'required': True" in obs.output
        obs = episode.step("print(len(apis.api_docs.show_app_descriptions()))")
        assert obs.output.strip() == str(len(REGISTRY))
        obs = episode.step("apis.api_docs.show_api_descriptions(app_name='nope')")
        assert obs.error
        assert "No app named 'nope'" in obs.output
        listing = sorted(p.name for p in Path(episode.workspace).rglob("*") if p.is_file())
    assert listing == [], "the world lives with the harness: nothing of it is in the workspace"
    for task in env.tasks():
        answer = env.expected_answer(task)
        if isinstance(answer, str) and len(answer) > 4:
            assert answer not in text
            assert answer not in json.dumps(task.metadata)


def test_answer_normalisation() -> None:
    assert answer_matches(123.4, "$123.40")
    assert answer_matches(1234.5, "1,234.50")
    assert answer_matches(7, 7.0)
    assert not answer_matches(123.4, 123.41)
    assert not answer_matches(3, "3 emails")
    assert not answer_matches(3, None)
    assert answer_matches("Alice Moreno", " alice  moreno. ")
    assert not answer_matches("Alice Moreno", "Alice")
    assert answer_matches(["a", "b"], "b, a")
    assert normalize_text("Total: $1,234.50!") == "total: 1234.5"


def test_unknown_task_and_split_are_input_errors(env: AppsEnv) -> None:
    from skilltransfer.errors import InputError

    with pytest.raises(InputError, match="unknown split"):
        env.tasks("train")
    with pytest.raises(InputError, match="unknown task id"):
        env.reference_solution(TaskSpec(id="nope", instruction="", difficulty=1, template="x"))


@pytest.mark.slow
def test_every_task_reference_passes_and_idle_or_wrong_fails(env: AppsEnv) -> None:
    kinds = Counter()
    for task in env.tasks():
        obs, score = run(env, task, env.reference_solution(task))
        assert not obs.error, (task.id, obs.output)
        assert score.success, (task.id, score)
        assert score.reward == 1.0
        _, idle = run(env, task, "complete_task()")
        assert not idle.success, task.id
        _, bad = run(env, task, f"complete_task(answer={wrong(env.expected_answer(task))!r})")
        assert not bad.success, task.id
        kinds[task.metadata["kind"]] += 1
    assert kinds["question"] >= 100
    assert kinds["action"] >= 150


def test_sandboxed_episodes(tmp_path: Path) -> None:
    pytest.importorskip("skilltransfer.sandbox")
    env = AppsEnv(seed=0, sandboxed=True, workdir=tmp_path)
    for template in ("spent_in_month", "schedule_meeting"):
        task = next(t for t in env.tasks() if t.template == template)
        with env.start(task) as episode:
            obs = episode.step(env.reference_solution(task))
            assert not obs.error, obs.output
            assert obs.done
            assert episode.evaluate().success
    task = env.tasks()[0]
    with env.start(task) as episode:
        obs = episode.step("apis.contacts.search_contacts(access_token='bad')")
        assert obs.error
        assert "Invalid or expired access token" in obs.output
        assert not episode.evaluate().success
