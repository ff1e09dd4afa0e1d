"""``ScienceWorldEnv``: the ScienceWorld benchmark (Wang et al., 2022) as a bundled env, with the simulator on the
harness side.

The agent's namespace holds stubs of harness services (``act``, ``look``, ``inventory``, ``task_description``,
``valid_actions``, ``action_templates``, ``complete_task``); the simulator (one JVM per env object, reused across its
tasks by ``load``), its score and the gold action sequences stay in the harness process. Tasks are (task type,
variation) pairs from the bundled index (``index.py``): the benchmark's own train/dev/test variation splits, up to
``per_split`` variations of each split per task type, the simulator's task description as the instruction; a
variation whose gold path did not complete it is left out (``excluded``).
Evaluation: reward = final score / 100 (a negative score counts 0), success = score 100 with the simulator's
completion flag; a negative score (the task failed irrecoverably) ends the episode.
"""

from __future__ import annotations

import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from skilltransfer.envs.base import Submission, WorkspaceEpisode, temporary_workdir
from skilltransfer.envs.scienceworld.docs import FUNCTIONS, overview
from skilltransfer.envs.scienceworld.index import SPLITS, Index, TaskType, Variation, load_index, ranked
from skilltransfer.envs.scienceworld.simulator import (
    PACKAGE_VERSION,
    Simulator,
    SimulatorError,
    StepResult,
    installed_version,
    unavailable_reason,
)
from skilltransfer.envs.scienceworld.subprocs import shared_objects, subprocedures
from skilltransfer.errors import InputError
from skilltransfer.protocols import Check, Score, TaskSpec
from skilltransfer.sandbox import Services
from skilltransfer.sandbox.services import function

HIDDEN_PACKAGES = ("scienceworld",)
"""Hidden from the agent's worker: with the simulator jar it could run its own simulator and make gold paths."""
MAX_ACTION_CHARS = 500
"""The longest action text ``act`` passes to the simulator."""
TRACE_SHOWN = 400
"""Score-trace entries written into a check's detail (the first and last halves when there are more)."""
ENDED = "The episode is over: the simulator reports the task completed or failed. No further actions are taken."


def task_id(task_type: str, variation: int) -> str:
    return f"{task_type}/{variation}"


