"""A worked example at the end of an env's docs, replayed as chat turns before the task."""

from __future__ import annotations

import pytest
from helpers_tinyenv import DOCS, CounterScript, TinyEnv, role_of, solve_first_task

from skilltransfer.agents.harness.worked_example import (
    first_plan_subtask,
    plan_subtasks,
    split_demonstration,
    split_plan_example,
)
from skilltransfer.envs.apps.docs import overview
from skilltransfer.envs.datasci.api import docs_text
from skilltransfer.envs.office.docs_example import EXAMPLES, example_for
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.sandbox import make_runner

EXAMPLE = '''## Example (another task): "Set the counter to 2."
Thought: Reset first.
```python
print(apis.counter.reset())
```
Observation: 0
Thought: Now add 2 and finish.
```python
apis.counter.add(2)
complete_task()
```
Observation: Task marked as complete.
'''


def test_split_demonstration_parses_turns_and_removes_the_section():
    docs = f"intro\n\n{EXAMPLE}\n## After\nmore"
    rest, demo = split_demonstration(docs)
    assert demo is not None
    assert demo.task == "Set the counter to 2."
    assert [r.splitlines()[0] for r, _ in demo.turns] == ["Thought: Reset first.", "Thought: Now add 2 and finish."]
    assert [o for _, o in demo.turns] == ["0", "Task marked as complete."]
    assert "Example" not in rest
    assert rest.startswith("intro")
    assert "## After\nmore" in rest


@pytest.mark.parametrize("docs", [
    "no example here",
    '## Example (another task): "x"\nThought: a\nThought: b\nObservation: c\n',  # two replies in a row
    '## Example (another task): "x"\nObservation: c\n',  # an observation first
    '## Example (another task): "x"\nThought: a\n```python\nx\n```\n',  # ends without an observation
])
def test_malformed_or_missing_examples_leave_the_docs_alone(docs):
    assert split_demonstration(docs) == (docs, None)


def test_apps_docs_example_follows_the_format():
    _, demo = split_demonstration(overview(("contacts",), example=True))
    assert demo is not None
    assert demo.turns[-1][1] == "Task marked as complete."


def test_datasci_docs_example_follows_the_format_and_its_code_cleans_by_the_readme(tmp_path):
    """The example's cleaning code, run on a file written by its README's conventions, prints what it claims."""
    docs, demo = split_demonstration(docs_text(example=True))
    assert demo is not None
    assert "## Example (another task)" not in docs
    assert demo.turns[-1][1] == "Task marked as complete."
    (tmp_path / "data" / "weather").mkdir(parents=True)
    (tmp_path / "data" / "weather" / "stations.csv").write_text(
        "station_id,name,elevation,elevation_unit\nST-001,A,\"1,000\",ft\n ST-001 ,A,\"1,000\",ft \n"
        "ST-002,B,100,m\nST-003,C,NA,\nST-004,D,-,m\n")
    code = demo.turns[1][0].split("```python\n")[1].split("```")[0]
    runner = make_runner(tmp_path, sandboxed=False)
    try:
        result = runner.execute(code)
    finally:
        runner.close()
    assert result.error is None
    assert result.output.split() == ["4", "2", str(round((304.8 + 100) / 2, 2))]


