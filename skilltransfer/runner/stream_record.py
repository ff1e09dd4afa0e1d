"""A stream's record of each task: its trajectory file written while it runs (`LiveTrajectory`), its `TaskRecord`
assembled from the agent's result and the verdict (`task_record`: tokens by role, retrieved skills and how they were
followed or run, induced skills, routes, exposures, picks, the context windows, the cost), and its commit to the run
folder (`commit_task`).

While a task runs its trajectory file is rewritten as it grows (status "running", at most every ``PARTIAL_WRITE_S``
seconds); an error that ends the task mid-way writes it once more (status "aborted", with the error) before the run
stops, so a crash, Ctrl-C or an endpoint that stays down leaves the partial trajectory on disk. Each record carries the
task's `ContextAccount` (`context_account`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.coordination import CoordinationResult
from skilltransfer.llm.strict import param_changes
from skilltransfer.log import (
    USED_SHARE,
    ActionStep,
    CoordinationRecord,
    Exposure,
    InducedSkill,
    LibraryDraw,
    RetrievalStep,
    RetrievedSkill,
    RouteRecord,
    RunFolder,
    TaskRecord,
    TrajectoryLog,
    TrajectoryStatus,
    picks_from_steps,
)
from skilltransfer.log.provenance import merged
from skilltransfer.memory.capacity import TaskOutcome
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.masking import MASK_LOG_KIND
from skilltransfer.memory.near_miss import RELEVANT_KEY, right_skills
from skilltransfer.memory.snapshots import SNAPSHOT_SKILLS, SNAPSHOTS, snapshot_texts
from skilltransfer.metrics.following import api_calls, following_share, skill_calls
from skilltransfer.metrics.windows import ContextAccount, ContextWindow
from skilltransfer.protocols import Score, SkillStore, TaskSpec
from skilltransfer.runner.stream_build import StreamParts
from skilltransfer.settings.config import StreamConfig

PARTIAL_WRITE_S = 2.0
"""Least seconds between two writes of a running task's trajectory file."""


