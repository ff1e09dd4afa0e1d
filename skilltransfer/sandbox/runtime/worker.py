"""The sandbox worker process: isolates itself, builds the agent's namespace, then runs code actions.

Started by ``skilltransfer.sandbox.SandboxRunner`` as ``python -P -s -m sandbox_runtime.worker RFD WFD`` with only
the runtime folder on ``PYTHONPATH`` (this package, plus agent-side packages such as ``office_tools``): the
``skilltransfer`` package, the env generators, reference solutions and checks are not importable here. Frames are
described in ``channel``. The first frame from the harness is the configuration; the worker answers
``{"ready": true, "n": nonce, "isolation": {...}}`` or ``{"fatal": reason}``, then serves
``{"op": "exec", "n": nonce, "code": ...}`` -> ``{"t": "result", "n": nonce, "output": ..., "error": ...,
"skill_calls": {...}}`` (`skilluse`) and
``{"op": "check", "n": nonce, "code": ..., "name": ...}`` -> ``{"t": "checked", "n": nonce, "reason": ...}`` until
the channel closes. While an action runs, its service stubs send ``call`` frames and wait for the harness's replies.

Isolation happens here, before any agent code runs, in this order: new network, mount and PID namespaces with
everything but the system folders hidden, the needed paths bound back (the toolkit's own package covered again) and
every mount read-only except the workspace and temp folder (root only), resource limits, privilege drop to the
configured unprivileged uid/gid (root only; no capability kept when reads are confined), importing the setup
function (if any), then the audit hook (``guard``). Only the standard library and this package are imported before.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import resource
import sys
import traceback
import types
from typing import Any

from .cell import run_cell
from .channel import WorkerChannel
from .explain import format_error
from .guard import install_guard
from .isolation import (
    drop_privileges,
    editable_mappings,
    enter_namespaces,
    installed_paths,
    limit_processes,
    set_limits,
    world_reachable,
)
from .skilluse import HOOK, counter, take
from .stubs import build


class LimitedWriter(io.TextIOBase):
    """A text sink that keeps the head and tail of what is written (at most ``limit`` characters in all)."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = ""
        self.tail = ""
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head += text[:take]
            text = text[take:]
        if text:
            self.tail += text
            if len(self.tail) > 2 * self.half:
                self.dropped += len(self.tail) - self.half
                self.tail = self.tail[-self.half:]
        return len(text)

    def getvalue(self) -> str:
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            self.tail = self.tail[-self.half:]
        if not self.dropped:
            return self.head + self.tail
        return f"{self.head}\n... [{self.dropped} characters truncated] ...\n{self.tail}"


def new_namespace(entries: dict[str, Any]) -> dict[str, Any]:
    """An episode namespace: ``__name__`` is ``"__episode__"`` for actions and code-skill checks alike."""
    return {"__name__": "__episode__", **entries}


