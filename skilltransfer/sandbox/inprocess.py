"""Run actions in the harness process: no isolation, for reference-solution checks and trusted test doubles."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from skilltransfer.sandbox.runner import SandboxRunner
from skilltransfer.sandbox.runtime.cell import run_cell
from skilltransfer.sandbox.runtime.channel import DirectTransport
from skilltransfer.sandbox.runtime.explain import format_error
from skilltransfer.sandbox.runtime.stubs import build
from skilltransfer.sandbox.services import Services
from skilltransfer.sandbox.values import ExecResult, Limits, NamespaceSpec, Runner
from skilltransfer.util.imports import resolve


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
        workspace: the episode folder (the working directory while code runs).
        spec: how the namespace is built; service stubs call ``services`` directly (same JSON round trip).
        services: the episode's harness services.
        limits: only ``max_message_bytes`` and ``echo_last_expression`` apply.
    """

    def __init__(self, workspace: Path, spec: NamespaceSpec | None = None, services: Services | None = None, *,
                 limits: Limits | None = None) -> None:
        self.workspace = Path(workspace)
        self.limits = limits or Limits()
        transport = DirectTransport(services or Services(), self.limits.max_message_bytes)
        self.namespace: dict[str, Any] = {"__name__": "__episode__"}
        self.namespace.update(namespace_entries(self.workspace, spec or NamespaceSpec(), transport))

    def execute(self, code: str) -> ExecResult:
        buffer = io.StringIO()
        error: str | None = None
        with contextlib.chdir(self.workspace), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:
                run_cell(code, "<action>", self.namespace, echo=self.limits.echo_last_expression)
            except BaseException as exc:  # noqa: BLE001 - agent code may raise anything, incl. SystemExit
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = format_error(exc, self.namespace)
        return ExecResult(output=buffer.getvalue(), error=error)

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
