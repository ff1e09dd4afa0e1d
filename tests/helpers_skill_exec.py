"""A scripted policy that uses the skill actions (``load_skill``, ``run_skill``, ``open_node``) the way each execution
mode offers them (a test double, for the scripted model and the mock server).

The caller opens the first group when ``open_node`` is offered, then loads or runs the first skill it sees (with the
task's target as input when the task is a counter task), then finishes (counter tasks: sets the counter; any other
env: ``complete_task()``). A subagent (its first message is a ``# Skill task``) sets the counter from its inputs, or
runs the first member of a group it was given, then reports ``SUBTASK DONE``.
"""

from __future__ import annotations

import re
from typing import Any

from helpers_tinyenv import CounterScript, task_start

SKILL_NAME = re.compile(r"^### (?:Code skill|Skill): (.+)$", re.MULTILINE)
GROUP_NAME = re.compile(r"^- \[group\] (.+?)(?::|$)", re.MULTILINE)
TARGET = re.compile(r"[Ss]et the counter to (-?\d+)|- target: (-?\d+)")


def block(code: str, thought: str = "Next.") -> str:
    return f"{thought}\n```python\n{code}\n```"


def _target(text: str) -> int | None:
    found = TARGET.search(text)
    return int(found.group(1) or found.group(2)) if found else None


def _finish(target: int | None) -> str:
    if target is None:
        return block("complete_task()", "Done.")
    return block(f"apis.counter.reset()\napis.counter.add({target})\ncomplete_task()", "Set it.")


class SkillActionScript(CounterScript):
    """``CounterScript`` (planner, summarizer, induction) whose executor uses the offered skill actions; asked to
    organise a library it answers without groups (the organiser then falls back to the task tree)."""

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        if str(messages[0]["content"]).startswith("You organise a library of agent skills"):
            return "These skills all look useful."
        return super().__call__(messages)

    def execute(self, messages: list[dict[str, Any]]) -> str:  # type: ignore[override]
        seeded = [i for i, m in enumerate(messages) if m["role"] == "user" and "# Skill task" in str(m["content"])]
        start = seeded[0] if seeded else task_start(messages)
        first = str(messages[start]["content"])
        turns = sum(1 for m in messages[start:] if m["role"] == "assistant")
        last = str(messages[-1]["content"]) if turns else ""
        if "# Skill task" in first:
            return self.subagent(first, turns, last)
        target = _target(first.split("# Current subtask")[-1])
        if turns and re.search(r"returned:|FAILED|Loaded skill|_skill error|open_node error", last):
            return _finish(target)
        offered = {name for name in ("load_skill", "run_skill", "open_node") if f"`{name}(" in first}
        inputs = f', {{"target": {target}}}' if target is not None else ""
        if "## Group:" in last:
            names = SKILL_NAME.findall(last)
            if names and "run_skill" in offered:
                return block(f'run_skill("{names[0]}"{inputs})', "Run the skill.")
            if names and "load_skill" in offered:
                return block(f'load_skill("{names[0]}")', "Load the skill.")
            return _finish(target)
        groups, skills = GROUP_NAME.findall(first), SKILL_NAME.findall(first)
        if turns == 0 and "open_node" in offered and groups:
            return block(f'open_node("{groups[0]}")', "Open the first group.")
        if turns == 0 and "run_skill" in offered and (skills or groups):
            return block(f'run_skill("{(skills or groups)[0]}"{inputs})', "Delegate.")
        if turns == 0 and "load_skill" in offered and skills:
            return block(f'load_skill("{skills[0]}")', "Load the skill.")
        return _finish(target)

    @staticmethod
    def subagent(first: str, turns: int, last: str) -> str:
        target = _target(first.split("## Inputs from the caller")[-1].split("## Knowledge")[0])
        members = SKILL_NAME.findall(first.split("## Knowledge")[-1])
        if "`run_skill(" in first and members:  # a routing subagent
            if turns == 0:
                inputs = f', {{"target": {target}}}' if target is not None else ""
                return block(f'run_skill("{members[0]}"{inputs})', "Run the member skill.")
            return f"SUBTASK DONE: {last.strip().splitlines()[-1] if last.strip() else 'nothing'}"
        if turns == 0:
            code = f"apis.counter.reset()\nprint(apis.counter.add({target}))" if target is not None else \
                "print('working')"
            return block(code, "Carry out the skill.")
        return f"SUBTASK DONE: skill output {last.strip().splitlines()[-1] if last.strip() else ''}"
