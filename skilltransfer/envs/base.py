"""Shared episode machinery: a workspace folder per episode, a code runner (sandboxed or in-process), completion.

An episode has two sides. The *agent side* is the namespace its Python actions run in (in the sandbox worker by
default): agent-side apps over the workspace's files (an env's setup function) and stubs of *harness services*.
The *harness side* holds what the agent must not reach: an env's world state behind its APIs (e.g. the apps world's
database), the evaluator, and the submission: ``complete_task(answer=None)`` is a harness service, so completion and
the answer are recorded here, never read back from a workspace file. Files that *are* the world in some envs (an
office testbed's documents, a data lake) stay in the workspace; the evaluator reads them with
``skilltransfer.envs.workspace_files`` (no links followed, regular files only, size caps).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.protocols import Observation, Score, TaskSpec
from skilltransfer.sandbox import (
    ExecResult,
    InProcessRunner,
    Limits,
    NamespaceSpec,
    Runner,
    Services,
    loading_action,
    make_runner,
    skill_body_problem,
)
from skilltransfer.sandbox.runtime.skilluse import clean
from skilltransfer.sandbox.scratch import remove_tree, scratch_dir
from skilltransfer.sandbox.services import function
from skilltransfer.util.text import truncate

__all__ = ["MAX_ANSWER_CHARS", "MAX_OUTPUT_CHARS", "ExecResult", "InProcessRunner", "Runner", "Submission",
           "WorkspaceEpisode", "make_runner", "temporary_workdir"]

MAX_OUTPUT_CHARS = 20_000
"""Observations longer than this are truncated (head and tail kept)."""

MAX_ANSWER_CHARS = 100_000
"""The longest answer ``complete_task`` accepts (characters of its JSON); a longer one is refused."""

COMPLETE_TASK_DOC = "Signal that the task is finished, optionally with the final answer."


def temporary_workdir(prefix: str) -> Path:
    """A fresh folder for an env's episode workspaces under the toolkit's per-process temp root (removed at exit,
    or at the next start after a crash)."""
    return scratch_dir(prefix)


@dataclass(frozen=True)
class Submission:
    """What the agent submitted through ``complete_task``, recorded on the harness side."""

    done: bool = False
    answer: Any = None


class WorkspaceEpisode:
    """A running task whose agent acts in ``workspace`` and whose hidden state stays with the harness.

    Args:
        task: the task.
        workspace: the episode's own folder (created by the env, deleted on close unless ``keep``).
        setup: agent-side setup function (``NamespaceSpec.setup``), importable in the sandbox worker; None for none.
        setup_kwargs: its JSON keyword arguments.
        packages: agent-side packages it needs (``NamespaceSpec.packages``).
        services: the env's harness services for this episode (e.g. its APIs); ``complete_task`` is added.
        bindings: how those services appear in the agent's namespace (``skilltransfer.sandbox.services``).
        hidden_packages: installed packages the sandbox worker may not import or read (``NamespaceSpec``).
        docs: the API documentation text the agent may read.
        evaluator: ``evaluator(workspace, submission) -> Score``, run on the harness side after the agent's
            processes are stopped.
        sandboxed: run agent code in the sandbox (default) or in-process (trusted test doubles).
        limits: sandbox limits; None for defaults.
        keep: keep the workspace folder after close.
        on_close: called once when the episode closes (e.g. to drop the env's per-episode world).
    """

    def __init__(self, task: TaskSpec, workspace: Path, *, docs: str, evaluator: Callable[[Path, Submission], Score],
                 setup: str | None = None, setup_kwargs: dict[str, Any] | None = None,
                 packages: dict[str, str] | None = None, services: Services | None = None,
                 bindings: dict[str, Any] | None = None, hidden_packages: tuple[str, ...] = (),
                 sandboxed: bool = True, limits: Limits | None = None, keep: bool = False,
                 on_close: Callable[[], None] | None = None) -> None:
        self.task = task
        self.workspace = Path(workspace)
        self.submission = Submission()
        self._docs = docs
        self._evaluator = evaluator
        self._keep = keep
        self._on_close = on_close
        self.services = services or Services()
        self.services.register("complete_task", self._complete_task)
        spec = NamespaceSpec(setup=setup, setup_kwargs=dict(setup_kwargs or {}), packages=dict(packages or {}),
                             bindings={**(bindings or {}), "complete_task": function(
                                 "complete_task", "complete_task", COMPLETE_TASK_DOC, lenient=True)},
                             hidden_packages=tuple(hidden_packages))
        self.closed = False
        self._reserved = tuple(spec.bindings)
        self._loaded: set[str] = set()
        """Ids of the code skills loaded with an id: the only ones whose call counts an action's result may carry."""
        self.runner = make_runner(self.workspace, spec, self.services, sandboxed=sandboxed, limits=limits)

    def _complete_task(self, answer: Any = None) -> None:
        """The ``complete_task`` service: record completion and the (size-capped) answer. It returns nothing, so the
        completing action's observation is what the agent's code printed, with or without the sandbox's echo of a
        last expression (``Limits.echo_last_expression``)."""
        size = len(json.dumps(answer))
        if size > MAX_ANSWER_CHARS:
            raise ValueError(f"complete_task: the answer is {size} characters long (as JSON), over the limit of "
                             f"{MAX_ANSWER_CHARS}; the task is not marked as complete. Submit a shorter answer.")
        self.submission = Submission(done=True, answer=answer)

    @property
    def done(self) -> bool:
        return self.submission.done

    def step(self, action: str) -> Observation:
        """Run one code action; the observation holds its printed output or the error, and the calls it made of
        loaded code skills' functions (only ids of skills loaded here, well-formed counts: the record is forgeable)."""
        result = self.runner.execute(action)
        text = result.output
        if result.error:
            text = f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{result.error}"
        return Observation(output=truncate(text, MAX_OUTPUT_CHARS) or "(no output)", error=result.error is not None,
                           done=self.done, skill_calls=clean(result.skill_calls, allowed=self._loaded.__contains__))

    def load_code(self, source: str, skill_id: str | None = None) -> Observation:
        """Load a code skill's definitions into the action namespace (bodies that would run code, or bind a name of
        the namespace or a builtin, are refused); with ``skill_id``, later actions' observations count the calls of
        its functions (`Observation.skill_calls`). It loads in a namespace of its own (`loading_action`) while every
        harness service refuses calls, so loading can neither submit nor change the world; were it to submit anyway,
        the submission is undone and the skill refused."""
        problem = skill_body_problem(source, self._reserved)
        if problem is not None:
            return Observation(output=f"SkillRefused: {problem}", error=True, done=self.done)
        before = self.submission
        with self.services.refusing("a code skill is being loaded; loading runs nothing"):
            if skill_id is not None:
                self._loaded.add(skill_id)
            observation = self.step(loading_action(source, skill_id))
        if self.submission is not before:
            self.submission = before
            return Observation(output="SkillRefused: loading the skill submitted the task (undone)", error=True,
                               done=self.done)
        return observation

    def docs(self) -> str:
        return self._docs

    def evaluate(self) -> Score:
        """Stop the agent's processes, then evaluate the final state on the harness side."""
        self.runner.stop()
        return self._evaluator(self.workspace, self.submission)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.runner.close()
        if self._on_close is not None:
            self._on_close()
        if not self._keep:
            remove_tree(self.workspace)

    def __enter__(self) -> WorkspaceEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
