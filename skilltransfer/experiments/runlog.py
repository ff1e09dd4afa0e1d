"""The run log: the files of one stream run, their schemas, and every read and write of them.

A run is a folder ``<runs_dir>/<run>/``, every file with a ``format_version``, every write atomic (the JSONL files
are appended, a line per write):

- ``config.json`` (`RunConfigLog`): the stream's settings (`StreamConfig.identity`: typed env, model, condition,
  every axis, limits, agent and memory settings), the derived agent/induction settings, prompt ids, the embedder id
  and the stream's task ids; a ``library_filter`` stream adds the utility it ranked its library by
  (`LibraryUtility`);
- ``results.jsonl`` (one `TaskRecord` per finished task, in stream order): the commit point. A task's line is
  appended in one write (a commit costs the same at the stream's last task as at its first); a partial last line,
  from an append cut off, is no committed task: readers skip it and `RunFolder.start` cuts it off;
- ``trajectories/<task_id>.json`` (`TrajectoryLog`; ids made file-name safe by `safe_task_id`), rewritten while the
  task runs (status "running"), once more if an error ends it ("aborted"), and when it is scored ("finished");
- ``artifacts/<task file>.json``: the task's final artifacts (`skilltransfer.envs.artifacts.episode_artifacts`: the
  answer and the workspace files it added, changed or deleted, as text), written before the task is committed; what
  ``skilltransfer judge`` reads;
- ``plans/`` (coordinated streams, unless ``plans`` names a shared folder): one frozen plan per task;
- ``memory/``: the skill memory after the last committed task;
- ``prompts.jsonl`` (`PromptStore`): what the model saw and said. Every message of every model call and every raw
  reply, each stored once by content id (a system prompt sent in 50 calls is one line); a trajectory's
  ``calls[i]`` names its prompt as ``messages`` (ids, in order) and its reply as ``reply`` (an id). Lines are
  appended, and flushed before the trajectory that names them is written; an append cut off by a crash leaves a
  partial last line that readers skip and `RunFolder.start` cuts off.

A task is committed in this order (`RunFolder.commit`): its trajectory, a memory snapshot (``memory.next`` plus the
marker ``memory.next.task`` naming the task), the results file with the task's line (the commit point), then the
snapshot replaces ``memory``. `RunFolder.recover_memory` finishes or undoes an interrupted commit, so a resumed run
starts from exactly the memory after its last committed task.

Folders of the old format (format_version 1, env and model recorded as strings) are read through
`skilltransfer.experiments.legacy` for ``show`` and ``report``; resuming one is refused with one line.

JSONL is split on ``\\n`` only (`skilltransfer.util.files.iter_jsonl`): pydantic writes U+2028 and its kin unescaped,
and ``str.splitlines`` would break such a line in two.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from skilltransfer.agents.config import AgentConfig, AgentLevel
from skilltransfer.agents.steps import ModelCall
from skilltransfer.errors import InputError, validation_message
from skilltransfer.experiments.config import IDENTITY_MODEL_FIELDS, ModelSpec, StreamConfig
from skilltransfer.experiments.legacy import upgrade_v1_config
from skilltransfer.induction.inducer import InductionConfig
from skilltransfer.memory.snapshots import SNAPSHOT_SKILLS, SNAPSHOTS, snapshot_texts
from skilltransfer.metrics.following import USED_SHARE
from skilltransfer.protocols import SkillStore
from skilltransfer.skill import SkillFormat
from skilltransfer.util import trees, untrusted
from skilltransfer.util.files import jsonl_lines, new_file_mode, read_json, read_text

FORMAT_VERSION = 2
CONFIG = "config.json"
RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories"
ARTIFACTS = "artifacts"
MEMORY = "memory"
PROMPTS = "prompts.jsonl"
MAX_RESULTS_BYTES = 256 << 20
"""The largest results.jsonl read (a run folder given to show/report/judge/resume may be anyone's)."""
MAX_PROMPTS_BYTES = 2 << 30
"""The largest prompts.jsonl read."""


# --------------------------------------------------------------------------------------------- schemas
class LibraryUtility(BaseModel):
    """The utility of each skill of a frozen library as a ``library_filter`` stream ranked it when it started (the
    paper's utility, specificity x abstractness: `skilltransfer.metrics.score_library` of the library as read against
    the stream's task instructions, with the run's embedder ``embedder_id``); what ``view`` shows as the library's
    utility."""

    utility: dict[str, float]
    """Skill id -> utility, every skill of the library as read (kept or not)."""
    kept: list[str]
    """The ids of the skills the stream kept (its half of the ranking, in rank order): its memory's skills."""
    tasks: int
    """The task instructions scored against (the stream's)."""
    tau: float
    """The abstractness temperature."""
    specificity: str
    """The specificity mode (``pairs``: the paper's)."""


class RunConfigLog(BaseModel):
    """``config.json`` of a run."""

    format_version: int = FORMAT_VERSION
    config: StreamConfig
    """The stream's settings as `StreamConfig.identity` gives them."""
    level: AgentLevel
    skill_format: SkillFormat | None
    agent: AgentConfig
    induction: InductionConfig | None
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
    """What the run ran on (`skilltransfer.experiments.provenance`): toolkit version, git commit and dirty flag,
    Python and package versions, the seed sent, the model ids and ``system_fingerprint`` values the endpoint answered
    with; ``resumed_with`` lists what differed when the run was resumed. Not a setting: never compared on resume."""

    def to_json(self) -> str:
        """The file's text: the model recorded by what shapes its answers only (`IDENTITY_MODEL_FIELDS`), nothing
        that does not change results (no endpoint, key, cache, sandboxing)."""
        transport = set(ModelSpec.model_fields) - set(IDENTITY_MODEL_FIELDS)
        exclude: Any = {"config": {"model": transport, "embedder_cache": True, "env": {"sandboxed"}}}
        if self.library_utility is None:  # the file of every other stream is as it was
            exclude["library_utility"] = True
        return self.model_dump_json(indent=2, exclude=exclude) + "\n"


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
    followed: float | None = None
    """Text skills: the share of the skill's API calls, in order, that the task's code made after this retrieval
    (`skilltransfer.metrics.following`); None for code skills, skills naming no API, and older runs."""
    ran: int | None = None
    """Code skills: the calls of the skill's functions that the task's code made after this retrieval, as the sandbox
    recorded them (`skilltransfer.sandbox.runtime.skilluse`); None for text skills and older runs."""
    source: Literal["library", "memory"] | None = None
    """Where the skill came from when the run retrieves from a library beside its own memory (``library_use:
    beside``): ``library`` or ``memory`` (induced by this run); None when the run has one store (its library, or
    its own memory)."""

    @property
    def used(self) -> bool | None:
        """Whether the task used the skill: a code skill's function ran (``ran`` >= 1), a text skill was followed
        (``followed`` >= `USED_SHARE`); None when not measured."""
        if self.ran is not None:
            return self.ran >= 1
        return self.followed >= USED_SHARE if self.followed is not None else None


class RouteRecord(BaseModel):
    """One lens retrieval of a task in brief (the trajectory's retrieval step holds the whole `RouteLog`)."""

    subtask_index: int | None
    visited: int
    """Units the verifier routed (or rewrote, under rewrite-all)."""
    rewritten: int
    adaptation_cost: int
    """Visited plus rewritten units (the study's C_adapt)."""
    retrieved_tree: int
    """Distinct units under the seeds and expanded units (what flat reuse of them would insert)."""
    decisions: dict[str, int]
    """ACCEPT / DECOMPOSE / REWRITE / SKIP counts."""
    verifier_calls: int
    verifier_tokens: int
    """Prompt plus completion tokens of routing's calls."""
    context_units: int
    context_tokens: int
    graph_units: int = 0
    decomposed: int = 0
    """Skills decomposed into the graph before this retrieval (the graph kept in step with the memory)."""
    fallbacks: int = 0
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
    nodes: int
    completed_nodes: int
    """Nodes completed (metaskill) or reported done by the host (nl-sop, prompt-graph)."""
    violated_constraints: int
    unverified_constraints: int
    submitted_by: str | None = None
    """Who called ``complete_task``: a node id or "finish" (metaskill), "host" (nl-sop, prompt-graph); None: nobody."""
    not_run_nodes: int = 0
    """Planned nodes that never ran (metaskill: not dispatched, e.g. after a node submitted; hosts: not reported)."""
    plan_tokens: int = 0
    """Prompt + completion tokens of the plan writer when this stream wrote the plan (also in the task's tokens and
    ``tokens_by_role["plan_writer"]``; the report keeps it out of the interface's cost)."""


class Exposure(BaseModel):
    """One masking draw of a task (``mask_rate`` > 0): a retrieved candidate skill, shown or withheld."""

    skill_id: str
    propensity: float
    """Probability it was shown (1 - mask_rate; 1 for a skill that is not masked: an induced skill beside a
    library)."""
    shown: bool
    rank: int
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
    reasoning_tokens: int = 0
    """Completion tokens spent reasoning (part of ``completion_tokens``; 0 for a model that does not reason)."""
    cost_usd: float | None = None
    """What the task's calls cost at the model's ``price`` (prompt tokens as input, completion tokens, reasoning
    included, as output); None when the model has no price."""
    length_cut_calls: int = 0
    """Answered model calls whose reply the completion cap cut (finish_reason "length")."""
    tokens_by_role: dict[str, dict[str, int]]
    """Per role (executor, planner, summarizer, induction): calls, prompt/completion tokens and dependency."""
    retrieved: list[RetrievedSkill]
    induced: list[InducedSkill]
    memory_size: int
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
    """Each model call's accounting (`skilltransfer.agents.steps.ModelCall`), its prompt as ``messages`` (ids in
    ``prompts.jsonl``) and its reply as ``reply`` (an id); read both with `RunFolder.call_prompts`."""
    contexts: list[list[dict[str, Any]]]
    """The final message list of each executor run."""
    coordination: dict[str, Any] | None = None
    """A coordinated task: ``interface``, ``plan`` (file, fingerprint, written now or replayed, writer, fallback,
    packages), ``audit`` (`skilltransfer.coordination.Audit.to_dict`), node ``outputs`` and ``prompt_ids``."""


def safe_task_id(task_id: str) -> str:
    """A file-name-safe form of a task id ('/' and other unsafe characters replaced, plus a hash if changed)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).strip(".") or "task"
    return safe if safe == task_id else f"{safe}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


# --------------------------------------------------------------------------------------------- prompts
MESSAGE_ID_CHARS = 16
_LINE_HEAD = '{"id":"'


def message_id(message: Mapping[str, Any]) -> str:
    """A message's content id: the first 16 hex digits of the SHA-256 of its canonical JSON (sorted keys)."""
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:MESSAGE_ID_CHARS]


