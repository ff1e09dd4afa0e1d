"""A worked example in an env's docs, shown to the executor as earlier chat turns instead of prose, and its plan shown
to the planner: the format, and the two guards that show them (hooks ``opening``, ``planner_opening``):
`DemonstrationTurns` and `ExamplePlan`.

Small models follow a pattern they see in their own conversation far better than one described in the system
prompt. An env opts in by ending its docs with a section in this format (the section runs to the next ``## `` heading
or the end of the docs)::

    ## Example (another task): "What is my wallet balance?"
    Thought: I need the payments app's credentials first.
    ```python
    ...
    ```
    Observation: {'balance': 1204.5}
    Thought: The balance is 1204.5.
    ```python
    complete_task(answer=1204.5)
    ```
    Observation: Task marked as complete.

Each reply starts at a ``Thought:`` line and each observation at an ``Observation:`` line; the example ends with an
observation. With ``AgentConfig.demonstration="turns"`` (the default) the executor removes the section from the system
prompt and replays it as messages: the example task (in the task message's format), then each reply as an assistant
message and each observation as a user message; the real task message follows the last observation. The planner
never sees the example (it writes no code). ``"inline"`` leaves the docs untouched.

A ``Report: <text>`` line after an observation ends one of the example's *subtasks*: what its executor would report.
The k-th subtask executor of a task is shown the example as the example's k-th subtask (`Demonstration.as_subtask`,
``AgentConfig.subtask_example``; the last reported one when the example has fewer): the turns after the previous
report up to its report, then the reply ``SUBTASK DONE: <text>``, under the example plan's k-th subtask, with the
earlier reports as the example's progress; without a report line, all turns, the last ``complete_task`` reply
becoming ``SUBTASK DONE: <what its thought concluded>``.
So the executor sees a subtask end the way a subtask must end (a small model otherwise copies the example's closing
``complete_task`` into every subtask). The task-level executor never sees report lines.

An env may also end its docs with an *example plan* (`split_plan_example`): the subtasks a planner would send for
the worked example's task. The planner shows it after the docs; the executor drops it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from skilltransfer.agents.harness.base import Guard, Opening, PlannerOpening, RunContext, TaskView
from skilltransfer.agents.harness.grounding import asks_completion
from skilltransfer.agents.prompts import NO_HISTORY, NO_SUMMARY, history_line
from skilltransfer.agents.replies import SUBTASK_DONE_OBSERVATION
from skilltransfer.protocols import Message

_HEADER = re.compile(r'^## Example \(another task\): "(?P<task>[^"\n]+)"[ \t]*$', re.MULTILINE)
_PLAN_HEADER = re.compile(r'^## Example plan \(another task\): "[^"\n]+"[ \t]*$', re.MULTILINE)
_NEXT_SECTION = re.compile(r"^## ", re.MULTILINE)
_TURN = re.compile(r"^(Thought|Observation|Report):", re.MULTILINE)
_PLAN_SUBTASK = re.compile(r"^SUBTASK: (.+)$", re.MULTILINE)
_CONCLUSION_TAIL = re.compile(r",\s+(?:so|which)\b.*$", re.DOTALL)
"""The part of a closing thought that says what comes next (", so I submit that number"), cut from its report."""


@dataclass(frozen=True)
class Demonstration:
    """A worked example: its task and the (reply, observation) pairs that solved it."""

    task: str
    turns: tuple[tuple[str, str], ...]
    reports: tuple[tuple[int, str], ...] = ()
    """The example's subtasks that ``Report:`` lines mark: how many turns came before each report, and its text."""

    @property
    def first_report(self) -> tuple[int, str] | None:
        """The first reported subtask (turns before its report, its text), if a report line marks one."""
        return self.reports[0] if self.reports else None

    def messages(self, task_message: str, observation: Callable[[str], str]) -> list[Message]:
        """The example as chat messages: ``task_message`` (the example task in the task message's format), then each
        reply and its observation (rendered by ``observation``)."""
        out: list[Message] = [{"role": "user", "content": task_message}]
        for reply, output in self.turns:
            out.append({"role": "assistant", "content": reply})
            out.append({"role": "user", "content": observation(output)})
        return out

    def segment(self, index: int) -> int:
        """Which reported subtask the ``index``-th subtask of a task is shown (the last one past the end); 0 without
        report lines."""
        return min(index, len(self.reports) - 1) if self.reports else 0

    def as_subtask(self, index: int = 0) -> Demonstration:
        """The example as one subtask: its ``segment(index)``-th reported subtask (the turns after the previous report)
        ending ``SUBTASK DONE: <report>`` when report lines mark subtasks; otherwise a last reply that calls
        ``complete_task`` becomes ``SUBTASK DONE: <report>``, the report being that reply's thought without its
        closing clause (unchanged when the last reply does not call it). The result has no report lines."""
        if self.reports:
            k = self.segment(index)
            start, (stop, report) = (self.reports[k - 1][0] if k else 0), self.reports[k]
        elif self.turns and "complete_task(" in self.turns[-1][0]:
            start, stop = 0, len(self.turns) - 1
            thought = self.turns[-1][0].split("```")[0].removeprefix("Thought:").strip()
            report = _CONCLUSION_TAIL.sub("", thought).strip().rstrip(".")
        else:
            return self
        done = (f"SUBTASK DONE: {report}", SUBTASK_DONE_OBSERVATION)
        return Demonstration(self.task, (*self.turns[start:stop], done))


def split_demonstration(docs: str) -> tuple[str, Demonstration | None]:
    """The docs without their example section, and the example (None, docs unchanged, when there is none or it does
    not follow the format)."""
    header = _HEADER.search(docs)
    if header is None:
        return docs, None
    rest, end = _without_section(docs, header)
    turns, reports = _parse_turns(docs[header.end():end])
    if not turns:
        return docs, None
    return rest, Demonstration(header.group("task"), turns, reports)