class ExampleEnv(TinyEnv):
    """The counter world whose docs end with a worked example (a test helper)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.docs = f"{DOCS}\n\n{EXAMPLE}"



def test_executor_replays_the_example_as_turns(tmp_path):
    model = ScriptedModel(CounterScript())
    result, score = solve_first_task(ExampleEnv([4], workdir=tmp_path), model)
    assert score.success
    first = model.calls[0]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "Example" not in first[0]["content"]
    assert "Set the counter to 2." in first[1]["content"]
    assert first[2]["content"].startswith("Thought: Reset first.")
    assert first[3]["content"] == "Observation:\n0\n"
    assert first[5]["content"].startswith("Observation:\nTask marked as complete.")
    assert "Set the counter to 4." in first[5]["content"]  # the real task follows the last observation


def test_as_subtask_ends_the_example_with_a_subtask_done_report():
    demo = split_demonstration(EXAMPLE)[1]
    assert demo is not None
    sub = demo.as_subtask()
    assert sub.turns[:-1] == demo.turns[:-1]
    assert sub.turns[-1] == ("SUBTASK DONE: Now add 2 and finish", "(subtask marked done)")
    assert sub.as_subtask() == sub  # no complete_task left: unchanged
    _, apps_demo = split_demonstration(overview(("notes",), example=True))
    assert apps_demo is not None
    report = apps_demo.as_subtask().turns[-1][0]
    assert report == 'SUBTASK DONE: The note about the dentist is titled "Call the dentist"'


def test_a_report_line_marks_the_examples_first_subtask():
    body = EXAMPLE.replace("Observation: 0\n", "Observation: 0\nReport: the counter is 0.\n")
    rest, demo = split_demonstration(f"docs\n\n{body}")
    assert demo is not None
    assert demo.first_report == (1, "the counter is 0.")
    assert [o for _, o in demo.turns] == ["0", "Task marked as complete."]  # the task-level turns are unchanged
    sub = demo.as_subtask()
    assert sub.turns == (demo.turns[0], ("SUBTASK DONE: the counter is 0.", "(subtask marked done)"))
    assert split_demonstration('## Example (another task): "x"\nReport: r\nThought: a\nObservation: b\n')[1] is None
    assert first_plan_subtask(PLAN) == "reset the counter"
    assert first_plan_subtask(None) is None


@pytest.mark.parametrize("docs", [docs_text(example=True),
                                  *(f"docs\n\n{example_for([app])}" for app in sorted(EXAMPLES))])
def test_env_examples_mark_a_first_subtask_that_is_the_plans_first(docs):
    rest, plan = split_plan_example(docs)
    demo = split_demonstration(rest)[1]
    assert demo is not None
    assert demo.first_report is not None
    assert demo.first_report[0] == 1
    assert first_plan_subtask(plan) is not None


@pytest.mark.parametrize("subtask_example", [True, False])
def test_a_subtask_executor_sees_the_example_end_with_subtask_done(tmp_path, subtask_example):
    model = ScriptedModel(CounterScript())
    _, score = solve_first_task(ExampleEnv([4], workdir=tmp_path), model, level="subtask",
                                subtask_example=subtask_example)
    assert score.success
    executor = [c for c in model.calls if role_of(c) == "executor"]
    reading = [c for c in executor if "# Current subtask\nRead the current counter value." in c[-1]["content"]]
    completing = [c for c in executor if "and complete the task." in c[-1]["content"]]
    assert reading
    assert completing
    for messages in executor:
        example = messages[1:6]
        assert "Set the counter to 2." in example[0]["content"]
        assert ("# Current subtask" in example[0]["content"]) is subtask_example
        assert "Current subtask" in messages[5]["content"]  # the real subtask follows the example
    for messages in reading:
        assert messages[4]["content"].startswith("SUBTASK DONE:" if subtask_example else "Thought: Now add 2")
    for messages in completing:  # a subtask that asks to complete the task sees the example complete it
        assert messages[4]["content"].startswith("Thought: Now add 2")


def test_inline_keeps_the_example_in_the_system_prompt(tmp_path):
    model = ScriptedModel(CounterScript())
    solve_first_task(ExampleEnv([4], workdir=tmp_path), model, demonstration="inline")
    first = model.calls[0]
    assert [m["role"] for m in first] == ["system", "user"]
    assert "## Example (another task)" in first[0]["content"]


def test_planner_never_sees_the_example(tmp_path):
    script = CounterScript()
    model = ScriptedModel(script)
    solve_first_task(ExampleEnv([4], workdir=tmp_path), model, level="subtask")
    planner_prompts = [c[0]["content"] for c in model.calls if "PLANNER" in c[0]["content"]]
    assert planner_prompts
    assert all("Example (another task)" not in p for p in planner_prompts)


PLAN = '''## Example plan (another task): "Set the counter to 2."
SUBTASK: reset the counter
SUBTASK: add 2 and call complete_task()
'''


class PlanExampleEnv(TinyEnv):
    """The counter world whose docs end with a worked example and its plan (a test helper)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.docs = f"{DOCS}\n\n{EXAMPLE}\n{PLAN}"


