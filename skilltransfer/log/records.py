"""The run log's typed records: ``config.json`` (`RunConfigLog`), a line of ``results.jsonl`` (`TaskRecord`, with the
retrieved and induced skills, lens routes, masking draws and a coordinated task's plan in brief) and a trajectory
file (`TrajectoryLog`). The folder that holds them: `skilltransfer.log.folder`.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from skilltransfer.log.numbers import MAX_COUNT
from skilltransfer.log.selection import LibraryDraw, SkillPick
from skilltransfer.skill import SkillFormat

FORMAT_VERSION = 2
"""The run log's format: 1 recorded the env and the model as strings (`skilltransfer.log.legacy`)."""
TASK_ERROR = "error"
"""The exit status of a task that an exception ended."""
TASK_TIMEOUT = "task_timeout"
"""The exit status of a task that ran past ``agent.task_timeout_s``."""
USED_SHARE = 0.5
"""A text skill whose following share (`skilltransfer.metrics.following`) reaches this is counted as used."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
"""A count a record holds (tokens, steps, calls, positions): read back within range (`skilltransfer.log.numbers`)."""
Share = Annotated[float, Field(ge=0, le=1)]
"""A share, probability or reward: within [0, 1]."""
Seconds = Annotated[float, Field(ge=0)]


class LibraryUtility(BaseModel):
    """The utility of each skill of a frozen library as a ``library_filter`` stream ranked it when it started (the
    paper's utility, specificity x abstractness: `skilltransfer.metrics.score_library` of the library as read against
    the stream's task instructions, with the run's embedder ``embedder_id``); what ``view`` shows as the library's
    utility."""

    utility: dict[str, float]
    """Skill id -> utility, every skill of the library as read (kept or not)."""
    kept: list[str]
    """The ids of the skills the stream kept (its half of the ranking, in rank order): its memory's skills."""
    tasks: Count
    """The task instructions scored against (the stream's)."""
    tau: float
    """The abstractness temperature."""
    specificity: str
    """The specificity mode (``pairs``: the paper's)."""


StreamT = TypeVar("StreamT")
AgentT = TypeVar("AgentT")
InductionT = TypeVar("InductionT")
JsonObject = dict[str, Any]


class RunConfigLog(BaseModel, Generic[StreamT, AgentT, InductionT]):
    """``config.json`` of a run, with the stream's, the agent's and the induction's settings of type ``StreamT``,
    ``AgentT`` and ``InductionT``: JSON objects as the log reads them (`RunConfigData`; the log knows no runner), the
    settings' own types one floor up (`skilltransfer.settings.RunSettings`)."""

    format_version: int = FORMAT_VERSION
    config: StreamT
    """The stream's settings as `skilltransfer.settings.StreamConfig.recorded` gives them."""
    level: str
    """The agent's level ("task" or "subtask")."""
    skill_format: SkillFormat | None
    agent: AgentT
    """The agent's settings (`skilltransfer.agents.AgentConfig`)."""
    induction: InductionT | None
    """The induction's settings (`skilltransfer.induction.inducer.InductionConfig`); None without induction."""
    prompt_ids: dict[str, str]
    embedder_id: str | None
    task_ids: list[str]
    created: str
    model_adaptations: dict[str, str] = Field(default_factory=dict)
    """Request parameters the model's endpoint rejected (HTTP 400) and what the run sends instead
    (``max_completion_tokens`` for ``max_tokens``, else ``dropped``): learnt during the run, sent from the first
    request when it resumes (`skilltransfer.llm.strict`)."""
    library_utility: LibraryUtility | None = None
    """A ``library_filter`` stream's ranking of its library (None for every other stream; not a setting: never
    compared on resume)."""
    provenance: dict[str, Any] = Field(default_factory=dict)
    """What the run ran on (`skilltransfer.log.provenance`): toolkit version, git commit and dirty flag,
    Python and package versions, the seed sent, the model ids and ``system_fingerprint`` values the endpoint answered
    with; ``resumed_with`` lists what differed when the run was resumed. Not a setting: never compared on resume."""

    def to_json(self) -> str:
        """The file's text (what the settings leave out of it: `skilltransfer.settings.RunSettings.to_json`)."""
        exclude: Any = {"library_utility": True} if self.library_utility is None else None
        return self.model_dump_json(indent=2, exclude=exclude) + "\n"


RunConfigData = RunConfigLog[JsonObject, JsonObject, JsonObject]
"""``config.json`` as the log reads it: the settings as validated JSON objects."""