def split_plan_example(docs: str) -> tuple[str, str | None]:
    """The docs without their example plan section, and that section (None, docs unchanged, when there is none).

    The section is the planner's counterpart of the worked example: a header ``## Example plan (another task):
    "<task>"`` and the ``SUBTASK: ...`` lines a planner would send for that task, one per subtask, then ``DONE``. The
    planner shows it after the docs; the executor never sees it.
    """
    header = _PLAN_HEADER.search(docs)
    if header is None:
        return docs, None
    rest, end = _without_section(docs, header)
    return rest, docs[header.start(): end].strip()


def _without_section(docs: str, header: re.Match[str]) -> tuple[str, int]:
    """The docs without the section ``header`` starts (it runs to the next ``## `` heading or the end), and where
    that section ends in ``docs``."""
    following = _NEXT_SECTION.search(docs, header.end())
    end = following.start() if following else len(docs)
    return (docs[: header.start()].rstrip() + "\n\n" + docs[end:].lstrip()).strip() + "\n", end


def plan_subtasks(plan: str | None) -> list[str]:
    """The ``SUBTASK:`` lines of an example plan (`split_plan_example`), in order."""
    return [found.strip() for found in _PLAN_SUBTASK.findall(plan)] if plan is not None else []


def first_plan_subtask(plan: str | None) -> str | None:
    """The first ``SUBTASK:`` line of an example plan (`split_plan_example`), if any."""
    return next(iter(plan_subtasks(plan)), None)


def _parse_turns(body: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[int, str], ...]]:
    """The (reply, observation) turns and each report line's (turns before it, text); ((), ()) when the body does
    not follow the format."""
    marks = list(_TURN.finditer(body))
    turns: list[tuple[str, str]] = []
    reports: list[tuple[int, str]] = []
    reply: str | None = None
    for index, mark in enumerate(marks):
        stop = marks[index + 1].start() if index + 1 < len(marks) else len(body)
        text = body[mark.start(): stop].strip()
        if mark.group(1) == "Report":
            if reply is not None or not turns or (reports and reports[-1][0] == len(turns)):
                return (), ()  # a report belongs after an observation, one per subtask
            reports.append((len(turns), text.removeprefix("Report:").strip()))
        elif mark.group(1) == "Thought":
            if reply is not None:  # two replies in a row: not the format
                return (), ()
            reply = text
        else:
            if reply is None:
                return (), ()
            turns.append((reply, text.removeprefix("Observation:").strip()))
            reply = None
    return (tuple(turns), tuple(reports)) if reply is None else ((), ())


# --------------------------------------------------------------------------------------------- the guards
class DemonstrationTurns(Guard):
    """Demonstration turns: the worked example at the end of an env's docs (the format above) is replayed to the
    executor as earlier chat turns before the task instead of prose in the system prompt (context fitting keeps them
    verbatim); the planner never sees it. A subtask executor is shown it as a subtask when
    ``agent.subtask_example`` is on: the k-th subtask of a task that may not complete the task sees the example plan's
    k-th subtask, the turns up to its ``Report:`` line and the reply ``SUBTASK DONE: <report>``
    (`Demonstration.as_subtask`); one that asks for ``complete_task`` sees the whole example in the subtask format.
    Switch: ``agent.demonstration`` (``turns``; ``inline`` is off)."""

    name = "demonstration"

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        docs, demo = split_demonstration(opening.docs)
        if demo is None:
            return opening
        opening.docs = docs
        may_complete = not context.subtask or asks_completion(context.subtask)
        if context.subtask_mode and not context.subagent and self.config.subtask_example:
            summary, history, subtask = NO_SUMMARY, NO_HISTORY, demo.task
            if demo.reports and not may_complete:
                plan = split_plan_example(context.episode.docs().strip())[1]
                k, planned = demo.segment(context.subtask_index or 0), plan_subtasks(plan)
                if k < len(planned):
                    subtask = planned[k]
                    earlier = [report for _, report in demo.reports[:k]]
                    summary = "\n".join(f"- {report}" for report in earlier) or NO_SUMMARY
                    history = "\n".join(history_line(i, planned[i - 1], "subtask_done", report)
                                         for i, report in enumerate(earlier, start=1)) or NO_HISTORY
                else:
                    k = 0  # no plan line for it: the example's first subtask, under the example task
                demo = demo.as_subtask(k)
            elif not may_complete:
                demo = demo.as_subtask()
            task = self.prompts.executor_subtask.render(instruction=demo.task, summary=summary, history=history,
                                                        subtask=subtask, skills="")
        else:
            task = self.prompts.executor_task.render(instruction=demo.task, skills="")
        opening.turns = demo.messages(task, lambda output: self.prompts.observation.render(output=output))
        return opening

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.docs = split_demonstration(opening.docs)[0]
        return opening


class ExamplePlan(Guard):
    """Example plans: an env's docs may end with the subtasks a planner would send for its worked example's task
    (``## Example plan (another task): ...``, `split_plan_example`); the planner shows it after the docs, the executor
    never sees it. Switch: ``agent.example_plan``."""

    name = "example_plan"

    def opening(self, context: RunContext, opening: Opening) -> Opening:
        opening.docs = split_plan_example(opening.docs)[0]
        return opening

    def planner_opening(self, task: TaskView, opening: PlannerOpening) -> PlannerOpening:
        opening.docs, plan = split_plan_example(opening.docs)
        if plan:
            opening.example = f"\n{plan}\n"
        return opening
