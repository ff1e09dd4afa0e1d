"""Run logs as one table: a row per finished task across runs (``skilltransfer export``, `load_runs`, also
importable as ``skilltransfer.load_runs``).

Each row holds the run (name and folder), its env, model and condition labels, every setting that differs between
the runs exported together (dotted ``config.json`` keys, e.g. ``order_seed``, ``agent.step_limit``,
``model.params.temperature``), and the task's record: position, id, difficulty, template, success, reward, exit
status, steps, subtasks, latency, model calls, prompt / completion / reasoning tokens, ``cost_usd`` (None without a
price), the skills it retrieved (``retrieved_skills``, ids in order), the skills it retrieved that an earlier task of
the run had induced (``transferred_skills``, names: the within-run transfer events of `transfer_events`, the one
definition ``show``, ``view`` and ``report`` use), the skills of the run's frozen library it retrieved
(``library_transferred_skills``, names: its library transfer events), the skills it induced (``induced_skills``),
the skills it picked out of those shown (``picked_skills``, ids in the order first picked; None where the run logged
no picks) and its right skills where known (``right_skills``, ids; None: unknown; `skilltransfer.log.selection`).
List columns are lists in parquet and jsonl and JSON text in CSV.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder, TaskRecord
from skilltransfer.report.events import LIBRARY, WITHIN_RUN, transfer_events
from skilltransfer.report.runs import find_runs
from skilltransfer.settings.recorded import RunSettings, read_run_settings

if TYPE_CHECKING:
    import pandas as pd

ExportFormat = Literal["csv", "parquet", "jsonl"]
LIST_COLUMNS = ("retrieved_skills", "transferred_skills", "library_transferred_skills", "induced_skills",
                "picked_skills", "right_skills")
SKIPPED_SETTINGS = ("run", "runs_dir")
"""Config keys that name every run apart and are not settings (the ``run`` and ``path`` columns say them)."""


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def _settings(log: RunSettings) -> dict[str, Any]:
    data = json.loads(log.to_json())["config"]
    for key in SKIPPED_SETTINGS:
        data.pop(key, None)
    flat: dict[str, Any] = {}
    _flatten(data, "", flat)
    return flat


def _task_row(record: TaskRecord, transferred: list[str], from_library: list[str]) -> dict[str, Any]:
    return {"position": record.position, "task_id": record.task_id, "difficulty": record.difficulty,
            "template": record.template, "success": record.success, "reward": record.reward,
            "exit_status": record.exit_status, "steps": record.steps, "subtasks": record.subtasks,
            "latency_s": record.latency_s, "model_calls": record.model_calls, "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens, "reasoning_tokens": record.reasoning_tokens,
            "tokens": record.prompt_tokens + record.completion_tokens, "cost_usd": record.cost_usd,
            "retrieved_skills": list(dict.fromkeys(s.skill_id for s in record.retrieved)),
            "transferred_skills": transferred, "library_transferred_skills": from_library,
            "induced_skills": [i.skill_id for i in record.induced if i.status == "added" and i.skill_id],
            "picked_skills": None if record.picks is None else list(dict.fromkeys(p.skill_id for p in record.picks)),
            "right_skills": record.relevant_skills}


def task_rows(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """One dict per finished task of the runs under ``paths`` (run folders or folders holding them), in run then
    stream order (see the module docstring for the columns).

    Raises:
        InputError: a path that does not exist or holds no run folder; an unreadable run log.
    """
    runs = find_runs([Path(p) for p in paths])
    loaded = [(folder, read_run_settings(RunFolder(folder)), RunFolder(folder).read_records()) for folder in runs]
    settings = [_settings(log) for _, log, _ in loaded]
    keys = list(dict.fromkeys(k for s in settings for k in s))
    differing = [k for k in keys if len({json.dumps(s.get(k), sort_keys=True, default=str) for s in settings}) > 1]
    rows: list[dict[str, Any]] = []
    for (folder, log, records), setting in zip(loaded, settings, strict=True):
        config = log.config
        head: dict[str, Any] = {"run": config.run, "path": str(folder), "env": config.env.display_label,
                                "model": config.model.report_label, "condition": config.condition_label()}
        head.update({key: setting.get(key) for key in differing})
        by_task: dict[tuple[str, str], list[str]] = {}
        for event in transfer_events(records, config.library_event_source()):
            by_task.setdefault((event.kind, event.target_task_id), []).append(event.skill_name)
        rows += [{**head, **_task_row(record, by_task.get((WITHIN_RUN, record.task_id), []),
                                      by_task.get((LIBRARY, record.task_id), []))} for record in records]
    return rows


def load_runs(*paths: str | Path) -> pd.DataFrame:
    """The runs under ``paths`` as a pandas DataFrame, one row per finished task (`task_rows`)::

        from skilltransfer import load_runs
        df = load_runs("runs/grid-paper-table2")
        df.groupby(["env", "condition"]).success.mean()

    Raises:
        InputError: a path that does not exist or holds no run folder; an unreadable run log.
    """
    import pandas as pd

    if len(paths) == 1 and isinstance(paths[0], list | tuple):  # load_runs([a, b]) as well as load_runs(a, b)
        paths = tuple(paths[0])
    return pd.DataFrame(task_rows(paths))


def write_export(frame: pd.DataFrame, out: Path, fmt: ExportFormat) -> None:
    """Write ``frame`` to ``out`` as csv (list columns as JSON text), parquet or jsonl, atomically."""
    from skilltransfer.util.files import atomic_write_text

    if fmt == "csv":
        flat = frame.copy()
        for column in LIST_COLUMNS:
            if column in flat:
                flat[column] = flat[column].map(json.dumps)
        atomic_write_text(out, flat.to_csv(index=False))
    elif fmt == "jsonl":
        text = frame.to_json(orient="records", lines=True)  # pandas >= 3 ends it with a newline, older ones not
        atomic_write_text(out, text + ("\n" if len(frame) and not text.endswith("\n") else ""))
    elif fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - pandas' parquet engine
        except ImportError:
            raise InputError("--format parquet needs pyarrow: pip install pyarrow") from None
        partial = out.with_name(f".{out.name}.partial")
        frame.to_parquet(partial, index=False)
        partial.replace(out)
    else:
        raise InputError(f"unknown format {fmt!r}; choose one of: csv, parquet, jsonl")
