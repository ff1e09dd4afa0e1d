"""A task's trajectory as people read it, in the one place ``show`` and ``view`` both read: which model calls made
which step (`step_calls`), how the task used each skill a retrieval step shows (`use_label`, `retrieval_uses`), and
``show --task``'s text (`format_trajectory`). Reads the run folder through ``skilltransfer.log``."""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import (
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
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.util.text import truncate


def task_number(position: Any) -> str:
    """A 0-based stream position as the 1-based task number people read ("?" when unknown)."""
    return str(position + 1) if isinstance(position, int) else "?"


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


def retrieval_uses(step: RetrievalStep, record: TaskRecord | None) -> dict[str, str]:
    """Skill id -> how the task used it (`use_label`), for each skill of a retrieval ``step`` whose use the task's
    ``record`` measured (matched by skill id and subtask); {} without a record."""
    if record is None:
        return {}
    hits = {(h.skill_id, h.subtask_index): h for h in record.retrieved}
    return {skill_id: label for skill in step.skills if isinstance(skill, dict)
            and isinstance(skill_id := skill.get("id"), str)
            and (label := use_label(hits.get((skill_id, step.subtask_index))))}


def _origin(skill: dict[str, Any]) -> str:
    """Where a retrieved skill came from, as a trajectory's retrieval step records it: ``from library NAME`` (and
    the task that induced it, when the library's skill says), else the task of this run that induced it."""
    induced = skill.get("source_task_id")
    if skill.get("source") == "library":
        name = skill.get("library")
        return (f"from library {name}" if name else "from the library") + (
            f" (induced on {induced})" if induced else "")
    if induced:
        return f"from {induced} (task {task_number(skill.get('source_position'))})"
    return "from an unrecorded source"


def format_step(step: ReadStep, max_chars: int = 2000, record: TaskRecord | None = None) -> str:
    """One trajectory step (`skilltransfer.log.trajectory_io.read_steps`) as readable text; a retrieval step's
    skills with their use from the task's ``record`` (`use_label`)."""
    if isinstance(step, RetrievalStep):
        uses = retrieval_uses(step, record)
        found = "\n".join(f"    - {s['name']} [{s['format']}] score {s['score']:.3f} {_origin(s)}"
                          + (f" LOAD ERROR: {s['load_error']}" if s.get("load_error") else "")
                          + (f" - {uses[s['id']]}" if s["id"] in uses else "")
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