def test_split_plan_example_removes_the_section():
    docs, plan = split_plan_example(f"{DOCS}\n\n{PLAN}\n## Later section\ntext\n")
    assert plan == PLAN.strip()
    assert "Example plan" not in docs
    assert "## Later section\ntext" in docs
    assert split_plan_example(DOCS) == (DOCS, None)


def test_the_planner_sees_the_example_plan_and_the_executor_does_not(tmp_path):
    model = ScriptedModel(CounterScript())
    solve_first_task(PlanExampleEnv([4], workdir=tmp_path), model, level="subtask")
    planner = [c[0]["content"] for c in model.calls if "PLANNER" in c[0]["content"]]
    others = [m["content"] for c in model.calls if "PLANNER" not in c[0]["content"] for m in c]
    assert planner
    assert all(PLAN.strip() in p and "Example (another task)" not in p for p in planner)
    assert others
    assert all("Example plan" not in text for text in others)


@pytest.mark.parametrize("docs", [overview(("notes",), example=True), docs_text(example=True),
                                  *(f"docs\n\n{example_for([app])}" for app in sorted(EXAMPLES))])
def test_env_docs_plans_follow_the_format(docs):
    rest, plan = split_plan_example(docs)
    assert plan is not None
    assert split_demonstration(rest)[1] is not None
    lines = plan.splitlines()[1:]
    assert lines
    assert all(line.startswith("SUBTASK: ") for line in lines)
    assert "complete_task" in lines[-1]


def test_numbers_of_the_worked_example_do_not_ground_a_subtask_report(tmp_path):
    """The example's observations are not this task's outputs: a report of the example's "0" is refused."""
    replies = iter(["```python\nprint(apis.counter.add(4))\n```", "SUBTASK DONE: it was 0 before", "SUBTASK DONE: 4"])

    def script(messages):
        system = messages[0]["content"]
        if "PLANNER" in system:
            return "SUBTASK: set the counter to 4" if "(none yet)" in messages[-1]["content"] else "DONE"
        return "- counter is 4" if "SUMMARIZER" in system else next(replies)

    result, _ = solve_first_task(ExampleEnv([4], workdir=tmp_path), ScriptedModel(script), level="subtask",
                                 close_unfinished=False)
    assert result.actions[1].refused == "ungrounded_report"


def test_a_subtask_executor_sees_the_examples_first_subtask_under_the_plans_first_line(tmp_path):
    env = PlanExampleEnv([4], workdir=tmp_path)
    env.docs = env.docs.replace("Observation: 0\n", "Observation: 0\nReport: the counter is 0.\n")
    model = ScriptedModel(CounterScript())
    _, score = solve_first_task(env, model, level="subtask")
    assert score.success
    executor = [c for c in model.calls if role_of(c) == "executor"]
    reading = [c for c in executor if "# Current subtask\nRead the current counter value." in c[-1]["content"]]
    assert reading
    for messages in reading:
        assert "# Current subtask\nreset the counter" in messages[1]["content"]
        assert messages[2]["content"].startswith("Thought: Reset first.")
        assert messages[4]["content"] == "SUBTASK DONE: the counter is 0."
    assert all("Report:" not in m["content"] for c in executor for m in c)
    task_env = PlanExampleEnv([4], workdir=tmp_path / "task")
    task_env.docs = env.docs
    task_level = ScriptedModel(CounterScript())
    solve_first_task(task_env, task_level)
    assert all("Report:" not in m["content"] for m in task_level.calls[0])


