"""The stream runner: an env's tasks in order under one condition, with a skill memory that persists across the stream.

A run is a versioned log folder ``<runs_dir>/<run>/``: ``config.json`` (the condition, every setting, prompt ids),
``results.jsonl`` (one ``TaskRecord`` per finished task), ``trajectories/<task_id>.json`` (one ``TrajectoryLog`` per
task; ids are sanitised) and ``memory/`` (the skill memory after the last finished task). Every write is atomic, and a
task is committed in this order: trajectory, memory snapshot (``memory.next`` plus a marker naming the task), the
results line (the commit point), then the snapshot replaces ``memory``. Rerunning the same command resumes: committed
tasks are skipped, an uncommitted snapshot is discarded, so the memory is exactly the one after the last committed
task.

While a task runs its trajectory file is rewritten as it grows (status "running", at most every
``PARTIAL_WRITE_S`` seconds); an error that ends the task mid-way writes it once more (status "aborted", with the
error) before the run stops, so a crash, Ctrl-C or an endpoint that stays down leaves the partial trajectory on disk.
A task whose prompt cannot fit the model's window is not an error: it ends with exit status ``context_exceeded`` and
is recorded like any failed task.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.agents.agent import Agent
from skilltransfer.agents.config import AgentConfig, AgentLevel
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.errors import InputError, read_text
from skilltransfer.induction.inducer import Inducer, InductionConfig, PromptVariant
from skilltransfer.memory.library import load_library
from skilltransfer.memory.store import MemoryConfig, SkillMemory
from skilltransfer.protocols import ChatModel, Score, TaskSpec
from skilltransfer.skill import SkillFormat, UsageStats
from skilltransfer.util.files import atomic_write_text

FORMAT_VERSION = 1
PARTIAL_WRITE_S = 2.0
"""Least seconds between two writes of a running task's trajectory file."""
CONDITIONS: dict[str, tuple[AgentLevel, SkillFormat | None]] = {
    "task": ("task", None), "task+text": ("task", "text"), "task+code": ("task", "code"),
    "subtask": ("subtask", None), "subtask+text": ("subtask", "text"), "subtask+code": ("subtask", "code"),
}
"""Condition name -> (induction level, skill format; None = no memory), seed §4."""
LibraryFilter = Literal["top", "bottom"]


def parse_condition(name: str) -> tuple[AgentLevel, SkillFormat | None]:
    """(level, format) of a named condition; unknown names raise an ``InputError`` listing the choices."""
    key = name.strip().lower()
    if key not in CONDITIONS:
        raise InputError(f"unknown condition {name!r}; choose one of: {', '.join(CONDITIONS)}")
    return CONDITIONS[key]


def safe_task_id(task_id: str) -> str:
    """A file-name-safe form of a task id ('/' and other unsafe characters replaced, plus a hash if changed)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).strip(".") or "task"
    return safe if safe == task_id else f"{safe}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


class StreamConfig(BaseModel):
    """One stream run: the condition, where to log, and the agent/induction/memory settings."""

    model_config = ConfigDict(extra="forbid")

    run: str
    """Run name: the log folder is ``<runs_dir>/<run>``; rerunning with the same name resumes."""
    runs_dir: str = "runs"
    """Parent folder of run folders."""
    condition: str = "task"
    """One of task, task+text, task+code, subtask, subtask+text, subtask+code."""
    agent: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``AgentConfig`` fields (the level comes from the condition)."""
    induction_variant: PromptVariant = "full"
    """Induction prompt variant: full, no_demo or no_rules."""
    memory: dict[str, Any] = Field(default_factory=dict)
    """Overrides of ``MemoryConfig`` fields (dedup threshold, code validation, ...)."""
    library: str | None = None
    """A frozen library to retrieve from instead of a growing memory: another run's memory folder, a SKILL.md folder
    or a .jsonl file. Induction is off; near-duplicates are kept as they are; usage counts start from zero."""
    library_filter: LibraryFilter | None = None
    """Keep only the top or bottom half of the library by utility (``skilltransfer.metrics.score_library`` against
    this stream's task instructions with the run's embedder): skills ranked by utility (ties by id), the top half is
    the first ceil(n/2) (so it holds the median skill when n is odd), the bottom half the rest."""
    env: str = ""
    """Environment name and arguments, recorded for reproduction (the runner is given the env object)."""
    model: str = ""
    """Model spec, recorded for reproduction."""
    embedder: str = ""
    """Embedder spec, recorded for reproduction."""

    @property
    def path(self) -> Path:
        return Path(self.runs_dir) / self.run


