"""Run agent code in a separate, limited, persistent worker process (see ``skilltransfer.sandbox_worker``).

Layers, from the kernel up (the first four need the harness to run as root; ``SandboxRunner.isolation`` says
which are active):

* private network, mount and PID namespaces: no network interfaces but loopback; every mount read-only except the
  workspace and the runner's private temp folder (so writes to ``/tmp``, ``/dev/shm``, the repo... fail with EROFS,
  from Python or any subprocess); killing the worker tears the PID namespace down, so children that daemonised or
  forked without end die and are reaped too;
* reads confined to what the worker needs: every top-level folder but the system ones (``/usr``, ``/etc``,
  ``/lib*``, ``/bin``, ``/sbin``, ``/dev``, ``/sys``, ``/proc``), i.e. ``/root``, ``/home``, ``/tmp``, ``/var``,
  ``/work``, ``/opt``..., plus ``/dev/shm``, is covered with an empty tmpfs, and only the Python installation
  (``sys.prefix``, ``sys.base_prefix``, site-packages and other interpreter ``sys.path`` entries, editable installs),
  the ``skilltransfer`` package folder, the setup function's module and the workspace/temp folder are bind-mounted
  back (read-only but the last two). Other episodes' workspaces, the repo, the harness's caches and history are
  absent; top-level files are covered with ``/dev/null``; ``/proc`` shows only the namespace's own processes;
* a private unprivileged uid/gid per worker (``Limits.uid_base`` upwards) owning the workspace, so ``RLIMIT_NPROC``
  (ignored for root) stops fork bombs and files elsewhere are not writable. No capability is kept (when reads are
  not confined, CAP_DAC_READ_SEARCH is kept so the Python installation under ``/root`` stays readable);
* resource limits: address space (``memory_mb``), CPU seconds per call, file size, processes, no core dumps;
* a minimal environment (PATH, LANG, HOME = workspace, TMPDIR, PYTHONPATH): no API keys or other harness secrets;
* a Python audit hook refusing writes outside the workspace/temp folder and internet sockets or DNS lookups (the
  only file/network layer when not root); when the mount namespace does not confine reads (not root), it also
  refuses opening files for reading and listing folders outside the workspace, temp folder, the readable paths
  above and ``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``, ``/dev``, ``/proc/self`` (best effort: C code and
  subprocesses are not audited);
* a per-call wall-clock limit enforced by the harness, and killing the worker's process group (plus, with a private
  uid, every process of that uid) on timeout, crash, restart and close.

A hang, crash (segfault, ``os._exit``), fork bomb or CPU overrun becomes an error observation; the worker is killed
and a fresh one starts on the next call, its namespace rebuilt by the setup function (the world lives in the
workspace, so it survives; the agent's variables do not, and the observation says so). Output printed by
subprocesses (file-descriptor level) is captured too, appended after the Python-level output of the call.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import itertools
import json
import math
import os
import pickle
import random
import select
import shutil
import signal
import site
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import ExecResult

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_uid_counter = itertools.count()


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox worker."""

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
    startup_s: float = 60.0
    """Wall-clock seconds to start the worker and run the setup function."""
    drop_privileges: bool = True
    """When the harness is root: run as a private unprivileged uid in private network/mount/PID namespaces."""
    uid_base: int = 200_000
    """Private uids are drawn from ``[uid_base, uid_base + 100_000)``."""


class SandboxError(RuntimeError):
    """The worker could not be started or its setup function failed."""


def _uids_in_use() -> set[int]:
    uids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                uids.add(os.stat(f"/proc/{entry}").st_uid)
    return uids


def _pick_uid(limits: Limits) -> int:
    """A uid from the private range that no running process has (spread by pid across harness processes)."""
    busy = _uids_in_use()
    spread = random.Random(os.getpid()).randrange(0, 100_000)
    for _ in range(1000):
        uid = limits.uid_base + (spread + next(_uid_counter)) % 100_000
        if uid not in busy:
            return uid
    raise SandboxError("no free private uid for the sandbox worker")


def _python_path() -> str:
    """PYTHONPATH for the worker: the package root plus harness sys.path folders not in a default interpreter."""
    standard = {sys.prefix, sys.base_prefix, *site.getsitepackages()}
    entries = [_PACKAGE_ROOT]
    for entry in sys.path:
        path = os.path.abspath(entry or os.getcwd())
        if os.path.exists(path) and not any(path.startswith(s) for s in standard) and path not in entries:
            entries.append(path)
    return os.pathsep.join(entries)


