"""What ``skilltransfer show`` prints: a run's summary (success with a bootstrap CI, latency, tokens, skills) and one
task's trajectory as readable text. Reads the run folder through ``skilltransfer.log``."""

from __future__ import annotations

import bisect
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import (
    FORMAT_VERSION,
    ActionStep,
    InductionStep,
    MessageStep,
    PlanStep,
    ReadStep,
    RetrievalStep,
    RetrievedSkill,
    RunFolder,
    SummaryStep,
    TaskRecord,
    TrajectoryLog,
    message_id,
    read_steps,
    reply_message,
)
from skilltransfer.memory.distractors import DISTRACTOR_SOURCE
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.util.text import truncate

CI_LEVEL = 0.95


WITHIN_RUN = "within-run"
"""A transfer event of a skill an earlier task of the same run induced."""
LIBRARY = "library"
"""A transfer event of a skill from a frozen library: another run's memory or a library the run was given."""


@dataclass(frozen=True)
class TransferEvent:
    """A task retrieved a skill that an earlier task of the same run induced (``kind`` within-run), or a skill from
    the run's frozen library (``kind`` library); `transfer_events` is the definition."""

    target_position: int
    target_task_id: str
    target_success: bool
    skill_name: str
    source_position: int | None
    """Within-run: the stream position of the task that induced the skill; library: None (the skill came from
    outside this run's stream)."""
    source_task_id: str | None
    """Within-run: the inducing task; library: the task the skill names as its source in the run it was induced in
    (None when it names none, e.g. a hand-written library)."""
    skill_id: str = ""
    score: float = 0.0
    """The retrieval's best score in the target task (its subtasks may retrieve the skill more than once)."""
    kind: str = WITHIN_RUN
    """`WITHIN_RUN` or `LIBRARY`."""
    source: str = ""
    """Library events: the library (`StreamConfig.library_event_source`); within-run events: ""."""


def transfer_events(records: list[TaskRecord], library: str | None = None) -> list[TransferEvent]:
    """The transfer events of a run: the one definition that ``show``, ``view``, ``report`` and ``export`` count
    (docs/metrics.md, "transfer event").

    One event per (task, skill) where the task retrieved

    * a skill that an *earlier* task of the same run induced (added, or merged into; the source is the first such
      task): a **within-run** event; a skill induced and retrieved within one task is none;
    * a skill of the run's frozen library (``library``: its config's `library_event_source`; another run's memory or a
      library it was given), i.e. one no task of this run induced: a **library** event, source the library (and the
      skill's own source task, when it records one). A planted distractor (``distractors``, source
      ``distractor/...``) is none: it is noise added to the library, not a skill anyone induced or curated. Beside
      the run's own growing memory (``library_use: beside``) each retrieved skill records its ``source``: only a
      ``library`` one can be a library event (a skill the task itself induced is none).

    In stream order; a skill retrieved by several subtasks of one task counts once (at its best score). Without
    ``library`` (a growing memory, or an older caller), only within-run events. The outcome of the target task is
    recorded, not required (the paper's Fig. 6: a skill induced earlier is retrieved later).
    """
    induced_by: dict[str, TaskRecord] = {}
    events: list[TransferEvent] = []
    for record in sorted(records, key=lambda r: r.position):
        best: dict[str, RetrievedSkill] = {}  # first-retrieval order, best score
        for hit in record.retrieved:
            counts = hit.skill_id in induced_by or (
                library is not None and hit.source != "memory"
                and not (hit.source_task_id or "").startswith(DISTRACTOR_SOURCE))
            if counts and (hit.skill_id not in best or hit.score > best[hit.skill_id].score):
                best[hit.skill_id] = hit
        for skill_id, hit in best.items():
            source = induced_by.get(skill_id)
            if source is not None:
                events.append(TransferEvent(record.position, record.task_id, record.success, hit.name,
                                            source.position, source.task_id, skill_id, hit.score))
            else:
                events.append(TransferEvent(record.position, record.task_id, record.success, hit.name, None,
                                            hit.source_task_id, skill_id, hit.score, LIBRARY, library or ""))
        for induction in record.induced:
            for induced_id in (induction.skill_id, induction.target_id):
                if induction.status in ("added", "merged") and induced_id is not None:
                    induced_by.setdefault(induced_id, record)
    return events


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