class RunConfigLog(BaseModel):
    """``config.json`` of a run."""

    format_version: int = FORMAT_VERSION
    config: StreamConfig
    level: AgentLevel
    skill_format: SkillFormat | None
    agent: AgentConfig
    induction: InductionConfig | None
    prompt_ids: dict[str, str]
    embedder_id: str | None
    task_ids: list[str]
    created: str


class RetrievedSkill(BaseModel):
    """One retrieved skill of a task."""

    skill_id: str
    name: str
    format: str
    score: float
    subtask_index: int | None
    query_kind: str
    source_task_id: str | None
    source_position: int | None
    load_error: str | None = None


class InducedSkill(BaseModel):
    """One induction of a task and the memory's ``AddResult``."""

    subtask_index: int | None
    status: str
    """added, merged, dropped, pruned or unparseable."""
    skill_id: str | None
    skill_name: str | None
    target_id: str | None
    reason: str
    prompt_id: str


class TaskRecord(BaseModel):
    """One line of ``results.jsonl``."""

    format_version: int = FORMAT_VERSION
    run: str
    condition: str
    position: int
    task_id: str
    difficulty: int
    template: str
    reward: float
    success: bool
    exit_status: str
    steps: int
    """Executor steps (format errors included)."""
    subtasks: int
    latency_s: float
    """Wall-clock time of the agent on this task (induction included; evaluation excluded)."""
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    dependency: int
    """Sum over the task's model calls of P*C + C(C+1)/2 (P prompt, C completion tokens)."""
    peak_context: int
    """Largest single prompt of the task, in tokens."""
    context_fitted_calls: int = 0
    """Model calls whose prompt was shortened to fit the context window (elided steps or cut skills)."""
    tokens_by_role: dict[str, dict[str, int]]
    """Per role (executor, planner, summarizer, induction): calls, prompt/completion tokens and dependency."""
    retrieved: list[RetrievedSkill]
    induced: list[InducedSkill]
    memory_size: int
    trajectory: str
    """Path of the trajectory file, relative to the run folder."""


class TrajectoryLog(BaseModel):
    """``trajectories/<task_id>.json``: the full trajectory of one task."""

    format_version: int = FORMAT_VERSION
    task_id: str
    position: int
    instruction: str
    status: Literal["running", "aborted", "finished"] = "finished"
    """"running": written while the task runs (a process killed mid-task leaves it so); "aborted": an error ended
    the task (see ``error``; the run stopped and resuming redoes the task); "finished": scored and recorded."""
    exit_status: str = ""
    """The agent's exit status (empty while running)."""
    error: str | None = None
    """The error that aborted the task."""
    score: dict[str, Any] = Field(default_factory=dict)
    """reward, success and checks (empty until the task is scored)."""
    steps: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    contexts: list[list[dict[str, Any]]]
    """The final message list of each executor run."""


@dataclass
class StreamSummary:
    """What ``run_stream`` did: all records of the run (earlier and new) and how many tasks ran now."""

    path: Path
    records: list[TaskRecord]
    ran: list[str]

    @property
    def success_rate(self) -> float:
        return sum(r.success for r in self.records) / len(self.records) if self.records else 0.0


# --------------------------------------------------------------------------------------------- log folder helpers
def read_records(path: Path) -> list[TaskRecord]:
    """The records of a ``results.jsonl`` file ([] when it does not exist).

    Raises:
        InputError: a line that is not a ``TaskRecord`` (names the file and line).
    """
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(read_text(path, what="results file").splitlines(), start=1):
        if line.strip():
            try:
                records.append(TaskRecord.model_validate_json(line))
            except ValueError as exc:
                raise InputError(f"broken results line: {str(exc).splitlines()[0]}", path=path, line=number) from None
    return records


