"""Value types of the sandbox: limits, what an action returned, how the agent's namespace is built, runners."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Limits:
    """Resource limits and execution settings of one sandbox worker."""

    wall_s: float = 30.0
    """Wall-clock seconds per call (harness side); on overrun the worker is killed and restarted."""
    memory_mb: int = 2048
    """Address-space limit (RLIMIT_AS) in MiB."""
    cpu_s: float = 30.0
    """CPU seconds per call (RLIMIT_CPU, re-armed before each call)."""
    max_processes: int = 64
    """Processes and threads the sandbox uid may have at once (RLIMIT_NPROC): stops fork bombs."""
    max_output_chars: int = 20_000
    """Captured output beyond this is truncated (head and tail kept)."""
    file_size_mb: int = 256
    """Largest file the agent code may write (RLIMIT_FSIZE) in MiB."""
    workspace_quota_mb: int = 1024
    """Disk space the workspace and temp folder may hold together; growing past it kills the worker."""
    max_workspace_entries: int = 100_000
    """Files and folders the workspace and temp folder may hold together (counts against the quota)."""
    world_quota_mb: int = 64
    """How much a world held in the harness (the apps env's SQLite copy) may grow per episode; a write past it fails
    (the agent is told), so agent writes cannot grow the harness's memory without bound."""
    mount_workspace: bool = True
    """When the harness is root: the workspace and temp folder live on one tmpfs of the quota's size, so the kernel
    holds the quota (else it is measured every ``quota_check_s`` and what was written past it is cut)."""
    quota_check_s: float = 0.25
    """How often the quota is measured while the worker lives (it holds to within one such interval)."""
    max_message_bytes: int = 8 << 20
    """Largest service call or result on the worker<->harness channel (JSON bytes)."""
    startup_s: float = 60.0
    """Wall-clock seconds to start the worker and run the setup function."""
    drop_privileges: bool = True
    """When the harness is root: run as a private unprivileged uid in private network/mount/PID namespaces."""
    uid_base: int = 200_000
    """Private uids are drawn from ``[uid_base, uid_base + 100_000)``."""
    evaluation_s: float = 30.0
    """Wall-clock seconds one evaluation check of untrusted task data or files (and one artifact rendering) may take
    in its forked child (`skilltransfer.sandbox.bounded`); past it the check fails, saying so."""
    evaluation_memory_mb: int = 1024
    """Memory (address space beyond the harness's own) one such check may allocate; past it the check fails."""
    echo_last_expression: bool = True
    """Show an action's last expression like a notebook cell (its repr, when not None; ``sandbox.runtime.cell``)."""


class SandboxError(RuntimeError):
    """The worker could not be started or its setup function failed."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running one code action."""

    output: str
    error: str | None = None
    timed_out: bool = False
    crashed: bool = False
    quota_exceeded: bool = False
    skill_calls: dict[str, int] = field(default_factory=dict, hash=False)
    """Calls the action made of each loaded code skill's functions (skill id -> calls,
    `skilltransfer.sandbox.runtime.skilluse`): as the agent's process reported them, so forgeable."""


@dataclass(frozen=True)
class NamespaceSpec:
    """How the agent's namespace is built, in whatever process runs its code.

    Attributes:
        setup: ``"module:function"`` importable in the worker, called as ``setup(workspace, **setup_kwargs)`` and
            returning namespace entries (agent-side apps over the workspace's files); None for none. Its module
            must not import ``skilltransfer`` (the worker cannot): use a package from ``packages``, or a module of
            your own.
        setup_kwargs: JSON keyword arguments of the setup function.
        bindings: namespace entries that are harness-service stubs or values (``skilltransfer.sandbox.services``).
        packages: top-level name in the worker -> dotted name of a self-contained package of this toolkit (relative
            imports only, no evaluation state) copied into the worker's runtime folder, e.g. ``{"office_tools":
            "skilltransfer.envs.office.office_tools"}``; in-process, ``office_tools.x`` resolves to that package.
        hidden_packages: installed top-level packages the worker may not see either (like ``skilltransfer``), e.g.
            a simulator whose copy the harness runs behind services (``scienceworld``: its jar makes gold paths).
    """

    setup: str | None = None
    setup_kwargs: dict[str, Any] = field(default_factory=dict)
    bindings: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    hidden_packages: tuple[str, ...] = ()


class Runner(Protocol):
    """Executes code actions in a persistent namespace."""

    def execute(self, code: str) -> ExecResult: ...

    def stop(self) -> None:
        """Stop every process the agent's code left running (a later action starts afresh)."""
        ...

    def close(self) -> None: ...
