"""The ScienceWorld simulator on the harness side: one JVM per ``Simulator``, reused across tasks by ``load``.

Wraps the benchmark's own Python API (``scienceworld.ScienceWorldEnv``, PyPI ``scienceworld==1.2.3``, which ships the
simulator jar and starts it through py4j). ``step`` calls the same simulator methods as the benchmark's
``ScienceWorldEnv.step`` (``step``, ``getScore``, ``getCompleted``, ``getNumMoves``) and applies the same rules
(score = round(100 × score), a negative score or a move count over the limit completes the episode), but it skips
the per-step ``info`` dictionary (look, inventory, task description and the list of valid actions), which costs
0.1-1.6 s a step; those are asked for on demand instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PACKAGE_VERSION = "1.2.3"
"""The ``scienceworld`` release the bundled variation index was generated with."""

JRE_HINT = "install a Java runtime, e.g. Debian's default-jre-headless"
CALL_TIMEOUT_S = 300.0
"""A simulator call that has not answered after this long is taken for a hang: the JVM is stopped (the next
``load`` starts a new one). Generous: generating a gold path takes up to ~30 s on a quiet machine."""


HEAP_MB = 1024
"""The simulator JVM's heap cap (``-Xmx``). Without one a JVM takes up to a quarter of the machine's memory and, across
hundreds of loads, grows to several GB; the simulator runs in about 400 MB (gold-path generation included)."""
_LAUNCH_LOCK = threading.Lock()


class SimulatorError(RuntimeError):
    """The simulator failed (its JVM died or hung, or it raised); the message says what happened."""


def unavailable_reason() -> str | None:
    """Why the simulator cannot run here (one line), or None when it can: the ``scienceworld`` package and a
    ``java`` executable on PATH are needed."""
    if importlib.util.find_spec("scienceworld") is None:
        return f"the scienceworld package is not installed (pip install scienceworld=={PACKAGE_VERSION})"
    if shutil.which("java") is None:
        return f"ScienceWorld's simulator needs Java: no 'java' on PATH ({JRE_HINT})"
    return None


def installed_version() -> str | None:
    """The installed ``scienceworld`` version, or None."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python >= 3.8 has it
        return None
    try:
        return version("scienceworld")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class StepResult:
    """One simulator step: the observation text, the score after it (0-100, negative when failed), whether the
    episode is over (task completed, failed, or the move limit passed) and the move count."""

    observation: str
    score: int
    completed: bool
    moves: int