def _recover_memory(run_dir: Path, finished: set[str]) -> None:
    """Finish or undo an interrupted memory commit (see the module docstring)."""
    current, nxt, old, marker = (run_dir / name for name in ("memory", "memory.next", "memory.old", "memory.next.task"))
    if nxt.exists():
        committed = marker.is_file() and marker.read_text(encoding="utf-8").strip() in finished
        if committed:
            if current.exists():
                shutil.rmtree(old, ignore_errors=True)
                os.rename(current, old)
            os.rename(nxt, current)
        else:
            shutil.rmtree(nxt)
    if not current.exists() and old.exists():
        os.rename(old, current)
    shutil.rmtree(old, ignore_errors=True)
    marker.unlink(missing_ok=True)


def _commit_memory(run_dir: Path, memory: SkillMemory, task_id: str) -> None:
    memory.save(run_dir / "memory.next")
    atomic_write_text(run_dir / "memory.next.task", task_id)


def _swap_memory(run_dir: Path) -> None:
    _recover_memory(run_dir, {(run_dir / "memory.next.task").read_text(encoding="utf-8").strip()})


# --------------------------------------------------------------------------------------------- memory set-up
def _frozen_library(cfg: StreamConfig, library: str, embedder: Any, tasks: Sequence[TaskSpec]) -> SkillMemory:
    skills = load_library(library)
    if cfg.library_filter is not None:
        from skilltransfer.metrics import score_library

        if len(tasks) < 2:
            raise InputError("filtering a library by utility needs at least 2 tasks in the stream")
        report = score_library(skills, [t.instruction for t in tasks], embedder)
        utility = {row.id: row.utility for row in report.skills}
        ranked = sorted(skills, key=lambda s: (-utility[s.id], s.id))
        cut = (len(ranked) + 1) // 2
        skills = ranked[:cut] if cfg.library_filter == "top" else ranked[cut:]
        if not skills:
            raise InputError(f"the {cfg.library_filter} half of the library is empty", path=library)
    skills = [s.model_copy(update={"usage": UsageStats()}, deep=True) for s in skills]
    memory = SkillMemory(embedder, config=MemoryConfig.model_validate({**cfg.memory, "dedup_threshold": 1.01}))
    memory.add_many(skills)
    memory.read_only = True
    return memory


def _open_memory(cfg: StreamConfig, fmt: SkillFormat | None, embedder: Any, tasks: Sequence[TaskSpec],
                 run_dir: Path) -> SkillMemory | None:
    if fmt is None and cfg.library is None:
        return None
    if embedder is None:
        raise InputError(f"condition {cfg.condition!r} needs an embedder for its skill memory")
    if (run_dir / "memory").is_dir():
        return SkillMemory.load(run_dir / "memory", embedder)
    if cfg.library is not None:
        return _frozen_library(cfg, cfg.library, embedder, tasks)
    return SkillMemory(embedder, config=MemoryConfig.model_validate(cfg.memory))