def coordination_totals(records: list[TaskRecord]) -> dict[str, int]:
    """Totals over a coordinated run's tasks: plans written/replayed/fallback, nodes and completed nodes, violated and
    unverified constraints, tasks a plan node submitted (metaskill) and nodes that never ran (empty when no task was
    coordinated)."""
    rows = [r.coordination for r in records if r.coordination is not None]
    if not rows:
        return {}
    return {"tasks": len(rows), "plans_written": sum(c.plan_written for c in rows),
            "plans_replayed": sum(not c.plan_written for c in rows),
            "plan_fallbacks": sum(c.plan_fallback is not None for c in rows), "nodes": sum(c.nodes for c in rows),
            "completed_nodes": sum(c.completed_nodes for c in rows),
            "violated_constraints": sum(c.violated_constraints for c in rows),
            "unverified_constraints": sum(c.unverified_constraints for c in rows),
            "submitted_by_node": sum(c.submitted_by not in (None, "finish", "host") for c in rows),
            "not_run_nodes": sum(c.not_run_nodes for c in rows)}


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


def run_cost(records: Sequence[TaskRecord]) -> float | None:
    """The records' summed ``cost_usd`` (None when none has one: the model had no price)."""
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
    return round(sum(costs), 6) if costs else None


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


def _number(position: Any) -> str:
    """A 0-based stream position as the 1-based task number people read ("?" when unknown)."""
    return str(position + 1) if isinstance(position, int) else "?"


def _transfer_text(events: list[TransferEvent], shown: int = 5) -> str:
    within = [e for e in events if e.kind == WITHIN_RUN]
    library = [e for e in events if e.kind == LIBRARY]
    lines = [_events_line(within, "events", "later tasks retrieved skills induced earlier in this run") if within
             else "no task retrieved a skill induced earlier in this run"]
    for e in within[:shown]:
        lines.append(f"  task {_number(e.target_position)} {e.target_task_id} "
                     f"[{'success' if e.target_success else 'failure'}] <- {e.skill_name!r} from task "
                     f"{_number(e.source_position)} {e.source_task_id}")  # 1-based where people read them
    if len(within) > shown:
        lines.append(f"  ... {len(within) - shown} more (show --json lists all)")
    if library:
        sources = ", ".join(dict.fromkeys(e.source for e in library))
        lines.append(_events_line(library, "library transfer events",
                                  f"tasks retrieved skills of the frozen library ({sources})"))
        for e in library[:shown]:
            origin = f" (induced on {e.source_task_id} there)" if e.source_task_id else ""
            lines.append(f"  task {_number(e.target_position)} {e.target_task_id} "
                         f"[{'success' if e.target_success else 'failure'}] <- {e.skill_name!r}{origin}")
        if len(library) > shown:
            lines.append(f"  ... {len(library) - shown} more (show --json lists all)")
    return "\n".join(lines)


def _events_line(events: list[TransferEvent], name: str, what: str) -> str:
    targets = {e.target_position: e.target_success for e in events}
    return f"{len(events)} {name} in {len(targets)} tasks ({sum(targets.values())} solved): {what}"


# --------------------------------------------------------------------------------------------- trajectories
def load_task(run_dir: str | Path, task_id: str) -> tuple[TaskRecord | None, TrajectoryLog]:
    """The record and trajectory of one task (``task_id`` may also be its number in the stream, 1-based as progress
    lines print it); an unfinished task whose partial trajectory is on disk (running, or aborted by an error) comes
    without a record.

    Raises:
        InputError: the task has neither a record nor a trajectory in this run, or its trajectory is missing/broken.
    """
    folder = RunFolder(run_dir)
    config = read_run_settings(folder)
    records = folder.read_records()
    record = next((r for r in records if r.task_id == task_id), None)
    if record is None and task_id.isdigit():
        number = int(task_id)
        if not 1 <= number <= len(config.task_ids):
            raise InputError(f"--task {task_id}: task numbers run from 1 to {len(config.task_ids)} in this run "
                             "(or give a task id)", path=folder.path)
        record = next((r for r in records if r.position == number - 1), None)
        if record is None:
            task_id = config.task_ids[number - 1]
    relative = record.trajectory if record is not None else folder.trajectory_file(task_id)
    if record is None and not (folder.path / relative).is_file():
        shown = ", ".join(r.task_id for r in records[:5]) + (", ..." if len(records) > 5 else "")
        raise InputError(f"task {task_id!r} is not finished in this run (finished: {shown or 'none'})",
                         path=folder.path)
    return record, folder.read_trajectory(relative)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.strip("\n").splitlines()) if text.strip() else f"{prefix}(empty)"


def _where(step: RetrievalStep | ActionStep | InductionStep) -> str:
    index = step.subtask_index
    return f" (subtask {index})" if index is not None else ""


