"""A stream's build: its settings checked, its frozen library and organisation read (`prepare_stream`), then its
parts made once (`build_stream`): the task list, the run folder (started, or resumed with its records), the memory
(the saved one, the frozen library, or a library beside a memory of its own), the lens retriever, the inducer, the
agent or the coordinated runner, the prompt ids, and the model wrapped in the stream's layers (the served models
recorded, the task's deadline). What each task sees of the memory is set before it runs (`StreamParts.task_view`).

``run`` calls `prepare_stream` before it builds the env and model, so bad input fails before anything is written; the
loop that runs the parts is `skilltransfer.runner.stream.run_stream`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.agents.agent import Agent
from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.disclosure import DisclosureOrigin
from skilltransfer.agents.prompts import DISCLOSURE_PROMPTS, DISCLOSURE_SECTIONS, SKILL_EXEC_PROMPTS, AgentPrompts
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.envs.opening import pick_positions
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import Inducer
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.retriever import GRAPH_DIR, LensRetriever, lens_prompt_ids
from skilltransfer.llm import make_model
from skilltransfer.llm.chain import ReportingModel, TimedModel
from skilltransfer.llm.strict import adopt_param_changes
from skilltransfer.log import LibraryDraw, LibraryUtility, RunFolder, TaskRecord
from skilltransfer.log.provenance import ServedModels, run_provenance
from skilltransfer.memory.distractors import distractor_skills
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.masking import MaskedRetriever
from skilltransfer.memory.near_miss import (
    LIBRARY_KEY,
    SizedLibrary,
    corpus_skills,
    named_skills,
    read_corpus,
    right_skills,
)
from skilltransfer.memory.organization import LibraryView
from skilltransfer.memory.ranking import Ranker
from skilltransfer.memory.scope import OwnTaskLibrary
from skilltransfer.memory.store import SkillMemory
from skilltransfer.protocols import ChatModel, Embedder, Env, TaskSpec
from skilltransfer.runner.build import agent_library_name, external_library, stream_library_read
from skilltransfer.runner.clock import TaskClock
from skilltransfer.runner.coordinated import CoordinatedTask
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import RunSettings, check_resume, read_run_settings
from skilltransfer.skill import Skill, UsageStats


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
    read = stream_library_read(config)
    library = read.skills if read is not None else None
    config.check_skill_exec()
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
    """What `skilltransfer.runner.stream_record.commit_task` last recorded in ``config.json`` (adaptations, served
    provenance): unchanged, the file is neither read nor written again."""

    def task_view(self, agent: Agent, task: TaskSpec) -> LibraryDraw | None:
        """Set what ``task`` sees of the memory before it runs: the masking retriever's task, the agent's memory under
        ``library_scope`` own-task (the skills induced from the task itself) or ``library_size`` (a library of that
        many skills, drawn for the task); returns the draw under ``library_size``, else None."""
        if self.masking is not None:
            self.masking.task_key = task.id
        if self.own_task is not None:  # library_scope own-task: this task sees the skills induced from it
            agent.memory = self.own_task.memory_for(task.id)
        if self.sized is None or self.memory is None:
            return None
        memory = self.memory  # library_size: this task's library of that many skills
        agent.memory, library = self.sized.memory_for(task, right_skills(task, memory),
                                                      named_skills(task, memory, LIBRARY_KEY) or ())
        agent.memory.ranker = memory.ranker  # the stream's retrieval mode over the task's library
        return LibraryDraw(**asdict(library))


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
    clock = TaskClock(config.agent.task_timeout_s)
    folder = RunFolder(config.path)
    agent_cfg = stream_agent_config(config, inputs, read_run_settings(folder).agent if folder.exists() else None)
    induction = config.induction_config()
    if tasks is None:  # the env's tasks, picked by task_positions (a caller's list is already selected)
        listed = list(env.tasks())
        tasks = pick_positions(listed, config.task_positions) if config.task_positions is not None else listed
    tasks = list(tasks)
    repeated = sorted(task_id for task_id, n in Counter(t.id for t in tasks).items() if n > 1)
    if repeated:
        raise InputError(f"the task stream repeats task ids: {', '.join(repeated[:5])}")
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
    folder.merge_provenance(log.provenance)
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