# --------------------------------------------------------------------------------------------- records
class _LiveTrajectory:
    """Writes one task's trajectory file while it runs (see the module docstring)."""

    def __init__(self, path: Path, task: TaskSpec, position: int, *, interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.task, self.position = path, task, position
        self.interval_s = PARTIAL_WRITE_S if interval_s is None else interval_s
        self.clock = clock
        self.result: AgentResult | None = None
        self._last = clock()  # the first write comes PARTIAL_WRITE_S into the task (fast tasks write once)

    def on_event(self, event: AgentEvent) -> None:
        self.result = event.result
        if event.kind in ("step_end", "call_end") and self.clock() - self._last >= self.interval_s:
            self.write("running")

    def write(self, status: Literal["running", "aborted", "finished"], *, score: dict[str, Any] | None = None,
              error: str | None = None) -> None:
        result = self.result
        log = TrajectoryLog(task_id=self.task.id, position=self.position, instruction=self.task.instruction,
                            status=status, exit_status=result.exit_status if result is not None else "",
                            error=error, score=score or {},
                            steps=[s.to_dict() for s in result.steps_so_far()] if result is not None else [],
                            calls=[c.to_dict() for c in result.calls.calls] if result is not None else [],
                            contexts=result.contexts if result is not None else [])
        atomic_write_text(self.path, log.model_dump_json(indent=1) + "\n")
        self._last = self.clock()


def _record(cfg: StreamConfig, position: int, task: TaskSpec, result: AgentResult, score: Score,
            memory: SkillMemory | None, trajectory: str) -> TaskRecord:
    by_role: dict[str, dict[str, int]] = {}
    answered = [call for call in result.calls.calls if call.error is None]
    for call in answered:
        row = by_role.setdefault(call.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "dependency": 0})
        row["calls"] += 1
        row["prompt_tokens"] += call.prompt_tokens
        row["completion_tokens"] += call.completion_tokens
        row["dependency"] += call.dependency
    retrieved = [RetrievedSkill(skill_id=s["id"], name=s["name"], format=s["format"], score=s["score"],
                                subtask_index=step.subtask_index, query_kind=step.query_kind,
                                source_task_id=s["source_task_id"], source_position=s["source_position"],
                                load_error=s["load_error"])
                 for step in result.retrievals for s in step.skills]
    induced = [InducedSkill(subtask_index=s.subtask_index, status=s.status, skill_id=s.skill_id,
                            skill_name=s.skill_name, target_id=s.target_id, reason=s.reason, prompt_id=s.prompt_id)
               for s in result.inductions]
    calls = result.calls
    return TaskRecord(run=cfg.run, condition=cfg.condition, position=position, task_id=task.id,
                      difficulty=task.difficulty, template=task.template, reward=score.reward, success=score.success,
                      exit_status=result.exit_status, steps=len(result.actions), subtasks=result.n_subtasks,
                      latency_s=round(result.latency_s, 4), model_calls=len(answered),
                      prompt_tokens=calls.prompt_tokens, completion_tokens=calls.completion_tokens,
                      dependency=calls.dependency, peak_context=calls.peak_context,
                      context_fitted_calls=calls.fitted_calls, tokens_by_role=by_role,
                      retrieved=retrieved, induced=induced, memory_size=len(memory) if memory is not None else 0,
                      trajectory=trajectory)


def _check_resume(path: Path, log: RunConfigLog) -> None:
    """Refuse to resume under other settings; a stream that extends the saved one (a larger limit) is allowed, unless
    the library is filtered by utility over the stream, and recorded in ``config.json``."""
    try:
        before = RunConfigLog.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except ValueError as exc:
        raise InputError(f"not a run config: {str(exc).splitlines()[0]}", path=path) from None
    keys = ("config", "level", "skill_format", "agent", "induction", "prompt_ids", "embedder_id")
    changed = [k for k in keys if getattr(before, k) != getattr(log, k)]
    extends = log.task_ids[: len(before.task_ids)] == before.task_ids
    if not extends or (log.config.library_filter is not None and log.task_ids != before.task_ids):
        # a utility-filtered library depends on the whole stream, so it cannot be extended
        changed.append("task_ids")
    if changed:
        raise InputError(f"this run folder was started with different settings ({', '.join(changed)} differ); "
                         "use another run name or delete the folder", path=path)
    if len(log.task_ids) > len(before.task_ids):
        extended = before.model_copy(update={"task_ids": log.task_ids})
        atomic_write_text(path, extended.model_dump_json(indent=2) + "\n")


# --------------------------------------------------------------------------------------------- the runner
def _fan_out(*sinks: Callable[[AgentEvent], None] | None) -> Callable[[AgentEvent], None]:
    live = [sink for sink in sinks if sink is not None]

    def send(event: AgentEvent) -> None:
        for sink in live:
            sink(event)

    return send


