"""Run agent code in a separate, limited, persistent worker process (see ``skilltransfer.sandbox.runtime.worker``).

Layers, from the kernel up (the first four need the harness to run as root; ``SandboxRunner.isolation`` says
which are active):

* private network, mount and PID namespaces: no network interfaces but loopback; every mount read-only except the
  workspace and the runner's private temp folder (so writes to ``/tmp``, ``/dev/shm``, the repo... fail with EROFS,
  from Python or any subprocess); killing the worker tears the PID namespace down, so children that daemonised or
  forked without end die and are reaped too;
* reads confined to what the worker needs: every top-level folder but the system ones (``/usr``, ``/etc``,
  ``/lib*``, ``/bin``, ``/sbin``, ``/dev``, ``/sys``, ``/proc``), i.e. ``/root``, ``/home``, ``/tmp``, ``/var``,
  ``/work``, ``/opt``..., plus ``/dev/shm``, is covered with an empty tmpfs, and only the Python installation
  (``sys.prefix``, ``sys.base_prefix``, site-packages, other interpreter ``sys.path`` entries, editable installs),
  the worker runtime folder (a read-only copy of ``skilltransfer.sandbox.runtime`` and of the episode's agent-side
  packages), a setup module of the user's own, and the workspace/temp folder are bind-mounted back (read-only but
  the last two). The ``skilltransfer`` package itself is never visible (covered again where a readable folder
  holds it), so env generators, reference solutions, answers and checks cannot be imported or read. Other
  episodes' workspaces, the repo, the harness's caches and history are absent; top-level files are covered with
  ``/dev/null``; ``/proc`` shows only the namespace's own processes;
* a private unprivileged uid/gid per worker (``Limits.uid_base`` upwards) owning the workspace, so ``RLIMIT_NPROC``
  (ignored for root) stops fork bombs and files elsewhere are not writable. No capability is kept (when reads are
  not confined, CAP_DAC_READ_SEARCH is kept so the Python installation under ``/root`` stays readable);
* resource limits per process: address space (``memory_mb``), the worker's CPU seconds per call, file size,
  processes, no core dumps; and per sandbox (root): a control group (``sandbox.cgroups``) holding all its processes'
  memory (``memory_mb``) and count (``max_processes``), and a tmpfs of the quota's size holding the workspace and temp
  folder (``sandbox.diskcap``); a harness thread (the watcher) stops a sandbox whose processes used more than
  ``cpu_s`` CPU seconds since the action began (from the group's accounting, or the worker's process tree and session
  read from /proc without one, which also gives memory), and one that reached its workspace quota (measured every
  ``quota_check_s`` without the mount, the excess then cut, newest files first);
* a minimal environment (PATH, LANG, HOME = workspace, TMPDIR, PYTHONPATH = the runtime folder): no API keys or
  other harness secrets;
* a Python audit hook refusing writes outside the workspace/temp folder and internet sockets or DNS lookups (the
  only file/network layer when not root); when the mount namespace does not confine reads (not root), it also
  refuses opening files for reading and listing folders outside the workspace, temp folder, the readable paths
  above and ``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``, ``/dev``, ``/proc/self``, and inside the
  ``skilltransfer`` package (best effort: C code and subprocesses are not audited);
* a per-call wall-clock limit enforced by the harness, and killing the worker's process group (plus, with a private
  uid, every process of that uid) on timeout, crash, restart and close.

The channel. The harness talks to the worker over two pipes (``runtime.channel`` frames). Agent code runs in the
worker process, so it can write frames of its own to the worker->harness pipe (it cannot write to the other one).
Every action gets a fresh random nonce; the harness accepts exactly one result frame carrying that nonce and
discards (and logs) any other frame, so a forged or stale frame can never be attributed to another action or
desynchronise the channel; a frame that breaks the framing (oversized length) restarts the worker. Service calls are
answered only while their action runs. What agent code can forge is the text of its own action's observation, which
it could print anyway; completion, answers and world state are recorded by harness services, never read from the
worker.

A hang, crash (segfault, ``os._exit``), fork bomb, CPU overrun or quota overrun becomes an error observation; the
worker is killed and a fresh one starts on the next call, its namespace rebuilt (workspace files and harness-side
state survive; the agent's variables do not, and the observation says so). Output printed by subprocesses
(file-descriptor level) is captured too, appended after the Python-level output of the call.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import itertools
import json
import logging
import math
import os
import random
import secrets
import select
import signal
import site
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import asdict
from pathlib import Path
from typing import Any

from skilltransfer.sandbox.cgroups import ProcessTree, SandboxGroup
from skilltransfer.sandbox.diskcap import WorkspaceMount
from skilltransfer.sandbox.quota import Usage, measure
from skilltransfer.sandbox.runtime.channel import HEADER, decode, encode
from skilltransfer.sandbox.runtime.skilluse import clean
from skilltransfer.sandbox.scratch import remove_tree, runtime_dir, scratch_dir
from skilltransfer.sandbox.services import Services
from skilltransfer.sandbox.values import ExecResult, Limits, NamespaceSpec, SandboxError
from skilltransfer.untrusted import open_folder
from skilltransfer.util.trees import WalkLimits, chown_tree, walk

log = logging.getLogger("skilltransfer.sandbox")
_uid_counter = itertools.count()
HIDDEN_PACKAGES = ("skilltransfer",)
"""Top-level packages the worker may never import or read."""


class ProtocolError(ValueError):
    """The worker->harness byte stream broke the framing; the worker is restarted."""


class QuotaExceeded(Exception):
    """The workspace grew past its quota; the quota watcher killed the worker."""


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


def _module_location(setup: str | None, packages: dict[str, str]) -> tuple[str | None, str | None]:
    """For a setup module of the user's own: (the folder to put on PYTHONPATH, the path the worker must read)."""
    top = (setup or "").partition(":")[0].split(".")[0]
    if not top or top in packages or top in HIDDEN_PACKAGES or top == "sandbox_runtime":
        return None, None
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(top)
        if spec is not None and spec.submodule_search_locations:
            folder = list(spec.submodule_search_locations)[0]
            return os.path.dirname(folder), folder
        if spec is not None and spec.origin and os.path.isabs(spec.origin):
            return os.path.dirname(spec.origin), spec.origin
    return None, None


