"""The stream runner: an env's tasks in order under one condition, with a skill memory that persists across the stream.

Every task is logged and committed through the run log (`skilltransfer.log`): rerunning the same
stream resumes, skipping committed tasks and starting from the memory saved after the last one. While a task runs its
trajectory file is rewritten as it grows (status "running", at most every ``PARTIAL_WRITE_S`` seconds); an error that
ends the task mid-way writes it once more (status "aborted", with the error) before the run stops, so a crash, Ctrl-C
or an endpoint that stays down leaves the partial trajectory on disk. A task whose prompt cannot fit the model's
window is not an error: it ends with exit status ``context_exceeded`` and is recorded like any failed task.

An exception inside a task (the agent, the env, the evaluation) is that task's record, not the stream's end: exit
status ``error``, reward 0, the traceback in its trajectory's ``error``. A task past ``agent.task_timeout_s`` (checked
by `TaskClock` before each model call) is recorded the same way with exit status ``task_timeout``. What is not the
task's fault still stops the stream, leaving the task to be redone on resume: a user-input or model-call error
(`InputError`: an endpoint down past its retry budget, a bad key, a cache miss in replay) and Ctrl-C.

With ``coordination`` set (nl-sop, prompt-graph, metaskill) each task is carried out from its frozen plan by
`skilltransfer.runner.coordinated.CoordinatedTask` instead of the agent's `TaskLoop`. Every stream snapshots the
episode's workspace right after ``env.start`` and, after ``evaluate()``, writes the task's artifacts
(`RunFolder.write_artifacts`). After ``evaluate()`` the task's loop induces what waited for the verdict
(``finish``: ``only_successful`` or the ``contract`` induction variant). Each record carries the task's
`ContextAccount` (`context_account`); ``skill_exec``/``library_organization`` are the agent's settings.

One build: `prepare_stream` checks the settings and loads the frozen library and organisation (``run`` calls it
before building the env and model, so bad input fails before anything is written), `build_stream` builds the parts
once (memory, retriever, inducer, agent or coordinated runner, prompt ids), and `run_stream` is the loop: start, run,
evaluate, induce, commit.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.agents.agent import Agent
from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.disclosure import DisclosureOrigin
from skilltransfer.agents.prompts import DISCLOSURE_PROMPTS, DISCLOSURE_SECTIONS, SKILL_EXEC_PROMPTS, AgentPrompts
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.coordination import CoordinationResult
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.envs.artifacts import episode_artifacts, snapshot_workspace
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import Inducer
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.retriever import GRAPH_DIR, LensRetriever, lens_prompt_ids
from skilltransfer.llm import make_model
from skilltransfer.llm.chain import ReportingModel, TimedModel
from skilltransfer.llm.strict import adopt_param_changes, param_changes
from skilltransfer.log import (
    TASK_ERROR,
    TASK_TIMEOUT,
    USED_SHARE,
    ActionStep,
    CoordinationRecord,
    Exposure,
    InducedSkill,
    LibraryDraw,
    LibraryUtility,
    RetrievalStep,
    RetrievedSkill,
    RouteRecord,
    RunFolder,
    TaskRecord,
    TrajectoryLog,
    TrajectoryStatus,
    picks_from_steps,
)
from skilltransfer.log.provenance import ServedModels, merged, run_provenance
from skilltransfer.memory.capacity import TaskOutcome
from skilltransfer.memory.distractors import distractor_skills
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.masking import MASK_LOG_KIND, MaskedRetriever
from skilltransfer.memory.near_miss import (
    LIBRARY_KEY,
    RELEVANT_KEY,
    SizedLibrary,
    corpus_skills,
    named_skills,
    read_corpus,
    right_skills,
)
from skilltransfer.memory.organization import LibraryView
from skilltransfer.memory.ranking import Ranker
from skilltransfer.memory.scope import OwnTaskLibrary
from skilltransfer.memory.snapshots import SNAPSHOT_SKILLS, SNAPSHOTS, snapshot_texts
from skilltransfer.memory.store import SkillMemory
from skilltransfer.metrics.following import api_calls, following_share, skill_calls
from skilltransfer.metrics.windows import ContextAccount, ContextWindow
from skilltransfer.protocols import ChatModel, Embedder, Env, Score, SkillStore, TaskSpec
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import (
    LockedEmbedder,
    agent_library_name,
    external_library,
    pick_positions,
    stream_library_read,
)
from skilltransfer.runner.coordinated import CoordinatedTask
from skilltransfer.runner.guard import GuardedEnv
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import RunSettings, check_resume, read_run_settings
from skilltransfer.skill import Skill, UsageStats
from skilltransfer.util import secrets

PARTIAL_WRITE_S = 2.0
"""Least seconds between two writes of a running task's trajectory file."""
MAX_PARALLEL_TASKS = 16
"""Most tasks one stream of independent tasks runs at once (each may hold a sandbox worker process)."""
MAX_TRACEBACK_CHARS = 20_000
"""The longest traceback kept in a task's trajectory (its tail)."""


class TaskTimeout(Exception):
    """A task ran past ``agent.task_timeout_s`` (raised by `TaskClock` before a model call)."""