class RetrievedSkill(BaseModel):
    """One retrieved skill of a task."""

    skill_id: str
    name: str
    format: str
    score: float
    subtask_index: int | None
    query_kind: str
    source_task_id: str | None
    source_position: Count | None
    load_error: str | None = None
    followed: Share | None = None
    """Text skills: the share of the skill's API calls, in order, that the task's code made after this retrieval
    (`skilltransfer.metrics.following`); None for code skills, skills naming no API, and older runs."""
    ran: Count | None = None
    """Code skills: the calls of the skill's functions that the task's code made after this retrieval, as the sandbox
    recorded them (`skilltransfer.sandbox.runtime.skilluse`); None for text skills and older runs."""
    source: Literal["library", "memory"] | None = None
    """Where the skill came from when the run retrieves from a frozen library (instead of or beside its own memory):
    ``library``, or ``memory`` (induced by this run, ``library_use: beside``); None when the run has only its own
    memory (and in runs before 2026-12-07, whose library-only arm recorded None)."""
    library: str | None = None
    """With ``source`` ``library``: the library's name (its folder or file name, as the agent was told it)."""
    rank: int | None = None
    """1-based rank in its retrieval (the order the skills were shown in); None in runs logged before it was kept
    (`ranked` then counts it from the order of ``retrieved``)."""

    @property
    def used(self) -> bool | None:
        """Whether the task used the skill: a code skill's function ran (``ran`` >= 1), a text skill was followed
        (``followed`` >= `USED_SHARE`); None when not measured."""
        if self.ran is not None:
            return self.ran >= 1
        return self.followed >= USED_SHARE if self.followed is not None else None


def ranked(retrieved: list[RetrievedSkill]) -> list[tuple[RetrievedSkill, int]]:
    """Each retrieved skill with its 1-based rank in its retrieval: the recorded ``rank``, else (older runs) its place
    in its run of consecutive items of one (sub)task and query kind."""
    out: list[tuple[RetrievedSkill, int]] = []
    previous: tuple[int | None, str] | None = None
    counted = 0
    for hit in retrieved:
        key = (hit.subtask_index, hit.query_kind)
        counted = counted + 1 if key == previous else 1
        previous = key
        out.append((hit, hit.rank if hit.rank is not None else counted))
    return out


class RouteRecord(BaseModel):
    """One lens retrieval of a task in brief (the trajectory's retrieval step holds the whole `RouteLog`)."""

    subtask_index: int | None
    visited: Count
    """Units the verifier routed (or rewrote, under rewrite-all)."""
    rewritten: Count
    adaptation_cost: Count
    """Visited plus rewritten units (the study's C_adapt)."""
    retrieved_tree: Count
    """Distinct units under the seeds and expanded units (what flat reuse of them would insert)."""
    decisions: dict[str, Count]
    """ACCEPT / DECOMPOSE / REWRITE / SKIP counts."""
    verifier_calls: Count
    verifier_tokens: Count
    """Prompt plus completion tokens of routing's calls."""
    context_units: Count
    context_tokens: Count
    graph_units: Count = 0
    decomposed: Count = 0
    """Skills decomposed into the graph before this retrieval (the graph kept in step with the memory)."""
    fallbacks: Count = 0
    """Decisions the verifier did not make: its reply named none (``fallback:unparseable``) or its prompt did not fit
    (``fallback:context``); routing then took the fallback decision (ACCEPT: what flat reuse does)."""

    @classmethod
    def from_log(cls, log: dict[str, Any], subtask_index: int | None) -> RouteRecord:
        decisions: dict[str, int] = {}
        for visit in log.get("visits", []):
            decisions[visit["decision"]] = decisions.get(visit["decision"], 0) + 1
        return cls(subtask_index=subtask_index, visited=int(log.get("visited", 0)),
                   rewritten=len(log.get("rewrites", {})), adaptation_cost=int(log.get("adaptation_cost", 0)),
                   retrieved_tree=int(log.get("retrieved_tree", 0)), decisions=decisions,
                   verifier_calls=int(log.get("verifier_calls", 0)),
                   verifier_tokens=int(log.get("verifier_prompt_tokens", 0))
                   + int(log.get("verifier_completion_tokens", 0)),
                   context_units=len(log.get("context_units", [])), context_tokens=int(log.get("context_tokens", 0)),
                   graph_units=int(log.get("graph_units", 0)),
                   decomposed=len((log.get("synced") or {}).get("added", [])),
                   fallbacks=sum(str(visit.get("how", "")).startswith("fallback:") for visit in log.get("visits", [])))


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


class CoordinationRecord(BaseModel):
    """A coordinated task's plan and audit in brief (the trajectory holds the whole audit)."""

    interface: str
    plan_fingerprint: str
    plan_written: bool
    """Whether this stream wrote the plan (False: replayed from the plan folder)."""
    plan_fallback: str | None = None
    """Why the plan writer fell back to a one-node plan, if it did."""
    nodes: Count
    completed_nodes: Count
    """Nodes completed (metaskill) or reported done by the host (nl-sop, prompt-graph)."""
    violated_constraints: Count
    unverified_constraints: Count
    submitted_by: str | None = None
    """Who called ``complete_task``: a node id or "finish" (metaskill), "host" (nl-sop, prompt-graph); None: nobody."""
    not_run_nodes: Count = 0
    """Planned nodes that never ran (metaskill: not dispatched, e.g. after a node submitted; hosts: not reported)."""
    plan_tokens: Count = 0
    """Prompt + completion tokens of the plan writer when this stream wrote the plan (also in the task's tokens and
    ``tokens_by_role["plan_writer"]``; the report keeps it out of the interface's cost)."""


