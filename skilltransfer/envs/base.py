"""Shared episode machinery: a workspace folder per episode, a code runner (sandboxed or in-process), completion.

Every environment keeps its whole state in the episode's workspace folder (files, or an SQLite database file), so
a sandbox worker that crashes can be restarted without losing the world, and evaluation reads the workspace from the
harness side. Agent actions are Python code executed in a persistent namespace built by the env's *setup function*
(``"package.module:function"``, called as ``setup(workspace: Path, **setup_kwargs) -> dict[str, Any]``), which
typically provides ``apis`` (the env's API), ``docs(...)`` and ``complete_task(answer=None)``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from skilltransfer.protocols import Observation, Score, TaskSpec

ANSWER_FILE = ".episode/answer.json"
"""Where ``complete_task`` records that the agent finished, relative to the workspace."""

MAX_OUTPUT_CHARS = 20_000
"""Observations longer than this are truncated (head and tail kept)."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running one code action."""

    output: str
    error: str | None = None
    timed_out: bool = False
    crashed: bool = False


class Runner(Protocol):
    """Executes code actions in a persistent namespace."""

    def execute(self, code: str) -> ExecResult: ...

    def close(self) -> None: ...


def resolve(dotted: str) -> Any:
    """Import ``"package.module:attr"``."""
    module_name, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the head and tail of an over-long output, saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters truncated] ...\n{text[-half:]}"


def temporary_workdir(prefix: str) -> Path:
    """A fresh temp folder for an env's episode workspaces, removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def write_answer(workspace: Path, answer: Any) -> None:
    """Record completion (and the answer, JSON-serialisable or stringified) in the workspace."""
    path = Path(workspace) / ANSWER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        payload = json.dumps({"answer": answer})
    except TypeError:
        payload = json.dumps({"answer": str(answer)})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(payload)
    os.replace(tmp, path)


def read_answer(workspace: Path) -> tuple[bool, Any]:
    """Whether the agent completed the task, and its answer (None if none was given)."""
    path = Path(workspace) / ANSWER_FILE
    if not path.exists():
        return False, None
    return True, json.loads(path.read_text())["answer"]


def completion_function(workspace: Path) -> Callable[..., str]:
    """The ``complete_task(answer=None)`` function put into every env's namespace."""

    def complete_task(answer: Any = None) -> str:
        """Signal that the task is finished, optionally with the final answer."""
        write_answer(workspace, answer)
        return "Task marked as complete."

    return complete_task


class InProcessRunner:
    """Runs actions in this process: no isolation. For reference-solution checks and tests only.

    Args:
        workspace: the episode folder (the working directory while code runs).
        setup: ``"module:function"`` building the namespace.
        setup_kwargs: extra keyword arguments for the setup function.
    """

    def __init__(self, workspace: Path, setup: str, setup_kwargs: dict[str, Any] | None = None) -> None:
        self.workspace = Path(workspace)
        self.namespace: dict[str, Any] = {"__name__": "__episode__"}
        self.namespace.update(resolve(setup)(self.workspace, **(setup_kwargs or {})))

    def execute(self, code: str) -> ExecResult:
        buffer = io.StringIO()
        error: str | None = None
        with contextlib.chdir(self.workspace), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:
                exec(compile(code, "<action>", "exec"), self.namespace)
            except BaseException as exc:  # noqa: BLE001 - agent code may raise anything, incl. SystemExit
                if isinstance(exc, KeyboardInterrupt):
                    raise
                lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
                error = "".join(line for line in lines if 'File "' not in line or "<action>" in line)
        return ExecResult(output=buffer.getvalue(), error=error)

    def close(self) -> None:
        self.namespace.clear()


def make_runner(workspace: Path, setup: str, setup_kwargs: dict[str, Any] | None = None, *,
                sandboxed: bool = True, limits: Any = None) -> Runner:
    """A sandboxed runner (separate, limited process; the default) or an in-process one (tests only)."""
    if not sandboxed:
        return InProcessRunner(workspace, setup, setup_kwargs)
    from skilltransfer.sandbox import SandboxRunner

    return SandboxRunner(workspace, setup, setup_kwargs, limits=limits)


class WorkspaceEpisode:
    """A running task whose world lives in ``workspace``.

    Args:
        task: the task.
        workspace: the episode's own folder (created by the env, deleted on close unless ``keep``).
        setup: setup function path, see module docs.
        setup_kwargs: its keyword arguments.
        docs: the API documentation text the agent may read.
        evaluator: ``evaluator(workspace, answer) -> Score`` run on the harness side after the episode.
        sandboxed: run agent code in the sandbox (default) or in-process (tests).
        limits: sandbox limits (``skilltransfer.sandbox.Limits``); None for defaults.
        keep: keep the workspace folder after close.
    """

    def __init__(self, task: TaskSpec, workspace: Path, *, setup: str, setup_kwargs: dict[str, Any] | None = None,
                 docs: str, evaluator: Callable[[Path, Any], Score], sandboxed: bool = True, limits: Any = None,
                 keep: bool = False) -> None:
        self.task = task
        self.workspace = Path(workspace)
        self._docs = docs
        self._evaluator = evaluator
        self._keep = keep
        self.runner = make_runner(self.workspace, setup, setup_kwargs, sandboxed=sandboxed, limits=limits)
        self.closed = False

    @property
    def done(self) -> bool:
        return read_answer(self.workspace)[0]

    def step(self, action: str) -> Observation:
        """Run one code action; the observation holds its printed output or the error."""
        result = self.runner.execute(action)
        text = result.output
        if result.error:
            text = f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{result.error}"
        return Observation(output=truncate(text) or "(no output)", error=result.error is not None, done=self.done)

    def load_code(self, source: str) -> Observation:
        """Load code (e.g. a code skill's functions) into the action namespace."""
        return self.step(source)

    def docs(self) -> str:
        return self._docs

    def evaluate(self) -> Score:
        """Evaluate the final state of the workspace (harness side; agent code cannot touch it)."""
        _, answer = read_answer(self.workspace)
        return self._evaluator(self.workspace, answer)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.runner.close()
        if not self._keep:
            shutil.rmtree(self.workspace, ignore_errors=True)

    def __enter__(self) -> WorkspaceEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