def reply_message(reply: str) -> dict[str, str]:
    """A raw reply as the message it is stored as (so a reply sent back in the next prompt is the same line)."""
    return {"role": "assistant", "content": reply}


def reasoning_message(reasoning: str) -> dict[str, str]:
    """A reply's reasoning as stored beside it (role "reasoning": no prompt ever holds such a message)."""
    return {"role": "reasoning", "content": reasoning}


class PromptStore:
    """``prompts.jsonl``: every message sent to the model and every reply, each stored once by content id.

    One line per distinct message: ``{"id": "<message_id>", "message": {...}}`` (ASCII JSON).

    Args:
        path: the file (created on the first `add`).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._known: set[str] | None = None
        self._lock = threading.Lock()
        """Serialises `add` (a stream may run independent tasks in threads)."""

    def _lines(self) -> Iterable[str]:
        """The file's complete lines (a partial last line, from an interrupted append, is left out).

        The file is opened inside its folder without following a link, and read through that descriptor (a run
        folder given to show/view/resume may be anyone's).

        Raises:
            InputError: the file is a link, not a regular file or over `MAX_PROMPTS_BYTES`.
        """
        try:
            data = untrusted.read_bytes(self.path.name, root=self.path.parent, max_bytes=MAX_PROMPTS_BYTES)
        except untrusted.UntrustedFileError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise InputError(exc.reason, path=self.path) from None
        return data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace").split("\n")

    def known(self) -> set[str]:
        """The ids stored so far, each checked against its message (`verify`).

        Raises:
            InputError: a line whose id is not its message's content id (naming the file and line).
        """
        if self._known is None:
            self._known = self.verify()
        return self._known

    def verify(self) -> set[str]:
        """The ids of the file's lines, each checked to be its message's content id (`message_id`): a folder that maps
        a known id to other text would show a forged prompt and keep the real one from being logged.

        Raises:
            InputError: a line whose id is not its message's content id, or that is not a stored message.
        """
        found: set[str] = set()
        for number, line in enumerate(self._lines(), start=1):
            if not line.strip():
                continue
            key, message = _stored_line(line)
            if key is None or message is None or message_id(message) != key:
                raise InputError("a stored message's id is not the content id of its text (a forged or damaged "
                                 "prompt log; not read)", path=self.path, line=number)
            found.add(key)
        return found

    def add(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        """Store the messages not stored yet (one flushed append) and return every message's id, in order."""
        with self._lock:
            return self._add(messages)

    def _add(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        known = self.known()
        ids, new = [], []
        for message in messages:
            key = message_id(message)
            ids.append(key)
            if key not in known:
                known.add(key)
                new.append(json.dumps({"id": key, "message": message}, ensure_ascii=True, separators=(",", ":")))
        if new:  # appended inside the run folder, never through a link
            try:
                untrusted.append(self.path.parent, self.path.name, ("\n".join(new) + "\n").encode("ascii"),
                                 mode=new_file_mode())
            except untrusted.UntrustedFileError as exc:
                raise InputError(exc.reason, path=self.path) from None
        return ids

    def read(self, ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Id -> message for ``ids`` (all when None); ids not stored are left out, as are unreadable lines."""
        wanted = set(ids) if ids is not None else None
        found: dict[str, dict[str, Any]] = {}
        for number, line in enumerate(self._lines(), start=1):
            key = line[len(_LINE_HEAD):len(_LINE_HEAD) + MESSAGE_ID_CHARS]
            if not line.startswith(_LINE_HEAD) or (wanted is not None and key not in wanted):
                continue
            key_read, message = _stored_line(line)
            if message is None:
                continue
            if key_read != key or message_id(message) != key:
                raise InputError(f"message {key}: the id is not the content id of its text (a forged or damaged "
                                 "prompt log; not shown)", path=self.path, line=number)
            found[key] = message
        return found

    def size(self) -> int:
        """The file's size in bytes (0 when missing, a link or not a regular file)."""
        try:
            info = self.path.lstat()
        except OSError:
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def repair(self) -> None:
        """Cut off a partial last line left by an interrupted append (through one descriptor, no link followed)."""
        try:
            untrusted.cut_partial_line(self.path.parent, self.path.name, max_bytes=MAX_PROMPTS_BYTES)
        except untrusted.UntrustedFileError as exc:
            raise InputError(exc.reason, path=self.path) from None
        self._known = None


def _complete_tail(tail: str) -> str | None:
    """The text after a JSONL file's last newline when it is a whole JSON value (a last line written without its
    newline), else None (nothing, or a partial line: an append cut off or still being written)."""
    if not tail.strip():
        return None
    try:
        json.loads(tail)
    except ValueError:
        return None
    return tail


def _committed_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each committed line of ``results.jsonl`` text: the non-blank lines before the last
    newline, and after it a whole JSON value without its newline (a partial line is no committed task)."""
    complete = text.rfind("\n") + 1
    lines = list(jsonl_lines(text[:complete]))
    tail = _complete_tail(text[complete:])
    if tail is not None:
        lines.append((text.count("\n") + 1, tail))
    return lines


def _stored_line(line: str) -> tuple[str | None, dict[str, Any] | None]:
    """The id and message of one ``prompts.jsonl`` line ((None, None) when it is not one)."""
    try:
        value = untrusted.parse_json(line)
    except untrusted.UntrustedFileError:
        return None, None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not isinstance(value.get("message"),
                                                                                                dict):
        return None, None
    return value["id"], value["message"]


RENAMED_KEYS: dict[tuple[str, ...], str] = {("config", "composition", "node_retries"): "retries"}
"""Settings renamed within log format 2 (path in ``config.json`` -> new name): a run folder written before a rename
reads with the new name (the value is unchanged)."""


def _rename_keys(data: Any) -> None:
    for path, new in RENAMED_KEYS.items():
        holder = data
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and path[-1] in holder and new not in holder:
            holder[new] = holder.pop(path[-1])


# --------------------------------------------------------------------------------------------- the folder
def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaf_changes(before: Any, after: Any, key: str) -> list[str]:
    """``key.path: was X, now Y`` for each leaf where two JSON values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for name in dict.fromkeys([*before, *after]):
            out += _leaf_changes(before.get(name), after.get(name), f"{key}.{name}" if key else str(name))
        return out
    return [] if before == after else [f"{key}: was {_short(before)}, now {_short(after)}"]


def setting_changes(before: StreamConfig, after: StreamConfig) -> list[str]:
    """The settings in which two recorded streams differ, each as ``config.key.path: was X, now Y`` (what only
    selects tasks is left out, as in `StreamConfig.differences`)."""
    out: list[str] = []
    for name in before.differences(after):
        out += _leaf_changes(before.model_dump(mode="json", include={name}),
                             after.model_dump(mode="json", include={name}), "config")
    return out


class RunFolder:
    """One run folder: read its files (one-line errors naming the file and line), write them, commit tasks.

    Args:
        path: the run folder (it need not exist yet).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        """The folder as given (shown to the user)."""
        self.root = self.path.absolute()
        """The folder every read and write goes through: absolute, so a change of the working folder elsewhere in the
        process (an in-process test-double episode acting meanwhile) cannot move it."""
        self._results_repaired = False
        """Whether `_repair_results` ran (before the first line this object appends)."""
        self.prompts = PromptStore(self.root / PROMPTS)
        """The run's messages and replies (`PromptStore`)."""

    @property
    def config_file(self) -> Path:
        return self.root / CONFIG

    @property
    def results_file(self) -> Path:
        return self.root / RESULTS

    @property
    def memory_dir(self) -> Path:
        return self.root / MEMORY

    @staticmethod
    def is_run(path: Path) -> bool:
        """Whether ``path`` holds a run (``config.json`` and ``results.jsonl``)."""
        return (path / CONFIG).is_file() and (path / RESULTS).is_file()

    def exists(self) -> bool:
        """Whether the run was started (its ``config.json`` exists)."""
        return self.config_file.is_file()

    # ----------------------------------------------------------------- reading
    def read_config(self) -> RunConfigLog:
        """The run's ``config.json``.

        Raises:
            InputError: not a run folder, or a config that is not JSON or not a run config (naming the field).
        """
        if not self.exists():
            raise InputError(f"not a run folder (no {CONFIG})", path=self.root)
        data = read_json(CONFIG, what="run config", root=self.root)
        version = data.get("format_version") if isinstance(data, dict) else None
        if version == 1:
            data = upgrade_v1_config(data)
        elif isinstance(version, int) and version > FORMAT_VERSION:
            raise InputError(f"run log format_version {version} is newer than this skilltransfer reads "
                             f"({FORMAT_VERSION}); upgrade skilltransfer", path=self.config_file)
        _rename_keys(data)
        try:
            return RunConfigLog.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"not a run config: {validation_message(exc, model=RunConfigLog)}",
                             path=self.config_file) from None

    def read_records(self) -> list[TaskRecord]:
        """The records of ``results.jsonl`` in file (stream) order; [] when it does not exist.

        Raises:
            InputError: a line that is not a `TaskRecord` (naming the file, line and field).
        """
        if not self.results_file.is_file():
            return []
        records = []
        text = read_text(RESULTS, what="results file", root=self.root, max_bytes=MAX_RESULTS_BYTES)
        for number, line in _committed_lines(text):
            try:
                records.append(TaskRecord.model_validate_json(line))
            except ValidationError as exc:
                raise InputError(validation_message(exc, model=TaskRecord), path=self.results_file,
                                 line=number) from None
        return records

    def committed(self) -> int:
        """How many tasks are committed (non-blank lines of ``results.jsonl``; 0 when unreadable)."""
        try:
            text = read_text(self.results_file, what="results file")
        except InputError:
            return 0
        return len(_committed_lines(text))

    def trajectory_file(self, task_id: str) -> str:
        """The trajectory file of a task, relative to the run folder."""
        return f"{TRAJECTORIES}/{safe_task_id(task_id)}.json"

    def artifacts_file(self, trajectory: str) -> str:
        """The artifacts file of a task (``artifacts/<its trajectory file name>``), relative to the run folder."""
        return f"{ARTIFACTS}/{Path(trajectory).name}"

    def read_trajectory(self, relative: str) -> TrajectoryLog:
        """A trajectory file (``relative`` to the run folder).

        Raises:
            InputError: the file is missing or not a trajectory.
        """
        path = self.root / relative
        if not path.is_file():
            raise InputError("trajectory file is missing", path=path)
        try:  # the path comes from results.jsonl: inside the run folder, no link followed
            return TrajectoryLog.model_validate_json(read_text(relative, what="trajectory", root=self.root))
        except ValidationError as exc:
            raise InputError(f"not a trajectory: {validation_message(exc, model=TrajectoryLog)}", path=path) from None

    def call_prompts(self, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Each logged call's prompt, reply and reasoning from `prompts`: ``{"messages": [...] | None, "reply": str |
        None, "reasoning": str | None}`` (None where the call recorded none, as in runs logged before prompts were
        kept, or an id is not stored)."""
        ids = {i for c in calls for i in [*(c.get("messages") or []), c.get("reply"), c.get("reasoning")]
               if isinstance(i, str)}
        stored = self.prompts.read(ids) if ids else {}
        out = []
        for call in calls:
            refs = call.get("messages")
            messages = [stored.get(i) for i in refs] if isinstance(refs, list) else None
            reply = stored.get(call["reply"]) if isinstance(call.get("reply"), str) else None
            thought = stored.get(call["reasoning"]) if isinstance(call.get("reasoning"), str) else None
            out.append({"messages": None if messages is None or None in messages else messages,
                        "reply": reply.get("content") if reply is not None else None,
                        "reasoning": thought.get("content") if thought is not None else None})
        return out

    def instructions(self, records: list[TaskRecord]) -> dict[str, str]:
        """Task id -> instruction, from the trajectories of ``records`` (missing files are left out).

        Raises:
            InputError: a trajectory file that is not JSON.
        """
        texts = {}
        for record in records:
            path = self.root / record.trajectory
            if not path.is_file():
                continue
            data = read_json(record.trajectory, what="trajectory", root=self.root)
            instruction = data.get("instruction") if isinstance(data, dict) else None
            if isinstance(instruction, str) and instruction.strip():
                texts[record.task_id] = instruction
        return texts

    # ----------------------------------------------------------------- writing
    def start(self, log: RunConfigLog) -> list[TaskRecord]:
        """Start or resume the run: write ``config.json`` (or check it against ``log``), finish or undo an
        interrupted memory commit, and return the committed records.

        A stream that extends the saved one (a larger limit) may resume, unless its library is filtered by utility
        over the stream; ``config.json`` then records the longer stream.

        Raises:
            InputError: the folder was started with other settings (naming which), or a broken config/results file.
        """
        if self.exists():
            self.refuse_links()
            self._check_resume(log)
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self._write(CONFIG, log.to_json())
        self._repair_results()
        records = self.read_records()
        self.prompts.repair()
        self.recover_memory({r.task_id for r in records})
        return records

    def refuse_links(self) -> None:
        """Refuse to resume a folder holding a symbolic link, FIFO, device or socket anywhere below it (a shared run
        folder whose ``prompts.jsonl``, ``trajectories/`` or ``memory`` is a link would have the run write wherever
        it points); every write then goes through `untrusted.write_atomic` / `untrusted.append`, below the folder.

        Raises:
            InputError: naming the first such entries.
        """
        _, left = trees.files(self.root, max_entries=1_000_000)
        if left:
            shown = "; ".join(left[:3]) + (f"; and {len(left) - 3} more" if len(left) > 3 else "")
            raise InputError(f"holds what a run folder never does ({shown}): a run folder with links or special "
                             "files is not resumed; copy its regular files to a new folder, or give another --out",
                             path=self.root)

    def _write(self, relative: str, text: str) -> None:
        """Replace a file below the run folder atomically, never through a link (`untrusted.write_atomic`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            untrusted.write_atomic(self.root, relative, text, mode=new_file_mode())
        except untrusted.UntrustedFileError as exc:
            raise InputError(exc.reason, path=self.root / relative) from None

    def _marker(self) -> str | None:
        """The task named by ``memory.next.task`` (None when missing or unreadable)."""
        try:
            return untrusted.read_text("memory.next.task", root=self.root, max_bytes=4096).strip()
        except untrusted.UntrustedFileError:
            return None

    def _resumable_config(self) -> RunConfigLog:
        before = self.read_config()
        if before.format_version != FORMAT_VERSION:
            raise InputError(f"run folder of log format_version {before.format_version} (an older skilltransfer) "
                             "cannot be resumed; show and report still read it; use another run folder",
                             path=self.config_file)
        return before

    def _check_resume(self, log: RunConfigLog) -> None:
        before = self._resumable_config()
        changed = setting_changes(before.config, log.config)
        keys = ("level", "skill_format", "agent", "induction", "prompt_ids", "embedder_id")
        changed += _leaf_changes(before.model_dump(mode="json", include=set(keys)),
                                 log.model_dump(mode="json", include=set(keys)), "")
        extends = log.task_ids[: len(before.task_ids)] == before.task_ids
        if not extends or (log.config.library_filter is not None and log.task_ids != before.task_ids):
            # a utility-filtered library depends on the whole stream, so it cannot be extended
            changed.append(f"task_ids: was {_short(before.task_ids)}, now {_short(log.task_ids)}")
        self._refuse(changed)
        if len(log.task_ids) > len(before.task_ids):
            extended = before.model_copy(update={"task_ids": log.task_ids, "config": log.config})
            self._write(CONFIG, extended.to_json())

    def check_settings(self, config: StreamConfig) -> None:
        """Refuse, before anything runs or is drawn, a stream whose settings differ from the ones this folder was
        started with (the rest is checked when the run starts).

        Raises:
            InputError: naming each differing setting with both values, and the flag that picks another folder.
        """
        if self.config_file.is_file():
            self._refuse(setting_changes(self._resumable_config().config, config.identity()))

    def _refuse(self, changed: list[str]) -> None:
        if changed:
            raise InputError(f"this run folder was started with different settings ({'; '.join(changed)}): give "
                             "another output folder (--out DIR), or rerun with the recorded settings, or delete the "
                             "folder",
                             path=self.config_file)

    def record_adaptations(self, changes: Mapping[str, str]) -> None:
        """Add the model's parameter changes learnt so far to ``config.json`` (rewritten only when they grew)."""
        before = self.read_config()
        merged = {**before.model_adaptations, **changes}
        if merged != before.model_adaptations:
            self._write(CONFIG, before.model_copy(update={"model_adaptations": merged}).to_json())

    def record_library_utility(self, ranking: LibraryUtility) -> None:
        """Add a ``library_filter`` stream's ranking of its library to ``config.json`` (`LibraryUtility`)."""
        before = self.read_config()
        if before.library_utility != ranking:
            self._write(CONFIG, before.model_copy(update={"library_utility": ranking}).to_json())

    def record_provenance(self, provenance: Mapping[str, Any]) -> None:
        """Replace ``config.json``'s provenance (rewritten only when it changed)."""
        before = self.read_config()
        if dict(provenance) != before.provenance:
            self._write(CONFIG, before.model_copy(update={"provenance": dict(provenance)}).to_json())

    def write_trajectory(self, relative: str, log: TrajectoryLog) -> None:
        """Write (or rewrite) a trajectory file atomically."""
        self._write(relative, log.model_dump_json(indent=1) + "\n")

    def log_calls(self, calls: Sequence[ModelCall]) -> list[dict[str, Any]]:
        """The calls as a trajectory logs them: their accounting, with their messages and reply stored in `prompts`
        and named by id (``messages``, ``reply``)."""
        messages: list[Mapping[str, Any]] = []
        for call in calls:
            messages += call.messages or []
            messages += [reply_message(call.reply)] if call.reply is not None else []
            messages += [reasoning_message(call.reasoning)] if call.reasoning else []
        ids = iter(self.prompts.add(messages))  # one append for all calls
        out = []
        for call in calls:
            data = call.to_dict()
            if call.messages is not None:
                data["messages"] = [next(ids) for _ in call.messages]
            if call.reply is not None:
                data["reply"] = next(ids)
            if call.reasoning:
                data["reasoning"] = next(ids)
            out.append(data)
        return out

    def write_artifacts(self, trajectory: str, artifacts: dict[str, Any]) -> None:
        """Write a task's artifacts record (`artifacts_file`) atomically."""
        self._write(self.artifacts_file(trajectory), json.dumps(artifacts, indent=1) + "\n")

    def commit(self, record: TaskRecord, memory: SkillStore | None, *,
               save_with_memory: Callable[[Path], None] | None = None) -> None:
        """Commit a finished task (its trajectory is written): memory snapshot (with the snapshot list,
        `skilltransfer.memory.snapshots`), results line, memory swap.

        ``save_with_memory`` writes what belongs to the memory (a lens stream's skill graph) into the snapshot
        folder, so it is committed (and recovered) with it."""
        if not self._results_repaired:
            self._repair_results()
        if memory is not None:
            memory.save(self.root / "memory.next")
            if save_with_memory is not None:
                save_with_memory(self.root / "memory.next")
            snapshots, archive = snapshot_texts(self.memory_dir, record.position, record.task_id, memory)
            self._write(f"memory.next/{SNAPSHOTS}", snapshots)
            self._write(f"memory.next/{SNAPSHOT_SKILLS}", archive)
            self._write("memory.next.task", record.task_id)
        self._append_result(record.model_dump_json() + "\n")
        if memory is not None:
            self.swap_memory()

    def _append_result(self, line: str) -> None:
        """Append a task's line to ``results.jsonl`` in one write, never through a link; a write that fails part-way
        (a full disk) leaves no partial line behind."""
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            untrusted.append(self.root, RESULTS, line.encode("utf-8"), mode=new_file_mode())
        except untrusted.UntrustedFileError as exc:
            raise InputError(exc.reason, path=self.results_file) from None
        except OSError:
            with contextlib.suppress(OSError, untrusted.UntrustedFileError):
                untrusted.cut_partial_line(self.root, RESULTS, max_bytes=MAX_RESULTS_BYTES)
            raise

    def _repair_results(self) -> None:
        """Cut off a partial last line of ``results.jsonl`` (an append cut off: no committed task), so the next line
        starts a line of its own; a last line that is a whole record without its newline gets the newline."""
        text = ""
        if self.results_file.is_file():
            text = read_text(RESULTS, what="results file", root=self.root, max_bytes=MAX_RESULTS_BYTES)
        tail = text[text.rfind("\n") + 1:]
        if tail and _complete_tail(tail) is not None:
            self._append_result("\n")
        elif tail:
            try:
                untrusted.cut_partial_line(self.root, RESULTS, max_bytes=MAX_RESULTS_BYTES)
            except untrusted.UntrustedFileError as exc:
                raise InputError(exc.reason, path=self.results_file) from None
        self._results_repaired = True

    def swap_memory(self) -> None:
        """Make the committed snapshot the run's memory."""
        marker = self._marker()
        self.recover_memory({marker} if marker is not None else set())

    def recover_memory(self, finished: set[str]) -> None:
        """Finish an interrupted memory commit whose task is in ``finished``, or discard its snapshot."""
        current, nxt = self.memory_dir, self.root / "memory.next"
        old, marker = self.root / "memory.old", self.root / "memory.next.task"
        if nxt.exists():
            committed = self._marker() in finished
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