class LiveTrajectory:
    """Writes one task's trajectory file while it runs (see the module docstring)."""

    def __init__(self, folder: RunFolder, relative: str, task: TaskSpec, position: int, *,
                 interval_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.folder, self.relative, self.task, self.position = folder, relative, task, position
        self.interval_s = PARTIAL_WRITE_S if interval_s is None else interval_s
        self.clock = clock
        self.result: AgentResult | None = None
        self.plan: dict[str, Any] | None = None
        """A coordinated task's plan (`skilltransfer.runner.coordinated.plan_info`)."""
        self._last = clock()  # the first write comes PARTIAL_WRITE_S into the task (fast tasks write once)

    def on_event(self, event: AgentEvent) -> None:
        self.result = event.result
        if event.kind in ("step_end", "call_end") and self.clock() - self._last >= self.interval_s:
            self.write("running")

    def write(self, status: TrajectoryStatus, *, score: dict[str, Any] | None = None,
              error: str | None = None) -> None:
        result = self.result
        log = TrajectoryLog(task_id=self.task.id, position=self.position, instruction=self.task.instruction,
                            status=status, exit_status=result.exit_status if result is not None else "",
                            error=error, score=score or {},
                            steps=[s.to_dict() for s in result.steps_so_far()] if result is not None else [],
                            calls=self.folder.log_calls(result.calls.calls) if result is not None else [],
                            contexts=result.contexts if result is not None else [],
                            coordination=self._coordination(result))
        self.folder.write_trajectory(self.relative, log)
        self._last = self.clock()

    def _coordination(self, result: AgentResult | None) -> dict[str, Any] | None:
        if not isinstance(result, CoordinationResult):
            return None
        return {**result.coordination_dict(), "plan": self.plan}


def _coordination_record(result: AgentResult, plan: dict[str, Any] | None) -> CoordinationRecord | None:
    if not isinstance(result, CoordinationResult) or result.audit is None or plan is None:
        return None
    audit = result.audit.to_dict()
    plan_tokens = sum(c.prompt_tokens + c.completion_tokens for c in result.calls.calls
                      if c.role == "plan_writer" and c.error is None)
    return CoordinationRecord(interface=result.interface, plan_fingerprint=result.plan_fingerprint,
                              plan_written=bool(plan["written_now"]), plan_fallback=plan["fallback"],
                              nodes=audit["n_nodes"], completed_nodes=audit["completed_nodes"],
                              violated_constraints=audit["violated_constraints"],
                              unverified_constraints=audit["unverified_constraints"],
                              submitted_by=audit["submitted_by"], not_run_nodes=audit["not_run_nodes"],
                              plan_tokens=plan_tokens)


def context_account(result: AgentResult) -> ContextAccount:
    """The task's context windows: the main agent's executor calls, then one window per ``run_skill`` subagent
    (its executor calls, the inputs sent, its seed prompt and the output returned); loads, opened nodes and file
    reads.
    Planner, summarizer and induction calls are not in a window (``tokens_by_role`` has them)."""
    account = ContextAccount()
    windows: dict[int, ContextWindow] = {0: account.main}
    for step in sorted(result.actions, key=lambda s: s.skill_action.get("window", 0) if s.skill_action else 0):
        action = step.skill_action
        if action is None or step.error and action["action"] != "run_skill":
            continue
        if action["action"] == "load_skill":
            account.skill_loads += 1
        elif action["action"] == "open_node":
            account.nodes_opened += 1
        elif action["action"] == "read_skill_file":
            account.file_reads += 1
        elif "window" in action:
            window = account.open_subagent(action["target"], sent_tokens=action["sent_tokens"],
                                           seed_tokens=action["seed_tokens"])
            window.returned_tokens = action.get("returned_tokens", 0)
            windows[action["window"]] = window
    for call in result.calls.calls:
        if call.role == "executor" and call.error is None:
            windows.get(call.window, account.main).record_call(call.prompt_tokens, call.completion_tokens)
    return account


def task_record(cfg: StreamConfig, position: int, task: TaskSpec, result: AgentResult, score: Score,
                memory: SkillStore | None, trajectory: str, plan: dict[str, Any] | None = None,
                library_draw: LibraryDraw | None = None) -> TaskRecord:
    """A task's line of ``results.jsonl``, assembled from what its agent did (``result``) and the verdict."""
    by_role: dict[str, dict[str, int]] = {}
    answered = [call for call in result.calls.calls if call.error is None]
    for call in answered:
        row = by_role.setdefault(call.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "dependency": 0})
        row["calls"] += 1
        row["prompt_tokens"] += call.prompt_tokens
        row["completion_tokens"] += call.completion_tokens
        row["dependency"] += call.dependency
        if call.reasoning_tokens:
            row["reasoning_tokens"] = row.get("reasoning_tokens", 0) + call.reasoning_tokens
    retrieved = [RetrievedSkill(skill_id=s["id"], name=s["name"], format=s["format"], score=s["score"],
                                subtask_index=step.subtask_index, query_kind=step.query_kind,
                                source_task_id=s["source_task_id"], source_position=s["source_position"],
                                load_error=s["load_error"], followed=followed(after, s, memory), ran=ran(after, s),
                                source=s.get("source"), library=s.get("library"), rank=rank)
                 for step in result.retrievals for after in [actions_after(result, step)]
                 for rank, s in enumerate(step.skills, start=1)]
    picks = picks_from_steps(result.steps, [(r.skill_id, r.name, r.followed) for r in retrieved if r.format == "text"],
                             used_share=USED_SHARE)
    induced = [InducedSkill(subtask_index=s.subtask_index, status=s.status, skill_id=s.skill_id,
                            skill_name=s.skill_name, target_id=s.target_id, reason=s.reason, prompt_id=s.prompt_id)
               for s in result.inductions]
    routes = [RouteRecord.from_log(step.route, step.subtask_index) for step in result.retrievals
              if step.route is not None and step.route.get("kind") != MASK_LOG_KIND]
    calls = result.calls
    price = cfg.model.price
    cost = round(price.cost(calls.prompt_tokens, calls.completion_tokens), 6) if price is not None else None
    return TaskRecord(cost_usd=cost, run=cfg.run, condition=cfg.condition, position=position, task_id=task.id,
                      difficulty=task.difficulty, template=task.template, reward=score.reward, success=score.success,
                      exit_status=result.exit_status, steps=len(result.actions), subtasks=result.n_subtasks,
                      latency_s=round(result.latency_s, 4), model_calls=len(answered),
                      prompt_tokens=calls.prompt_tokens, completion_tokens=calls.completion_tokens,
                      dependency=calls.dependency, peak_context=calls.peak_context,
                      context_fitted_calls=calls.fitted_calls, reasoning_tokens=calls.reasoning_tokens,
                      length_cut_calls=calls.length_cut_calls, tokens_by_role=by_role,
                      retrieved=retrieved, induced=induced, memory_size=len(memory) if memory is not None else 0,
                      trajectory=trajectory, coordination=_coordination_record(result, plan),
                      context_account=context_account(result).to_dict(), routes=routes,
                      exposures=exposures(result), picks=picks, relevant_skills=relevant_skills(task, memory),
                      library_draw=library_draw)