def _route_line(route: dict[str, Any]) -> str:
    """A lens retrieval in one line: decisions, rewrites, verifier calls, context and tree sizes."""
    counts: dict[str, int] = {}
    for visit in route.get("visits") or []:
        counts[visit["decision"]] = counts.get(visit["decision"], 0) + 1
    decided = ", ".join(f"{n} {d.lower()}" for d, n in sorted(counts.items())) or "none"
    return (f"\n    routed ({route.get('mode')}): visited {route.get('visited', 0)} ({decided}), "
            f"{len(route.get('rewrites') or {})} rewritten, {route.get('verifier_calls', 0)} verifier calls, context "
            f"{len(route.get('context_units') or [])} units / {route.get('context_tokens', 0)} tokens of a "
            f"{route.get('retrieved_tree', 0)}-unit retrieved tree")


def use_label(hit: RetrievedSkill | None) -> str:
    """How the task used a retrieved skill (as ``view``'s retrieval table says it): a code skill ``ran ×n used`` or
    ``not run`` (the sandbox's record), a text skill its following share (``used`` from 0.5); "" when not measured."""
    if hit is None or hit.used is None:
        return ""
    if hit.ran is not None:
        return f"ran ×{hit.ran} used" if hit.used else "not run"
    return f"followed {hit.followed:.2f}" + (" used" if hit.used else "")


def _origin(skill: dict[str, Any]) -> str:
    """Where a retrieved skill came from, as a trajectory's retrieval step records it: ``from library NAME`` (and
    the task that induced it, when the library's skill says), else the task of this run that induced it."""
    induced = skill.get("source_task_id")
    if skill.get("source") == "library":
        name = skill.get("library")
        return (f"from library {name}" if name else "from the library") + (
            f" (induced on {induced})" if induced else "")
    if induced:
        return f"from {induced} (task {_number(skill.get('source_position'))})"
    return "from an unrecorded source"


def format_step(step: ReadStep, max_chars: int = 2000, record: TaskRecord | None = None) -> str:
    """One trajectory step (`skilltransfer.log.trajectory_io.read_steps`) as readable text; a retrieval step's
    skills with their use from the task's ``record`` (`use_label`)."""
    if isinstance(step, RetrievalStep):
        hits = {(h.skill_id, h.subtask_index): h for h in record.retrieved} if record is not None else {}
        found = "\n".join(f"    - {s['name']} [{s['format']}] score {s['score']:.3f} {_origin(s)}"
                          + (f" LOAD ERROR: {s['load_error']}" if s.get("load_error") else "")
                          + (f" - {label}" if (label := use_label(hits.get((s["id"], step.subtask_index)))) else "")
                          for s in step.skills)
        below = f"\n    ({step.below_min_score} more below the minimum score)" if step.below_min_score else ""
        return f"[retrieve{_where(step)}] by {step.query_kind}: {step.query[:200]!r}\n" \
               + (found or "    (no skills)") + below + (_route_line(step.route) if step.route else "")
    if isinstance(step, PlanStep):
        what = step.subtask if step.decision == "subtask" else step.decision
        if step.decision == "closing":
            what = f"closing (harness): {step.subtask}"
        why = step.refused or "premature_planner_done"
        refused = f" (after a refused {'repeat' if why == 'repeated_subtask' else 'DONE'}: {why})" \
            if step.refused_reply is not None else ""
        return f"[plan {step.subtask_index}] {what}{refused}"
    if isinstance(step, ActionStep):
        flags = [name for name, on in (("error", step.error), ("format_error", step.format_error),
                                       ("done", step.done)) if on]
        flags += [f"{name}={value}" for name, value in (("refused", step.refused), ("stuck", step.stuck)) if value]
        head = f"[step {step.index}{_where(step)}" + (f" (subagent {step.window})" if step.window else "") + "]" \
            + (f" {' '.join(flags)}" if flags else "")
        parts = [head]
        if step.thought.strip() and step.action is not None:
            parts.append("  thought:\n" + _indent(truncate(step.thought, max_chars)))
        if step.action is not None:
            parts.append("  action:\n" + _indent(step.action))
        else:
            parts.append("  reply:\n" + _indent(truncate(step.reply, max_chars)))
        parts.append("  observation:\n" + _indent(truncate(step.observation, max_chars)))
        return "\n".join(parts)
    if isinstance(step, SummaryStep):
        kept = " (context_exceeded: previous summary kept)" if step.status == "context_exceeded" else ""
        return f"[summary {step.subtask_index}]{kept}\n" + _indent(truncate(step.summary, max_chars))
    if isinstance(step, InductionStep):
        name = step.skill_name or "-"
        reason = f": {step.reason}" if step.reason else ""
        return f"[induce{_where(step)}] {step.status} {name} ({step.skill_id or 'no id'}){reason}"
    if isinstance(step, MessageStep):
        where = f" (subagent {step.window})" if step.window else ""
        return f"[{step.source} message{where}]\n" + _indent(truncate(step.message, max_chars))
    return f"[{step.type}] {json.dumps(step.data, default=str)[:max_chars]}"