THREE_STEPS = '''## Example (another task): "Set the counter to 3."
Thought: Reset first.
```python
print(apis.counter.reset())
```
Observation: 0
Report: the counter is 0.
Thought: Add 3.
```python
print(apis.counter.add(3))
```
Observation: 3
Report: the counter is now 3.
Thought: Done.
```python
complete_task()
```
Observation: Task marked as complete.
'''
THREE_PLAN = '''## Example plan (another task): "Set the counter to 3."
SUBTASK: reset the counter
SUBTASK: add the number the task asks for
SUBTASK: call complete_task()
'''


def test_report_lines_mark_each_subtask_of_the_example():
    demo = split_demonstration(THREE_STEPS)[1]
    assert demo is not None
    assert demo.reports == ((1, "the counter is 0."), (2, "the counter is now 3."))
    assert demo.as_subtask(0).turns == (demo.turns[0], ("SUBTASK DONE: the counter is 0.", "(subtask marked done)"))
    second = (demo.turns[1], ("SUBTASK DONE: the counter is now 3.", "(subtask marked done)"))
    assert demo.as_subtask(1).turns == second
    assert demo.as_subtask(5).turns == second  # past the last report: the last reported subtask
    assert plan_subtasks(THREE_PLAN) == ["reset the counter", "add the number the task asks for",
                                         "call complete_task()"]
    twice = THREE_STEPS.replace("Report: the counter is now 3.\n", "Report: a\nReport: b\n")
    assert split_demonstration(twice)[1] is None  # two reports for one subtask: not the format


def test_the_second_subtask_sees_the_examples_second_subtask_under_its_earlier_report(tmp_path):
    env = TinyEnv([4], workdir=tmp_path)
    env.docs = f"{DOCS}\n\n{THREE_STEPS}\n{THREE_PLAN}"
    model = ScriptedModel(CounterScript())
    _, score = solve_first_task(env, model, level="subtask")
    assert score.success
    executor = [c for c in model.calls if role_of(c) == "executor"]
    first = next(c for c in executor if "# Current subtask\nRead the current counter value." in c[-1]["content"])
    assert "# Current subtask\nreset the counter" in first[1]["content"]
    assert "# Progress so far\n(nothing done yet)" in first[1]["content"]
    second = next(c for c in executor if "# Current subtask\nSet the counter to 4" in c[-1]["content"])
    # the second subtask asks to complete the task, so it sees the whole example
    assert second[2]["content"].startswith("Thought: Reset first.")
    assert len([m for m in second if m["role"] == "assistant"]) >= 3


def test_a_later_subtask_that_may_not_complete_sees_the_examples_later_subtask(tmp_path):
    from skilltransfer.agents.config import AgentConfig
    from skilltransfer.agents.executor import Executor
    from skilltransfer.agents.harness.base import RunContext
    from skilltransfer.agents.prompts import AgentPrompts
    from skilltransfer.agents.steps import CallLog

    env = TinyEnv([4], workdir=tmp_path)
    env.docs = f"{DOCS}\n\n{THREE_STEPS}\n{THREE_PLAN}"
    episode = env.start(env.tasks()[0])
    try:
        executor = Executor(ScriptedModel(["x"]), AgentPrompts.load(None),
                            AgentConfig(level="subtask", harness="small-model"), CallLog())
        messages = executor.opening(RunContext(episode, "TASK", budget=1, subtask_index=1, subtask_mode=True,
                                               subtask="add the number"))
    finally:
        episode.close()
    opening = messages[1]["content"]
    assert "# Current subtask\nadd the number the task asks for" in opening
    assert "# Progress so far\n- the counter is 0." in opening
    assert "1. reset the counter -> subtask_done: the counter is 0." in opening
    assert messages[2]["content"].startswith("Thought: Add 3.")
    assert messages[4]["content"] == "SUBTASK DONE: the counter is now 3."
    assert messages[5]["content"].endswith("TASK")
