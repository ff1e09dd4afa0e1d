"""Run actions in the harness process: no isolation, for reference-solution checks and trusted test doubles.

Two ways: an episode's test double (the default) runs its actions as the worker would, in the workspace as the
process's working directory with stdout captured, so it changes process-wide state while an action runs (a grid runs
such actions one at a time, `skilltransfer.runner.guard.GuardedEnv`). ``scoped=True`` changes nothing
process-wide: the code's ``print`` and ``open`` are its namespace's own (output captured per action, relative paths
under the workspace), so threads may run scoped programs at once (the apps env's reference programs, run while other
streams act).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import IO, Any

from skilltransfer.sandbox.runner import SandboxRunner
from skilltransfer.sandbox.runtime.cell import compile_cell, run_compiled
from skilltransfer.sandbox.runtime.channel import DirectTransport
from skilltransfer.sandbox.runtime.explain import format_error
from skilltransfer.sandbox.runtime.skilluse import HOOK, counter, take
from skilltransfer.sandbox.runtime.stubs import build
from skilltransfer.sandbox.services import Services
from skilltransfer.sandbox.values import ExecResult, Limits, NamespaceSpec, Runner
from skilltransfer.util.imports import resolve
from skilltransfer.util.pyast import ast_lock

ACTION_FILENAME = "<action>"
"""The file name of an action's code in tracebacks (`format_error` keeps only its frames)."""


def namespace_entries(workspace: Path, spec: NamespaceSpec, transport: Any) -> dict[str, Any]:
    """The namespace entries of ``spec``, built in this process (setup function first, then the stubs)."""
    entries: dict[str, Any] = {}
    if spec.setup:
        entries.update(resolve(spec.setup, spec.packages)(Path(workspace), **spec.setup_kwargs))
    entries.update(build(spec.bindings, transport))
    return entries


class InProcessRunner:
    """Runs actions in this process: no isolation. For reference-solution checks and tests only.

    Args:
        workspace: the episode folder (the working directory while code runs; scoped: where relative ``open``
            paths point).
        spec: how the namespace is built; service stubs call ``services`` directly (same JSON round trip).
        services: the episode's harness services.
        limits: only ``max_message_bytes`` and ``echo_last_expression`` apply.
        scoped: change no process-wide state (see the module docstring); code that reaches the working directory
            other than through ``open`` (``os``, ``pathlib``, pandas) sees the process's.
    """

    def __init__(self, workspace: Path, spec: NamespaceSpec | None = None, services: Services | None = None, *,
                 limits: Limits | None = None, scoped: bool = False) -> None:
        self.workspace = Path(workspace)
        self.limits = limits or Limits()
        self.scoped = scoped
        self._output: io.StringIO | None = None
        transport = DirectTransport(services or Services(), self.limits.max_message_bytes)
        self.namespace: dict[str, Any] = {"__name__": "__episode__"}
        if scoped:
            self.namespace["__builtins__"] = {**vars(builtins), "print": self._print, "open": self._open}
        self.namespace.update(namespace_entries(self.workspace, spec or NamespaceSpec(), transport))
        self.namespace[HOOK], self._skill_calls = counter()

    def execute(self, code: str) -> ExecResult:
        buffer = io.StringIO()
        error: str | None = None
        if self.scoped:
            self._output = buffer
            scope: Any = contextlib.nullcontext()
        else:
            scope = contextlib.ExitStack()
            for context in (contextlib.chdir(self.workspace), contextlib.redirect_stdout(buffer),
                            contextlib.redirect_stderr(buffer)):
                scope.enter_context(context)
        with scope:
            try:
                with ast_lock():
                    cell = compile_cell(code, ACTION_FILENAME, echo=self.limits.echo_last_expression)
                run_compiled(cell, self.namespace, show=lambda text: print(text, file=buffer))
            except BaseException as exc:  # noqa: BLE001 - agent code may raise anything, incl. SystemExit
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = format_error(exc, self.namespace)
            finally:
                self._output = None
        return ExecResult(output=buffer.getvalue(), error=error, skill_calls=take(self._skill_calls))

    def _print(self, *values: Any, sep: str | None = " ", end: str | None = "\n", file: IO[str] | None = None,
               flush: bool = False) -> None:
        """The scoped namespace's ``print``: the process's stdout and stderr mean this action's output."""
        if file is None or file is sys.stdout or file is sys.stderr:
            file = self._output if self._output is not None else io.StringIO()
        print(*values, sep=sep, end=end, file=file, flush=flush)

    def _open(self, file: Any, *args: Any, **kwargs: Any) -> Any:
        """The scoped namespace's ``open``: a relative path is taken under the workspace."""
        if isinstance(file, str | bytes | os.PathLike) and not os.path.isabs(os.fsdecode(file)):
            file = self.workspace / os.fsdecode(file)
        return open(file, *args, **kwargs)  # noqa: SIM115 - the caller closes what it opens

    def stop(self) -> None:
        """Nothing runs between actions in-process."""

    def close(self) -> None:
        self.namespace.clear()


def make_runner(workspace: Path, spec: NamespaceSpec | None = None, services: Services | None = None, *,
                sandboxed: bool = True, limits: Limits | None = None) -> Runner:
    """A sandboxed runner (separate, limited process; the default) or an in-process one (tests only)."""
    if not sandboxed:
        return InProcessRunner(workspace, spec, services, limits=limits)
    return SandboxRunner(workspace, spec, services, limits=limits)