def hidden_paths() -> list[str]:
    """Where the harness's own ``skilltransfer`` package lives (never visible to the worker)."""
    return [os.path.realpath(Path(__file__).resolve().parents[1])]  # sandbox/runner.py: the package's folder


def _readable_paths(runtime: Path, module: str | None) -> list[str]:
    """What the worker may read besides its workspace: Python, site-packages, the runtime folder, a setup module."""
    paths = [sys.prefix, sys.base_prefix, *site.getsitepackages(), str(runtime), *([module] if module else [])]
    return sorted({os.path.realpath(path) for path in paths if os.path.exists(path)})


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


LIMIT_CHECK_S = 0.1
"""How often the watcher compares each sandbox's CPU time (and, without a control group, memory) with its limits."""


class _QuotaWatch:
    """One harness thread watching every live sandbox: its workspace quota (every ``quota_check_s``), the CPU time
    of all its processes since the running action began, and (without a control group) their memory; it stops a
    sandbox that grows past one of them."""

    def __init__(self) -> None:
        self._runners: weakref.WeakSet[SandboxRunner] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, runner: SandboxRunner) -> None:
        with self._lock:
            self._runners.add(runner)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="skilltransfer-quota", daemon=True)
                self._thread.start()

    def discard(self, runner: SandboxRunner) -> None:
        with self._lock:
            self._runners.discard(runner)

    def _loop(self) -> None:
        while True:
            with self._lock:
                runners = list(self._runners)
            if not runners:
                with self._lock:
                    if not self._runners:
                        self._thread = None
                        return
                continue
            began = time.monotonic()
            for runner in runners:
                with contextlib.suppress(Exception):
                    runner.check_limits()
            interval = min(LIMIT_CHECK_S, *(r.limits.quota_check_s for r in runners))
            time.sleep(max(interval, 20 * (time.monotonic() - began)))


_WATCH = _QuotaWatch()