@dataclass
class Session:
    """The harness-side state of one episode: its simulator, score trace and end."""

    simulator: Simulator
    generation: int
    """The simulator's JVM count when the episode started: a JVM started since is not this episode's world."""
    trace: list[tuple[str, int, int]] = field(default_factory=list)
    """(action, score after it, move count) per simulator step, the episode's first "look around" included."""
    completed: bool = False
    live: bool = True
    """False once another episode took over the simulator, or this one closed."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def score(self) -> int:
        return self.trace[-1][1] if self.trace else 0

    def record(self, action: str, result: StepResult) -> None:
        self.trace.append((action, result.score, result.moves))
        self.completed = self.completed or result.completed

    def _check(self) -> None:
        if not self.live:
            raise RuntimeError("this episode has ended; its simulator is no longer available")
        if not self.simulator.running or self.simulator.starts != self.generation:
            raise SimulatorError("the simulator of this episode stopped (see the earlier error); its world is gone")

    # ------------------------------------------------------------------ services
    def act(self, action: str) -> str:
        if not isinstance(action, str):
            raise TypeError(f"act() takes the action as a string, not {type(action).__name__}")
        action = " ".join(action.split())
        if len(action) > MAX_ACTION_CHARS:
            raise ValueError(f"act(): the action is {len(action)} characters long; at most {MAX_ACTION_CHARS}")
        with self.lock:
            self._check()
            if self.completed:
                return ENDED
            result = self.simulator.step(action)
            self.record(action, result)
            return result.observation

    def free(self, what: str) -> Any:
        with self.lock:
            self._check()
            return {"look": self.simulator.look, "inventory": self.simulator.inventory,
                    "task_description": self.simulator.task_description,
                    "valid_actions": self.simulator.valid_actions,
                    "action_templates": self.simulator.action_templates}[what]()


class ScienceWorldEpisode(WorkspaceEpisode):
    """A workspace episode that is also done when the simulator ends the task (completed or failed)."""

    session: Session

    @property
    def done(self) -> bool:
        return self.submission.done or self.session.completed


def _stop(simulator: Simulator) -> None:
    simulator.close()


class ScienceWorldEnv:
    """ScienceWorld's 30 task types, as (task type, variation) tasks over the benchmark's own splits.

    Args:
        seed: unused (a variation number is the benchmark's own seed); accepted like every env's.
        workdir: where episode workspaces are created (default: a temporary folder).
        sandboxed: run agent code in the sandbox (default) or in-process (tests, reference checks).
        limits: sandbox limits.
        keep_workspaces: keep workspaces after ``close``.
        per_split: at most this many variations of each split per task type (the bundled index holds 5).
        max_moves: end an episode once the simulator's move count exceeds this (the benchmark's
            ``envStepLimit``); None: no limit (the agent's step budget bounds the episode).
        index_path: another variation index file (``python -m skilltransfer.envs.scienceworld.generate``).

    Raises:
        InputError: the simulator cannot run here (no ``java``, no ``scienceworld`` package, another version of it).
    """

    name = "scienceworld"
    official_metric = "success"
    """The benchmark's official score (`report`'s default metric for this env):
    ScienceWorld's task completion (score 100)."""
    concurrent_episodes = False
    """One simulator per env: starting an episode ends the one before, so a stream runs its tasks one at a time even
    without a skill memory."""

    def __init__(self, *, seed: int = 0, workdir: Path | None = None, sandboxed: bool = True, limits: Any = None,
                 keep_workspaces: bool = False, per_split: int | None = None, max_moves: int | None = None,
                 index_path: str | None = None) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise InputError(f"scienceworld env: {reason}")
        version = installed_version()
        self.index: Index = load_index(Path(index_path)) if index_path else load_index()
        if version != self.index.scienceworld_version:
            raise InputError(f"scienceworld env: the installed scienceworld is {version}, the variation index was "
                             f"made with {self.index.scienceworld_version} (pip install scienceworld=="
                             f"{PACKAGE_VERSION}, or regenerate the index)")
        if per_split is not None and per_split < 1:
            raise InputError(f"scienceworld env: per_split must be >= 1, got {per_split}")
        if max_moves is not None and max_moves < 1:
            raise InputError(f"scienceworld env: max_moves must be >= 1, got {max_moves}")
        self.seed = seed
        self._workdir = Path(workdir) if workdir is not None else None
        self.sandboxed = sandboxed
        self.limits = limits
        self.keep_workspaces = keep_workspaces
        self.per_split = min(per_split or self.index.per_split, self.index.per_split)
        self.max_moves = max_moves
        self._tasks, self._variations = self._build_tasks()
        self._simulator: Simulator | None = None
        self._session: Session | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ tasks
    def _build_tasks(self) -> tuple[list[TaskSpec], dict[str, Variation]]:
        keep = {(name, v) for name, info in self.index.task_types.items()
                for split in SPLITS for v in ranked(info.splits[split], name, split)[:self.per_split]}
        chosen = [v for v in self.index.variations if (v.task_type, v.variation) in keep and _gold_succeeds(v)]
        self.excluded: tuple[str, ...] = tuple(task_id(v.task_type, v.variation) for v in self.index.variations
                              if (v.task_type, v.variation) in keep and not _gold_succeeds(v))
        gold_by_type: dict[str, list[tuple[str, ...]]] = {}
        for v in self.index.variations:
            gold_by_type.setdefault(v.task_type, []).append(v.gold)
        shared = shared_objects(gold_by_type)
        low, high = self.difficulty_cuts
        tasks, by_id = [], {}
        for v in chosen:
            info = self.index.task_types[v.task_type]
            length = len(v.gold)
            metadata = {"task_type": v.task_type, "task_id": info.task_id, "topic": info.topic, "title": info.title,
                        "variation": v.variation, "gold_length": length, "gold_score": v.gold_score,
                        "subprocedures": subprocedures(v.gold, shared)}
            spec = TaskSpec(id=task_id(v.task_type, v.variation), instruction=v.description,
                            difficulty=1 if length <= low else 2 if length <= high else 3, template=v.task_type,
                            split=v.split, metadata=metadata)
            tasks.append(spec)
            by_id[spec.id] = v
        return tasks, by_id

    @cached_property
    def difficulty_cuts(self) -> tuple[int, int]:
        """Gold-path lengths at the 1/3 and 2/3 terciles of the whole index: difficulty 1 up to the first, 2 up to
        the second, 3 above."""
        lengths = sorted(len(v.gold) for v in self.index.variations)
        return lengths[(len(lengths) - 1) // 3], lengths[(2 * (len(lengths) - 1)) // 3]

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        """The tasks (optionally one split: "train", "dev" or "test"), by task type and variation."""
        if split not in (None, *SPLITS):
            raise InputError(f"scienceworld env: unknown split {split!r}; use 'train', 'dev' or 'test'")
        return [t for t in self._tasks if split is None or t.split == split]

    @cached_property
    def streams(self) -> dict[str, tuple[str, ...]]:
        """Curated streams (``skilltransfer run --stream NAME``).

        ``dev30``: one dev variation of each of the 30 task types (the first in the index's selection order), types
        interleaved over the paper's ten task groups (1-1, 2-1, 3-1, ..., 10-1, 1-2, 2-2, ...), so that neighbouring
        tasks differ in type while sub-procedures recur across the stream.
        ``dev60``: the same with two dev variations per type (two rounds). ``starter``: eight short dev tasks of the
        ``find-*`` family (find a living thing, an animal, a plant, a non-living thing; go to a room, focus on the
        thing, move it to a box), two each, interleaved.
        """
        by_type: dict[str, list[TaskSpec]] = {}
        for task in self._tasks:
            if task.split == "dev":
                by_type.setdefault(task.template, []).append(task)
        for name, tasks in by_type.items():
            order = ranked(self.index.task_types[name].splits["dev"], name, "dev")
            tasks.sort(key=lambda t: order.index(t.metadata["variation"]))
        types = _interleave([self.index.task_types[name] for name in by_type])
        streams = {}
        for label, rounds, names in (("dev30", 1, types), ("dev60", 2, types),
                                     ("starter", 2, [n for n in types if n.startswith("find-")])):
            streams[label] = tuple(by_type[n][r].id for r in range(rounds) for n in names if r < len(by_type[n]))
        return streams

    # ------------------------------------------------------------------ episodes
    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            self._workdir = temporary_workdir("scienceworld-")
        self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    @property
    def simulator(self) -> Simulator:
        """This env's simulator (one JVM, started on the first episode and reused; stopped when the env is
        garbage-collected, by ``close``, or at exit)."""
        if self._simulator is None:
            self._simulator = Simulator(max_moves=self.max_moves)
            weakref.finalize(self, _stop, self._simulator)
        return self._simulator

    def docs(self, task: TaskSpec | None = None) -> str:
        return overview()

    def task(self, task_id: str) -> TaskSpec:
        """The task with this id."""
        for task in self._tasks:
            if task.id == task_id:
                return task
        raise InputError(f"scienceworld env: unknown task id {task_id!r}")

    def variation(self, task: TaskSpec) -> Variation:
        found = self._variations.get(task.id)
        if found is None:
            raise InputError(f"scienceworld env: unknown task id {task.id!r}")
        return found

    def reference_solution(self, task: TaskSpec) -> str:
        """A Python program that plays the task's gold action sequence through ``act`` (harness side only)."""
        actions = "".join(f"    {a!r},\n" for a in self.variation(task).gold)
        return (f"for action in [\n{actions}]:\n    observation = act(action)\n    print(observation)\n"
                f"    if observation == {ENDED!r}:\n        break\n")

    def gold_actions(self, task: TaskSpec) -> list[str]:
        """The task's gold action sequence as the bundled index recorded it (harness side only)."""
        return list(self.variation(task).gold)

    def start(self, task: TaskSpec) -> ScienceWorldEpisode:
        """Load (task type, variation) into this env's simulator (no JVM restart), make the benchmark's first move
        ("look around"), and open an episode whose services act on it. A previous episode of this env loses the
        simulator (its services refuse); its score stays what it recorded."""
        variation = self.variation(task)
        with self._lock:
            if self._session is not None:
                self._session.live = False
            simulator = self.simulator
            try:
                simulator.load(variation.task_type, variation.variation)
            except SimulatorError:
                if simulator.running:
                    raise
                simulator.load(variation.task_type, variation.variation)  # its JVM had died: once more, on a new one
            session = Session(simulator, simulator.starts)
            session.record("look around", simulator.reset())
            self._session = session
        services = Services()
        services.register("act", session.act)
        for name in FUNCTIONS:
            if name != "act":
                services.register(name, lambda _name=name: session.free(_name))
        bindings = {name: function(name, name, text) for name, text in FUNCTIONS.items()}
        workspace = Path(tempfile.mkdtemp(prefix=f"{task.template}-{variation.variation}-", dir=self.workdir))

        def finish() -> None:
            session.live = False

        episode = ScienceWorldEpisode(task, workspace, services=services, bindings=bindings, docs=self.docs(task),
                                      hidden_packages=HIDDEN_PACKAGES,
                                      evaluator=lambda _ws, submission: self.evaluate(session, submission),
                                      sandboxed=self.sandboxed, limits=self.limits, keep=self.keep_workspaces,
                                      on_close=finish)
        episode.session = session
        return episode

    def evaluate(self, session: Session, submission: Submission) -> Score:
        """The final score of the episode's simulator (as recorded after its last action)."""
        with session.lock:
            session.live = False
            score, completed = session.score, session.completed
            trace = list(session.trace)
        success = score >= 100 and completed
        moves = trace[-1][2] if trace else 0
        checks = (
            Check("ScienceWorld score reaches 100 (task completed)", success,
                  f"final score {score}, simulator completion flag {completed}, {len(trace)} actions, {moves} moves"
                  + (", submitted with complete_task" if submission.done else "")),
            Check("the task was not failed (score >= 0)", score >= 0, "score trace (action: score after it): "
                  + _trace_text(trace)),
        )
        return Score(reward=max(score, 0) / 100, success=success, checks=checks)

    def close(self) -> None:
        """Stop this env's simulator (a later episode starts a new one)."""
        if self._simulator is not None:
            self._simulator.close()


def _gold_succeeds(variation: Variation) -> bool:
    """Whether the simulator's own gold path completed the variation when the index was made (a task without a
    passing reference is left out: nothing shows it can be done as scored)."""
    return variation.gold_completed and variation.gold_score >= 100


def _interleave(types: list[TaskType]) -> list[str]:
    """Task type names round-robin over the paper's task groups (the ``N`` of task id ``N-k``), groups in number
    order and each group's types in id order."""
    def key(task_id: str) -> tuple[int, ...]:
        return tuple(int(part) for part in task_id.split("-"))

    numbers = sorted({key(t.task_id)[0] for t in types})
    groups = [[t.name for t in sorted(types, key=lambda t: key(t.task_id)) if key(t.task_id)[0] == n] for n in numbers]
    out: list[str] = []
    while any(groups):
        for group in groups:
            if group:
                out.append(group.pop(0))
    return out


def _trace_text(trace: list[tuple[str, int, int]]) -> str:
    parts = [f"{action!r}: {score}" for action, score, _ in trace]
    if len(parts) > TRACE_SHOWN:
        half = TRACE_SHOWN // 2
        parts = [*parts[:half], f"... {len(parts) - TRACE_SHOWN} more ...", *parts[-half:]]
    return "; ".join(parts)