def run_stream(env: Any, model: ChatModel, config: StreamConfig, *, embedder: Any = None,
               tasks: Sequence[TaskSpec] | None = None, induction_model: ChatModel | None = None,
               on_task: Callable[[TaskRecord], None] | None = None,
               on_event: Callable[[AgentEvent], None] | None = None) -> StreamSummary:
    """Run ``tasks`` (default ``env.tasks()``) in order under ``config.condition``, resuming a partial run.

    Args:
        env: the environment (``start(task) -> Episode``).
        model: the agent's policy.
        config: the run settings.
        embedder: the retrieval embedder (required by the memory conditions and libraries).
        tasks: the stream, in order.
        induction_model: the model that induces skills (default: ``model``).
        on_task: called with each new record after it is committed.
        on_event: called with each agent event (task/subtask/step/call starts and ends) of the tasks run now.

    Raises:
        InputError: unknown condition, a run folder started with other settings, a bad library.
    """
    level, fmt = parse_condition(config.condition)
    tasks = list(env.tasks() if tasks is None else tasks)
    counts = Counter(t.id for t in tasks)
    repeated = sorted(task_id for task_id, n in counts.items() if n > 1)
    if repeated:
        raise InputError(f"the task stream repeats task ids: {', '.join(repeated[:5])}")
    agent_cfg = AgentConfig.model_validate({**config.agent, "level": level})
    induction = InductionConfig(format=fmt, variant=config.induction_variant) if fmt and not config.library else None
    inducer = Inducer(induction_model or model, config=induction) if induction is not None else None
    prompt_ids = AgentPrompts.load(agent_cfg.prompt_dir).ids()
    if inducer is not None:
        prompt_ids["induction"] = inducer.prompt_id
    log = RunConfigLog(config=config, level=level, skill_format=fmt, agent=agent_cfg, induction=induction,
                       prompt_ids=prompt_ids, embedder_id=str(embedder.id) if embedder is not None else None,
                       task_ids=[t.id for t in tasks], created=datetime.now(UTC).isoformat(timespec="seconds"))
    run_dir = config.path
    if (run_dir / "config.json").is_file():
        _check_resume(run_dir / "config.json", log)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.json", log.model_dump_json(indent=2) + "\n")
    records = read_records(run_dir / "results.jsonl")
    finished = {r.task_id for r in records}
    _recover_memory(run_dir, finished)
    memory = _open_memory(config, fmt, embedder, tasks, run_dir)
    agent = Agent(model, memory=memory, inducer=inducer, config=agent_cfg)
    ran: list[str] = []
    lines = [r.model_dump_json() + "\n" for r in records]  # serialised once; the file is rewritten atomically
    for position, task in enumerate(tasks):
        if task.id in finished:
            continue
        trajectory = f"trajectories/{safe_task_id(task.id)}.json"
        live = _LiveTrajectory(run_dir / trajectory, task, position)
        agent.on_event = _fan_out(live.on_event, on_event)
        episode = env.start(task)
        try:
            result = agent.run(episode, stream_position=position, run_id=config.run)
            score = episode.evaluate()
        except BaseException as exc:
            live.write("aborted", error=" ".join(f"{type(exc).__name__}: {exc}".split())[:1000])
            raise
        finally:
            episode.close()
        if memory is not None:
            retrieved_ids = [s["id"] for step in result.retrievals for s in step.skills if s["id"] in memory]
            memory.record_retrieval(retrieved_ids, score.success)
        live.result = result
        live.write("finished", score={"reward": score.reward, "success": score.success,
                                      "checks": [asdict(c) for c in score.checks]})
        record = _record(config, position, task, result, score, memory, trajectory)
        if memory is not None:
            _commit_memory(run_dir, memory, task.id)
        records.append(record)
        lines.append(record.model_dump_json() + "\n")
        atomic_write_text(run_dir / "results.jsonl", "".join(lines))
        if memory is not None:
            _swap_memory(run_dir)
        ran.append(task.id)
        if on_task is not None:
            on_task(record)
    return StreamSummary(run_dir, records, ran)