class TaskClock:
    """The running task's deadline, shared by the stream's timed models (`TimedModel`); one per thread (a stream
    of independent tasks runs several at once, each in its own thread)."""

    def __init__(self, limit_s: float | None) -> None:
        self.limit_s = limit_s
        self._local = threading.local()

    @property
    def deadline(self) -> float | None:
        return getattr(self._local, "deadline", None)

    def start(self) -> None:
        self._local.deadline = time.monotonic() + self.limit_s if self.limit_s is not None else None

    def stop(self) -> None:
        self._local.deadline = None

    def check(self) -> None:
        """Raises `TaskTimeout` past the deadline."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise TaskTimeout(f"the task ran past agent.task_timeout_s={self.limit_s:g}")


@dataclass
class StreamSummary:
    """What ``run_stream`` did: all records of the run (earlier and new) and how many tasks ran now."""

    path: Path
    records: list[TaskRecord]
    ran: list[str]
    stopped: str | None = None
    """Why the stream stopped before its last task (a reached `Budget` limit), else None."""

    @property
    def success_rate(self) -> float:
        return sum(r.success for r in self.records) / len(self.records) if self.records else 0.0


# --------------------------------------------------------------------------------------------- the build
@dataclass(frozen=True)
class StreamInputs:
    """What a stream reads from user-given paths, checked and loaded once (`prepare_stream`)."""

    library: list[Skill] | None = None
    """The frozen library's skills (a source stream's empty memory: []); None without a library."""
    organization: LibraryView | None = None
    """The frozen organisation of ``organization``, if set."""
    library_notes: list[str] = field(default_factory=list)
    """One line per skill of the library that could not be read or whose package the agent is not shown whole
    (`skilltransfer.memory.library.LibraryRead.notes`): ``run`` prints them at start, records keep none."""
    external: bool = False
    """The library is an external one (a SKILL.md folder or a .jsonl, not a run's memory; `external_library`): the
    agent discloses it progressively unless ``agent.skill_disclosure`` says otherwise."""
    corpus: list[tuple[str, list[Skill]]] = field(default_factory=list)
    """``library_size``: each ``near_miss.corpus`` library's name and readable skills (its notes join
    ``library_notes``)."""


def prepare_stream(config: StreamConfig) -> StreamInputs:
    """Check the stream's settings and load its frozen library and organisation: the part of the build that fails on
    user input, done once and before anything is written (``run`` calls it before it builds the env and model).

    Raises:
        InputError: settings that would be ignored (`StreamConfig.check_skill_exec`), a bad library or organisation.
    """
    config.check_skill_exec()
    read = stream_library_read(config)
    library = read.skills if read is not None else None
    organized = config.organization is not None and library != []  # a library without skills: nothing organised
    organization = LibraryView.load(config.organization) if organized and config.organization else None
    notes = read.notes() if read is not None else []
    corpus: list[tuple[str, list[Skill]]] = []
    if config.library_size is not None:
        for path in config.near_miss.corpus:
            skills, unread = read_corpus(path, resource_bytes=config.library_resource_bytes)
            corpus.append((agent_library_name(path), skills))
            notes += [f"near_miss.corpus {line}" for line in unread]
    return StreamInputs(library, organization, notes, external_library(config), corpus)


def near_miss_note(config: StreamConfig, sizes: Sequence[int | None] = ()) -> str:
    """One line on a ``library_size`` stream's corpus: how many readable skills it holds, and the sizes it cannot
    fill beside the library (each task's library is then capped; ``library_draw.size`` records what it held).

    Raises:
        InputError: a corpus path that is missing or holds no readable skill (a grid says so before it runs).
    """
    skills: dict[str, None] = {}
    unread = 0
    for path in config.near_miss.corpus:
        read, unreadable = read_corpus(path, resource_bytes=config.library_resource_bytes)
        skills.update(dict.fromkeys(skill.id for skill in read))
        unread += len(unreadable)
    wanted = sorted({size for size in (*sizes, config.library_size) if size is not None})
    short = [size for size in wanted if size > len(skills) + 1]
    line = (f"near_miss.corpus: {len(skills)} skills" + (f" ({unread} SKILL.md not read)" if unread else "")
            + f" besides the library's own; band {list(config.near_miss.band)}")
    if short:
        line += (f"; library sizes {', '.join(map(str, short))} need more skills than the corpus holds beside a "
                 "task's right skill: unless the library itself has enough, those tasks' libraries are smaller "
                 "(recorded per task; report's mean_size)")
    return line


def stream_agent_config(config: StreamConfig, inputs: StreamInputs,
                        recorded: AgentConfig | None = None) -> AgentConfig:
    """The agent's settings (`StreamConfig.agent_config`) with ``skill_disclosure`` resolved: ``progressive`` for an
    external library when unset (what ``config.json`` records under ``agent``), unless ``recorded`` (the settings
    of the run folder being resumed) says it started without (a folder started before progressive disclosure existed
    resumes as it ran: in full)."""
    agent = config.agent_config()
    started_in_full = recorded is not None and recorded.skill_disclosure is None
    if agent.skill_disclosure is None and inputs.external and not started_in_full:
        agent = agent.model_copy(update={"skill_disclosure": "progressive"})
    return agent


@dataclass
class StreamParts:
    """A stream's parts, built once by `build_stream`."""

    tasks: list[TaskSpec]
    folder: RunFolder
    records: list[TaskRecord]
    """The tasks committed before this invocation (a resumed run), then every new one."""
    memory: SkillMemory | JointMemory | None
    """The stream's skill memory: its own, a frozen library, or a library beside its own (``library_use: beside``)."""
    retriever: LensRetriever | None
    agent: Agent
    coordinated: CoordinatedTask | None
    prompt_ids: dict[str, str]
    own_verifier: ChatModel | None = None
    """The lens verifier's model when the stream built it (``config.verifier_model``): closed when the stream ends."""
    clock: TaskClock = field(default_factory=lambda: TaskClock(None))
    """The running task's deadline (``agent.task_timeout_s``)."""
    served: ServedModels | None = None
    """What the endpoint says it serves (recorded in ``config.json``'s provenance after each task)."""
    masking: MaskedRetriever | None = None
    """The retriever of a stream with ``mask_rate`` > 0 (told each task's id before it runs)."""
    make_agent: Callable[[], Agent] | None = None
    """Builds another agent like ``agent`` (a stream of independent tasks runs one per thread)."""
    own_task: OwnTaskLibrary | None = None
    """``library_scope`` own-task: each task's view of the frozen library (the agent's memory is set before it)."""
    sized: SizedLibrary | None = None
    """``library_size``: each task's library of that many skills (the agent's memory is set before it)."""
    recorded: dict[str, Any] = field(default_factory=dict)
    """What `_commit_task` last recorded in ``config.json`` (adaptations, served provenance): unchanged, the file is
    neither read nor written again."""


def disclosure_origin(config: StreamConfig) -> DisclosureOrigin:
    """Whose skills a stream's progressive disclosure shows (`skilltransfer.agents.disclosure.Disclosure`): a
    library (``library``), a library beside the agent's own memory (``beside``) or the agent's own memory."""
    if config.library is None:
        return "memory"
    return "beside" if config.library_use == "beside" else "library"


def stream_prompt_ids(config: StreamConfig, inducer: Inducer | None, *, disclosed: bool = False) -> dict[str, str]:
    """The ids of every prompt the stream uses (agent, induction, lens, coordination), as ``config.json`` records
    (``disclosed``: the agent discloses its library progressively, with the section prompt of its
    `disclosure_origin`)."""
    prompt_ids = AgentPrompts.load(config.agent.prompt_dir).ids()
    if (config.skill_exec, config.library_organization) == ("inline", "flat"):
        prompt_ids = {k: v for k, v in prompt_ids.items() if k not in SKILL_EXEC_PROMPTS}
    section = DISCLOSURE_SECTIONS[disclosure_origin(config)]
    prompt_ids = {k: v for k, v in prompt_ids.items()
                  if k not in DISCLOSURE_SECTIONS.values() or (disclosed and k == section)}
    if not disclosed:
        prompt_ids = {k: v for k, v in prompt_ids.items() if k not in DISCLOSURE_PROMPTS}
    if inducer is not None:
        prompt_ids["induction"] = inducer.prompt_id
        if inducer.set_system is not None:
            prompt_ids["induction_set"] = inducer.set_system.id
        if inducer.lessons_system is not None:
            prompt_ids["induction_lessons"] = inducer.lessons_system.id
    if config.reuse != "flat":
        prompt_ids.update({f"lens.{k}": v for k, v in lens_prompt_ids(config.lens).items()})
    if config.coordination != "none":
        coordination_dir = config.composition.prompt_dir
        prompt_ids.update({f"coordination.{k}": v for k, v in CoordinationPrompts.load(coordination_dir).ids().items()})
    return prompt_ids


def build_stream(env: Env, model: ChatModel, config: StreamConfig, *, embedder: Embedder | None = None,
                 tasks: Sequence[TaskSpec] | None = None, induction_model: ChatModel | None = None,
                 inputs: StreamInputs | None = None, verifier: ChatModel | None = None) -> StreamParts:
    """Build a stream's parts once: the task list, the run folder (started, or resumed with its records), the memory
    (the saved one, the frozen library or a new one), the lens retriever, the inducer, the agent or the coordinated
    runner, and the prompt ids (see `run_stream` for the arguments).

    Raises:
        InputError: see `prepare_stream`; a repeated task id; a run folder started with other settings.
    """
    inputs = inputs if inputs is not None else prepare_stream(config)
    if tasks is None:  # the env's tasks, picked by task_positions (a caller's list is already selected)
        listed = list(env.tasks())
        tasks = pick_positions(listed, config.task_positions) if config.task_positions is not None else listed
    tasks = list(tasks)
    repeated = sorted(task_id for task_id, n in Counter(t.id for t in tasks).items() if n > 1)
    if repeated:
        raise InputError(f"the task stream repeats task ids: {', '.join(repeated[:5])}")
    folder = RunFolder(config.path)
    agent_cfg = stream_agent_config(config, inputs, read_run_settings(folder).agent if folder.exists() else None)
    induction = config.induction_config()
    clock = TaskClock(config.agent.task_timeout_s)
    served = ServedModels()
    model = ReportingModel(model, served)
    if clock.limit_s is not None:
        model = TimedModel(model, clock)
        induction_model = TimedModel(induction_model, clock) if induction_model is not None else None
    inducer = Inducer(induction_model or model, config=induction) if induction is not None else None
    prompt_ids = stream_prompt_ids(config, inducer, disclosed=agent_cfg.skill_disclosure == "progressive")
    log = RunSettings(config=config.recorded(), level=config.level, skill_format=config.skill_format,
                       agent=agent_cfg, induction=induction, prompt_ids=prompt_ids,
                       embedder_id=str(embedder.id) if embedder is not None else None,
                       task_ids=[t.id for t in tasks], created=datetime.now(UTC).isoformat(timespec="seconds"),
                       provenance=run_provenance(config.model.effective_params()))
    check_resume(folder, log)
    records = folder.start(log)
    folder.record_provenance(merged(folder.read_config().provenance or log.provenance, log.provenance))
    adopt_param_changes(model, folder.read_config().model_adaptations)  # a resumed run sends what the first learnt
    memory = _open_memory(config, inputs, embedder, tasks, folder)
    if memory is not None and config.retrieval != "dense":
        memory.ranker = retrieval_ranker(config, inputs)
    single = memory if isinstance(memory, SkillMemory) else None  # lens and own-task scope read one store
    retriever = _lens_retriever(config, single, embedder, folder.memory_dir)
    own_verifier = None
    if verifier is None and config.verifier_model is not None and retriever is not None:
        verifier = own_verifier = make_model(config.verifier_model, cache=False)
    masking = _masking(config, memory)
    role_models = {"verifier": verifier} if verifier is not None else None

    def make_agent() -> Agent:
        return Agent(model, memory=memory, inducer=inducer, config=agent_cfg, organization=inputs.organization,
                     retriever=masking or retriever, role_models=role_models,
                     library=agent_library_name(config.library) if config.library is not None else None)

    agent = make_agent()
    coordinated = CoordinatedTask(agent, config) if config.coordination != "none" else None
    own_task = OwnTaskLibrary(single, embedder) if config.library_scope == "own-task" and single is not None \
        and embedder is not None else None
    sized = _sized_library(config, single, inputs, embedder)
    return StreamParts(tasks, folder, records, memory, retriever, agent, coordinated, prompt_ids, own_verifier,
                       clock, served, masking=masking, make_agent=make_agent, own_task=own_task, sized=sized)


def _sized_library(cfg: StreamConfig, library: SkillMemory | None, inputs: StreamInputs,
                   embedder: Embedder | None) -> SizedLibrary | None:
    """``library_size``: the per-task libraries over the frozen library and the corpus (embedded here, once)."""
    if cfg.library_size is None or library is None or embedder is None:
        return None
    skills = corpus_skills(inputs.corpus, list(library))
    vectors = library.embed([f"{s.description}\n{s.body}" if library.config.index_body else s.description
                             for s in skills]) if skills else np.zeros((0, library.dim), dtype=np.float32)
    corpus = SkillMemory.frozen(embedder, skills, vectors, config=library.config)
    return SizedLibrary(library, corpus, cfg.library_size, cfg.near_miss)


def retrieval_ranker(config: StreamConfig, inputs: StreamInputs) -> Ranker:
    """The ranker of a stream's ``retrieval`` (`skilltransfer.memory.ranking`): a hierarchical one routes over the
    stream's organisation when it has one."""
    organization = inputs.organization.organization if inputs.organization is not None else None
    return Ranker(config.retrieval, organization)


def retrieval_note(config: StreamConfig, inputs: StreamInputs, *, library_from: str | None = None) -> str | None:
    """What a stream's retrieval does, in one line (``run`` and ``grid`` print it at start); None for dense or a
    stream without a memory. ``library_from``: the library is the memory of an earlier phase, not read yet."""
    if config.retrieval == "dense" or not config.has_memory:
        return None
    text = "description + body" if config.retrieval_text == "description+body" else "description"
    if library_from is not None and config.retrieval == "hierarchical" and config.organization is not None:
        return f"hierarchical over the organization {config.organization} (written before the stream starts); " \
               f"indexed: {text}"
    memory = f"the memory of {library_from}" if library_from is not None else "a growing memory"
    skills = None if library_from is not None else inputs.library
    return f"{retrieval_ranker(config, inputs).describe(skills, memory=memory)}; indexed: {text}"


def _masking(cfg: StreamConfig, memory: SkillMemory | JointMemory | None) -> MaskedRetriever | None:
    """The masking retriever of a stream with ``mask_rate`` > 0; it draws after the harness's retrieval floor, over
    the library's skills only when the library is beside the agent's own memory."""
    if memory is None or cfg.mask_rate <= 0:
        return None
    drawn = (lambda skill: memory.from_library(skill.id)) if isinstance(memory, JointMemory) else None
    return MaskedRetriever(memory, cfg.mask_rate, seed=cfg.mask_seed, drawn=drawn)


# --------------------------------------------------------------------------------------------- memory set-up
def _frozen_library(cfg: StreamConfig, skills: list[Skill], embedder: Embedder,
                    tasks: Sequence[TaskSpec], folder: RunFolder) -> SkillMemory:
    if cfg.library_filter is not None and skills:  # half of no skills is none
        from skilltransfer.metrics import score_library

        if len(tasks) < 2:
            raise InputError("filtering a library by utility needs at least 2 tasks in the stream")
        report = score_library(skills, [t.instruction for t in tasks], embedder)
        utility = {row.id: row.utility for row in report.skills}
        ranked = sorted(skills, key=lambda s: (-utility[s.id], s.id))
        cut = (len(ranked) + 1) // 2
        skills = ranked[:cut] if cfg.library_filter == "top" else ranked[cut:]  # may be empty: runs with none
        folder.record_library_utility(LibraryUtility(utility=utility, kept=[s.id for s in skills], tasks=len(tasks),
                                                     tau=report.tau, specificity=report.specificity_mode))
    skills = [s.model_copy(update={"usage": UsageStats()}, deep=True) for s in skills]
    if cfg.distractors:
        skills += distractor_skills(cfg.distractors)
    memory = SkillMemory(embedder, config=cfg.memory.model_copy(update={"dedup_threshold": 1.01}))
    memory.add_many(skills)
    memory.read_only = True
    return memory


def _open_memory(cfg: StreamConfig, inputs: StreamInputs, embedder: Embedder | None, tasks: Sequence[TaskSpec],
                 folder: RunFolder) -> SkillMemory | JointMemory | None:
    """The stream's memory: the saved one (a resumed run), else the frozen library, else a new one; beside the
    library (``library_use: beside``), the library read again and the saved or a new memory of the stream's own."""
    if not cfg.has_memory:
        return None
    if embedder is None:
        raise InputError(f"condition {cfg.condition!r} needs an embedder for its skill memory")
    saved = folder.memory_dir
    own = SkillMemory.load(saved, embedder) if saved.is_dir() else None
    if cfg.library_use == "beside" and inputs.library is not None:
        library = _frozen_library(cfg, inputs.library, embedder, tasks, folder)
        return JointMemory(library, own if own is not None else SkillMemory(embedder, config=cfg.memory))
    if own is not None:
        return own
    if inputs.library is not None:
        return _frozen_library(cfg, inputs.library, embedder, tasks, folder)
    return SkillMemory(embedder, config=cfg.memory)


def _lens_retriever(cfg: StreamConfig, memory: SkillMemory | None, embedder: Embedder | None,
                    memory_dir: Path) -> LensRetriever | None:
    """The retriever of a lens stream: its graph from the run's memory (resume), else ``skill_graph``, else empty."""
    if cfg.reuse == "flat" or memory is None or embedder is None:
        return None
    saved = memory_dir / GRAPH_DIR
    source = saved if saved.is_dir() else cfg.graph_source
    graph = SkillGraph.load(source, embedder) if source is not None else None
    return LensRetriever(memory, graph, embedder, mode=cfg.reuse, config=cfg.lens)


# --------------------------------------------------------------------------------------------- records
class _LiveTrajectory:
    """Writes one task's trajectory file while it runs (see the module docstring)."""

    def __init__(self, folder: RunFolder, relative: str, task: TaskSpec, position: int, *,
                 interval_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.folder, self.relative, self.task, self.position = folder, relative, task, position
        self.interval_s = PARTIAL_WRITE_S if interval_s is None else interval_s
        self.clock = clock
        self.result: AgentResult | None = None
        self.plan: dict[str, Any] | None = None
        """A coordinated task's plan (`skilltransfer.runner.coordinated.plan_info`)."""
        self._last = clock()  # the first write comes PARTIAL_WRITE_S into the task (fast tasks write once)

    def on_event(self, event: AgentEvent) -> None:
        self.result = event.result
        if event.kind in ("step_end", "call_end") and self.clock() - self._last >= self.interval_s:
            self.write("running")

    def write(self, status: TrajectoryStatus, *, score: dict[str, Any] | None = None,
              error: str | None = None) -> None:
        result = self.result
        log = TrajectoryLog(task_id=self.task.id, position=self.position, instruction=self.task.instruction,
                            status=status, exit_status=result.exit_status if result is not None else "",
                            error=error, score=score or {},
                            steps=[s.to_dict() for s in result.steps_so_far()] if result is not None else [],
                            calls=self.folder.log_calls(result.calls.calls) if result is not None else [],
                            contexts=result.contexts if result is not None else [],
                            coordination=self._coordination(result))
        self.folder.write_trajectory(self.relative, log)
        self._last = self.clock()


    def _coordination(self, result: AgentResult | None) -> dict[str, Any] | None:
        if not isinstance(result, CoordinationResult):
            return None
        return {**result.coordination_dict(), "plan": self.plan}


def _coordination_record(result: AgentResult, plan: dict[str, Any] | None) -> CoordinationRecord | None:
    if not isinstance(result, CoordinationResult) or result.audit is None or plan is None:
        return None
    audit = result.audit.to_dict()
    plan_tokens = sum(c.prompt_tokens + c.completion_tokens for c in result.calls.calls
                      if c.role == "plan_writer" and c.error is None)
    return CoordinationRecord(interface=result.interface, plan_fingerprint=result.plan_fingerprint,
                              plan_written=bool(plan["written_now"]), plan_fallback=plan["fallback"],
                              nodes=audit["n_nodes"], completed_nodes=audit["completed_nodes"],
                              violated_constraints=audit["violated_constraints"],
                              unverified_constraints=audit["unverified_constraints"],
                              submitted_by=audit["submitted_by"], not_run_nodes=audit["not_run_nodes"],
                              plan_tokens=plan_tokens)


def context_account(result: AgentResult) -> ContextAccount:
    """The task's context windows: the main agent's executor calls, then one window per ``run_skill`` subagent
    (its executor calls, the inputs sent, its seed prompt and the output returned); loads, opened nodes and file
    reads.
    Planner, summarizer and induction calls are not in a window (``tokens_by_role`` has them)."""
    account = ContextAccount()
    windows: dict[int, ContextWindow] = {0: account.main}
    for step in sorted(result.actions, key=lambda s: s.skill_action.get("window", 0) if s.skill_action else 0):
        action = step.skill_action
        if action is None or step.error and action["action"] != "run_skill":
            continue
        if action["action"] == "load_skill":
            account.skill_loads += 1
        elif action["action"] == "open_node":
            account.nodes_opened += 1
        elif action["action"] == "read_skill_file":
            account.file_reads += 1
        elif "window" in action:
            window = account.open_subagent(action["target"], sent_tokens=action["sent_tokens"],
                                           seed_tokens=action["seed_tokens"])
            window.returned_tokens = action.get("returned_tokens", 0)
            windows[action["window"]] = window
    for call in result.calls.calls:
        if call.role == "executor" and call.error is None:
            windows.get(call.window, account.main).record_call(call.prompt_tokens, call.completion_tokens)
    return account


def _record(cfg: StreamConfig, position: int, task: TaskSpec, result: AgentResult, score: Score,
            memory: SkillStore | None, trajectory: str, plan: dict[str, Any] | None = None,
            library_draw: LibraryDraw | None = None) -> TaskRecord:
    by_role: dict[str, dict[str, int]] = {}
    answered = [call for call in result.calls.calls if call.error is None]
    for call in answered:
        row = by_role.setdefault(call.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "dependency": 0})
        row["calls"] += 1
        row["prompt_tokens"] += call.prompt_tokens
        row["completion_tokens"] += call.completion_tokens
        row["dependency"] += call.dependency
        if call.reasoning_tokens:
            row["reasoning_tokens"] = row.get("reasoning_tokens", 0) + call.reasoning_tokens
    retrieved = [RetrievedSkill(skill_id=s["id"], name=s["name"], format=s["format"], score=s["score"],
                                subtask_index=step.subtask_index, query_kind=step.query_kind,
                                source_task_id=s["source_task_id"], source_position=s["source_position"],
                                load_error=s["load_error"], followed=followed(after, s, memory), ran=ran(after, s),
                                source=s.get("source"), library=s.get("library"), rank=rank)
                 for step in result.retrievals for after in [actions_after(result, step)]
                 for rank, s in enumerate(step.skills, start=1)]
    picks = picks_from_steps(result.steps, [(r.skill_id, r.name, r.followed) for r in retrieved if r.format == "text"],
                             used_share=USED_SHARE)
    induced = [InducedSkill(subtask_index=s.subtask_index, status=s.status, skill_id=s.skill_id,
                            skill_name=s.skill_name, target_id=s.target_id, reason=s.reason, prompt_id=s.prompt_id)
               for s in result.inductions]
    routes = [RouteRecord.from_log(step.route, step.subtask_index) for step in result.retrievals
              if step.route is not None and step.route.get("kind") != MASK_LOG_KIND]
    calls = result.calls
    price = cfg.model.price
    cost = round(price.cost(calls.prompt_tokens, calls.completion_tokens), 6) if price is not None else None
    return TaskRecord(cost_usd=cost, run=cfg.run, condition=cfg.condition, position=position, task_id=task.id,
                      difficulty=task.difficulty, template=task.template, reward=score.reward, success=score.success,
                      exit_status=result.exit_status, steps=len(result.actions), subtasks=result.n_subtasks,
                      latency_s=round(result.latency_s, 4), model_calls=len(answered),
                      prompt_tokens=calls.prompt_tokens, completion_tokens=calls.completion_tokens,
                      dependency=calls.dependency, peak_context=calls.peak_context,
                      context_fitted_calls=calls.fitted_calls, reasoning_tokens=calls.reasoning_tokens,
                      length_cut_calls=calls.length_cut_calls, tokens_by_role=by_role,
                      retrieved=retrieved, induced=induced, memory_size=len(memory) if memory is not None else 0,
                      trajectory=trajectory, coordination=_coordination_record(result, plan),
                      context_account=context_account(result).to_dict(), routes=routes,
                      exposures=exposures(result), picks=picks, relevant_skills=relevant_skills(task, memory),
                      library_draw=library_draw)


def relevant_skills(task: TaskSpec, memory: SkillStore | None) -> list[str] | None:
    """The ids of the task's right skills as known when it ran (`skilltransfer.memory.near_miss.right_skills`): named
    by the task's metadata in any memory, or induced from the task itself in a frozen library (read-only, or beside
    the agent's own memory); None when unknown."""
    if memory is None:
        return None
    library = memory.library if isinstance(memory, JointMemory) else memory
    if not library.read_only and RELEVANT_KEY not in task.metadata:
        return None
    return right_skills(task, library)


def actions_after(result: AgentResult, step: RetrievalStep) -> list[ActionStep]:
    """The action steps the task ran after this retrieval (the rest of the task: its own subtask and the later
    ones)."""
    after = result.steps[result.steps.index(step) + 1:] if step in result.steps else []
    return [s for s in after if isinstance(s, ActionStep)]


def followed(after: Sequence[ActionStep], hit: dict[str, Any], memory: SkillStore | None) -> float | None:
    """A retrieved text skill's following share (`skilltransfer.metrics.following`) over the code of ``after``, the
    actions after its retrieval (`actions_after`)."""
    skill = next((s for s in memory if s.id == hit["id"]), None) if memory is not None else None
    if hit["format"] != "text" or skill is None:
        return None
    code = "\n".join(s.action for s in after if s.action)
    return following_share(skill_calls(skill.body), api_calls(code))


def ran(after: Sequence[ActionStep], hit: dict[str, Any]) -> int | None:
    """A retrieved code skill's calls, as the sandbox recorded them (`ActionStep.skill_calls`), in ``after``, the
    actions after its retrieval (`actions_after`); None for other formats."""
    if hit["format"] != "code":
        return None
    return sum(s.skill_calls.get(hit["id"], 0) for s in after)


def exposures(result: AgentResult) -> list[Exposure]:
    """A masked stream's draws, one per (task, skill) candidate: the first retrieval that had the skill as a
    candidate (a later one reuses the draw, `skilltransfer.memory.masking`)."""
    out: dict[str, Exposure] = {}
    for step in result.retrievals:
        if step.route is None or step.route.get("kind") != MASK_LOG_KIND:
            continue
        for row in step.route["candidates"]:
            if row["id"] not in out:
                out[row["id"]] = Exposure(skill_id=row["id"], propensity=row["propensity"], shown=row["shown"],
                                          rank=row["rank"], score=row["score"], subtask_index=step.subtask_index,
                                          name=row.get("name"))
    return list(out.values())


# --------------------------------------------------------------------------------------------- the runner
def _fan_out(*sinks: Callable[[AgentEvent], None] | None) -> Callable[[AgentEvent], None]:
    live = [sink for sink in sinks if sink is not None]

    def send(event: AgentEvent) -> None:
        for sink in live:
            sink(event)

    return send


def run_stream(env: Env, model: ChatModel, config: StreamConfig, *, embedder: Embedder | None = None,
               tasks: Sequence[TaskSpec] | None = None, induction_model: ChatModel | None = None,
               on_task: Callable[[TaskRecord], None] | None = None,
               on_event: Callable[[AgentEvent], None] | None = None,
               verifier: ChatModel | None = None, inputs: StreamInputs | None = None,
               budget: Budget | None = None, parallel_tasks: int = 1) -> StreamSummary:
    """Run ``tasks`` (default ``env.tasks()``) in order under ``config.condition``, resuming a partial run: build
    the parts once (`build_stream`), then for each task not yet committed: start, run, evaluate, induce, commit.
    A stream whose tasks are independent (`independent_tasks`) runs up to ``parallel_tasks`` of them at once, one
    agent per thread, and commits them in stream order: its records are a sequential run's (timings aside).

    Args:
        env: the environment (``start(task) -> Episode``).
        model: the agent's policy.
        config: the run settings.
        embedder: the retrieval embedder (required by the memory conditions and libraries).
        tasks: the stream, in order (default: ``env.tasks()``, picked by ``config.task_positions``).
        induction_model: the model that induces skills (default: ``model``).
        on_task: called with each new record after it is committed.
        on_event: called with each agent event (task/subtask/step/call starts and ends) of the tasks run now.
        verifier: the lens verifier's model (default: built from ``config.verifier_model`` when set, and closed when
            the stream ends; else ``model``).
        inputs: the stream's checked library and organisation (`prepare_stream`), when the caller loaded them.
        budget: a spending limit (shared with other streams): once reached no new task starts and the summary says
            why (``stopped``); rerunning resumes.
        parallel_tasks: most tasks run at once when they are independent (the env must tolerate concurrent episodes:
            a grid wraps in-process ones in a lock).

    Raises:
        InputError: a run folder started with other settings, a bad library.
    """
    parts = build_stream(env, model, config, embedder=embedder, tasks=tasks, induction_model=induction_model,
                         inputs=inputs, verifier=verifier)
    finished = {r.task_id for r in parts.records}
    ran: list[str] = []
    stopped = None
    todo = [(position, task) for position, task in enumerate(parts.tasks) if task.id not in finished]
    if parallel_tasks > 1 and len(todo) > 1 and independent_tasks(config) and parts.masking is None \
            and parts.make_agent is not None and getattr(env, "concurrent_episodes", True):
        stopped = _run_parallel(env, config, parts, todo, parallel_tasks, on_event, on_task, budget, ran)
        todo = []
    for position, task in todo:
        if task.id in finished:
            continue
        stopped = budget.reached() if budget is not None else None
        if stopped is not None:
            break
        record = _run_task(env, config, parts, position, task, on_event)
        parts.records.append(record)
        ran.append(task.id)
        if budget is not None:
            budget.add(record)
        if on_task is not None:
            on_task(record)
    close = getattr(parts.own_verifier, "close", None)
    if close is not None:
        close()
    return StreamSummary(parts.folder.path, parts.records, ran, stopped)


def parallel_width(config: StreamConfig) -> int:
    """How many tasks a stream runs at once: its model's connection limit (``max_concurrency``, at most
    `MAX_PARALLEL_TASKS`) when its tasks are independent, else 1."""
    return max(1, min(config.model.max_concurrency, MAX_PARALLEL_TASKS)) if independent_tasks(config) else 1


def independent_tasks(config: StreamConfig) -> bool:
    """Whether a stream's tasks are independent of each other: no memory of its own (none, or a frozen library read
    as it is: flat reuse, organisation and exposure, inline skills, the whole library for every task; a library is
    read-only, so nothing is induced), no coordination plan, no evolution, no masking. They may then run
    concurrently with the records of a sequential run (a frozen library's usage counts are updated at each commit,
    in stream order)."""
    frozen = config.library is not None and config.library_use == "instead" and config.library_scope == "all" \
        and config.skill_exec == "inline" and config.library_organization == "flat" \
        and config.library_exposure == "retrieved"
    return ((not config.has_memory or frozen) and config.coordination == "none" and config.reuse == "flat"
            and config.evolution is None and not config.organize and not config.mask_rate)


def _run_parallel(env: Env, config: StreamConfig, parts: StreamParts, todo: list[tuple[int, TaskSpec]], width: int,
                  on_event: Callable[[AgentEvent], None] | None, on_task: Callable[[TaskRecord], None] | None,
                  budget: Budget | None, ran: list[str]) -> str | None:
    """Run independent tasks ``width`` at a time (one agent per thread), committing in stream order; returns why it
    stopped early (a reached budget), else None. An error that stops the stream stops it after the running tasks."""
    assert parts.make_agent is not None
    env = GuardedEnv(env)  # in-process episodes act one at a time
    if parts.memory is not None and not isinstance(parts.memory.embedder, LockedEmbedder):
        parts.memory.embedder = LockedEmbedder(parts.memory.embedder)  # the agents' retrievals embed one at a time
    agents = [parts.agent, *(parts.make_agent() for _ in range(width - 1))]
    free = list(agents)
    lock = threading.Lock()

    def perform(position: int, task: TaskSpec) -> TaskRecord:
        with lock:
            agent = free.pop()
        try:
            return _perform_task(env, config, parts, position, task, on_event, agent)
        finally:
            with lock:
                free.append(agent)

    pending = list(todo)
    in_flight: list[tuple[TaskSpec, Future[TaskRecord]]] = []
    stopped = None
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix=f"tasks:{config.run}") as pool:
        try:
            while pending or in_flight:
                while pending and len(in_flight) < width and stopped is None:
                    stopped = budget.reached() if budget is not None else None
                    if stopped is None:
                        position, task = pending.pop(0)
                        in_flight.append((task, pool.submit(perform, position, task)))
                if not in_flight:
                    break
                task, future = in_flight.pop(0)
                record = future.result()  # the next task in stream order: commit it as soon as it is done
                _commit_task(parts, record)
                parts.records.append(record)
                ran.append(task.id)
                if budget is not None:
                    budget.add(record)
                if on_task is not None:
                    on_task(record)
        except BaseException:
            for _, future in in_flight:
                future.cancel()
            raise
    return stopped


