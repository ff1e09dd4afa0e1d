"""The execution-mode table (``skill_exec``, the study's Fig. 2) and the library-organisation table
(``library_organization``, its Fig. 5): per env x model x condition label, success and the context accounting of
each task (`skilltransfer.metrics.ContextAccount`, from results.jsonl's ``context_account``).

Each table appears only when some run of the report uses a non-default value of its axis; it then lists every group
with a skill memory (the inline / flat groups are its baselines), split by the skills the runs read (column
``library``: `StreamConfig.skills_read_label`: the frozen library's path relative to the runs folder, ``memory``
dropped; "own memory" for a growing memory, "PATH + own memory" for a library beside one), so a grid's own and
contract-induced libraries are separate rows. The execution-mode table keeps the flat-library
groups (modes compared on one organisation); the organisation table lists all.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import TaskRecord
from skilltransfer.memory.organization import ORGANIZATION_FILE
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.metrics.windows import ContextAccount
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import groups, per_task
from skilltransfer.report.table import Table
from skilltransfer.settings.config import StreamConfig
from skilltransfer.util.files import read_text

_NOTE = ("success as in Table 2 (each task averaged over the group's runs first, 95 % task-bootstrap CI); per task: "
         "peak context = the largest single prompt over the main agent's executor context and every subagent's; "
         "total tokens = prompt + completion tokens of all the task's model calls (every role); communication share "
         "= (subagents' seed prompts, which hold the inputs sent, + outputs returned) / the tokens of the executor "
         "and subagent windows, summed over the group's tasks; calls/loads/opened are means per task.")
_COMMON = ["runs", "tasks", "success_pct", "ci_low", "ci_high", "peak_context", "main_peak_context", "total_tokens",
           "communication_share", "subagent_calls", "skill_loads", "nodes_opened"]


def _account(record: TaskRecord) -> ContextAccount:
    return ContextAccount.from_dict(record.context_account or {})


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


def organization_built(config: StreamConfig) -> str:
    """How the organisation a run navigated was built: its ``organization.json``'s ``built_by.method`` (with the
    fallback's reason), else what the run falls back to (`skilltransfer.agents.skill_actions.organize_retrieved`)."""
    kind = config.library_organization
    if kind in ("flat", "task-tree"):
        return kind
    if config.organization is None:
        return "fallback:task-tree (no organization given)"
    path = Path(config.organization)
    path = path / ORGANIZATION_FILE if path.is_dir() else path
    try:
        built = json.loads(read_text(path, what="organization")).get("built_by") or {}
    except (InputError, ValueError, AttributeError):
        return f"unreadable: {path}"
    method = str(built.get("method", "?"))
    return f"{method} ({built['reason']})" if "reason" in built else method


def _tables(runs: list[RunLog], metric: str, seed: int) -> tuple[Table, Table]:
    execs = Table("skill_exec", "Execution modes: success, peak context, tokens and communication",
                  ["env", "model", "condition", "library", "skill_exec", *_COMMON],
                  note=f"flat-library groups only; {_NOTE}")
    orgs = Table("library_organization", "Library organisations x execution modes",
                 ["env", "model", "condition", "library", "library_organization", "organization_built", "skill_exec",
                  *_COMMON],
                 note=f"{_NOTE} organization_built: how the tree/graph was built (llm, or fallback:task-tree with "
                      "the reason; without an organisation a tree/graph run groups the skills by source task).")
    configs = [run.log.config for run in runs]
    any_exec = any(c.skill_exec != "inline" for c in configs if c.has_memory)
    any_org = any(c.library_organization != "flat" for c in configs if c.has_memory)
    for (env, model, condition), grouped in groups(runs).items():
        by_library: dict[str, list[RunLog]] = {}
        for run in grouped:
            by_library.setdefault(run.log.config.skills_read_label(), []).append(run)
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
                                  "library_organization": config.library_organization,
                                  "organization_built": organization_built(config)})
    return execs, orgs


def _strip(config: StreamConfig, **update: Any) -> str:
    """A run's condition label with some axes set back (what pairs runs across that axis), plus its library."""
    return f"{config.model_copy(update=update).condition_label()}\x00{config.skills_read_label()}"