class Worker:
    """Runs actions in a persistent namespace; output captured at Python and file-descriptor level."""

    def __init__(self, config: dict[str, Any], channel: WorkerChannel) -> None:
        self.limits = config["limits"]
        self.channel = channel
        self.namespace: dict[str, Any] = new_namespace({})
        self.namespace[HOOK], self.skill_calls = counter()  # code skills' calls (`skilluse`), not in check namespaces
        self.entries: dict[str, Any] = {}
        self.capture = os.open(os.path.join(config["tmpdir"], ".fd_output"), os.O_RDWR | os.O_CREAT | os.O_TRUNC,
                               0o600)
        os.dup2(self.capture, 1)
        os.dup2(self.capture, 2)
        self.offset = 0
        self.setup_function: Any = None

    def load(self, setup: str | None) -> None:
        """Import the setup function (before the audit hook, which may refuse listing the folder of its module)."""
        if setup:
            module_name, _, attr = setup.partition(":")
            self.setup_function = getattr(importlib.import_module(module_name), attr)

    def build(self, workspace: str, setup_kwargs: dict[str, Any], bindings: dict[str, Any]) -> None:
        """Fill the namespace: the setup function's entries, then the service stubs. Each entry that is an object
        (not a function, class or module) is also importable by its name: ``import apis`` binds the same object."""
        if self.setup_function is not None:
            from pathlib import Path

            self.entries.update(self.setup_function(Path(workspace), **setup_kwargs))
        self.entries.update(build(bindings, self.channel))
        self.namespace.update(self.entries)
        for name, value in self.entries.items():  # `import apis` binds the namespace's object, as a model expects
            if name.isidentifier() and not name.startswith("_") and name not in sys.modules \
                    and not callable(value) and not isinstance(value, types.ModuleType):
                sys.modules[name] = value

    def _fd_output(self) -> str:
        end = os.lseek(self.capture, 0, os.SEEK_END)
        if end <= self.offset:
            return ""
        limit = int(self.limits["max_output_chars"])
        os.lseek(self.capture, self.offset, os.SEEK_SET)
        data = os.read(self.capture, min(end - self.offset, 4 * limit))
        self.offset = end
        return data.decode(errors="replace")

    def _arm_cpu(self) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + float(self.limits["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))

    def run(self, code: str, filename: str, namespace: dict[str, Any], nonce: str, *,
            echo: bool = False) -> tuple[str, str | None]:
        writer = LimitedWriter(int(self.limits["max_output_chars"]))
        error: str | None = None
        self._arm_cpu()
        self.channel.nonce = nonce
        try:
            with contextlib.redirect_stdout(writer), contextlib.redirect_stderr(writer):
                try:
                    run_cell(code, filename, namespace, echo=echo)
                except BaseException as exc:  # noqa: BLE001 - agent code may raise anything, incl. SystemExit
                    error = format_error(exc, namespace)
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
        finally:
            self.channel.nonce = None
        extra = self._fd_output()
        if extra:
            writer.write(extra)
        return writer.getvalue(), error

    def check(self, code: str, name: str, nonce: str) -> str | None:
        """Load ``code`` into a fresh namespace identical to the episode's at its start; is ``name`` callable then?"""
        namespace = new_namespace(dict(self.entries))
        _, error = self.run(code, "<skill>", namespace, nonce)
        if error is not None:
            last = error.strip().splitlines()[-1] if error.strip() else "an exception"
            return f"loading raised {last}"[:500]
        if not callable(namespace.get(name)):
            return f"after loading, {name!r} is not a callable"
        return None


def _hidden(config: dict[str, Any], readable: list[str]) -> list[str]:
    """The toolkit's own package folders: the harness's, editable installs', and any inside a readable folder."""
    names = list(config.get("hidden_packages") or [])
    hidden = set(config.get("hidden") or [])
    hidden.update(path for name, path in editable_mappings().items() if name in names)
    for folder in readable:
        hidden.update(os.path.join(folder, name) for name in names if os.path.isdir(os.path.join(folder, name)))
    return sorted(os.path.realpath(path) for path in hidden)


def main() -> None:
    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)
    channel = WorkerChannel(rfd, wfd, int(1 << 20))
    config = channel.receive()
    if config is None:
        return
    channel.max_bytes = int(config["limits"]["max_message_bytes"])
    privileged = os.getuid() == 0 and config.get("uid") is not None
    isolation: dict[str, Any] = {"namespaces": False, "read_only_fs": False, "reads_confined": False,
                                 "private_proc": False, "uid": os.getuid(), "read_capability": False}
    writable = [config["workspace"], config["tmpdir"]]
    installed = installed_paths(config.get("hidden_packages") or [])
    hidden = _hidden(config, [*(config.get("readable") or []), *installed])
    readable = [path for path in [*(config.get("readable") or []), *installed]
                if not any(os.path.realpath(path) == h or os.path.realpath(path).startswith(h + os.sep)
                           for h in hidden)]
    try:
        if privileged:
            isolation.update(enter_namespaces((rfd, wfd), writable, readable, hidden))
        os.chdir(config["workspace"])
        set_limits(config["limits"])
        dropped = False
        if privileged:
            keep_read = not isolation["reads_confined"] or not all(world_reachable(p) for p in readable)
            isolation["read_capability"] = drop_privileges(int(config["uid"]), int(config["gid"]), keep_read)
            dropped = True
            isolation["uid"] = os.getuid()
        limit_processes(int(config["limits"]["max_processes"]), dropped)
        worker = Worker(config, channel)
        worker.load(config.get("setup"))
        # the kernel hides the rest when reads are confined; otherwise the hook refuses reads outside the allow-list
        install_guard(writable, None if isolation["reads_confined"] else readable, hidden)
        worker.build(config["workspace"], dict(config.get("setup_kwargs") or {}), dict(config.get("bindings") or {}))
    except BaseException as exc:  # noqa: BLE001 - report any setup failure to the harness
        channel.send({"fatal": "".join(traceback.format_exception_only(type(exc), exc)).strip()})
        return
    channel.send({"ready": True, "n": config.get("n"), "isolation": isolation})
    while (message := channel.receive()) is not None:
        nonce = str(message.get("n"))
        if message.get("op") == "check":
            channel.send({"t": "checked", "n": nonce,
                          "reason": worker.check(message["code"], message["name"], nonce)})
        elif message.get("op") == "exec":
            output, error = worker.run(message["code"], "<action>", worker.namespace, nonce,
                                       echo=bool(config["limits"].get("echo_last_expression", True)))
            channel.send({"t": "result", "n": nonce, "output": output, "error": error,
                          "skill_calls": take(worker.skill_calls)})


if __name__ == "__main__":
    main()