def _run_task(env: Env, config: StreamConfig, parts: StreamParts, position: int, task: TaskSpec,
              on_event: Callable[[AgentEvent], None] | None) -> TaskRecord:
    """One task of the stream: start, run (the agent or the coordinated runner), evaluate, induce what waited for
    the verdict, commit (record, trajectory, artifacts, memory)."""
    record = _perform_task(env, config, parts, position, task, on_event, parts.agent)
    _commit_task(parts, record)
    return record


def _perform_task(env: Env, config: StreamConfig, parts: StreamParts, position: int, task: TaskSpec,
                  on_event: Callable[[AgentEvent], None] | None, agent: Agent) -> TaskRecord:
    """A task up to its commit: start, run, evaluate, induce, write the finished trajectory; returns the record."""
    folder, memory, coordinated = parts.folder, parts.memory, parts.coordinated
    trajectory = folder.trajectory_file(task.id)
    live = _LiveTrajectory(folder, trajectory, task, position)
    if parts.masking is not None:
        parts.masking.task_key = task.id
    if parts.own_task is not None:  # library_scope own-task: this task sees the skills induced from it
        agent.memory = parts.own_task.memory_for(task.id)
    drawn = None
    if parts.sized is not None and memory is not None:  # library_size: this task's library of that many skills
        agent.memory, library = parts.sized.memory_for(task, right_skills(task, memory),
                                                       named_skills(task, memory, LIBRARY_KEY) or ())
        agent.memory.ranker = memory.ranker  # the stream's retrieval mode over the task's library
        drawn = LibraryDraw(**asdict(library))
    events = _fan_out(live.on_event, on_event)
    started = time.perf_counter()
    episode = None
    failure: tuple[BaseException, str] | None = None
    parts.clock.start()
    try:
        episode = env.start(task)
        workspace = getattr(episode, "workspace", None)
        before = snapshot_workspace(workspace) if workspace is not None else {}
        result: AgentResult
        if coordinated is not None:
            coordinated_run = coordinated.task(episode, stream_position=position, run_id=config.run, on_event=events)
            result = coordinated_run.run()
            live.plan = coordinated_run.plan
            finish = coordinated_run.finish
        else:
            loop = agent.task(episode, stream_position=position, run_id=config.run, on_event=events)
            result = loop.run()
            finish = loop.finish
        parts.clock.stop()  # evaluation and deferred induction finish what the agent did
        score = episode.evaluate()
        finish(score.success)
        folder.write_artifacts(trajectory, episode_artifacts(episode, before))
    except Exception as exc:  # noqa: BLE001 - the task's failure is its record (see the module docstring)
        if isinstance(exc, InputError):
            live.write("aborted", error=_one_line(exc))
            raise
        failure = (exc, secrets.redact(traceback.format_exc())[-MAX_TRACEBACK_CHARS:])
    except BaseException as exc:
        live.write("aborted", error=_one_line(exc))
        raise
    finally:
        parts.clock.stop()
        if episode is not None:
            episode.close()
    if failure is not None:
        result = live.result if live.result is not None else AgentResult(task.id)
        result.exit_status = TASK_TIMEOUT if isinstance(failure[0], TaskTimeout) else TASK_ERROR
        result.latency_s = time.perf_counter() - started
        score = Score(reward=0.0, success=False)
    live.result = result
    live.write("finished", score={"reward": score.reward, "success": score.success,
                                  "checks": [asdict(c) for c in score.checks]},
               error=failure[1] if failure is not None else None)
    record = _record(config, position, task, result, score, memory, trajectory, live.plan, drawn)
    if memory is not None and memory.config.capacity is not None:
        memory.evict(position, [task_outcome(r) for r in (*parts.records, record)])
        record.memory_size = len(memory)
    return record