def peak_context_table(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """The study's Fig. 4 (left): per pair of runs that differ only in execution mode (subagent or hybrid against
    agent-skill), the share of their shared tasks whose peak context is lower under the first, with a 95 %
    task-bootstrap CI."""
    table = Table("peak_context_paired", "Paired peak context: tasks where subagents keep the peak context lower",
                  ["env", "model", "condition", "library", "mode", "against", "tasks", "lower_pct", "ci_low",
                   "ci_high", "ties_pct", "peak_mode", "peak_against", "success_mode_pct", "success_against_pct"],
                  note="Runs paired when they differ only in skill_exec (same env, model, library, organisation, "
                       "exposure, distractors); per shared task, the peak context (the largest single prompt over "
                       "the main window and every subagent window, each task averaged over a group's runs) under "
                       "`mode` is strictly lower than under `against` (lower_pct, with a 95 % task-bootstrap CI) or "
                       "equal (ties_pct). As the study notes, peaks are comparable only where both modes succeed "
                       "about as often (success columns).")
    cells: dict[tuple[str, str, str], dict[str, list[RunLog]]] = {}
    for run in runs:
        config = run.log.config
        if config.has_memory and config.skill_exec != "inline":
            key = (run.env, run.model, _strip(config, skill_exec="inline"))
            cells.setdefault(key, {}).setdefault(config.skill_exec, []).append(run)
    for (env, model, stripped), modes in sorted(cells.items()):
        label, library = stripped.split("\x00")
        for mode in ("subagent", "hybrid"):
            if mode not in modes or "agent-skill" not in modes:
                continue
            mine, theirs = _peaks(modes[mode]), _peaks(modes["agent-skill"])
            shared = sorted(set(mine) & set(theirs))
            if not shared:
                continue
            lower = [float(mine[t] < theirs[t]) for t in shared]
            share, low, high = bootstrap_ci(lower, seed=seed)
            table.rows.append({
                "env": env, "model": model, "condition": label, "library": library, "mode": mode,
                "against": "agent-skill", "tasks": len(shared), "lower_pct": 100 * share, "ci_low": 100 * low,
                "ci_high": 100 * high, "ties_pct": 100 * fmean([float(mine[t] == theirs[t]) for t in shared]),
                "peak_mode": fmean([mine[t] for t in shared]), "peak_against": fmean([theirs[t] for t in shared]),
                "success_mode_pct": 100 * fmean(per_task(modes[mode], metric).values()),
                "success_against_pct": 100 * fmean(per_task(modes["agent-skill"], metric).values())})
    return table


def _peaks(members: list[RunLog]) -> dict[str, float]:
    """Task id -> its peak context, averaged over the runs."""
    values: dict[str, list[int]] = {}
    for run in members:
        for record in run.records:
            values.setdefault(record.task_id, []).append(_account(record).peak_context)
    return {task: fmean(v) for task, v in values.items()}


def distractor_table(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """The study's Fig. 3: success and peak context per number of distracting skills, per execution mode."""
    table = Table("distractors", "Distracting skills: success and peak context by their number",
                  ["env", "model", "condition", "library", "skill_exec", "distractors", "runs", "tasks",
                   "success_pct", "ci_low", "ci_high", "peak_context", "total_tokens"],
                  note="distractors: unrelated skills added to the frozen library (skilltransfer.memory.distractors); "
                       "condition: the label without the distractor tag; success as in Table 2 (95 % task-bootstrap "
                       "CI); peak context and total tokens are means per task.")
    if not any(run.log.config.distractors for run in runs):
        return table
    cells: dict[tuple[str, str, str, str, int], list[RunLog]] = {}
    for run in runs:
        config = run.log.config
        if config.has_memory:
            key = (run.env, run.model, _strip(config, distractors=0), config.skill_exec, config.distractors)
            cells.setdefault(key, []).append(run)
    varied = {key[:4] for key in cells if key[4]}  # only the cells some run added distractors to
    for (env, model, stripped, mode, count), members in sorted(cells.items()):
        if (env, model, stripped, mode) not in varied:
            continue
        label, library = stripped.split("\x00")
        values = per_task(members, metric)
        mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
        records = [r for run in members for r in run.records]
        table.rows.append({"env": env, "model": model, "condition": label, "library": library, "skill_exec": mode,
                           "distractors": count, "runs": len(members), "tasks": len(values),
                           "success_pct": 100 * mean, "ci_low": 100 * low, "ci_high": 100 * high,
                           "peak_context": fmean([_account(r).peak_context for r in records]),
                           "total_tokens": fmean([r.prompt_tokens + r.completion_tokens for r in records])})
    return table


def skill_exec_tables(runs: list[RunLog], metric: str = "success", seed: int = 0) -> list[Table]:
    """The execution-mode, library-organisation, paired peak-context and distractor tables that have rows (see the
    module docstring)."""
    tables = [*_tables(runs, metric, seed), peak_context_table(runs, metric, seed),
              distractor_table(runs, metric, seed)]
    return [table for table in tables if table.rows]