def _readable_paths(setup: str | None) -> list[str]:
    """What the worker may read besides its workspace: Python, site-packages, this package, the setup's module."""
    paths = [sys.prefix, sys.base_prefix, *site.getsitepackages(), str(Path(__file__).resolve().parent)]
    top = (setup or "").partition(":")[0].split(".")[0]
    if top:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(top)
            if spec is not None and spec.submodule_search_locations:
                paths.extend(spec.submodule_search_locations)
            elif spec is not None and spec.origin and os.path.isabs(spec.origin):
                paths.append(spec.origin)
    return sorted({os.path.realpath(path) for path in paths if os.path.exists(path)})


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is ``uid`` until none is left (fork bombs respawn)."""
    for _ in range(200):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as handle:
                    fields = dict(line.split(":", 1) for line in handle if line.startswith(("State:", "Uid:")))
            except (OSError, ValueError):
                continue
            zombie = fields.get("State", "").strip().startswith("Z")
            if not zombie and "Uid" in fields and int(fields["Uid"].split()[0]) == uid:
                found = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.005)


class SandboxRunner:
    """Executes code actions in a sandboxed, persistent worker (same interface as ``InProcessRunner``).

    Args:
        workspace: the episode folder: the worker's cwd and the only place (besides its temp folder) it may write.
        setup: ``"module:function"`` building the namespace, called in the worker as ``setup(workspace, **kwargs)``;
            None for an empty namespace.
        setup_kwargs: keyword arguments for the setup function (must be picklable).
        limits: resource limits; None for the defaults.
    """

    def __init__(self, workspace: Path, setup: str | None, setup_kwargs: dict[str, Any] | None = None, *,
                 limits: Limits | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        self.setup = setup
        self.setup_kwargs = dict(setup_kwargs or {})
        self.limits = limits or Limits()
        self.private = os.geteuid() == 0 and self.limits.drop_privileges
        self.uid: int | None = None
        self.tmpdir = Path(tempfile.mkdtemp(prefix="skilltransfer-sbx-"))
        self.isolation: dict[str, Any] = {}
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_worker = self._from_worker = -1
        self.closed = False
        self._start()

    # -- process management -------------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                "HOME": str(self.workspace), "TMPDIR": str(self.tmpdir), "PYTHONPATH": _python_path(),
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}

    def _start(self) -> None:
        if self.private:  # a fresh uid per worker: nothing left by an earlier one counts against its process limit
            self.uid = _pick_uid(self.limits)
            _chown_tree(self.workspace, self.uid, self.uid)
            _chown_tree(self.tmpdir, self.uid, self.uid)
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-s", "-m", "skilltransfer.sandbox_worker", str(down_r), str(up_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(down_r, up_w), env=self._env(), cwd=self.workspace, start_new_session=True)
        except OSError as exc:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise SandboxError(f"could not start the sandbox worker: {exc}") from exc
        os.close(down_r)
        os.close(up_w)
        self._to_worker, self._from_worker = down_w, up_r
        config = {"workspace": str(self.workspace), "tmpdir": str(self.tmpdir), "setup": self.setup,
                  "setup_kwargs": base64.b64encode(pickle.dumps(self.setup_kwargs)).decode(),
                  "limits": asdict(self.limits), "uid": self.uid, "gid": self.uid,
                  "readable": _readable_paths(self.setup)}
        try:
            self._send(config)
            reply = self._receive(self.limits.startup_s)
        except (OSError, TimeoutError, ValueError) as exc:
            self._kill()
            raise SandboxError(f"sandbox worker failed to start ({self.setup}): {exc}") from exc
        if reply is None or "fatal" in reply:
            self._kill()
            reason = reply["fatal"] if reply else f"worker exited ({self._exit_reason()})"
            raise SandboxError(f"sandbox setup {self.setup} failed: {reason}")
        self.isolation = reply.get("isolation", {})

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if self.uid is not None:  # children that left the group; and wait out the PID namespace's teardown
                _kill_uid(self.uid)
        for fd in (self._to_worker, self._from_worker):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._to_worker = self._from_worker = -1

    def _exit_reason(self) -> str:
        proc = self._proc
        if proc is None:
            return "not started"
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
        code = proc.returncode
        if code is None:
            return "still running"
        if code < 0:
            sig = signal.Signals(-code)
            hint = {signal.SIGXCPU: "CPU time limit exceeded", signal.SIGKILL: "killed",
                    signal.SIGSEGV: "segmentation fault", signal.SIGXFSZ: "file size limit exceeded"}.get(sig)
            return f"signal {sig.name}" + (f": {hint}" if hint else "")
        return f"exit code {code}"

    def _restart(self) -> None:
        """Kill the worker; a fresh one (namespace rebuilt by the setup function) starts on the next call."""
        self._kill()
        self._proc = None
        self.restarts += 1

    # -- messaging ----------------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        data = struct.pack(">I", len(data)) + data
        while data:
            data = data[os.write(self._to_worker, data):]

    def _read(self, n: int, deadline: float) -> bytes | None:
        chunks = []
        while n:
            left = deadline - time.monotonic()
            poller = select.poll()
            poller.register(self._from_worker, select.POLLIN | select.POLLHUP | select.POLLERR)
            if left <= 0 or not poller.poll(left * 1000):
                raise TimeoutError
            chunk = os.read(self._from_worker, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message; None if the worker died; TimeoutError if none came in time; ValueError if garbled."""
        deadline = time.monotonic() + timeout
        header = self._read(4, deadline)
        if header is None:
            return None
        size = struct.unpack(">I", header)[0]
        if size > 8 * self.limits.max_output_chars + (1 << 20):
            raise ValueError(f"oversized message ({size} bytes)")
        body = self._read(size, deadline)
        if body is None:
            return None
        message = json.loads(body)
        if not isinstance(message, dict):
            raise ValueError("message is not an object")
        return message

    def _call(self, message: dict[str, Any], timeout: float) -> tuple[dict[str, Any] | None, ExecResult | None]:
        """Send a request; the reply, or (None, an error result) after restarting a timed-out/crashed worker."""
        if self.closed:
            raise SandboxError("the sandbox runner is closed")
        if self._proc is None:
            self._start()
        try:
            self._send(message)
            reply = self._receive(timeout)
        except TimeoutError:
            self._restart()
            return None, ExecResult(
                output="", timed_out=True,
                error=f"TimeoutError: the action did not finish within {timeout:g} s and was killed; the sandbox was "
                      "restarted, so all variables and imports were lost (files in the workspace are kept).")
        except OSError:
            reply, problem = None, None  # broken pipe: the worker died
        except ValueError as exc:
            reply, problem = None, f"the worker broke the protocol ({exc})"
        else:
            problem = None
        if reply is None or not isinstance(reply.get("output", ""), str):
            problem = problem or f"the worker process died ({self._exit_reason()})"
            self._restart()
            return None, ExecResult(
                output="", crashed=True,
                error=f"SandboxCrash: {problem}; the sandbox was restarted, so all variables and imports were lost "
                      "(files in the workspace are kept).")
        return reply, None

    # -- public API ---------------------------------------------------------------------------------------------

    def execute(self, code: str) -> ExecResult:
        """Run one code action in the persistent namespace and return its output and error."""
        reply, failure = self._call({"op": "exec", "code": code}, self.limits.wall_s)
        if failure is not None:
            return failure
        assert reply is not None
        error = reply.get("error")
        return ExecResult(output=str(reply.get("output", "")), error=str(error) if error is not None else None)

    def check(self, source: str, function_name: str) -> str | None:
        """Load ``source`` into a fresh namespace; None if ``function_name`` is then callable, else the reason."""
        reply, failure = self._call({"op": "check", "code": source, "name": function_name}, self.limits.wall_s)
        if failure is not None:
            return ("loading timed out" if failure.timed_out else "loading crashed the worker") + (
                f": {failure.error.split(';')[0]}" if failure.error else "")
        assert reply is not None
        reason = reply.get("reason")
        return None if reason is None else str(reason)

    def close(self) -> None:
        """Kill the worker and everything it started; remove the private temp folder."""
        if self.closed:
            return
        self.closed = True
        self._kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def scratch_setup(workspace: Path) -> dict[str, Any]:
    """A namespace holding only ``complete_task``: for code run outside any env (benchmarks, trying code skills)."""
    from skilltransfer.envs.base import completion_function

    return {"complete_task": completion_function(workspace)}


def check_code_loads(source: str, function_name: str, *, timeout_s: float = 10.0) -> str | None:
    """Execute ``source`` in a fresh sandbox worker (no env namespace) and check ``function_name`` is callable.

    Args:
        source: Python source (e.g. a code skill).
        function_name: the function that must exist after loading.
        timeout_s: wall-clock limit for loading (CPU limit likewise).

    Returns:
        None when it loads, else a one-line reason.
    """
    limits = Limits(wall_s=timeout_s, cpu_s=max(1.0, math.ceil(timeout_s)), startup_s=max(30.0, timeout_s))
    with tempfile.TemporaryDirectory(prefix="skilltransfer-check-") as folder:
        try:
            runner = SandboxRunner(Path(folder), None, limits=limits)
        except SandboxError as exc:
            return f"could not start the sandbox: {exc}".replace("\n", " ")
        try:
            reason = runner.check(source, function_name)
        finally:
            runner.close()
    return None if reason is None else reason.replace("\n", " ")