def format_coordination(data: dict[str, Any]) -> str:
    """A coordinated task's plan and audit as text (``show --task``)."""
    plan = data.get("plan") or {}
    audit = data.get("audit") or {}
    lines = [f"coordination: {data.get('interface')}, plan {data.get('plan_fingerprint')} "
             f"({'written now' if plan.get('written_now') else 'replayed'}"
             + (f", fallback: {plan['fallback']}" if plan.get("fallback") else "") + f") {plan.get('file', '')}"]
    if audit:
        lines.append(f"  audit ({audit.get('source')}): {audit.get('completed_nodes')}/{audit.get('n_nodes')} nodes "
                     f"completed, {audit.get('violated_constraints')} constraints violated, "
                     f"{audit.get('unverified_constraints')} unverified, peak parallel {audit.get('peak_parallel')}")
        for node in audit.get("nodes", []):
            attempts = node.get("attempts") or []
            exits = ", ".join(str(a.get("exit_status")) for a in attempts)
            lines.append(f"    {node.get('id')}: {node.get('status')}" + (f" ({exits})" if exits else ""))
        for constraint in audit.get("constraints", []):
            if constraint.get("held") is False:
                lines.append(f"    VIOLATED {constraint.get('before')} -> {constraint.get('after')}: "
                             f"{constraint.get('detail', '')}")
    return "\n".join(lines)


STEP_ROLES = {"ActionStep": "executor", "PlanStep": "planner", "SummaryStep": "summarizer",
              "InductionStep": "induction"}
ROUTING_ROLES = ("verifier", "rewriter", "decomposer")
"""Roles of lens routing calls (`skilltransfer.lens.retriever`), made for a retrieval step."""