def task_outcome(record: TaskRecord) -> TaskOutcome:
    """What the eviction policies read of a task's record (`skilltransfer.memory.capacity`)."""
    return TaskOutcome(record.position, record.success, tuple(r.skill_id for r in record.retrieved),
                       tuple((e.skill_id, e.propensity, e.shown) for e in record.exposures))


def _commit_task(parts: StreamParts, record: TaskRecord) -> None:
    """Commit a performed task (record, memory: the retrieved skills' usage counts first, so tasks performed side by
    side count in stream order) and what the run learnt of its model so far."""
    folder = parts.folder
    if parts.memory is not None:
        memory = parts.memory
        memory.record_retrieval([hit.skill_id for hit in record.retrieved if hit.skill_id in memory], record.success)
    own = parts.memory.own if isinstance(parts.memory, JointMemory) else parts.memory  # a library beside: not saved
    memory_files = None
    if own is not None:  # the snapshot list committed with the memory (`skilltransfer.memory.snapshots`)
        snapshots, archive = snapshot_texts(folder.memory_dir, record.position, record.task_id, own)
        memory_files = {SNAPSHOTS: snapshots, SNAPSHOT_SKILLS: archive}
    folder.commit(record, own, save_with_memory=parts.retriever.save if parts.retriever is not None else None,
                  memory_files=memory_files)
    changes = param_changes(parts.agent.model)
    if changes != parts.recorded.get("adaptations"):
        folder.record_adaptations(changes)
        parts.recorded["adaptations"] = dict(changes)
    if parts.served is not None:
        seen = parts.served.seen()
        if seen != parts.recorded.get("served"):
            before = folder.read_config().provenance
            folder.record_provenance(merged(before, seen) if before else before)
            parts.recorded["served"] = seen


def _one_line(exc: BaseException) -> str:
    return " ".join(secrets.redact(f"{type(exc).__name__}: {exc}").split())[:1000]
