"""What ``skilltransfer show`` prints of a run (and ``run`` at its end, and the viewer's run page): its summary
(success with a bootstrap CI, latency, tokens, cost, skills, transfer events) as `RunSummary` and as labelled rows.
Reads the run folder through ``skilltransfer.log``; the transfer events and cost are `skilltransfer.report.events`',
a task's trajectory is `skilltransfer.report.trajectory`'s."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.log import FORMAT_VERSION, RunFolder
from skilltransfer.report.events import (
    LIBRARY,
    WITHIN_RUN,
    TransferEvent,
    coordination_totals,
    run_cost,
    transfer_events,
)
from skilltransfer.report.trajectory import task_number
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import read_run_settings

CI_LEVEL = 0.95


@dataclass
class RunSummary:
    """Aggregates over the finished tasks of one run (means are per task)."""

    run: str
    path: str
    condition: str
    env: str
    """The env spec and what it was built with (`EnvSpec.describe`)."""
    model: str
    """The model and the settings that shape its answers (`ModelSpec.describe`)."""
    embedder: str
    planned: int
    """Tasks in the stream (``config.json``)."""
    finished: int
    """Tasks with a line in ``results.jsonl``."""
    success: float
    success_ci: tuple[float, float]
    """Percentile bootstrap CI of the success rate (95 %, resampling tasks)."""
    mean_reward: float
    latency_total_s: float
    latency_mean_s: float
    latency_median_s: float
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    mean_steps: float
    mean_subtasks: float
    dependency: int
    peak_context: int
    exit_status: dict[str, int]
    context_fitted_calls: int
    """Model calls whose prompt was shortened to fit the context window."""
    skills_written: int
    """Inductions the memory added as new skills."""
    skills_merged: int
    skills_pruned: int
    """Inductions rejected by code validation (status "pruned")."""
    skills_dropped: int
    skills_unparseable: int
    skills_not_stored: int
    """Inductions skipped (no code of the trajectory ran) and skills not stored as ungrounded (``ground_skills``)."""
    retrievals: int
    """Retrieved skills summed over tasks and (sub)tasks."""
    distinct_retrieved: int
    memory_size: int
    """Skills in memory after the last finished task."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The stream's axes with a value other than the default (order seed, induction variant, ...), and a library."""
    harness: str = ""
    """The harness preset (`StreamConfig.harness_label`) and the features that were on."""
    format_version: int = 0
    """The run log's format version (an older one is shown and reported, not resumed)."""
    tokens_by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    transfers: list[TransferEvent] = field(default_factory=list)
    """Retrievals of skills induced earlier in the same run and of skills from its frozen library (`transfer_events`;
    ``kind`` tells them apart)."""
    coordination: dict[str, int] = field(default_factory=dict)
    """A coordinated run's totals (`coordination_totals`); empty otherwise."""
    reasoning_tokens: int = 0
    """Completion tokens spent reasoning (part of ``completion_tokens``)."""
    length_cut_calls: int = 0
    """Model calls whose reply the completion cap cut (finish_reason "length")."""
    cost_usd: float | None = None
    """The finished tasks' cost at the model's price (None when no task recorded one)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_run(run_dir: str | Path, *, n_resamples: int = 10000, seed: int = 0) -> RunSummary:
    """Summarise a run folder (finished tasks only; an unfinished run is summarised as far as it got).

    Raises:
        InputError: not a run folder, or a broken config/results line.
    """
    from skilltransfer.metrics import bootstrap_ci

    folder = RunFolder(run_dir)
    log = read_run_settings(folder)
    records = folder.read_records()
    n = len(records)
    successes = [float(r.success) for r in records]
    if n:
        rate, low, high = bootstrap_ci(successes, level=CI_LEVEL, n_resamples=n_resamples, seed=seed)
    else:
        rate, low, high = 0.0, 0.0, 0.0
    latencies = [r.latency_s for r in records]
    induced = Counter(i.status for r in records for i in r.induced)
    by_role: dict[str, dict[str, int]] = {}
    for record in records:
        for role, row in record.tokens_by_role.items():
            total = by_role.setdefault(role, {})
            for key, value in row.items():
                total[key] = total.get(key, 0) + value
    return RunSummary(
        run=log.config.run, path=str(folder.path), condition=log.config.condition, env=log.config.env.describe(),
        model=log.config.model.describe(), embedder=log.config.embedder or (log.embedder_id or ""),
        planned=len(log.task_ids), finished=n, success=rate, success_ci=(low, high),
        mean_reward=statistics.fmean(r.reward for r in records) if n else 0.0,
        latency_total_s=sum(latencies), latency_mean_s=statistics.fmean(latencies) if n else 0.0,
        latency_median_s=statistics.median(latencies) if n else 0.0,
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        model_calls=sum(r.model_calls for r in records),
        mean_steps=statistics.fmean(r.steps for r in records) if n else 0.0,
        mean_subtasks=statistics.fmean(r.subtasks for r in records) if n else 0.0,
        dependency=sum(r.dependency for r in records),
        peak_context=max((r.peak_context for r in records), default=0),
        exit_status=dict(Counter(r.exit_status for r in records).most_common()),
        context_fitted_calls=sum(r.context_fitted_calls for r in records),
        reasoning_tokens=sum(r.reasoning_tokens for r in records),
        length_cut_calls=sum(r.length_cut_calls for r in records),
        cost_usd=run_cost(records),
        skills_written=induced["added"], skills_merged=induced["merged"], skills_pruned=induced["pruned"],
        skills_dropped=induced["dropped"], skills_unparseable=induced["unparseable"],
        skills_not_stored=induced["skipped"] + induced["ungrounded"],
        retrievals=sum(len(r.retrieved) for r in records),
        distinct_retrieved=len({s.skill_id for r in records for s in r.retrieved}),
        memory_size=records[-1].memory_size if records else 0, tokens_by_role=by_role,
        settings={**log.config.axis_values(), **({"library": log.config.library} if log.config.library else {}),
                  **({"disclosure": "progressive"} if log.agent.skill_disclosure == "progressive" else {}),
                  **({"library_min_score": log.agent.library_min_score}
                     if log.agent.library_min_score is not None else {}),
                  **({"plans": str(log.config.plan_dir)} if log.config.coordination != "none" else {})},
        format_version=log.format_version, harness=_harness(log.config),
        transfers=transfer_events(records, log.config.library_event_source()),
        coordination=coordination_totals(records))


def _harness(config: StreamConfig) -> str:
    """``<preset label>: <features on>`` (or ``: no guard``)."""
    guards = config.agent.guards or []
    return f"{config.harness_label()}: " + (", ".join(guards) if guards else "no guard")


def summary_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """(label, value) rows of a summary, in display order."""
    s = summary
    n = max(s.finished, 1)
    low, high = s.success_ci
    status = ", ".join(f"{k} {v}" for k, v in s.exit_status.items()) or "-"
    roles = ", ".join(f"{role} {row.get('calls', 0)}" for role, row in s.tokens_by_role.items()) or "-"
    return [
        ("run", f"{s.run} ({s.path})"),
        ("condition", s.condition),
        *([("settings", ", ".join(f"{k}={v}" for k, v in s.settings.items()))] if s.settings else []),
        *([("harness", s.harness)] if s.harness else []),
        ("env", s.env or "-"),
        ("model", s.model or "-"),
        ("embedder", s.embedder or "-"),
        ("tasks", f"{s.finished} of {s.planned} finished"
                  + (f" (log format_version {s.format_version}: shown, not resumable)"
                     if s.format_version != FORMAT_VERSION else "")),
        ("success", f"{s.success:.1%}  [{low:.1%}, {high:.1%}] {CI_LEVEL:.0%} bootstrap CI" if s.finished
         else "- (no finished task yet)"),
        ("mean reward", f"{s.mean_reward:.3f}"),
        ("latency", f"{s.latency_total_s:.1f} s total, {s.latency_mean_s:.2f} s mean, "
                    f"{s.latency_median_s:.2f} s median per task"),
        ("tokens", f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion "
                   + (f"(of which {s.reasoning_tokens:,} reasoning) " if s.reasoning_tokens else "")
                   + f"({(s.prompt_tokens + s.completion_tokens) / n:,.0f} per task)"),
        *([("cost", f"${s.cost_usd:,.4f} (${s.cost_usd / n:,.4f} per task) at the model's price")]
          if s.cost_usd is not None else []),
        ("model calls", f"{s.model_calls:,} ({s.model_calls / n:.1f} per task): {roles}"),
        ("steps", f"{s.mean_steps:.1f} actions, {s.mean_subtasks:.1f} subtasks per task"),
        ("dependency", f"{s.dependency:,} (peak context {s.peak_context:,} tokens)"),
        ("exit status", status),
        ("context", f"{s.context_fitted_calls:,} calls shortened to fit the window; "
                    f"{s.exit_status.get('context_exceeded', 0)} tasks ended context_exceeded; "
                    f"{s.length_cut_calls:,} replies cut by the completion cap"),
        ("skills", f"{s.skills_written} written, {s.skills_merged} merged, {s.skills_pruned} pruned, "
                   f"{s.skills_dropped} dropped, {s.skills_unparseable} unparseable, {s.skills_not_stored} not stored "
                   f"(no working code or ungrounded); memory holds {s.memory_size}"),
        ("retrieved", f"{s.retrievals} retrievals of {s.distinct_retrieved} distinct skills"),
        ("transfer", _transfer_text(s.transfers)),
        *([("coordination", _coordination_text(s.coordination))] if s.coordination else []),
    ]


def _coordination_text(c: dict[str, int]) -> str:
    return (f"plans {c['plans_written']} written, {c['plans_replayed']} replayed, {c['plan_fallbacks']} fallback; "
            f"nodes {c['completed_nodes']}/{c['nodes']} completed; constraints {c['violated_constraints']} violated, "
            f"{c['unverified_constraints']} unverified")



def _transfer_text(events: list[TransferEvent], shown: int = 5) -> str:
    within = [e for e in events if e.kind == WITHIN_RUN]
    library = [e for e in events if e.kind == LIBRARY]
    lines = [_events_line(within, "events", "later tasks retrieved skills induced earlier in this run") if within
             else "no task retrieved a skill induced earlier in this run"]
    for e in within[:shown]:
        lines.append(f"  task {task_number(e.target_position)} {e.target_task_id} "
                     f"[{'success' if e.target_success else 'failure'}] <- {e.skill_name!r} from task "
                     f"{task_number(e.source_position)} {e.source_task_id}")  # 1-based where people read them
    if len(within) > shown:
        lines.append(f"  ... {len(within) - shown} more (show --json lists all)")
    if library:
        sources = ", ".join(dict.fromkeys(e.source for e in library))
        lines.append(_events_line(library, "library transfer events",
                                  f"tasks retrieved skills of the frozen library ({sources})"))
        for e in library[:shown]:
            origin = f" (induced on {e.source_task_id} there)" if e.source_task_id else ""
            lines.append(f"  task {task_number(e.target_position)} {e.target_task_id} "
                         f"[{'success' if e.target_success else 'failure'}] <- {e.skill_name!r}{origin}")
        if len(library) > shown:
            lines.append(f"  ... {len(library) - shown} more (show --json lists all)")
    return "\n".join(lines)


def _events_line(events: list[TransferEvent], name: str, what: str) -> str:
    targets = {e.target_position: e.target_success for e in events}
    return f"{len(events)} {name} in {len(targets)} tasks ({sum(targets.values())} solved): {what}"