def step_calls(steps: Sequence[ReadStep], calls: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Step index -> the indices of the model calls that made it, matched in order: an action, plan or induction
    step by its reply's content id (with the calls of the same role just before it: a refused or unparseable
    planner reply), a summary by the next summarizer call, a routed retrieval by the routing calls (verifier,
    rewriter, decomposer) that come next. Calls of runs logged without prompts match nothing."""
    out: dict[int, list[int]] = {}
    taken: set[int] = set()
    start = 0
    # per role, the call indices with a reply, all and by reply id, in order: each step finds its call by bisection,
    # so a crafted trajectory (replies matching nothing) costs O((steps + calls) log calls), never steps x calls
    replied: dict[str, list[int]] = {}
    by_reply: dict[tuple[str, str], list[int]] = {}
    for j, call in enumerate(calls):
        role_j, reply_j = call.get("role"), call.get("reply")
        if isinstance(role_j, str) and isinstance(reply_j, str):
            replied.setdefault(role_j, []).append(j)
            by_reply.setdefault((role_j, reply_j), []).append(j)
    for index, step in enumerate(steps):
        role = STEP_ROLES.get(type(step).__name__)
        if isinstance(step, RetrievalStep) and step.route:
            routing = []
            while start < len(calls) and calls[start].get("role") in ROUTING_ROLES:
                routing.append(start)
                start += 1
            if routing:
                out[index] = routing
                taken.update(routing)
        if role is None:
            continue
        reply = step.reply if isinstance(step, ActionStep | PlanStep | InductionStep) else None
        want = message_id(reply_message(reply)) if role != "summarizer" and isinstance(reply, str) and reply else None
        if want is None and role != "summarizer":
            continue
        candidates = replied.get(role, []) if want is None else by_reply.get((role, want), [])
        at = bisect.bisect_left(candidates, start)
        if at == len(candidates):
            continue
        found = candidates[at]
        mine = [j for j in range(start, found) if calls[j].get("role") == role and j not in taken] + [found]
        taken.update(mine)
        out[index] = mine
        start = found + 1
    return out


def format_prompt(number: int, call: dict[str, Any], prompt: dict[str, Any], shown: dict[str, int],
                  max_chars: int) -> str:
    """One model call's prompt and reply as text; a message already printed (``shown``: id -> call number) is one
    line naming that call."""
    tokens = f"{call.get('prompt_tokens', 0):,}+{call.get('completion_tokens', 0):,} tokens"
    if isinstance(call.get("reasoning_tokens"), int) and call["reasoning_tokens"]:
        tokens += f" ({call['reasoning_tokens']:,} reasoning)"
    if call.get("finish_reason") == "length":
        tokens += ", cut by the completion cap (finish_reason length)"
    lines = [f"  [call {number}] {call.get('role')}, {tokens}" + (f", {call['error']}" if call.get("error") else "")]
    messages = prompt.get("messages")
    if messages is None:
        lines.append("    (prompt not recorded)")
    for key, message in zip(call.get("messages") or [], messages or [], strict=False):
        role = message.get("role", "?")
        if key in shown:
            lines.append(f"    --- {role} {key} (as in call {shown[key]})")
            continue
        shown[key] = number
        lines.append(f"    --- {role} {key}")
        lines.append(_indent(truncate(str(message.get("content", "")), max_chars), "      "))
    if prompt.get("reasoning"):
        lines.append("    --- reasoning (kept apart: never sent back to the model)")
        lines.append(_indent(truncate(str(prompt["reasoning"]), max_chars), "      "))
    if prompt.get("reply") is not None:
        lines.append("    --- reply")
        lines.append(_indent(truncate(prompt["reply"], max_chars), "      "))
    return "\n".join(lines)


def format_trajectory(record: TaskRecord | None, trajectory: TrajectoryLog, *, max_chars: int = 2000,
                      prompts: list[dict[str, Any]] | None = None, path: str | Path | None = None) -> str:
    """A task's record and trajectory as readable text (observations cut to ``max_chars``); without a record (an
    unfinished task), the trajectory's status and error. With ``prompts`` (`RunFolder.call_prompts`), each step is
    followed by the prompts and replies of its model calls, and the calls no step names come last. ``path`` (the
    trajectory file) is named in the error on a step that is not a step of its type."""
    score = trajectory.score
    checks = "\n".join(f"    [{'x' if c.get('passed') else ' '}] {c.get('requirement')}"
                       + (f": {c['detail']}" if c.get("detail") else "") for c in score.get("checks", []))
    if record is None:
        head = [f"task {trajectory.task_id} (task {trajectory.position + 1} of the stream): not finished, trajectory "
                f"{trajectory.status}" + (f" ({trajectory.error})" if trajectory.error else ""),
                f"instruction: {trajectory.instruction}"]
    else:
        head = [
            f"task {record.task_id} (task {record.position + 1} of the stream, difficulty {record.difficulty}, "
            f"template {record.template})",
            f"instruction: {trajectory.instruction}",
            f"result: {'SUCCESS' if record.success else 'FAILURE'} reward {record.reward:.3f}, exit "
            f"{record.exit_status}, {record.steps} steps, {record.subtasks} subtasks, {record.latency_s:.2f} s, "
            f"{record.prompt_tokens:,}+{record.completion_tokens:,} tokens in {record.model_calls} calls",
        ]
    fitted = [c["context_fit"] for c in trajectory.calls if c.get("context_fit")]
    changed = [f for f in fitted if f.get("elided_steps") or f.get("dropped_steps") or f.get("cut_skills")
               or f.get("shortened_skills") or f.get("dropped_skills_section")]
    if changed:
        head.append(f"context: {len(changed)} of {len(trajectory.calls)} calls shortened to fit the "
                    f"{fitted[0]['window']:,}-token window (up to {max(f['elided_steps'] for f in changed)} steps "
                    f"elided, {max(f.get('dropped_steps', 0) for f in changed)} dropped)")
    refused = [c["error"] for c in trajectory.calls if c.get("error")]
    if refused:
        head.append(f"last failed call: {refused[-1]}")
    if checks:
        head.append("checks:\n" + checks)
    if trajectory.coordination:
        head.append(format_coordination(trajectory.coordination))
    steps = read_steps(trajectory.steps, path=path)
    body = [format_step(step, max_chars, record) for step in steps]
    if prompts is not None:
        by_step, shown = step_calls(steps, trajectory.calls), dict[str, int]()
        for index, numbers in sorted(by_step.items()):
            body[index] += "\n" + "\n".join(format_prompt(n, trajectory.calls[n], prompts[n], shown, max_chars)
                                             for n in numbers)
        rest = sorted(set(range(len(trajectory.calls))) - {n for ns in by_step.values() for n in ns})
        if rest:
            body.append("[other model calls]\n" + "\n".join(
                format_prompt(n, trajectory.calls[n], prompts[n], shown, max_chars) for n in rest))
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def load_prompts(run_dir: str | Path, trajectory: TrajectoryLog) -> list[dict[str, Any]]:
    """The prompts and replies of a trajectory's calls (`RunFolder.call_prompts`)."""
    return RunFolder(run_dir).call_prompts(trajectory.calls)
