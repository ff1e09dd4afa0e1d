"""``AppsEnv``: an AppWorld-like offline world of simulated apps, with state-based evaluation.

Every episode gets a fresh copy of the world's SQLite file in its own workspace; agent code runs against
``apis`` built by ``setup`` (importable, so the sandbox worker can build the namespace in its own process).
"""

from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

from skilltransfer.envs.apps.api import Apis
from skilltransfer.envs.apps.docs import overview
from skilltransfer.envs.apps.evaluator import (
    Snapshot,
    TableDiff,
    answer_matches,
    compare_changes,
    diff,
    score,
    snapshot,
)
from skilltransfer.envs.apps.tasks import HiddenTask, generate_tasks
from skilltransfer.envs.apps.world import DB_NAME, generate_world, write_db
from skilltransfer.envs.base import WorkspaceEpisode, completion_function, make_runner, read_answer
from skilltransfer.errors import InputError
from skilltransfer.protocols import Check, Score, TaskSpec

SETUP = "skilltransfer.envs.apps.env:setup"


def setup(workspace: Path, **_: Any) -> dict[str, Any]:
    """Build the agent's namespace: ``apis`` over the workspace's world file and ``complete_task``."""
    workspace = Path(workspace)
    return {"apis": Apis(workspace), "complete_task": completion_function(workspace)}


class AppsEnv:
    """Multi-app tool use over a simulated world (email, contacts, phone, calendar, files, notes, todo, payments,
    shopping): 465 tasks from 47 scenario templates (seed 0).

    Args:
        seed: world and task-stream seed.
        workdir: where episode workspaces are created (default: ``<system temp>/skilltransfer-apps``); every
            episode gets its own fresh sub-folder.
        sandboxed: run agent code in the sandbox (default) or in-process (tests, reference checks).
        limits: sandbox limits.
        keep_workspaces: keep workspaces after ``close`` (for debugging).
    """

    name = "apps"

    def __init__(self, *, seed: int = 0, workdir: Path | None = None, sandboxed: bool = True, limits: Any = None,
                 keep_workspaces: bool = False, **_: Any) -> None:
        self.seed = seed
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.gettempdir()) / "skilltransfer-apps"
        self.sandboxed = sandboxed
        self.limits = limits
        self.keep_workspaces = keep_workspaces
        self.world = generate_world(seed)
        self._tasks, self._hidden = generate_tasks(self.world, seed)
        self._required: dict[str, dict[str, TableDiff]] = {}

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The task stream (optionally one split: "dev" or "test")."""
        if split not in (None, "dev", "test"):
            raise InputError(f"apps env: unknown split {split!r}; use 'dev' or 'test'")
        return [t for t in self._tasks if split is None or t.split == split]

    def docs(self) -> str:
        return overview()

    def reference_solution(self, task: TaskSpec) -> str:
        """The Python program that solves ``task`` (harness side only)."""
        return self._hidden_for(task).code

    def expected_answer(self, task: TaskSpec) -> Any:
        """The expected answer of a question task (None for action tasks); harness side only."""
        return self._hidden_for(task).answer

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        """A fresh workspace holding a copy of the world, and an episode over it."""
        self._hidden_for(task)
        workspace = self._new_workspace(task.id)
        return WorkspaceEpisode(task, workspace, setup=SETUP, docs=self.docs(),
                                evaluator=lambda ws, answer: self.evaluate(task, ws, answer),
                                sandboxed=self.sandboxed, limits=self.limits, keep=self.keep_workspaces)

    def evaluate(self, task: TaskSpec, workspace: Path, answer: Any) -> Score:
        """Score a finished workspace: completion, answer (question tasks), required changes, no collateral damage."""
        hidden = self._hidden_for(task)
        completed, _ = read_answer(workspace)
        answer_check = None
        if hidden.kind == "question":
            ok = completed and answer_matches(hidden.answer, answer)
            answer_check = Check("answer is correct", ok, "" if ok else f"got {answer!r}")
        actual = diff(self._initial, snapshot(Path(workspace) / DB_NAME))
        return score(completed, answer_check, compare_changes(self._required_changes(task), actual))

    # ------------------------------------------------------------------ internals
    def _hidden_for(self, task: TaskSpec) -> HiddenTask:
        hidden = self._hidden.get(task.id)
        if hidden is None:
            raise InputError(f"apps env (seed {self.seed}): unknown task id {task.id!r}")
        return hidden

    def _new_workspace(self, label: str) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        workspace = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=self.workdir))
        (workspace / DB_NAME).write_bytes(self._world_bytes)
        return workspace

    @cached_property
    def _world_bytes(self) -> bytes:
        with tempfile.TemporaryDirectory(prefix="apps-world-") as scratch:
            path = Path(scratch) / DB_NAME
            write_db(self.world, path)
            return path.read_bytes()

    @cached_property
    def _initial(self) -> Snapshot:
        workspace = self._new_workspace("initial")
        try:
            return snapshot(workspace / DB_NAME)
        finally:
            (workspace / DB_NAME).unlink()
            workspace.rmdir()

    def _required_changes(self, task: TaskSpec) -> dict[str, TableDiff]:
        """The reference program's changes to the world, computed once per task in a scratch workspace."""
        if task.id not in self._required:
            workspace = self._new_workspace(f"reference-{task.id}")
            runner = make_runner(workspace, SETUP, sandboxed=False)
            try:
                result = runner.execute(self._hidden_for(task).code)
                if result.error:
                    raise RuntimeError(f"reference solution of {task.id} failed: {result.error}")
                self._required[task.id] = diff(self._initial, snapshot(workspace / DB_NAME))
            finally:
                runner.close()
                for path in sorted(workspace.rglob("*"), reverse=True):
                    path.unlink() if path.is_file() else path.rmdir()
                workspace.rmdir()
        return self._required[task.id]
