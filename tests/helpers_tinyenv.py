"""A tiny counter world for agent/induction/stream tests (a test helper, not a benchmark).

The world state is a counter held on the harness side (the episode's ``Counter``); the agent's namespace has the
service stubs ``apis.counter.get()``, ``apis.counter.add(n)``, ``apis.counter.reset()`` and
``complete_task(answer=None)``. Task "Set the counter to N" succeeds when the final counter is N and the agent
called ``complete_task``.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import Submission, WorkspaceEpisode, temporary_workdir
from skilltransfer.protocols import Check, Score, TaskSpec
from skilltransfer.sandbox import Services
from skilltransfer.sandbox.services import function, tree

DOCS = """apis.counter.get() -> int: the current counter value.
apis.counter.add(n: int) -> int: add n (an int) to the counter; returns the new value.
apis.counter.reset() -> int: set the counter to 0.
apis.counter.history() -> str: a long log of past counter readings.
complete_task(answer=None): call when the task is finished."""
HISTORY_LINES = 36

COUNTER_APIS = ("get", "add", "reset", "history")
BINDINGS = {"apis": tree({"counter": tree({name: function(f"counter.{name}") for name in COUNTER_APIS}, "<counter>")},
                         "<apis>")}


class Counter:
    """The counter world of one episode (harness side)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def get(self) -> int:
        return self.value

    def add(self, n: int) -> int:
        if not isinstance(n, int):
            raise TypeError(f"add() needs an int, got {type(n).__name__}")
        self.value += n
        return self.value

    def reset(self) -> int:
        self.value = 0
        return 0

    def history(self) -> str:  # a long observation (about 2,150 characters)
        return "\n".join(f"reading {i}: the counter was checked and found as before" for i in range(HISTORY_LINES))

    def services(self) -> Services:
        services = Services()
        for name in COUNTER_APIS:
            services.register(f"counter.{name}", getattr(self, name))
        return services


