"""``AppsEnv``: an AppWorld-like offline world of simulated apps, with state-based evaluation.

As in AppWorld's remote-API mode, the world lives with the harness: every episode gets a fresh in-memory copy of the
world database (``WorldDb``), and the agent's ``apis.<app>.<api>(...)`` are stubs of harness services that run the
API against it. The agent's process never holds the database, the tasks' reference programs or expected answers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from skilltransfer.envs.apps.api import REGISTRY, ApiSpec, WorldDb
from skilltransfer.envs.apps.docs import overview
from skilltransfer.envs.apps.evaluator import (
    Snapshot,
    TableDiff,
    answer_matches,
    compare_changes,
    diff,
    score,
    snapshot,
    truncate_text,
)
from skilltransfer.envs.apps.tasks import HiddenTask, generate_tasks
from skilltransfer.envs.apps.world import generate_world, world_bytes
from skilltransfer.envs.base import Submission, WorkspaceEpisode, temporary_workdir
from skilltransfer.errors import InputError
from skilltransfer.protocols import Check, Score, TaskSpec
from skilltransfer.sandbox import InProcessRunner, Limits, NamespaceSpec, Services
from skilltransfer.sandbox.scratch import remove_tree
from skilltransfer.sandbox.services import function, tree

LOOKUP_NOTES = {
    "apis.supervisor.show_account_passwords": "Access tokens are not listed here: get one with "
    "apis.<app>.login(username=..., password=...)['access_token'], using the entry whose account_name is that app",
}
"""Added to a failing key/index lookup in an API's result: the embedded model looked for an ``access_token`` in the
passwords list on 3 of 4 starter tasks."""


def bindings() -> dict[str, Any]:
    """The agent's ``apis`` object: one stub per documented API, shaped like the apps (``dir``, repr, errors)."""
    apps = {}
    for app, info in REGISTRY.items():
        names = ", ".join(sorted(info.apis))
        children = {name: function(f"apis.{app}.{name}", name, f"{spec.description} (see apis.api_docs.show_api_doc)",
                                   lookup_note=LOOKUP_NOTES.get(f"apis.{app}.{name}", ""))
                    for name, spec in info.apis.items()}
        apps[app] = tree(children, f"<app {app}: {names}>", f"App {app!r} has no API {{name}}. Its APIs: {names}.")
    listing = ", ".join(REGISTRY)
    return {"apis": tree(apps, f"<apis: {listing}>",
                         f"'Apis' object has no attribute {{name}}: there is no app {{name}}. Apps: {listing}.")}


def _service(world: WorldDb, spec: ApiSpec) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return world.call(spec, args, kwargs)

    return call


def register_services(services: Services, world: WorldDb) -> None:
    """Register ``apis.<app>.<api>`` for every API, running against ``world``."""
    for app, info in REGISTRY.items():
        for name, spec in info.apis.items():
            services.register(f"apis.{app}.{name}", _service(world, spec))