class SandboxRunner:
    """Executes code actions in a sandboxed, persistent worker (same interface as ``InProcessRunner``).

    Args:
        workspace: the episode folder: the worker's cwd and the only place (besides its temp folder) it may write.
        spec: how the agent's namespace is built (setup function, service bindings, agent-side packages).
        services: the harness services the namespace's stubs call while an action runs.
        limits: resource limits; None for the defaults.
    """

    def __init__(self, workspace: Path, spec: NamespaceSpec | None = None, services: Services | None = None, *,
                 limits: Limits | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        self.spec = spec or NamespaceSpec()
        self.services = services or Services()
        self.limits = limits or Limits()
        self.services.max_reply_bytes = min(self.services.max_reply_bytes, self.limits.max_message_bytes)
        self.private = os.geteuid() == 0 and self.limits.drop_privileges
        self.uid: int | None = None
        self.tmpdir = scratch_dir("sbx-")
        self.worker_tmp = self.tmpdir
        """The worker's temp folder (on the size-limited file system when there is one)."""
        self._mount: WorkspaceMount | None = None
        if self.private and self.limits.mount_workspace:
            try:  # the kernel holds the quota: a tmpfs of its size for the workspace and temp folder together
                self._mount = WorkspaceMount.create(self.workspace, self.tmpdir, self.limits.workspace_quota_mb << 20,
                                                    self.limits.max_workspace_entries)
                self.worker_tmp = self._mount.tmp
            except OSError as exc:
                log.warning("sandbox %s: no size-limited workspace (%s); the quota is measured instead",
                            self.workspace.name, exc)
        self._group: SandboxGroup | None = None
        self._accounting: SandboxGroup | ProcessTree | None = None
        self._cpu_mark = 0.0
        self._oom_mark = 0
        self._action_started = time.time()
        self._limit_kill: str | None = None
        self._watch_lock = threading.Lock()
        """Orders the watcher's stops with the actions and restarts: a stop decided for one worker or action never
        reaches the next (a loaded machine delays the watcher past an action's end)."""
        self._phase = 0
        """Counts worker starts and each action's start and end: the watcher's CPU time mark belongs to one phase."""
        self._in_action = False
        self._last_disk_check = 0.0
        self.runtime = runtime_dir(self.spec.packages)
        self.isolation: dict[str, Any] = {}
        self.restarts = 0
        self.discarded_frames = 0
        self.channel_events: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_worker = self._from_worker = -1
        self._nonce = ""
        self._quota_floor = (0, 0)
        self._quota_kill: Usage | None = None
        self._quota_lock = threading.Lock()
        self.closed = False
        self._start()

    # -- process management -------------------------------------------------------------------------------------

    def _env(self, module_root: str | None) -> dict[str, str]:
        python_path = os.pathsep.join([str(self.runtime), *([module_root] if module_root else [])])
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                "HOME": str(self.workspace), "TMPDIR": str(self.worker_tmp), "PYTHONPATH": python_path,
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}

    def _start(self) -> None:
        if self.private:  # a fresh uid per worker: nothing left by an earlier one counts against its process limit
            self.uid = _pick_uid(self.limits)
            chown_tree(self.workspace, self.uid, self.uid)
            chown_tree(self.worker_tmp, self.uid, self.uid)
        module_root, module = _module_location(self.spec.setup, self.spec.packages)
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-s", "-m", "sandbox_runtime.worker", str(down_r), str(up_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(down_r, up_w), env=self._env(module_root), cwd=self.workspace, start_new_session=True)
        except OSError as exc:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            raise SandboxError(f"could not start the sandbox worker: {exc}") from exc
        os.close(down_r)
        os.close(up_w)
        fcntl.fcntl(down_w, fcntl.F_SETFL, fcntl.fcntl(down_w, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._to_worker, self._from_worker = down_w, up_r
        self._nonce = secrets.token_hex(8)
        self._enter_group(self._proc.pid)
        with self._watch_lock:  # a group keeps the CPU time of the workers before this one
            self._new_phase(in_action=False)
        config = {"n": self._nonce, "workspace": str(self.workspace), "tmpdir": str(self.worker_tmp),
                  "setup": self.spec.setup, "setup_kwargs": self.spec.setup_kwargs, "bindings": self.spec.bindings,
                  "limits": asdict(self.limits), "uid": self.uid, "gid": self.uid,
                  "readable": _readable_paths(self.runtime, module), "hidden": hidden_paths(),
                  "hidden_packages": [*HIDDEN_PACKAGES, *self.spec.hidden_packages]}
        deadline = time.monotonic() + self.limits.startup_s
        try:
            self._send(config, deadline)
            reply = self._receive(deadline)
        except (OSError, TimeoutError, ValueError) as exc:
            self._kill()
            raise SandboxError(f"sandbox worker failed to start ({self.spec.setup}): {exc}") from exc
        if reply is None or "fatal" in reply:
            self._kill()
            reason = reply["fatal"] if reply else f"worker exited ({self._exit_reason()})"
            raise SandboxError(f"sandbox setup {self.spec.setup} failed: {reason}")
        if reply.get("n") != self._nonce:
            self._kill()
            raise SandboxError("sandbox worker failed to start: its first reply was not the start-up reply")
        self.isolation = {**reply.get("isolation", {}),
                          "cgroup": f"v{self._group.version}" if self._group is not None else None,
                          "disk": "size-limited mount" if self._mount is not None else "measured"}
        _WATCH.add(self)

    def _enter_group(self, pid: int) -> None:
        """Put the new worker (blocked reading its configuration) into the sandbox's control group, made on first
        use; without one, account for its process tree from /proc."""
        if self.private and self._group is None:
            self._group = SandboxGroup.create(self.limits.memory_mb << 20, self.limits.max_processes + 3)
        if self._group is not None:
            try:
                self._group.add(pid)
                self._accounting = self._group
                return
            except OSError as exc:
                log.warning("sandbox %s: could not enter its control group (%s)", self.workspace.name, exc)
                self._group.remove()
                self._group = None
        self._accounting = ProcessTree(pid)

    def _kill(self) -> None:
        proc = self._proc
        if self._group is not None:
            self._group.kill()
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
        _WATCH.discard(self)
        with self._watch_lock:  # a stop the watcher decided for this worker finds it gone (`_stop_for`)
            self._kill()
            self._proc = None
        self.restarts += 1

    # -- workspace quota ----------------------------------------------------------------------------------------

    def usage(self) -> Usage:
        """Disk usage of the workspace and temp folder now (entries counted up to 4x the entry limit)."""
        if self._mount is not None:
            return self._mount.usage()
        return measure([self.workspace, self.tmpdir], 4 * self.limits.max_workspace_entries)

    def _grown_past(self, usage: Usage) -> bool:
        if self._mount is not None:  # the kernel stops it at the quota: reaching it counts
            return self._mount.full()
        return usage.bytes > self.limits.workspace_quota_mb << 20 or usage.entries > self.limits.max_workspace_entries

    def _over_quota(self) -> Usage | None:
        """The usage when the folders grew past the quota, and past their level when the quota last stopped the
        worker (so that an agent over its quota can still run actions that delete files); None otherwise. On a
        size-limited mount, a folder still full since the quota stopped the worker is not stopped again: the
        kernel refuses its writes (``ENOSPC``), whatever few pages a restart freed."""
        with self._quota_lock:
            usage = self.usage()
            if not self._grown_past(usage):
                self._quota_floor = (0, 0)
                return None
            if self._mount is not None and self._quota_floor != (0, 0):
                return None
            if not usage.truncated and usage.bytes <= self._quota_floor[0] and usage.entries <= self._quota_floor[1]:
                return None
            self._quota_floor = (usage.bytes, usage.entries)
            return usage

    def _settle_quota(self) -> None:
        """After the quota stopped the worker: what its processes wrote while dying is not growth of the next one."""
        with self._quota_lock:
            usage = self.usage()
            self._quota_floor = (max(usage.bytes, self._quota_floor[0]), max(usage.entries, self._quota_floor[1]))

    def check_quota(self) -> None:
        """Kill the worker when the folders grew past the quota (the watcher calls `check_limits`)."""
        proc = self._proc
        if proc is None or self.closed or proc.poll() is not None:
            return
        usage = self._over_quota()
        if usage is None:
            return
        with self._watch_lock:
            if self._proc is not proc:  # restarted meanwhile
                return
            self._quota_kill = usage
            self._stop_all(proc)

    def check_limits(self) -> None:
        """Called by the watcher while the worker lives: the quota (every ``quota_check_s``), then the CPU time of
        all the sandbox's processes in the current phase (since the running action began, or while no action runs,
        since the last one ended), and, without a control group, their memory; a sandbox past one is stopped."""
        proc, accounting, phase, in_action = self._proc, self._accounting, self._phase, self._in_action
        if proc is None or self.closed or proc.poll() is not None:
            return
        now = time.monotonic()
        if now - self._last_disk_check >= self.limits.quota_check_s or self._mount is not None:
            self._last_disk_check = now
            self.check_quota()
        if accounting is None or self._quota_kill is not None:
            return
        used = accounting.cpu_seconds() - self._cpu_mark
        if used > self.limits.cpu_s:
            since = "since this action began" if in_action else "between actions, in background processes,"
            self._stop_for(proc, phase, f"CpuExceeded: the sandbox's processes used {used:.1f} CPU seconds {since} "
                                        f"(background processes count), over its limit of {self.limits.cpu_s:g}")
        elif isinstance(accounting, ProcessTree) and accounting.memory_bytes() > self.limits.memory_mb << 20:
            self._stop_for(proc, phase, f"MemoryError: the sandbox's processes together held more than "
                                        f"{self.limits.memory_mb} MiB")

    def _stop_for(self, proc: subprocess.Popen[bytes], phase: int, message: str) -> None:
        """Stop ``proc`` with ``message`` as the next result's error, unless the phase it was decided in is over: the
        worker restarted, or the action (or the pause between actions) whose CPU time was measured ended."""
        with self._watch_lock:
            if self._proc is not proc or self._phase != phase:
                return
            self._limit_kill = message
            self._stop_all(proc)

    def _new_phase(self, *, in_action: bool) -> None:
        """Start measuring CPU time afresh (the caller holds the watch lock)."""
        if self._accounting is not None:
            self._cpu_mark = self._accounting.cpu_seconds()
        self._phase += 1
        self._in_action = in_action

    def _stop_all(self, proc: subprocess.Popen[bytes]) -> None:
        if self._group is not None:
            self._group.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if self.uid is not None:
            _kill_uid(self.uid)

    def _trim(self) -> list[str]:
        """After the quota stopped a sandbox whose folders are measured (no size-limited mount): cut what was
        written past the quota, newest files first (removed, or the last one truncated), so the disk holds at most
        the quota however fast it was written. Returns what was cut."""
        if self._mount is not None:
            return []
        usage = self.usage()
        excess = usage.bytes - (self.limits.workspace_quota_mb << 20)
        extra = usage.entries - self.limits.max_workspace_entries
        if excess <= 0 and extra <= 0:
            return []
        since = self._action_started - 2
        found: list[tuple[float, int, Path, str, int]] = []
        for root in (self.workspace, self.tmpdir):
            with contextlib.suppress(OSError):
                for entry in walk(root, WalkLimits(max_entries=4 * self.limits.max_workspace_entries)):
                    with contextlib.suppress(OSError):
                        info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                        if not entry.is_dir and info.st_mtime >= since:
                            found.append((info.st_mtime, info.st_blocks * 512, root, entry.path, info.st_size))
        found.sort(key=lambda item: (-item[0], -item[1]))
        cut = []
        for _, blocks, root, relative, size in found:
            if excess <= 0 and extra <= 0:
                break
            parts = relative.split("/")
            with contextlib.suppress(OSError):
                parent = open_folder(root, "/".join(parts[:-1]))
                try:
                    if extra > 0 or blocks <= excess:
                        os.unlink(parts[-1], dir_fd=parent)
                        excess, extra = excess - blocks, extra - 1
                        cut.append(f"{relative} (removed)")
                    else:
                        keep = max(0, size - excess)
                        fd = os.open(parts[-1], os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
                        try:
                            os.ftruncate(fd, keep)
                        finally:
                            os.close(fd)
                        excess = 0
                        cut.append(f"{relative} (cut to {keep} bytes)")
                finally:
                    os.close(parent)
        return cut

    def _quota_message(self, usage: Usage, cut: list[str]) -> str:
        entries = f"more than {usage.entries - 1}" if usage.truncated else str(usage.entries)
        grew = "reached" if self._mount is not None else "grew to"
        shown = "; ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        trimmed = f" What was written past the quota was cut: {shown}." if cut else ""
        return (f"QuotaExceeded: the workspace {grew} {usage.mib:.0f} MiB in {entries} files and folders, against its "
                f"quota of {self.limits.workspace_quota_mb} MiB and {self.limits.max_workspace_entries} files; the "
                "action was stopped and the sandbox restarted, so all variables and imports were lost (files in the "
                f"workspace are kept: delete what is not needed to go on).{trimmed}")

    # -- messaging ----------------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any], deadline: float) -> None:
        self._write(encode(message), deadline)

    def _write(self, data: bytes, deadline: float) -> None:
        """Write without blocking past ``deadline`` (a worker that stops reading cannot hang the harness)."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._to_worker, view):]
                continue
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            poller = select.poll()
            poller.register(self._to_worker, select.POLLOUT | select.POLLERR)
            if left <= 0 or not poller.poll(left * 1000):
                raise TimeoutError

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

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        """The next frame; None if the worker died; TimeoutError; ProtocolError if the framing broke; ValueError if
        the frame is well framed but not a JSON object (it is then skipped by the caller)."""
        header = self._read(HEADER.size, deadline)
        if header is None:
            return None
        size = HEADER.unpack(header)[0]
        if size > self.limits.max_message_bytes + 8 * self.limits.max_output_chars + (1 << 20):
            raise ProtocolError(f"oversized frame ({size} bytes)")
        body = self._read(size, deadline)
        if body is None:
            return None
        return decode(body)

    def _note(self, event: str) -> None:
        """Record (and log) a frame the harness discarded: stale, duplicate or forged by agent code."""
        self.discarded_frames += 1
        self.channel_events = [*self.channel_events[-99:], event]
        log.warning("sandbox %s: %s", self.workspace.name, event)

    def _exchange(self, message: dict[str, Any], expect: str, timeout: float) -> dict[str, Any] | None:
        """Send an action; serve its service calls until its own result frame arrives (None if the worker died)."""
        deadline = time.monotonic() + timeout
        nonce = self._nonce = secrets.token_hex(8)
        self._send({**message, "n": nonce}, deadline)
        while True:
            try:
                frame = self._receive(deadline)
            except ProtocolError:
                raise
            except ValueError as exc:
                self._note(f"discarded a frame that is not a JSON object ({exc})")
                continue
            if frame is None:
                return None
            kind = frame.get("t")
            if frame.get("n") != nonce:
                self._note(f"discarded a {kind!r} frame that does not belong to the running action")
                continue
            if kind == "call":
                reply = self.services.dispatch(str(frame.get("svc")), frame.get("args"), frame.get("kwargs"))
                call_id = json.dumps(frame.get("id"))
                data = f'{{"op":"reply","id":{call_id},{reply[1:]}'.encode()
                self._write(HEADER.pack(len(data)) + data, deadline)
            elif kind == expect:
                return frame
            else:
                self._note(f"discarded an unexpected {kind!r} frame")

    def _call(self, message: dict[str, Any], expect: str, timeout: float
              ) -> tuple[dict[str, Any] | None, ExecResult | None]:
        """Run one action; its reply, or (None, an error result) after restarting a timed-out/crashed worker."""
        if self.closed:
            raise SandboxError("the sandbox runner is closed")
        if self._proc is None:
            self._start()
        self._action_started = time.time()
        with self._watch_lock:
            self._new_phase(in_action=True)
        self._oom_mark = self._group.oom_kills() if self._group is not None else 0
        try:
            reply = self._exchange(message, expect, timeout)
        except TimeoutError:
            reply, problem = None, "timeout"
        except OSError:
            reply, problem = None, ""  # broken pipe: the worker died
        except ProtocolError as exc:
            self._note(f"the worker broke the channel's framing ({exc})")
            reply, problem = None, f"the worker broke the channel protocol ({exc})"
        except Exception as exc:  # noqa: BLE001 - nothing the worker sends may end the run: it costs the action
            log.exception("sandbox %s: handling the worker's messages failed", self.workspace.name)
            self._note(f"handling the worker's messages failed ({type(exc).__name__}: {str(exc)[:200]})")
            reply, problem = None, f"the harness could not handle the worker's messages ({type(exc).__name__})"
        else:
            problem = ""
        with self._watch_lock:
            limit, self._limit_kill = self._limit_kill, None
            self._new_phase(in_action=False)
        lost = "the sandbox was restarted, so all variables and imports were lost (files in the workspace are kept)."
        if reply is not None and isinstance(reply.get("output", ""), str):
            over = self._over_quota()
            killed, self._quota_kill = self._quota_kill, None  # the watcher may have stopped it just after the reply
            over = over or killed
            if over is None and limit is None:
                return reply, None
            self._restart()
            if over is None:
                assert limit is not None
                return None, ExecResult(output=str(reply.get("output", "")), crashed=True, error=f"{limit}; {lost}")
            cut = self._trim()
            self._settle_quota()
            refusal = self._quota_message(over, cut)
            return None, ExecResult(output=str(reply.get("output", "")), error=refusal, quota_exceeded=True)
        quota, self._quota_kill = self._quota_kill, None
        reason = problem or f"the worker process died ({self._exit_reason()})"
        oom = self._group is not None and self._group.oom_kills() > self._oom_mark
        self._restart()
        if quota is not None:
            cut = self._trim()
            self._settle_quota()
            return None, ExecResult(output="", crashed=True, quota_exceeded=True,
                                    error=self._quota_message(quota, cut))
        if limit is not None:
            return None, ExecResult(output="", crashed=True, error=f"{limit}; {lost}")
        if oom and problem != "timeout":
            return None, ExecResult(output="", crashed=True, error=(
                f"MemoryError: the sandbox's processes together needed more than {self.limits.memory_mb} MiB and the "
                f"kernel stopped the worker; {lost}"))
        if problem == "timeout":
            return None, ExecResult(output="", timed_out=True, error=f"TimeoutError: the action did not finish "
                                                                     f"within {timeout:g} s and was killed; {lost}")
        return None, ExecResult(output="", crashed=True, error=f"SandboxCrash: {reason}; {lost}")

    # -- public API ---------------------------------------------------------------------------------------------

    def execute(self, code: str) -> ExecResult:
        """Run one code action in the persistent namespace and return its output and error."""
        reply, failure = self._call({"op": "exec", "code": code}, "result", self.limits.wall_s)
        if failure is not None:
            return failure
        assert reply is not None
        error = reply.get("error")
        return ExecResult(output=str(reply.get("output", "")), error=str(error) if error is not None else None,
                          skill_calls=clean(reply.get("skill_calls")))  # forgeable: kept only when well-formed

    def check(self, source: str, function_name: str) -> str | None:
        """Load ``source`` into a fresh namespace like the episode's; None if ``function_name`` is then callable."""
        reply, failure = self._call({"op": "check", "code": source, "name": function_name}, "checked",
                                    self.limits.wall_s)
        if failure is not None:
            return ("loading timed out" if failure.timed_out else "loading crashed the worker") + (
                f": {failure.error.split(';')[0]}" if failure.error else "")
        assert reply is not None
        reason = reply.get("reason")
        return None if reason is None else str(reason)

    def stop(self) -> None:
        """Kill the worker and everything it started (before evaluation); a later call starts a fresh worker."""
        if self._proc is not None:
            _WATCH.discard(self)
            self._kill()
            self._proc = None

    def close(self) -> None:
        """Kill the worker and everything it started; remove the private temp folder."""
        if self.closed:
            return
        self.closed = True
        _WATCH.discard(self)
        self._kill()
        if self._group is not None:
            self._group.remove()
        if self._mount is not None:
            self._mount.close()
        remove_tree(self.tmpdir)

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def check_code_loads(source: str, function_name: str, *, timeout_s: float = 10.0) -> str | None:
    """Execute ``source`` in a fresh sandbox worker and check ``function_name`` is callable.

    The namespace is an episode's at its start (``__name__`` is ``"__episode__"``, ``complete_task`` is bound)
    without an env's APIs; ``skilltransfer.sandbox.codecheck`` keeps code skills from running anything at load
    time, so the namespace cannot change what loading does.

    Args:
        source: Python source (e.g. a code skill).
        function_name: the function that must exist after loading.
        timeout_s: wall-clock limit for loading (CPU limit likewise).

    Returns:
        None when it loads, else a one-line reason.
    """
    from skilltransfer.sandbox.services import function

    limits = Limits(wall_s=timeout_s, cpu_s=max(1.0, math.ceil(timeout_s)), startup_s=max(30.0, timeout_s))
    folder = scratch_dir("check-")
    services = Services()
    services.register("complete_task", lambda answer=None: "Task marked as complete.")
    spec = NamespaceSpec(bindings={"complete_task": function("complete_task", lenient=True)})
    try:
        try:
            runner = SandboxRunner(folder, spec, services, limits=limits)
        except SandboxError as exc:
            return f"could not start the sandbox: {exc}".replace("\n", " ")
        try:
            reason = runner.check(source, function_name)
        finally:
            runner.close()
    finally:
        remove_tree(folder)
    return None if reason is None else reason.replace("\n", " ")