class TinyEnv:
    """Counter tasks; each episode gets a fresh workspace (in-process runner).

    Args:
        targets: the target value of each task, in stream order.
        start: the counter's initial value.
        workdir: where workspaces are created (a temp dir by default).
        sandboxed: run agent code in ``skilltransfer.sandbox`` (default: in-process).
        docs_padding: characters of extra notes appended to the API docs (a system prompt too long for a window).
    """

    name = "tiny"

    def __init__(self, targets: list[int] | tuple[int, ...] = (3, 5, 2), *, start: int = 0,
                 workdir: Path | None = None, sandboxed: bool = False, docs_padding: int = 0) -> None:
        self.sandboxed = sandboxed
        self.docs = DOCS + ("\nNotes: " + "the counter is an integer. " * (docs_padding // 27 + 1))[:docs_padding + 8] \
            if docs_padding else DOCS
        self.targets = list(targets)
        self.start_value = start
        self.workdir = Path(workdir) if workdir else temporary_workdir("tinyenv-")
        self._counter = itertools.count()

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        return [TaskSpec(id=f"tiny/{i}", instruction=f"Set the counter to {t}.", difficulty=1, template="set_counter",
                         apps=("counter",), metadata={"subprocedures": ["add_to_counter"], "target": t})
                for i, t in enumerate(self.targets)]

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        workspace = self.workdir / f"ep{next(self._counter)}"
        workspace.mkdir(parents=True)
        counter = Counter(self.start_value)
        target = int(task.metadata["target"])

        def evaluate(ws: Path, submission: Submission) -> Score:
            value_ok = counter.value == target
            checks = (Check(f"counter == {target}", value_ok, f"counter is {counter.value}"),
                      Check("completed", submission.done))
            return Score(reward=float(value_ok and submission.done), success=value_ok and submission.done,
                         checks=checks)

        return WorkspaceEpisode(task, workspace, services=counter.services(), bindings=BINDINGS, docs=self.docs,
                                evaluator=evaluate, sandboxed=self.sandboxed)

    def reference_solution(self, task: TaskSpec) -> str:
        return f"apis.counter.reset()\napis.counter.add({int(task.metadata['target'])})\ncomplete_task()"


# --------------------------------------------------------------------------------------------- scripted policies
ROLE_MARKERS = {"planner": "You are the PLANNER", "summarizer": "You are the SUMMARIZER",
                "induction": "You induce a reusable SKILL", "executor": "You are the EXECUTOR"}

TEXT_SKILL = """NAME: set_counter_value
DESCRIPTION: Set the counter to a target value.
BODY:
1. Reset the counter with apis.counter.reset().
2. Add the target with apis.counter.add(<target>) and call complete_task().
Caveat: add() needs an int."""

CODE_SKILL = '''NAME: set_counter_to
DESCRIPTION: Set the counter to a target value.
BODY:
```python
def set_counter_to(target):
    """Reset the counter and add target; returns the new value."""
    apis.counter.reset()
    print("set_counter_to called")
    # add() needs an int
    return apis.counter.add(int(target))
```'''


def solve_first_task(env: Any, model: Any, **config: Any) -> tuple[Any, Score]:
    """Run an `Agent` (``config``: its settings) on ``env``'s first task; (its result, the episode's score)."""
    from skilltransfer.agents import Agent

    episode = env.start(env.tasks()[0])
    try:
        return Agent(model, **{"harness": "small-model", **config}).run(episode), episode.evaluate()
    finally:
        episode.close()


def role_of(messages: list[dict[str, Any]]) -> str:
    """Which agent part sent these messages (by its system prompt)."""
    system = messages[0]["content"]
    for role, marker in ROLE_MARKERS.items():
        if marker in system:
            return role
    raise AssertionError(f"unknown prompt: {system[:80]!r}")


def _target(text: str) -> int:
    import re

    return int(re.findall(r"[Ss]et the counter to (-?\d+)", text)[0])


def task_start(messages: list[dict[str, Any]]) -> int:
    """Index of the executor's task message: the last leading user message that states a task (a demonstration of
    another task may come before it; the task message then follows the demonstration's last observation)."""
    index = 1
    for i, message in enumerate(messages):
        if message["role"] == "user" and ("# Task\n" in message["content"] or "# Overall task" in message["content"]):
            index = i
    return index


class SimulatedCrash(BaseException):
    """A crash of the process (like Ctrl-C or a kill): not the task's failure, so it stops the stream (an
    ``Exception`` inside a task is recorded as that task's error instead)."""


class CounterScript:
    """A callable script for ``ScriptedModel`` that plays every role in the counter world.

    Args:
        induction: the induction reply, or a function ``(call_number, messages) -> reply``.
        fail_at: raise `SimulatedCrash` on this (0-based) model call (simulates an interrupted run).
    """

    def __init__(self, induction: Any = TEXT_SKILL, *, fail_at: int | None = None) -> None:
        self.induction = induction
        self.fail_at = fail_at
        self.roles: list[str] = []
        self.induction_calls = 0

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        role = role_of(messages)
        if self.fail_at is not None and len(self.roles) == self.fail_at:
            raise SimulatedCrash("simulated crash")
        self.roles.append(role)
        if role == "planner":
            return self.plan(messages)
        if role == "summarizer":
            return "- the counter value was read"
        if role == "induction":
            self.induction_calls += 1
            reply = self.induction
            return reply(self.induction_calls - 1, messages) if callable(reply) else reply
        return self.execute(messages)

    @staticmethod
    def plan(messages: list[dict[str, Any]]) -> str:
        """Read, then set and complete, then DONE: counted from the subtask list when the planner sees one (the
        ``subtask_history`` guard), else from the running summary (the paper's planner: goal and summary only)."""
        user = messages[1]["content"]
        if "# Subtasks so far" not in user:
            summary = user.split("# Running summary")[1]
            if "(nothing done yet)" in summary:
                return "SUBTASK: Read the current counter value."
            return f"SUBTASK: Set the counter to {_target(user)} and complete the task."
        history = user.split("# Subtasks so far")[1]
        if "(none yet)" in history:
            return "SUBTASK: Read the current counter value."
        if "2." not in history:
            return f"SUBTASK: Set the counter to {_target(user)} and complete the task."
        return "DONE"

    @staticmethod
    def execute(messages: list[dict[str, Any]]) -> str:
        start = task_start(messages)
        first = messages[start]["content"]
        n_actions = sum(1 for m in messages[start:] if m["role"] == "assistant")
        subtask = "# Current subtask" in first
        if subtask and "Read the current counter" in first.split("# Current subtask")[1]:
            if n_actions == 0:
                return "I read the counter.\n```python\nprint(apis.counter.get())\n```"
            return "SUBTASK DONE: the counter value was printed"
        target = _target(first.split("# Current subtask")[-1])
        if "set_counter_to(" in first:
            return f"Use the skill.\n```python\nset_counter_to({target})\ncomplete_task()\n```"
        if n_actions == 0 and not subtask:
            return "Look first.\n```python\nprint(apis.counter.get())\n```"
        return f"Set it.\n```python\napis.counter.reset()\napis.counter.add({target})\ncomplete_task()\n```"


class GivesUpOnFive(CounterScript):
    """The counter world's script, except that it submits at once when the target is 5 (a weaker model)."""

    @staticmethod
    def execute(messages: list[dict[str, Any]]) -> str:
        if "counter to 5" in messages[task_start(messages)]["content"]:
            return "Done.\n```python\ncomplete_task()\n```"
        return CounterScript.execute(messages)


class HistoryScript(CounterScript):
    """`CounterScript` whose executor first reads the long counter history ``reads`` times (long observations)."""

    def __init__(self, induction: Any = TEXT_SKILL, *, reads: int = 6, fail_at: int | None = None) -> None:
        super().__init__(induction, fail_at=fail_at)
        self.reads = reads

    def execute(self, messages: list[dict[str, Any]]) -> str:  # type: ignore[override]
        import re

        first = messages[1]["content"]
        dropped = re.search(r"\[(\d+) earlier steps? dropped to fit the context\]", first)  # context fitting
        n_actions = sum(1 for m in messages if m["role"] == "assistant") + (int(dropped.group(1)) if dropped else 0)
        reading = "# Current subtask" in first and "Read the current counter" in first.split("# Current subtask")[1]
        if not reading and n_actions < self.reads:
            # each read is labelled, so the reads are different actions (not a loop for stuck detection)
            return (f"Check the history (read {n_actions + 1}).\n```python\n"
                    f"print('read {n_actions + 1}:', apis.counter.history())\n```")
        return CounterScript.execute(messages)
