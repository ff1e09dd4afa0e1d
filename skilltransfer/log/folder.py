"""`RunFolder`: every read and write of one run folder, and the names of its files (the layout, the order a task
is committed in and the formats read: `skilltransfer.log`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from skilltransfer import untrusted
from skilltransfer.errors import InputError, validation_message
from skilltransfer.log.legacy import upgrade_v1_config
from skilltransfer.log.numbers import check_numbers
from skilltransfer.log.prompts import PromptStore, reasoning_message, reply_message
from skilltransfer.log.provenance import merged
from skilltransfer.log.records import (
    FORMAT_VERSION,
    LibraryUtility,
    RunConfigData,
    RunConfigLog,
    TaskRecord,
    TrajectoryLog,
)
from skilltransfer.log.steps import ModelCall
from skilltransfer.protocols import SkillStore
from skilltransfer.util import trees
from skilltransfer.util.files import jsonl_lines, new_file_mode, parse_json_line, read_json, read_text

CONFIG = "config.json"
RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories"
ARTIFACTS = "artifacts"
MEMORY = "memory"
PROMPTS = "prompts.jsonl"
PLANS = "plans"
"""A coordinated stream's frozen plans, unless its ``plans`` setting names a shared folder."""
MAX_RESULTS_BYTES = 256 << 20
"""The largest results.jsonl read (a run folder given to show/report/judge/resume may be anyone's)."""
ConfigLogT = TypeVar("ConfigLogT", bound=RunConfigLog[Any, Any, Any])


def memory_folder(path: str | Path) -> Path:
    """The skill memory folder of ``path``: a run folder's ``memory/`` when it has one, else ``path`` itself (a
    memory or library folder)."""
    path = Path(path)
    return path / MEMORY if (path / MEMORY).is_dir() else path


def safe_task_id(task_id: str) -> str:
    """A file-name-safe form of a task id ('/' and other unsafe characters replaced, plus a hash if changed)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).strip(".") or "task"
    return safe if safe == task_id else f"{safe}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


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


TRAJECTORY_CONTENT = frozenset({("coordination", "outputs")})
"""Parts of a trajectory that hold a model's or an agent's values, not the toolkit's numbers (not range-checked)."""


def parse_trajectory(text: str | bytes, path: Path) -> TrajectoryLog:
    """A trajectory file's text as a `TrajectoryLog`: at most `untrusted.MAX_DEPTH` deep, every number the toolkit
    wrote finite and in range (`skilltransfer.log.numbers`).

    Raises:
        InputError: not JSON, a number out of range (naming the field) or not a trajectory (naming the file).
    """
    try:
        data = untrusted.parse_json(text, path)
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"not a trajectory: {exc.reason}", path=exc.shown) from None
    check_numbers(data, path, skip=TRAJECTORY_CONTENT)
    try:
        return TrajectoryLog.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"not a trajectory: {validation_message(exc, model=TrajectoryLog)}", path=path) from None


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
    def read_config(self) -> RunConfigData:
        """The run's ``config.json``, its settings as JSON objects (typed: `skilltransfer.settings.read_run_settings`).

        Raises:
            InputError: not a run folder, or a config that is not JSON or not a run config (naming the field).
        """
        return self.read_config_as(RunConfigData)

    def read_config_as(self, schema: type[ConfigLogT]) -> ConfigLogT:
        """The run's ``config.json`` validated as ``schema`` (a `RunConfigLog` with its settings typed), format 1
        upgraded, settings renamed since read by their new names.

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
        check_numbers(data, self.config_file)
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            raise InputError(f"not a run config: {validation_message(exc, model=schema)}",
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
            value = check_numbers(parse_json_line(line, path=self.results_file, number=number), self.results_file,
                                  number)
            try:
                records.append(TaskRecord.model_validate(value))
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

    def read_artifacts(self, trajectory: str) -> Any:
        """A task's artifacts record (`artifacts_file` of its ``trajectory``) as JSON (a mapping when the toolkit
        wrote it: `skilltransfer.envs.artifacts.episode_artifacts`); None when the run kept none (logged before
        artifacts were kept). Read inside the run folder, no link followed (a link there is refused, not skipped).

        Raises:
            InputError: the file is a link, not a regular file, too large or not JSON.
        """
        relative = self.artifacts_file(trajectory)
        if not os.path.lexists(self.root / relative):
            return None
        return read_json(relative, what="artifacts file", root=self.root)

    def read_trajectory(self, relative: str) -> TrajectoryLog:
        """A trajectory file (``relative`` to the run folder).

        Raises:
            InputError: the file is missing, not a regular file inside the folder (a link, a FIFO, a path leading out:
                named), or not a trajectory.
        """
        path = self.root / relative
        if not os.path.lexists(path):
            raise InputError("trajectory file is missing", path=path)
        # the path comes from results.jsonl: inside the run folder, no link followed
        return parse_trajectory(read_text(relative, what="trajectory", root=self.root), path)

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
    def start(self, log: RunConfigLog[Any, Any, Any]) -> list[TaskRecord]:
        """Start or resume the run: write ``config.json`` (a folder that exists keeps its own: check its settings
        against ``log`` first, `skilltransfer.settings.check_resume`), finish or undo an interrupted memory commit,
        and return the committed records.

        Raises:
            InputError: the folder holds a link or special file, or a broken config/results file.
        """
        if self.exists():
            self.refuse_links()
        else:
            self.write_config(log)
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

    def write_config(self, log: RunConfigLog[Any, Any, Any]) -> None:
        """Write ``config.json`` (`RunConfigLog.to_json`) atomically."""
        self._write(CONFIG, log.to_json())

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

    def merge_provenance(self, now: Mapping[str, Any]) -> None:
        """Add ``now`` (this invocation's provenance) to ``config.json``'s (`skilltransfer.log.provenance.merged`: its
        served models, and the software a resume ran with where it differs); a folder that records none takes
        ``now``."""
        self.record_provenance(merged(self.read_config().provenance or now, now))

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
               save_with_memory: Callable[[Path], None] | None = None,
               memory_files: Mapping[str, str] | None = None) -> None:
        """Commit a finished task (its trajectory is written): memory snapshot, results line, memory swap.

        ``save_with_memory`` writes what belongs to the memory (a lens stream's skill graph) into the snapshot
        folder, and ``memory_files`` (name -> text: the snapshot list, `skilltransfer.memory.snapshots`) are written
        there, so they are committed (and recovered) with it."""
        if not self._results_repaired:
            self._repair_results()
        if memory is not None:
            memory.save(self.root / "memory.next")
            if save_with_memory is not None:
                save_with_memory(self.root / "memory.next")
            for name, text in (memory_files or {}).items():
                self._write(f"memory.next/{name}", text)
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