class Exposure(BaseModel):
    """One masking draw of a task (``mask_rate`` > 0): a retrieved candidate skill, shown or withheld."""

    skill_id: str
    propensity: Share
    """Probability it was shown (1 - mask_rate; 1 for a skill that is not masked: an induced skill beside a
    library)."""
    shown: bool
    rank: Count
    """Its rank among the candidates of the first retrieval that had it."""
    score: float
    subtask_index: int | None = None
    name: str | None = None
    """The skill's name (a withheld skill is in no ``retrieved`` item; None in runs logged before it was kept)."""


class TaskRecord(BaseModel):
    """One line of ``results.jsonl``."""

    format_version: int = FORMAT_VERSION
    run: str
    condition: str
    position: Count
    task_id: str
    difficulty: int
    template: str
    reward: Share
    success: bool
    exit_status: str
    steps: Count
    """Executor steps (format errors included)."""
    subtasks: Count
    latency_s: Seconds
    """Wall-clock time of the agent on this task (induction included; evaluation excluded)."""
    model_calls: Count
    prompt_tokens: Count
    completion_tokens: Count
    dependency: Count
    """Sum over the task's model calls of P*C + C(C+1)/2 (P prompt, C completion tokens)."""
    peak_context: Count
    """Largest single prompt of the task, in tokens."""
    context_fitted_calls: Count = 0
    """Model calls whose prompt was shortened to fit the context window (elided steps or cut skills)."""
    reasoning_tokens: Count = 0
    """Completion tokens spent reasoning (part of ``completion_tokens``; 0 for a model that does not reason)."""
    cost_usd: Annotated[float, Field(ge=0)] | None = None
    """What the task's calls cost at the model's ``price`` (prompt tokens as input, completion tokens, reasoning
    included, as output); None when the model has no price."""
    length_cut_calls: Count = 0
    """Answered model calls whose reply the completion cap cut (finish_reason "length")."""
    tokens_by_role: dict[str, dict[str, Count]]
    """Per role (executor, planner, summarizer, induction): calls, prompt/completion tokens and dependency."""
    retrieved: list[RetrievedSkill]
    induced: list[InducedSkill]
    memory_size: Count
    trajectory: str
    """Path of the trajectory file, relative to the run folder."""
    coordination: CoordinationRecord | None = None
    """The plan and audit in brief, for a coordinated stream."""
    context_account: dict[str, Any] | None = None
    """Per context window (the main agent's executor context, then each subagent's): calls, prompt/completion
    tokens, peak context, communication tokens; skill loads, nodes opened (`skilltransfer.metrics.ContextAccount`
    ``to_dict``). None in runs logged before it existed."""
    routes: list[RouteRecord] = Field(default_factory=list)
    """Lens reuse: one brief per (sub)task retrieval (empty under flat reuse)."""
    exposures: list[Exposure] = Field(default_factory=list)
    """Masked retrieval (``mask_rate`` > 0): one draw per candidate skill of the task (`skilltransfer.memory.masking`);
    empty otherwise."""
    picks: list[SkillPick] | None = None
    """The skills the agent picked out of those shown, in order (`skilltransfer.log.selection`); None in runs logged
    before picks were kept."""
    relevant_skills: list[str] | None = None
    """The ids of the task's right skills as known when it ran (the task's metadata, or the frozen library's
    provenance: `skilltransfer.log.selection`); None: not known (``report --labels`` may give them)."""
    library_draw: LibraryDraw | None = None
    """The library this task chose from when the stream grows one per task (``library_size``); None otherwise."""


TrajectoryStatus = Literal["running", "aborted", "finished"]


class TrajectoryLog(BaseModel):
    """``trajectories/<task_id>.json``: the full trajectory of one task."""

    format_version: int = FORMAT_VERSION
    task_id: str
    position: int
    instruction: str
    status: TrajectoryStatus = "finished"
    """"running": written while the task runs (a process killed mid-task leaves it so); "aborted": an error ended
    the task (see ``error``; the run stopped and resuming redoes the task); "finished": scored and recorded."""
    exit_status: str = ""
    """The agent's exit status (empty while running)."""
    error: str | None = None
    """The error that aborted the task (one line), or the traceback of an exception or timeout that ended a finished
    task (exit status ``error`` / ``task_timeout``)."""
    score: dict[str, Any] = Field(default_factory=dict)
    """reward, success and checks (empty until the task is scored)."""
    steps: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    """Each model call's accounting (`skilltransfer.log.ModelCall`), its prompt as ``messages`` (ids in
    ``prompts.jsonl``) and its reply as ``reply`` (an id); read both with `RunFolder.call_prompts`."""
    contexts: list[list[dict[str, Any]]]
    """The final message list of each executor run."""
    coordination: dict[str, Any] | None = None
    """A coordinated task: ``interface``, ``plan`` (file, fingerprint, written now or replayed, writer, fallback,
    packages), ``audit`` (`skilltransfer.coordination.Audit.to_dict`), node ``outputs`` and ``prompt_ids``."""
