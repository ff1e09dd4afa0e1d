"""The env of ``skilltransfer triggers`` (docs/selection.md): each task is one user request of a trigger eval set
(skill-creator's ``[{"query": ..., "should_trigger": true}]``), asked once per repeat.

The agent gets the request as its task and the library as a stream shows it (cards, ``load_skill``); there is no
world to act on: ``complete_task(answer)`` ends the task. What the command measures is whether the agent loaded the
skill under test (the task's picks); the score only says whether the agent finished (submitted).

A task's metadata names the skill under test (``skill``), whether it should trigger, its right skills
(``relevant_skills``: the skill when it should trigger, else none) and, for the isolated setting, the skills its
library must hold (``library_skills``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import Submission, WorkspaceEpisode, temporary_workdir
from skilltransfer.protocols import Check, Score, TaskSpec

DOCS = ("You help a user with their request. There are no special APIs here: write Python to work things out if you "
        "need to, and call complete_task(answer) with your final answer (text) when you are done.")


def query_task_id(skill: str, index: int, repeat: int) -> str:
    """The task id of query ``index`` (0-based, in its eval set) of ``skill``, repeat ``repeat`` (0-based)."""
    return f"{skill}/q{index + 1:02d}/r{repeat + 1}"


class TriggerEnv:
    """One task per (query, repeat) (module docstring).

    Args:
        queries: ``{"skill", "query", "should_trigger", "index"}`` per query, in order.
        repeats: times each query is asked.
        isolated: each task's library holds only its skill under test (``library_skills``).
        workdir: where episode folders are made.
        sandboxed: run the agent's code in the sandbox.
    """

    name = "triggers"
    official_metric = "success"

    def __init__(self, queries: list[dict[str, Any]], repeats: int = 3, isolated: bool = False,
                 workdir: Path | None = None, sandboxed: bool = True) -> None:
        self.queries, self.repeats, self.isolated, self.sandboxed = queries, repeats, isolated, sandboxed
        self.workdir = Path(workdir) if workdir is not None else temporary_workdir("triggers-")
        self._count = itertools.count()

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        out = []
        for repeat in range(self.repeats):  # every query once, then again: a cut stream still covers the set
            for item in self.queries:
                skill, should = str(item["skill"]), bool(item["should_trigger"])
                metadata: dict[str, Any] = {"skill": skill, "should_trigger": should,
                                            "relevant_skills": [skill] if should else []}
                if self.isolated:
                    metadata["library_skills"] = [skill]
                out.append(TaskSpec(id=query_task_id(skill, int(item["index"]), repeat), instruction=str(item["query"]),
                                    difficulty=1, template=skill, metadata=metadata))
        return out

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        workspace = self.workdir / f"ep{next(self._count)}"
        workspace.mkdir(parents=True)

        def evaluate(ws: Path, submission: Submission) -> Score:
            return Score(reward=float(submission.done), success=submission.done,
                         checks=(Check("the agent finished (complete_task)", submission.done),))

        return WorkspaceEpisode(task, workspace, docs=DOCS, evaluator=evaluate, sandboxed=self.sandboxed)