class Simulator:
    """One ScienceWorld simulator process (a JVM), started on first use and reused for every ``load``.

    Args:
        max_moves: the episode completes once the move count exceeds this (the benchmark's ``envStepLimit``);
            None: no limit.
        heap_mb: the JVM's heap cap in MiB.

    Raises:
        SimulatorError: (on first use) the simulator cannot run here (see :func:`unavailable_reason`).
    """

    def __init__(self, *, max_moves: int | None = None, heap_mb: int = HEAP_MB) -> None:
        self.max_moves = max_moves
        self.heap_mb = heap_mb
        self._env: Any = None
        self._lock = threading.RLock()
        self.task_name: str | None = None
        self.variation: int | None = None
        self.starts = 0
        """How many JVMs this object started (1 unless it was closed and used again)."""

    # ------------------------------------------------------------------ life cycle
    @property
    def env(self) -> Any:
        """The benchmark's ``ScienceWorldEnv`` (starting the JVM on first use)."""
        with self._lock:
            if self._env is None:
                reason = unavailable_reason()
                if reason is not None:
                    raise SimulatorError(f"scienceworld env: {reason}")
                self._env = _launch(self.heap_mb)
                _set_timeout(self._env, CALL_TIMEOUT_S)
                self.starts += 1
            return self._env

    def _failed(self, exc: Exception, doing: str) -> SimulatorError:
        """Turn a py4j error into a `SimulatorError`. A Java exception leaves the JVM running; anything else (it died,
        hung past ``CALL_TIMEOUT_S`` or broke the connection) stops it, and the next ``load`` starts a new one."""
        from py4j.protocol import Py4JJavaError

        if isinstance(exc, Py4JJavaError):
            return SimulatorError(f"the simulator raised while {doing}: {str(exc.java_exception)[:300]}")
        self.kill()
        return SimulatorError(f"the simulator stopped answering while {doing} ({type(exc).__name__}; its JVM was "
                              "stopped, the next task starts a new one)")

    @property
    def running(self) -> bool:
        return self._env is not None

    def close(self) -> None:
        """Stop the JVM (a later call starts a new one)."""
        self._stop(clean=True)

    def kill(self) -> None:
        """Stop the JVM at once (it may be hung)."""
        self._stop(clean=False)

    def _stop(self, *, clean: bool) -> None:
        with self._lock:
            env, self._env = self._env, None
            self.task_name = self.variation = None
        if env is None:
            return
        process = getattr(getattr(env, "_gateway", None), "java_process", None)
        if clean:
            with contextlib.suppress(Exception):
                env.close()
                if process is not None:
                    process.wait(timeout=10)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        gateway: Any = getattr(env, "_gateway", None)
        with contextlib.suppress(Exception):
            gateway.shutdown_callback_server()
        with contextlib.suppress(Exception):
            gateway._gateway_client.is_connected = False  # no calls to the dead JVM (e.g. py4j's object GC)
        env.close = lambda: None  # the benchmark's __del__ would shut the gateway down a second time

    # ------------------------------------------------------------------ tasks
    def task_names(self) -> list[str]:
        return self._ask(lambda: [str(n) for n in self.env.get_task_names()], "task names")

    def max_variations(self, task_name: str) -> int:
        return self._ask(lambda: int(self.env.get_max_variations(task_name)), "variation counts")

    def splits(self, task_name: str) -> dict[str, list[int]]:
        """The benchmark's own train/dev/test variation lists of ``task_name`` (loads its variation 0)."""
        with self._lock:
            self.load(task_name, 0)
            return self._ask(lambda: {"train": [int(v) for v in self.env.get_variations_train()],
                                      "dev": [int(v) for v in self.env.get_variations_dev()],
                                      "test": [int(v) for v in self.env.get_variations_test()]}, "splits")

    def load(self, task_name: str, variation: int, *, gold: bool = False) -> None:
        """Load a fresh copy of (task, variation), as the benchmark's ``load`` does (no JVM restart).

        Args:
            gold: also have the simulator generate the gold action sequence (slow: up to ~30 s for some tasks).

        Raises:
            SimulatorError: the simulator refused the task or failed.
        """
        with self._lock:
            env = self.env
            try:
                env.load(task_name, variation, "", generateGoldPath=gold)
                error = str(env.server.errorStr())
            except ValueError as exc:
                raise SimulatorError(str(exc)) from None
            except Exception as exc:  # noqa: BLE001 - py4j errors
                raise self._failed(exc, f"loading {task_name} variation {variation}") from None
            if error:
                raise SimulatorError(f"ScienceWorld could not load {task_name} variation {variation}: {error}")
            self.task_name, self.variation = task_name, variation

    def reset(self) -> StepResult:
        """The benchmark's start of an episode after ``load``: a first "look around" move."""
        return self.step("look around")

    # ------------------------------------------------------------------ acting
    def step(self, action: str) -> StepResult:
        """Take one action; the observation, score, completion and move count after it."""
        with self._lock:
            server = self.env.server
            try:
                observation = str(server.step(action))
                score = int(round(100 * float(server.getScore())))
                completed = bool(server.getCompleted())
                moves = int(server.getNumMoves())
            except Exception as exc:  # noqa: BLE001 - py4j errors
                raise self._failed(exc, f"taking the action {action!r}") from None
        if score < 0 or (self.max_moves is not None and moves > self.max_moves):
            completed = True
        return StepResult(observation, score, completed, moves)

    def look(self) -> str:
        """The benchmark's free "look around" (takes no time)."""
        return self._ask(lambda: str(self.env.look()), "look")

    def inventory(self) -> str:
        """The benchmark's free "inventory" (takes no time)."""
        return self._ask(lambda: str(self.env.inventory()), "inventory")

    def task_description(self) -> str:
        return self._ask(lambda: str(self.env.get_task_description()), "task description")

    def valid_actions(self) -> list[str]:
        """The benchmark's valid action-object combinations in the current state (sorted)."""
        return self._ask(lambda: [str(a) for a in self.env.get_valid_action_object_combinations()], "valid actions")

    def action_templates(self) -> list[str]:
        """The benchmark's action templates (``get_possible_actions``)."""
        return self._ask(lambda: [str(a) for a in self.env.get_possible_actions()], "action templates")

    def gold_actions(self) -> list[str]:
        """The gold action sequence of the current task (``load(..., gold=True)`` first)."""
        actions = self._ask(lambda: [str(a) for a in self.env.get_gold_action_sequence()], "the gold path")
        if actions and actions[0].startswith("ERROR:"):
            raise SimulatorError(actions[0])
        return actions

    def _ask(self, query: Callable[[], Any], what: str) -> Any:
        with self._lock:
            try:
                return query()
            except Exception as exc:  # noqa: BLE001 - py4j errors
                raise self._failed(exc, f"asking for {what}") from None

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_timeout(env: Any, seconds: float) -> None:
    """Make py4j calls to ``env``'s JVM give up after ``seconds`` (connections made before are closed)."""
    try:
        env._gateway.gateway_parameters.read_timeout = seconds
        client = env._gateway._gateway_client
        while client.deque:
            client.deque.pop().close()
    except AttributeError:  # another py4j layout: calls then wait without limit
        pass


_JVM_OPTIONS = threading.local()
"""The JVM options of the launch running in this thread (`_launch`)."""


def _launch_gateway(*args: Any, **kwargs: Any) -> Any:
    """py4j's ``launch_gateway`` with the calling thread's `_JVM_OPTIONS` added (the benchmark's constructor takes
    none); a call from anywhere else passes through unchanged."""
    from py4j.java_gateway import launch_gateway

    extra = getattr(_JVM_OPTIONS, "options", None) or []
    return launch_gateway(*args, **{**kwargs, "javaopts": [*kwargs.get("javaopts", []), *extra]})


def _launch(heap_mb: int) -> Any:
    """The benchmark's ``ScienceWorldEnv`` (it starts the JVM) with the heap capped (``-Xmx``, unless the user's own
    ``JAVA_TOOL_OPTIONS`` sets one) and the serial GC, passed as JVM options of this launch only: no environment
    variable or other process-wide state changes while other streams run (the benchmark module's
    ``launch_gateway`` is `_launch_gateway`, which adds them for this thread's launch)."""
    import scienceworld.scienceworld as benchmark
    from scienceworld import ScienceWorldEnv

    options = ["-XX:+UseSerialGC"]
    if "-Xmx" not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
        options.insert(0, f"-Xmx{heap_mb}m")
    with _LAUNCH_LOCK:
        benchmark.launch_gateway = _launch_gateway  # idempotent
        _JVM_OPTIONS.options = options
        try:
            return ScienceWorldEnv("", envStepLimit=10**9)
        finally:
            _JVM_OPTIONS.options = None
