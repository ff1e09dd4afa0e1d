"""The execution-mode table (``skill_exec``, the study's Fig. 2) and the library-organisation table
(``library_organization``, its Fig. 5): per env x model x condition label, success and the context accounting of
each task (`skilltransfer.metrics.ContextAccount`, from results.jsonl's ``context_account``).

Each table appears only when some run of the report uses a non-default value of its axis; it then lists every group
with a skill memory (the inline / flat groups are its baselines), split by the frozen library the runs read (column
``library``: its path relative to the runs folder, ``memory`` dropped; "own memory" for a growing memory), so a grid's
own and contract-induced libraries are separate rows. The execution-mode table keeps the flat-library
groups (modes compared on one organisation); the organisation table lists all.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean
from typing import Any

from skilltransfer.experiments.config import StreamConfig
from skilltransfer.experiments.report.runs import RunLog
from skilltransfer.experiments.report.success import groups, per_task
from skilltransfer.experiments.report.table import Table
from skilltransfer.experiments.runlog import TaskRecord
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.metrics.windows import ContextAccount

_NOTE = ("success as in Table 2 (each task averaged over the group's runs first, 95 % task-bootstrap CI); per task: "
         "peak context = the largest single prompt over the main agent's executor context and every subagent's; "
         "total tokens = prompt + completion tokens of all the task's model calls (every role); communication share "
         "= (inputs sent to subagents + their seed prompts + outputs returned) / the tokens of the executor and "
         "subagent windows, summed over the group's tasks; calls/loads/opened are means per task.")
_COMMON = ["runs", "tasks", "success_pct", "ci_low", "ci_high", "peak_context", "main_peak_context", "total_tokens",
           "communication_share", "subagent_calls", "skill_loads", "nodes_opened"]


def _account(record: TaskRecord) -> ContextAccount:
    return ContextAccount.from_dict(record.context_account or {})


def library_label(config: StreamConfig) -> str:
    """Which library a run read (see the module docstring)."""
    if config.library is None:
        return "own memory"
    path = Path(config.library)
    if path.name == "memory":
        path = path.parent
    try:
        return path.relative_to(config.runs_dir).as_posix()
    except ValueError:
        return path.as_posix()


def _row(members: list[RunLog], metric: str, seed: int) -> dict[str, Any]:
    records = [r for run in members for r in run.records]
    accounts = [_account(r) for r in records]
    values = per_task(members, metric)
    mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
    windows = sum(a.total_tokens for a in accounts)

    def avg(values: list[float]) -> float:
        return fmean(values) if values else float("nan")

    return {"runs": len(members), "tasks": len(values), "success_pct": 100 * mean, "ci_low": 100 * low,
            "ci_high": 100 * high, "peak_context": avg([a.peak_context for a in accounts]),
            "main_peak_context": avg([a.main.peak_context for a in accounts]),
            "total_tokens": avg([r.prompt_tokens + r.completion_tokens for r in records]),
            "communication_share": sum(a.communication_tokens for a in accounts) / windows if windows else 0.0,
            "subagent_calls": avg([a.subagent_calls for a in accounts]),
            "skill_loads": avg([a.skill_loads for a in accounts]),
            "nodes_opened": avg([a.nodes_opened for a in accounts])}


def _tables(runs: list[RunLog], metric: str, seed: int) -> tuple[Table, Table]:
    execs = Table("skill_exec", "Execution modes: success, peak context, tokens and communication",
                  ["env", "model", "condition", "library", "skill_exec", *_COMMON],
                  note=f"flat-library groups only; {_NOTE}")
    orgs = Table("library_organization", "Library organisations x execution modes",
                 ["env", "model", "condition", "library", "library_organization", "skill_exec", *_COMMON], note=_NOTE)
    configs = [run.log.config for run in runs]
    any_exec = any(c.skill_exec != "inline" for c in configs if c.has_memory)
    any_org = any(c.library_organization != "flat" for c in configs if c.has_memory)
    for (env, model, condition), grouped in groups(runs).items():
        by_library: dict[str, list[RunLog]] = {}
        for run in grouped:
            by_library.setdefault(library_label(run.log.config), []).append(run)
        for library, members in sorted(by_library.items()):
            config = members[0].log.config
            if not config.has_memory or not any(run.records for run in members):
                continue
            row = {"env": env, "model": model, "condition": condition, "library": library,
                   **_row(members, metric, seed)}
            if any_exec and config.library_organization == "flat":
                execs.rows.append({**row, "skill_exec": config.skill_exec})
            if any_org:
                orgs.rows.append({**row, "skill_exec": config.skill_exec,
                                  "library_organization": config.library_organization})
    return execs, orgs


def skill_exec_tables(runs: list[RunLog], metric: str = "success", seed: int = 0) -> list[Table]:
    """The execution-mode and library-organisation tables that have rows (see the module docstring)."""
    return [table for table in _tables(runs, metric, seed) if table.rows]