class AppsEnv:
    """Multi-app tool use over a simulated world (email, contacts, phone, calendar, files, notes, todo, payments,
    shopping): 466 tasks from 47 scenario templates (seed 0).

    Args:
        seed: world and task-stream seed.
        workdir: where episode workspaces (the agent's working folders) are created (default: a temporary folder).
        sandboxed: run agent code in the sandbox (default) or in-process (tests, reference checks).
        limits: sandbox limits.
        keep_workspaces: keep workspaces after ``close`` (for debugging).
        focused_docs: an episode's docs show the task's apps first with full signatures and return values, the
            other apps one line each (`overview`); False shows every app's APIs alike.
        docs_example: append a worked example of API use (login, token, pagination) to the docs.
    """

    name = "apps"
    official_metric = "success"
    """The benchmark's official score (`report`'s default metric for this env):
    AppWorld's task goal completion: every check passes."""
    streams: dict[str, tuple[str, ...]] = {
        "starter": ("apps-contact_phone-08", "apps-contact_phone-04", "apps-contact_email-05",
                    "apps-contact_email-00", "apps-update_contact_phone-00", "apps-text_contact-00"),
    }
    """Curated streams (``skilltransfer run --stream NAME``): ``starter`` is six difficulty-1 contacts tasks (seed 0)
    that share one sub-procedure (credentials -> login -> search a contact by name), then use what it finds (read a
    phone number or email, update a phone number, text the contact): a stream a small model can solve, where a skill
    induced on an early task applies to the later ones. Its four lookups are, of the 20 contact_phone/contact_email
    tasks, those on which the embedded model's first action ran and printed the contact most often
    (``benchmarks/first_step.py``, 3 seeds each: 3, 2, 3 and 2 of 3; 7 of the 20 tasks had 0 of 3)."""

    def __init__(self, *, seed: int = 0, workdir: Path | None = None, sandboxed: bool = True, limits: Any = None,
                 keep_workspaces: bool = False, focused_docs: bool = True, docs_example: bool = True,
                 **_: Any) -> None:
        self.seed = seed
        self._workdir = Path(workdir) if workdir is not None else None
        self.sandboxed = sandboxed
        self.limits = limits
        self.keep_workspaces = keep_workspaces
        self.focused_docs = focused_docs
        self.docs_example = docs_example
        self.world = generate_world(seed)
        self._tasks, self._hidden = generate_tasks(self.world, seed)
        self._required: dict[str, dict[str, TableDiff]] = {}

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = temporary_workdir("apps-")
        self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The task stream (optionally one split: "dev" or "test")."""
        if split not in (None, "dev", "test"):
            raise InputError(f"apps env: unknown split {split!r}; use 'dev' or 'test'")
        return [t for t in self._tasks if split is None or t.split == split]

    def docs(self, task: TaskSpec | None = None) -> str:
        """The agent's documentation: for ``task``, focused on its apps (see ``focused_docs``)."""
        focus = task.apps if task is not None and self.focused_docs else None
        return overview(focus, example=self.docs_example)

    def reference_solution(self, task: TaskSpec) -> str:
        """The Python program that solves ``task`` (harness side only)."""
        return self._hidden_for(task).code

    def expected_answer(self, task: TaskSpec) -> Any:
        """The expected answer of a question task (None for action tasks); harness side only."""
        return self._hidden_for(task).answer

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        """A fresh copy of the world (harness side), an empty workspace for the agent, and an episode over them."""
        self._hidden_for(task)
        workspace = Path(tempfile.mkdtemp(prefix=f"{task.id}-", dir=self.workdir))
        world = WorldDb(self._world_bytes, quota_mb=(self.limits or Limits()).world_quota_mb)
        services = Services()
        register_services(services, world)
        return WorkspaceEpisode(task, workspace, services=services, bindings=self._bindings, docs=self.docs(task),
                                evaluator=lambda _ws, submission: self.evaluate(task, world, submission),
                                sandboxed=self.sandboxed, limits=self.limits, keep=self.keep_workspaces,
                                on_close=world.close)

    def evaluate(self, task: TaskSpec, world: WorldDb, submission: Submission) -> Score:
        """Score a finished episode: completion, answer (question tasks), required changes, no collateral damage."""
        hidden = self._hidden_for(task)
        answer_check = None
        if hidden.kind == "question":
            ok = submission.done and answer_matches(hidden.answer, submission.answer)
            detail = "" if ok else truncate_text(f"got {submission.answer!r}", 300)
            answer_check = Check("answer is correct", ok, detail)
        with world.lock:
            actual = diff(self._initial, snapshot(world.conn))
        return score(submission.done, answer_check, compare_changes(self._required_changes(task), actual))

    # ------------------------------------------------------------------ internals
    def _hidden_for(self, task: TaskSpec) -> HiddenTask:
        hidden = self._hidden.get(task.id)
        if hidden is None:
            raise InputError(f"apps env (seed {self.seed}): unknown task id {task.id!r}")
        return hidden

    @cached_property
    def _bindings(self) -> dict[str, Any]:
        return bindings()

    @cached_property
    def _world_bytes(self) -> bytes:
        return world_bytes(self.world)

    @cached_property
    def _initial(self) -> Snapshot:
        world = WorldDb(self._world_bytes)
        try:
            return snapshot(world.conn)
        finally:
            world.close()

    def _required_changes(self, task: TaskSpec) -> dict[str, TableDiff]:
        """The reference program's changes to the world, computed once per task on a scratch copy, in-process and
        scoped (no process-wide state changes: other streams act meanwhile)."""
        if task.id not in self._required:
            world = WorldDb(self._world_bytes, quota_mb=(self.limits or Limits()).world_quota_mb)
            services = Services()
            register_services(services, world)
            services.register("complete_task", lambda answer=None: "Task marked as complete.")
            spec = NamespaceSpec(bindings={**self._bindings, "complete_task": function("complete_task", lenient=True)})
            scratch = temporary_workdir("apps-reference-")
            runner = InProcessRunner(scratch, spec, services, scoped=True)
            try:
                result = runner.execute(self._hidden_for(task).code)
                if result.error:
                    raise RuntimeError(f"reference solution of {task.id} failed: {result.error}")
                self._required[task.id] = diff(self._initial, snapshot(world.conn))
            finally:
                runner.close()
                world.close()
                remove_tree(scratch)
        return self._required[task.id]
