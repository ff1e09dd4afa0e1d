"""A worked example at the end of an env's docs, replayed as chat turns before the task."""

from __future__ import annotations

import pytest
from helpers_tinyenv import DOCS, CounterScript, TinyEnv, solve_first_task

from skilltransfer.agents.demonstration import split_demonstration
from skilltransfer.envs.apps.docs import overview
from skilltransfer.llm.testing import ScriptedModel

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