def relevant_skills(task: TaskSpec, memory: SkillStore | None) -> list[str] | None:
    """The ids of the task's right skills as known when it ran (`skilltransfer.memory.near_miss.right_skills`): named
    by the task's metadata in any memory, or induced from the task itself in a frozen library (read-only, or beside
    the agent's own memory); None when unknown."""
    if memory is None:
        return None
    library = memory.library if isinstance(memory, JointMemory) else memory
    if not library.read_only and RELEVANT_KEY not in task.metadata:
        return None
    return right_skills(task, library)


def actions_after(result: AgentResult, step: RetrievalStep) -> list[ActionStep]:
    """The action steps the task ran after this retrieval (the rest of the task: its own subtask and the later
    ones)."""
    after = result.steps[result.steps.index(step) + 1:] if step in result.steps else []
    return [s for s in after if isinstance(s, ActionStep)]


def followed(after: Sequence[ActionStep], hit: dict[str, Any], memory: SkillStore | None) -> float | None:
    """A retrieved text skill's following share (`skilltransfer.metrics.following`) over the code of ``after``, the
    actions after its retrieval (`actions_after`)."""
    skill = next((s for s in memory if s.id == hit["id"]), None) if memory is not None else None
    if hit["format"] != "text" or skill is None:
        return None
    code = "\n".join(s.action for s in after if s.action)
    return following_share(skill_calls(skill.body), api_calls(code))


def ran(after: Sequence[ActionStep], hit: dict[str, Any]) -> int | None:
    """A retrieved code skill's calls, as the sandbox recorded them (`ActionStep.skill_calls`), in ``after``, the
    actions after its retrieval (`actions_after`); None for other formats."""
    if hit["format"] != "code":
        return None
    return sum(s.skill_calls.get(hit["id"], 0) for s in after)


def exposures(result: AgentResult) -> list[Exposure]:
    """A masked stream's draws, one per (task, skill) candidate: the first retrieval that had the skill as a
    candidate (a later one reuses the draw, `skilltransfer.memory.masking`)."""
    out: dict[str, Exposure] = {}
    for step in result.retrievals:
        if step.route is None or step.route.get("kind") != MASK_LOG_KIND:
            continue
        for row in step.route["candidates"]:
            if row["id"] not in out:
                out[row["id"]] = Exposure(skill_id=row["id"], propensity=row["propensity"], shown=row["shown"],
                                          rank=row["rank"], score=row["score"], subtask_index=step.subtask_index,
                                          name=row.get("name"))
    return list(out.values())


def task_outcome(record: TaskRecord) -> TaskOutcome:
    """What the eviction policies read of a task's record (`skilltransfer.memory.capacity`)."""
    return TaskOutcome(record.position, record.success, tuple(r.skill_id for r in record.retrieved),
                       tuple((e.skill_id, e.propensity, e.shown) for e in record.exposures))


def commit_task(parts: StreamParts, record: TaskRecord) -> None:
    """Commit a performed task (record, memory: the retrieved skills' usage counts first, so tasks performed side by
    side count in stream order) and what the run learnt of its model so far."""
    folder = parts.folder
    if parts.memory is not None:
        memory = parts.memory
        memory.record_retrieval([hit.skill_id for hit in record.retrieved if hit.skill_id in memory], record.success)
    own = parts.memory.own if isinstance(parts.memory, JointMemory) else parts.memory  # a library beside: not saved
    memory_files = None
    if own is not None:  # the snapshot list committed with the memory (`skilltransfer.memory.snapshots`)
        snapshots, archive = snapshot_texts(folder.memory_dir, record.position, record.task_id, own)
        memory_files = {SNAPSHOTS: snapshots, SNAPSHOT_SKILLS: archive}
    folder.commit(record, own, save_with_memory=parts.retriever.save if parts.retriever is not None else None,
                  memory_files=memory_files)
    changes = param_changes(parts.agent.model)
    if changes != parts.recorded.get("adaptations"):
        folder.record_adaptations(changes)
        parts.recorded["adaptations"] = dict(changes)
    if parts.served is not None:
        seen = parts.served.seen()
        if seen != parts.recorded.get("served"):
            before = folder.read_config().provenance
            folder.record_provenance(merged(before, seen) if before else before)
            parts.recorded["served"] = seen

