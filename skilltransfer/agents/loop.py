"""The paper's loop for one task (seed §3.1): `TaskLoop`, one object per task, as mini-swe-agent runs one agent per
task instance. Everything the task changes while it runs lives on the object; the stream-wide parts (model, memory,
settings) are given to it.

Read in this order: `TaskLoop.run` (start, the level, end), `TaskLoop.task_level` (one executor run on the whole
task), `TaskLoop.subtask_level` (planner -> executor -> summarizer until the planner says DONE, the agent calls
``complete_task``, ``subtask_limit`` subtasks were run or the shared ``step_limit`` executor budget is spent). The
executor's ReAct loop is `skilltransfer.agents.executor.Executor.run`; the planner and summarizer are
`skilltransfer.agents.roles`; reading and writing skills is `skilltransfer.agents.skill_io.TaskSkills`.

The task's harness (its guards) is asked at named hooks: a ``DONE`` that stands may be replaced by a plan
(``completion``), a planned subtask may end the task (``subtask_planned``); the loop names no guard. A prompt that
cannot fit the context window ends the task with ``context_exceeded`` (executor, planner) or keeps the previous
summary (summarizer).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.decisions import End
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.agents.executor import Executor, ExecutorRun
from skilltransfer.agents.harness.presets import make_harness
from skilltransfer.agents.prompts import NO_HISTORY, NO_SUMMARY, AgentPrompts, history_line
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.agents.roles import Planner, Summarizer
from skilltransfer.agents.skill_io import SkillSource, TaskSkills
from skilltransfer.agents.steps import new_call_log
from skilltransfer.agents.views import RunContext, SubtaskOutcome, SummaryView, TaskView
from skilltransfer.log import ActionStep, SummaryStep
from skilltransfer.protocols import Episode


class TaskLoop:
    """One task, from the first prompt to the exit status (see the module docstring).

    Args:
        source: the stream's model, memory and inducer.
        config: the agent's resolved settings; prompts: its prompts.
        episode: the task (left open: the caller evaluates and closes it).
        origin: ``stream_position`` and ``run_id`` of the task (the provenance of the skills it writes).
        on_event: receives each `AgentEvent`.
    """

    def __init__(self, source: SkillSource, config: AgentConfig, prompts: AgentPrompts, episode: Episode, *,
                 origin: Mapping[str, Any], on_event: Callable[[AgentEvent], None] | None = None) -> None:
        self.model, self.config, self.prompts, self.episode, self.on_event = source.model, config, prompts, \
            episode, on_event
        self.subtask: int | None = None
        """The subtask in progress (None at task level and before the first subtask)."""
        self.result = AgentResult(task_id=episode.task.id, calls=new_call_log(config, self._relay))
        self.harness = make_harness(config, prompts)
        self.skills = TaskSkills(source, config, prompts, episode, self.result, self.harness, origin)
        self.executor = Executor(self.model, prompts, config, self.result.calls, harness=self.harness)

    def run(self) -> AgentResult:
        """Solve the task; its result (the skills waiting for the verdict are written by `finish`)."""
        start = time.perf_counter()
        self._relay("task_start", {})
        try:
            if self.config.level == "task":
                self.task_level()
            else:
                self.subtask_level()
        finally:
            self.result.latency_s = time.perf_counter() - start
            self._relay("task_end", {})
        return self.result

    def finish(self, succeeded: bool) -> None:
        """Once the caller has evaluated the task: write the skills that waited for its verdict."""
        self.skills.induce_deferred(succeeded)

    def task_level(self) -> None:
        """The task-level agent: one executor run on the whole task, then induction from it."""
        instruction = self.episode.task.instruction
        skills, actions = self.skills.section(instruction, "instruction", None)
        message = self.prompts.executor_task.render(instruction=instruction, skills=skills)
        run = self.executor.run(RunContext(self.episode, message, budget=self.config.step_limit, actions=actions))
        self._record(run)
        self.result.exit_status = run.exit_status
        self.skills.induce(instruction, run.steps, None)

    def subtask_level(self) -> None:
        """The subtask-level agent: planner -> executor -> summarizer cycles (see the module docstring)."""
        cfg, result, harness, episode = self.config, self.result, self.harness, self.episode
        instruction = episode.task.instruction
        planner = Planner(self.model, self.prompts, cfg, result.calls, harness)
        summarizer = Summarizer(self.model, self.prompts, cfg, result.calls, harness)
        summary, used, spent = NO_SUMMARY, 0, 0  # steps taken (indices); steps of the task's budget
        history: list[str] = []
        result.exit_status = "subtask_limit"
        for index in range(cfg.subtask_limit):
            if spent >= cfg.step_limit:
                result.exit_status = "limits_exceeded"
                break
            task = TaskView(instruction, episode.docs(), tuple(history), index)
            try:
                plan = planner.next(task, summary, steps_left=cfg.step_limit - spent,
                                    subtasks_left=cfg.subtask_limit - index)
            except ContextExceeded:
                result.exit_status = "context_exceeded"
                break
            result.steps.append(plan)
            if plan.decision == "done":
                stands = harness.completion(task, plan)
                if stands.value is not plan:
                    plan = stands.value
                    plan.guards.extend(stands.records)
                    result.steps.append(plan)
            if plan.subtask is None:
                result.exit_status = "planner_done" if plan.decision == "done" else "planner_format_error"
                break
            planned = harness.subtask_planned(task, plan)
            plan.guards.extend(planned.records)
            if isinstance(planned.stop, End):
                result.exit_status = planned.stop.exit_status
                break
            self._relay("subtask_start", {"index": index})
            by_instruction = plan.query == "instruction" or cfg.retrieval_query == "instruction"
            query, kind = (instruction, "instruction") if by_instruction else (plan.subtask, "subtask")
            skills, actions = self.skills.section(query, kind, index)
            message = self.prompts.executor_subtask.render(instruction=instruction, summary=summary,
                                                           history="\n".join(history) or NO_HISTORY,
                                                           subtask=plan.subtask, skills=skills)
            run = self.executor.run(RunContext(episode, message, budget=cfg.step_limit - spent, first_index=used,
                                               subtask_index=index, subtask_mode=True, subtask=plan.subtask,
                                               actions=actions, earlier=result.actions))
            used += run.used
            spent += run.spent
            self._record(run)
            self.skills.induce(plan.subtask, run.steps, index)
            history.append(history_line(index + 1, plan.subtask, run.exit_status, run.result.strip()[:300]))
            harness.subtask_ended(task, SubtaskOutcome(plan, run.exit_status, history[-1]))
            if run.exit_status in ("submitted", "context_exceeded"):
                result.exit_status = run.exit_status
                break
            if plan.final:
                result.exit_status = "planner_done"
                break
            if spent < cfg.step_limit and index + 1 < cfg.subtask_limit:
                try:
                    step = summarizer.summarize(SummaryView(instruction, summary, result.actions), plan.subtask,
                                                run.steps, index=index)
                except ContextExceeded:
                    step = SummaryStep(index, summary, self.prompts.summarizer.id, status="context_exceeded")
                result.steps.append(step)
                summary = step.summary

    def _record(self, run: ExecutorRun) -> None:
        """An executor run's steps (its subagents' in order) and final context into the result."""
        ordered: list[ActionStep] = sorted([*run.steps, *run.delegated], key=lambda step: step.index)
        self.result.steps.extend(ordered)
        self.result.pending.clear()
        self.result.contexts.append(run.messages)

    def _relay(self, kind: str, data: dict[str, Any]) -> None:
        """A call log / executor event as an `AgentEvent` (the executor's steps are kept as they come)."""
        if kind == "subtask_start":
            self.subtask = data["index"]
        step = data.get("step")
        if kind == "step_end" and isinstance(step, ActionStep):
            self.result.pending.append(step)
        if self.on_event is None:
            return
        index = data.get("index") if kind == "step_start" else (step.index if isinstance(step, ActionStep) else None)
        self.on_event(AgentEvent(kind, self.result.task_id, self.result, subtask_index=self.subtask, step_index=index,
                                 step_limit=self.config.step_limit, role=data.get("role"),
                                 tokens=int(data.get("tokens", 0))))
