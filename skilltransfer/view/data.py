"""What the viewer shows, as JSON-ready dicts read from run folders through the run log (the format is the contract).

`Catalog` finds the runs under the paths it is given (run folders, grid outputs, report folders), keys each by a hash
of its path, and builds three payloads that the local server and the static export both serve:

- `Catalog.index`: every run's summary row (its condition as ``report`` labels it among the viewer's runs, model,
  preset, env, the library it read and that library's utility when the run has it, tasks, success with CI, tokens,
  latency), the grids (``grid.json`` / ``status.json``) and report figures (``figures/*.png``) found, and what could
  not be read;
- `Catalog.run`: one run's summary, task list, transfer events and skill library (with each skill's retrievals and
  its utility: from a ``scores.json`` of ``skilltransfer score --out`` in the run folder, and as a ``library_filter``
  run ranked its library, from ``config.json``'s ``library_utility``);
- `Catalog.task`: one task's record and trajectory, its calls' prompts (the messages they name in ``prompts.jsonl``),
  which calls made which step and how the task used each skill a retrieval step shows (both as ``show --task``
  reads them: `skilltransfer.report.trajectory`), and its code as highlighting tokens;
- `Catalog.report`: one report folder's tables (`skilltransfer.view.reports`; the index lists the folders).

Everything in a run folder is untrusted: files are read through `skilltransfer.untrusted` (regular files
inside the run folder only, no link below it followed, size-capped), and the payloads carry text (the page renders it
as text, never as markup).
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import statistics
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.log import (
    CONFIG,
    MEMORY,
    PROMPTS,
    RESULTS,
    ActionStep,
    RetrievalStep,
    RunFolder,
    TaskRecord,
    parse_trajectory,
    read_steps,
)
from skilltransfer.report.events import LIBRARY, best_retrievals, induced_skills, transfer_events
from skilltransfer.report.runs import RunLog, label_runs
from skilltransfer.report.summary import summarize_run, summary_rows
from skilltransfer.report.trajectory import retrieval_uses, step_calls
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.util import trees
from skilltransfer.view.highlight import python_tokens
from skilltransfer.view.reports import find_reports, report_payload

MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest run-log file the viewer reads (a trajectory, results, prompts or memory file)."""
MAX_FIGURES = 60
MAX_FIGURE_BYTES = 16 << 20
"""The largest figure shown (report figures are a few hundred KiB)."""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCORES = "scores.json"
"""A skill score report (``skilltransfer score RUN/memory --tasks ... --out RUN/scores.json``) read for utility."""


class UnsafeFile(InputError):
    """A run-log file the viewer refuses to read (a path or link out of the run folder, not a regular file, too
    large)."""


def _refusal(exc: untrusted.UntrustedFileError) -> InputError:
    """A missing file is not found (404); anything else is refused (403)."""
    return InputError(str(exc)) if exc.errno == errno.ENOENT else UnsafeFile(str(exc))


def check_file(root: Path, relative: str | Path) -> None:
    """Refuse ``root/relative`` unless it is a regular file inside ``root`` reached without following a link
    (`skilltransfer.untrusted`) and at most `MAX_FILE_BYTES`.

    Raises:
        UnsafeFile: it leads out of the folder, through a link, to something not a regular file, or is too large.
        InputError: it is missing.
    """
    try:
        fd, _ = untrusted.open_regular(Path(relative).as_posix(), root=root, max_bytes=MAX_FILE_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise _refusal(exc) from None
    os.close(fd)


def read_file(root: Path, relative: str | Path) -> bytes:
    """The bytes of ``root/relative`` under the rules of `check_file`."""
    try:
        return untrusted.read_bytes(Path(relative).as_posix(), root=root, max_bytes=MAX_FILE_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise _refusal(exc) from None


def _key(prefix: str, path: Path) -> str:
    return prefix + hashlib.sha1(str(path).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class RunEntry:
    """A run folder found under the viewer's paths."""

    key: str
    label: str
    """The folder's path as shown: relative to the parent of the path it was found under."""
    path: Path
    grid: str | None
    """The label of the grid output folder (with ``grid.json``) holding it, if any."""


@dataclass(frozen=True)
class FigureEntry:
    key: str
    label: str
    path: Path


def _signature(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            stat = path.stat()
            out.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            out.append((0, -1))
    return tuple(out)


class Catalog:
    """The runs under ``paths``, read on every call (a running stream's new tasks show on reload).

    Args:
        paths: run folders or folders holding them (grid outputs, report folders), searched recursively.

    Raises:
        InputError: a path does not exist.
    """

    def __init__(self, paths: Sequence[str | Path]) -> None:
        if not paths:
            raise InputError("give at least one run folder or folder of runs")
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            if not path.exists():
                raise InputError("no such run folder", path=path)
        self._lock = threading.Lock()
        self._summaries: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._logs: dict[str, tuple[Any, RunLog]] = {}
        self._labelled: dict[str, dict[str, Any]] = {}
        self._labelling = threading.Lock()
        """Held while labelling (`label_runs` labels the cached run logs in place)."""
        """Key -> labels as the last `index` (or a run page opened first) gave them."""
        self._found: dict[str, RunEntry | FigureEntry] = {}
        """Key -> run or figure as last scanned (a key not found is looked up by scanning again)."""

    # ----------------------------------------------------------------- finding runs
    def scan(self) -> tuple[list[RunEntry], list[FigureEntry]]:
        """The run folders and report figures under the paths, in path order."""
        runs: dict[Path, RunEntry] = {}
        figures: dict[Path, FigureEntry] = {}
        labels: set[str] = set()
        for given in self.paths:
            root = given.resolve()
            base = root.parent
            candidates = [root] if RunFolder.is_run(root) else sorted(
                c.parent for c in trees.find(root, lambda name: name == CONFIG) if RunFolder.is_run(c.parent))
            for path in candidates:
                path = path.resolve()
                if path in runs or not path.is_relative_to(root):
                    continue
                label = path.relative_to(base).as_posix()
                while label in labels:
                    label += "'"
                labels.add(label)
                grid = next((p for p in [path, *path.parents] if (p / "grid.json").is_file() and p.is_relative_to(
                    root)), None)
                runs[path] = RunEntry(_key("r", path), label, path,
                                      grid.relative_to(base).as_posix() if grid is not None else None)
            pngs = [root] if root.suffix == ".png" else [
                p for p in trees.find(root, lambda name: name.endswith(".png")) if p.parent.name == "figures"
            ] if root.is_dir() else []
            for png in pngs:
                png = png.resolve()
                if png.is_relative_to(root) and png not in figures and len(figures) < MAX_FIGURES and _is_png(png):
                    figures[png] = FigureEntry(_key("f", png), png.relative_to(base).as_posix(), png)
        found: dict[str, RunEntry | FigureEntry] = {e.key: e for e in runs.values()}
        found.update((e.key, e) for e in figures.values())
        with self._lock:
            self._found = found
        return list(runs.values()), list(figures.values())

    def _lookup(self, key: str) -> RunEntry | FigureEntry | None:
        with self._lock:
            found = self._found.get(key)
        if found is None:
            self.scan()
            with self._lock:
                found = self._found.get(key)
        return found

    def find(self, key: str) -> RunEntry:
        """The run with this key (as last scanned; scanned again for a key not seen).

        Raises:
            InputError: no run has it.
        """
        found = self._lookup(key)
        if not isinstance(found, RunEntry):
            raise InputError(f"no run {key!r} among the viewer's paths")
        return found

    def figure(self, key: str) -> Path:
        """The figure file with this key.

        Raises:
            InputError: no figure has it.
        """
        found = self._lookup(key)
        if not isinstance(found, FigureEntry):
            raise InputError(f"no figure {key!r}")
        return found.path

    # ----------------------------------------------------------------- index
    def index(self) -> dict[str, Any]:
        """Every run's summary row, the grids, the report figures and the problems met."""
        runs, figures = self.scan()
        rows, problems = [], []
        for entry in runs:
            try:
                rows.append(self._row(entry))
            except (InputError, OSError, ValueError) as exc:
                problems.append({"path": entry.label, "error": str(exc)})
        labels = self._labels(runs)
        for row in rows:
            row.update(labels.get(row["key"], {}))
        grids: dict[str, dict[str, Any]] = {}
        for entry in runs:
            if entry.grid is not None and entry.grid not in grids:
                grids[entry.grid] = _grid_info(entry, self.paths)
        return {"generated": datetime.now(UTC).isoformat(timespec="seconds"),
                "paths": [str(p) for p in self.paths], "runs": rows, "grids": list(grids.values()),
                "figures": [{"key": f.key, "label": f.label} for f in figures], "problems": problems,
                "reports": [{"key": r.key, "label": r.label} for r in find_reports(self.paths)]}

    def report(self, key: str) -> dict[str, Any]:
        """One report folder's page (`skilltransfer.view.reports`).

        Raises:
            InputError: no report folder under the paths has this key, or its report.json cannot be read.
        """
        entry = next((r for r in find_reports(self.paths) if r.key == key), None)
        if entry is None:
            raise InputError(f"no report {key!r} among the viewer's paths")
        return report_payload(entry)

    def _summary(self, entry: RunEntry) -> dict[str, Any]:
        """The run's `RunSummary` as a dict, cached until its config or results change."""
        folder = RunFolder(entry.path)
        check_file(entry.path, CONFIG)
        if folder.results_file.exists():
            check_file(entry.path, RESULTS)
        signature = _signature(folder.config_file, folder.results_file)
        with self._lock:
            cached = self._summaries.get(entry.key)
        if cached is not None and cached[0] == signature:
            return cached[1]
        summary = summarize_run(entry.path, n_resamples=2000)
        data = {**summary.to_dict(), "rows": [list(r) for r in summary_rows(summary)]}
        with self._lock:
            self._summaries[entry.key] = (signature, data)
        return data

    def _run_log(self, entry: RunEntry) -> RunLog:
        """The run as ``report`` loads it (config and records), cached until its config or results change."""
        folder = RunFolder(entry.path)
        signature = _signature(folder.config_file, folder.results_file)
        with self._lock:
            cached = self._logs.get(entry.key)
        if cached is not None and cached[0] == signature:
            return cached[1]
        check_file(entry.path, CONFIG)
        if folder.results_file.exists():
            check_file(entry.path, RESULTS)
        run = RunLog(entry.path, read_run_settings(folder), sorted(folder.read_records(), key=lambda r: r.position))
        with self._lock:
            self._logs[entry.key] = (signature, run)
        return run

    def _labels(self, entries: Iterable[RunEntry]) -> dict[str, dict[str, Any]]:
        """Key -> the run's labels as ``report`` gives them over these runs (`label_runs`, the one definition: a run
        with no finished task, which no report holds, labelled alone): ``condition``, ``env_label``."""
        logs: dict[str, RunLog] = {}
        for entry in entries:
            try:
                logs[entry.key] = self._run_log(entry)
            except (InputError, OSError, ValueError):
                continue  # the row's own reading names the problem
        with self._labelling:
            label_runs([run for run in logs.values() if run.records])
            for run in logs.values():
                if not run.records:
                    run.harness_differs, run.model_tags, run.condition_tags = None, "", ""
            labels = {key: {"condition": run.condition, "env_label": run.env} for key, run in logs.items()}
        with self._lock:
            self._labelled = labels
        return labels

    def _row(self, entry: RunEntry) -> dict[str, Any]:
        s = self._summary(entry)
        config = _read_json(entry.path, CONFIG)
        stream = _dict(config.get("config"))
        n = max(int(s["finished"]), 1)
        return {"key": entry.key, "label": entry.label, "grid": entry.grid, "run": s["run"],
                "condition": s["condition"], "model": s["model"], "env": s["env"],
                "preset": _label(s.get("harness")) or _preset(config), "harness": s.get("harness") or None,
                "settings": s["settings"], "finished": s["finished"], "planned": s["planned"],
                "success": s["success"], "ci": list(s["success_ci"]), "mean_reward": s["mean_reward"],
                "tokens": s["prompt_tokens"] + s["completion_tokens"],
                "tokens_per_task": (s["prompt_tokens"] + s["completion_tokens"]) / n,
                "latency_total_s": s["latency_total_s"], "latency_mean_s": s["latency_mean_s"],
                "model_calls": s["model_calls"], "memory_size": s["memory_size"],
                "transfers": sum(e["kind"] != LIBRARY for e in s["transfers"]),
                "library_transfers": sum(e["kind"] == LIBRARY for e in s["transfers"]),
                "cost_usd": s["cost_usd"],
                "exit_status": s["exit_status"], "reuse": stream.get("reuse"), "coordination": stream.get(
                    "coordination"), **self._library(entry)}

    def _library(self, entry: RunEntry) -> dict[str, Any]:
        """The skills a run read (`StreamConfig.skills_read_label`, as the report's tables name them; None without a
        skill memory) and its utility when the run has it (`library_utility`)."""
        config = self._run_log(entry).log.config
        return {"library": config.skills_read_label() if config.has_memory else None,
                "library_utility": library_utility(entry.path, self._run_log(entry))}

    # ----------------------------------------------------------------- one run
    def run(self, key: str) -> dict[str, Any]:
        """One run: summary rows, config, tasks (finished and not), transfer events and the skill library.

        Raises:
            InputError: unknown key, or a run folder that cannot be read.
        """
        entry = self.find(key)
        folder = RunFolder(entry.path)
        summary = self._summary(entry)
        config = _read_json(entry.path, CONFIG)
        records = folder.read_records()
        tasks = [_task_row(r) for r in records]
        done = {r.task_id for r in records}
        task_ids = _list(config.get("task_ids"))
        for position, task_id in enumerate(task_ids):
            if isinstance(task_id, str) and task_id not in done:
                tasks.append({"position": position, "task_id": task_id, "finished": False,
                              "status": _trajectory_status(folder, task_id)})
        transfers = transfer_edges(records, read_run_settings(folder).config.library_event_source())
        skills, skills_error = _skills(entry.path, records, transfers, self._run_log(entry))
        with self._lock:
            labels = self._labelled.get(entry.key)
        if labels is None:  # a run page opened before the runs page: label it among all runs
            labels = self._labels(self.scan()[0]).get(entry.key, {})
        return {"key": entry.key, "label": entry.label, "grid": entry.grid, "path": str(entry.path),
                "summary": summary["rows"], "run": summary["run"],
                "condition": labels.get("condition", summary["condition"]), **self._library(entry),
                "model": summary["model"], "env": summary["env"],
                "preset": _label(summary.get("harness")) or _preset(config), "harness": summary.get("harness") or None,
                "success": summary["success"], "ci": list(summary["success_ci"]), "finished": summary["finished"],
                "planned": summary["planned"], "cost_usd": summary["cost_usd"], "config": config, "tasks": tasks,
                "transfers": transfers,
                "skills": skills, "skills_error": skills_error,
                "prompts_bytes": folder.prompts.size()}

    # ----------------------------------------------------------------- one task
    def task(self, key: str, position: int) -> dict[str, Any]:
        """One task's record and trajectory with its prompts, step -> calls, step -> skill uses and code tokens.

        Raises:
            InputError: unknown run or position, or a trajectory that cannot be read.
        """
        entry = self.find(key)
        folder = RunFolder(entry.path)
        records = folder.read_records()
        record = next((r for r in records if r.position == position), None)
        config = _read_json(entry.path, CONFIG)
        task_ids = _list(config.get("task_ids"))
        if record is not None:
            relative = record.trajectory
        elif 0 <= position < len(task_ids) and isinstance(task_ids[position], str):
            relative = folder.trajectory_file(task_ids[position])
        else:
            raise InputError(f"no task at position {position} in this run", path=entry.path)
        trajectory = parse_trajectory(read_file(entry.path, relative), entry.path / relative)
        calls = trajectory.calls
        ids = {i for c in calls for i in [*(c.get("messages") or []), c.get("reply"), c.get("reasoning")]
               if isinstance(i, str)}
        messages: dict[str, Any] = {}
        if ids and folder.prompts.path.exists():
            check_file(entry.path, PROMPTS)
            messages = folder.prompts.read(ids)
        recorded = any(isinstance(c.get("messages"), list) for c in calls)
        steps = read_steps(trajectory.steps, path=entry.path / relative)
        code = {str(i): python_tokens(step.action) for i, step in enumerate(steps)
                if isinstance(step, ActionStep) and step.action is not None and step.action.strip()}
        data = trajectory.model_dump(mode="json", exclude={"contexts"} if recorded else set())
        return {"key": entry.key, "position": position, "task_id": trajectory.task_id,
                "record": record.model_dump(mode="json") if record is not None else None,
                "trajectory": data, "messages": messages, "prompts_recorded": recorded,
                "step_calls": {str(k): v for k, v in step_calls(steps, calls).items()},
                "uses": {str(i): uses for i, step in enumerate(steps)
                         if isinstance(step, RetrievalStep) and (uses := retrieval_uses(step, record))},
                "code": code}


# --------------------------------------------------------------------------------------------- helpers
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _read_json(root: Path, relative: str) -> dict[str, Any]:
    try:
        data = untrusted.parse_json(read_file(root, relative), root / relative)
    except untrusted.UntrustedFileError as exc:
        raise InputError(str(exc)) from None
    return data if isinstance(data, dict) else {}


def _is_png(path: Path) -> bool:
    """Whether ``path`` is a regular PNG file under `MAX_FIGURE_BYTES` (a FIFO or link is not; never blocks)."""
    try:
        fd, _ = untrusted.open_regular(path.name, root=path.parent, max_bytes=MAX_FIGURE_BYTES)
    except untrusted.UntrustedFileError:
        return False
    try:
        return os.pread(fd, 8, 0) == PNG_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


def read_figure(path: Path) -> bytes:
    """A figure's bytes: a regular file, not through a link, at most `MAX_FIGURE_BYTES`.

    Raises:
        UnsafeFile: anything else (a FIFO swapped in, a link, a file grown too large).
    """
    try:
        return untrusted.read_bytes(path.name, root=path.parent, max_bytes=MAX_FIGURE_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise UnsafeFile(str(exc)) from None


def _label(harness: Any) -> str | None:
    """The preset part of a summary's harness line ("small-model: guard, ..." -> "small-model")."""
    return harness.split(": ", 1)[0] if isinstance(harness, str) and harness else None


def _preset(config: dict[str, Any]) -> str | None:
    """The harness preset the stream ran with, wherever the config records one, for runs whose summary names none
    (None when it does not)."""
    stream = _dict(config.get("config"))
    for holder in (stream, stream.get("agent"), config.get("agent"), config):
        if isinstance(holder, dict):
            for name in ("preset", "harness_preset", "harness"):
                value = holder.get(name)
                if isinstance(value, str):
                    return value
    return None


def _grid_info(entry: RunEntry, paths: Iterable[Path]) -> dict[str, Any]:
    root = next((p for p in [entry.path, *entry.path.parents] if (p / "grid.json").is_file()), entry.path)
    info: dict[str, Any] = {"label": entry.grid, "name": None, "streams": {}}
    try:
        grid = _read_json(root, "grid.json")
        spec = _dict(grid.get("spec")) or grid
        info["name"] = spec.get("name") if isinstance(spec.get("name"), str) else None
        if (root / "status.json").is_file():
            status = _read_json(root, "status.json")
            streams = _dict(status.get("streams"))
            info["streams"] = {str(k): v.get("state") for k, v in streams.items() if isinstance(v, dict)}
            info["updated"] = status.get("updated")
    except InputError as exc:
        info["error"] = str(exc)
    return info


def _task_row(record: TaskRecord) -> dict[str, Any]:
    retrieved = [{"skill_id": hit.skill_id, "name": hit.name, "score": hit.score, "source_task_id": hit.source_task_id,
                  "source_position": hit.source_position, "source": hit.source, "library": hit.library}
                 for hit in best_retrievals(record.retrieved).values()]  # one row per skill: its best score
    return {"position": record.position, "task_id": record.task_id, "finished": True, "reward": record.reward,
            "success": record.success, "exit_status": record.exit_status, "steps": record.steps,
            "subtasks": record.subtasks, "tokens": record.prompt_tokens + record.completion_tokens,
            "model_calls": record.model_calls, "cost_usd": record.cost_usd, "latency_s": record.latency_s,
            "difficulty": record.difficulty,
            "template": record.template, "retrieved": retrieved,
            "picks": None if record.picks is None else [
                {"skill_id": p.skill_id, "name": p.name, "kind": p.kind, "rank": p.rank,
                 "right": None if record.relevant_skills is None else p.skill_id in record.relevant_skills}
                for p in record.picks],
            "induced": [{"status": i.status, "skill_id": i.skill_id, "skill_name": i.skill_name,
                         "target_id": i.target_id, "subtask_index": i.subtask_index} for i in record.induced]}


def _trajectory_status(folder: RunFolder, task_id: str) -> str:
    """"running" or "aborted" for a task with a partial trajectory on disk, else "pending"."""
    try:
        status = json.loads(read_file(folder.path, folder.trajectory_file(task_id))).get("status")
    except (InputError, ValueError, AttributeError):
        return "pending"
    return status if status in ("running", "aborted") else "pending"


def transfer_edges(records: list[TaskRecord], library: str | None = None) -> list[dict[str, Any]]:
    """The run's transfer events (`skilltransfer.report.events.transfer_events`, the one definition; ``library``:
    the run's `library_event_source`) as edges source -> target, with the retrieval's best score and the target's
    outcome. A library event's ``source`` is None and ``library`` names where the skill came from."""
    reward = {r.position: r.reward for r in records}
    return [{"kind": e.kind, "source": e.source_position, "source_task_id": e.source_task_id,
             "library": e.source or None, "target": e.target_position, "target_task_id": e.target_task_id,
             "skill_id": e.skill_id, "skill_name": e.skill_name, "score": e.score, "success": e.target_success,
             "reward": reward[e.target_position]}
            for e in transfer_events(records, library)]


def _scores(root: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The rows of the run folder's `SCORES` by skill id, and the report's other fields ({}, {} when there is none or
    it cannot be read)."""
    if not (root / SCORES).is_file():
        return {}, {}
    try:
        report = _read_json(root, SCORES)
    except InputError:
        return {}, {}
    rows = report.get("skills")
    return ({str(row.get("id")): row for row in rows if isinstance(row, dict)} if isinstance(rows, list) else {},
            {k: v for k, v in report.items() if k != "skills"})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value) else None


def library_utility(root: Path, run: RunLog) -> dict[str, Any] | None:
    """The utility of the library a run read, when the run has it (never computed here): as a ``library_filter`` run
    ranked its library (``config.json``'s ``library_utility``: the mean over the skills it kept and over the whole
    library), else from a `SCORES` in the run folder (``skilltransfer score RUN/memory --tasks ... --out``: the mean
    over its skills); None otherwise."""
    ranking = run.log.library_utility
    if ranking is not None:  # a value that is no finite number (a hand-edited file) is left out of the means
        utility = {i: v for i, v in ranking.utility.items() if _number(v) is not None}
        kept = [utility[i] for i in ranking.kept if i in utility]
        return {"source": "library_filter", "filter": run.log.config.library_filter,
                "mean": statistics.fmean(kept) if kept else None, "skills": len(ranking.kept),
                "library_mean": statistics.fmean(utility.values()) if utility else None,
                "library_skills": len(ranking.utility), "tasks": ranking.tasks}
    rows, report = _scores(root)
    values = [v for row in rows.values() if (v := _number(row.get("utility"))) is not None]
    if not values:
        return None
    return {"source": SCORES, "mean": statistics.fmean(values), "skills": len(values),
            "tasks": report.get("n_tasks") if isinstance(report.get("n_tasks"), int) else None}


def _skills(root: Path, records: list[TaskRecord], transfers: list[dict[str, Any]],
            run: RunLog) -> tuple[list[dict[str, Any]], str | None]:
    """The run's final skill memory, each skill with its retrievals, scores (`SCORES`) and utility as a
    ``library_filter`` run ranked it; (skills, why none could be read)."""
    from skilltransfer.memory.library import MANIFEST, SKILLS_JSONL, read_jsonl

    if not (root / MEMORY / MANIFEST).is_file():
        return [], None
    try:  # a memory may hold two skills of one name (a library import would refuse them)
        library = [skill for skill, _ in read_jsonl(f"{MEMORY}/{SKILLS_JSONL}", root=root)]
    except InputError as exc:
        return [], str(exc)
    scores, _ = _scores(root)
    ranked = run.log.library_utility.utility if run.log.library_utility is not None else {}
    retrieved_by: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        for skill_id, hit in best_retrievals(record.retrieved).items():
            retrieved_by.setdefault(skill_id, []).append(
                {"position": record.position, "task_id": record.task_id, "score": hit.score,
                 "success": record.success, "reward": record.reward, "subtask_index": hit.subtask_index})
    induced_at: dict[str, dict[str, Any]] = {}
    for record in records:
        for induced_id, induction in induced_skills(record):
            induced_at.setdefault(induced_id, {"position": record.position, "task_id": record.task_id,
                                             "status": induction.status})
    transferred = {(e["skill_id"], e["target"]): e["kind"] for e in transfers}
    effects = _effects(records)
    out = []
    for skill in library:
        uses = retrieved_by.get(skill.id, [])
        for use in uses:
            kind = transferred.get((skill.id, use["position"]))
            use["transfer"] = kind is not None
            use["transfer_kind"] = kind
        score = scores.get(skill.id)
        out.append({"id": skill.id, "name": skill.name, "description": skill.description, "body": skill.body,
                    "format": skill.format, "level": skill.level, "provenance": skill.provenance.model_dump(),
                    "usage": skill.usage.model_dump(), "inputs": skill.inputs, "outputs": skill.outputs,
                    "signature": skill.code.signature if skill.code is not None else None,
                    "extra": skill.extra, "resources": sorted(skill.resources),
                    "code": python_tokens(skill.body) if skill.format == "code" else None,
                    "induced_at": induced_at.get(skill.id), "retrieved_by": uses, "effect": effects.get(skill.id),
                    "scores": {k: score.get(k) for k in ("utility", "specificity", "abstractness", "best_match",
                                                         "off_domain")} if score is not None else None,
                    "library_utility": _number(ranked.get(skill.id))})
    return out, None


def _effects(records: list[TaskRecord]) -> dict[str, dict[str, Any]]:
    """Each skill's causal effects from the run's masking draws (`skilltransfer.metrics.effects`; the report's
    ``skill_effects`` table over this run alone): per outcome [estimate, CI low, CI high]; none without draws."""
    from skilltransfer.metrics.effects import skill_effects
    from skilltransfer.report.effects import task_draws

    rows = skill_effects([task_draws(r) for r in records if r.exposures])
    return {row.skill_id: {"candidates": row.candidates, "shown": row.shown, "withheld": row.withheld,
                           "p_harm": row.p_harm, "harmful": row.harmful,
                           **{name: [e.estimate, e.low, e.high] for name, e in row.effects.items()}}
            for row in rows}
