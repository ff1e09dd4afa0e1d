"""The task-level and subtask-level agents (seed §3.1) with skill retrieval and induction (seed §3.2).

One class runs both: the subtask-level agent cycles planner -> executor -> summarizer until the planner says DONE,
the agent calls ``complete_task``, 15 subtasks were run or the shared 50-step executor budget is spent; the task-level
agent is the special case with the whole task as its single subtask and only the executor. With a memory, skills are
retrieved before each (sub)task (top-k by description; code skills are also loaded into the episode's namespace) and,
with an inducer, one skill is induced from each finished (sub-)trajectory and added to the memory right away.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.executor import Executor, ExecutorRun
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.roles import Planner, Summarizer
from skilltransfer.agents.steps import ActionStep, CallLog, InductionStep, RetrievalStep, Step
from skilltransfer.memory.skill import Provenance
from skilltransfer.protocols import ChatModel, Episode, Message

NO_SUMMARY = "(nothing done yet)"


@dataclass
class AgentResult:
    """Everything one task produced: typed steps, model calls, executor contexts and the exit status."""

    task_id: str
    steps: list[Step] = field(default_factory=list)
    calls: CallLog = field(default_factory=CallLog)
    contexts: list[list[Message]] = field(default_factory=list)
    """The final message list of each executor run (one per subtask)."""
    exit_status: str = ""
    """"submitted", "planner_done", "planner_format_error", "subtask_limit" or "limits_exceeded"."""
    latency_s: float = 0.0

    @property
    def actions(self) -> list[ActionStep]:
        return [s for s in self.steps if isinstance(s, ActionStep)]

    @property
    def n_subtasks(self) -> int:
        return len({s.subtask_index for s in self.actions}) if self.actions else 0

    @property
    def retrievals(self) -> list[RetrievalStep]:
        return [s for s in self.steps if isinstance(s, RetrievalStep)]

    @property
    def inductions(self) -> list[InductionStep]:
        return [s for s in self.steps if isinstance(s, InductionStep)]


class Agent:
    """A task-level (``config.level="task"``) or subtask-level agent.

    Args:
        model: the policy (also used by the planner, summarizer and, usually, the inducer).
        memory: a skill memory (``SkillStore``) to retrieve from; None runs without skills.
        inducer: induces one skill per finished (sub-)trajectory into ``memory`` (``skilltransfer.induction.Inducer``);
            None (or a read-only memory) disables induction.
        config: agent settings; keyword arguments override its fields.
    """

    def __init__(self, model: ChatModel, *, memory: Any = None, inducer: Any = None,
                 config: AgentConfig | None = None, **kwargs: Any) -> None:
        self.model = model
        self.memory = memory
        self.inducer = inducer
        self.config = AgentConfig.model_validate({**(config or AgentConfig()).model_dump(), **kwargs})
        self.prompts = AgentPrompts.load(self.config.prompt_dir)

    def run(self, episode: Episode, *, stream_position: int | None = None, run_id: str | None = None) -> AgentResult:
        """Solve one task; the episode is left open (the caller evaluates and closes it)."""
        start = time.perf_counter()
        result = AgentResult(task_id=episode.task.id)
        origin = {"stream_position": stream_position, "run_id": run_id}
        try:
            if self.config.level == "task":
                self._run_task(episode, result, origin)
            else:
                self._run_subtasks(episode, result, origin)
        finally:
            result.latency_s = time.perf_counter() - start
        return result

    # ----------------------------------------------------------------- the two levels
    def _run_task(self, episode: Episode, result: AgentResult, origin: dict[str, Any]) -> None:
        instruction = episode.task.instruction
        skills = self._retrieve(episode, result, instruction, "instruction", None)
        message = self.prompts.executor_task.render(instruction=instruction, skills=skills)
        run = Executor(self.model, self.prompts, self.config, result.calls).run(
            episode, message, subtask_index=None, first_index=0, budget=self.config.step_limit, subtask_mode=False)
        self._record(result, run)
        result.exit_status = run.exit_status
        self._induce(episode, result, instruction, run.steps, None, origin)

    def _run_subtasks(self, episode: Episode, result: AgentResult, origin: dict[str, Any]) -> None:
        instruction, cfg, calls = episode.task.instruction, self.config, result.calls
        planner = Planner(self.model, self.prompts, cfg, calls)
        summarizer = Summarizer(self.model, self.prompts, cfg, calls)
        executor = Executor(self.model, self.prompts, cfg, calls)
        summary, used = NO_SUMMARY, 0
        history: list[str] = []
        result.exit_status = "subtask_limit"
        for index in range(cfg.subtask_limit):
            if used >= cfg.step_limit:
                result.exit_status = "limits_exceeded"
                break
            plan = planner.next(episode.docs(), instruction, summary, history, index=index,
                                steps_left=cfg.step_limit - used, subtasks_left=cfg.subtask_limit - index)
            result.steps.append(plan)
            if plan.decision != "subtask" or plan.subtask is None:
                result.exit_status = "planner_done" if plan.decision == "done" else "planner_format_error"
                break
            by_subtask = cfg.retrieval_query == "subtask"
            query, kind = (plan.subtask, "subtask") if by_subtask else (instruction, "instruction")
            skills = self._retrieve(episode, result, query, kind, index)
            message = self.prompts.executor_subtask.render(instruction=instruction, summary=summary,
                                                           subtask=plan.subtask, skills=skills)
            run = executor.run(episode, message, subtask_index=index, first_index=used, budget=cfg.step_limit - used,
                               subtask_mode=True)
            used += len(run.steps)
            self._record(result, run)
            self._induce(episode, result, plan.subtask, run.steps, index, origin)
            history.append(f"{index + 1}. {plan.subtask} -> {run.exit_status}: {run.result.strip()[:300]}")
            if run.exit_status == "submitted":
                result.exit_status = "submitted"
                break
            if used < cfg.step_limit and index + 1 < cfg.subtask_limit:
                step = summarizer.summarize(instruction, summary, plan.subtask, run.steps, index=index)
                result.steps.append(step)
                summary = step.summary

    @staticmethod
    def _record(result: AgentResult, run: ExecutorRun) -> None:
        result.steps.extend(run.steps)
        result.contexts.append(run.messages)

    # ----------------------------------------------------------------- memory: read before, write after
    def _retrieve(self, episode: Episode, result: AgentResult, query: str, kind: str, index: int | None) -> str:
        """Retrieve top-k skills, load code skills into the namespace, and return the context section ('' if none)."""
        if self.memory is None or self.config.top_k <= 0:
            return ""
        hits = self.memory.retrieve(query, k=self.config.top_k)
        step = RetrievalStep(query=query, query_kind=kind, subtask_index=index)
        load_errors: dict[str, str | None] = {}
        for skill, _ in reversed(hits):  # worst first, so the best-ranked definition wins a name clash
            if skill.format == "code":
                observation = episode.load_code(skill.body)
                load_errors[skill.id] = observation.output if observation.error else None
        for skill, score in hits:
            step.skills.append({"id": skill.id, "name": skill.name, "format": skill.format, "score": round(score, 6),
                                "source_task_id": skill.provenance.source_task_id,
                                "source_position": skill.provenance.stream_position,
                                "load_error": load_errors.get(skill.id)})
        result.steps.append(step)
        if not hits:
            return ""
        return self.prompts.skills_section.render(skills="\n".join(skill.render() for skill, _ in hits))

    def _induce(self, episode: Episode, result: AgentResult, goal: str, actions: list[ActionStep],
                index: int | None, origin: dict[str, Any]) -> None:
        """Induce one skill from the finished (sub-)trajectory and add it to memory (unparseable replies are logged)."""
        if self.inducer is None or self.memory is None or getattr(self.memory, "read_only", False):
            return
        if not any(step.action is not None for step in actions):
            return  # nothing was executed: there is no procedure to learn from
        provenance = Provenance(source_task_id=episode.task.id, subtask_index=index, **origin)
        induced = self.inducer.induce(goal, actions, level=self.config.level, calls=result.calls,
                                      provenance=provenance)
        step = InductionStep(subtask_index=index, prompt_id=induced.prompt_id, status="unparseable",
                             reason=induced.error, reply=induced.reply, prompt_tokens=induced.prompt_tokens,
                             completion_tokens=induced.completion_tokens)
        if induced.skill is not None:
            added = self.memory.add(induced.skill)
            step.status, step.skill_id, step.target_id = added.action, added.skill_id, added.target_id
            step.skill_name = induced.skill.name
            step.reason = "; ".join(part for part in (added.reason, induced.error) if part)
        result.steps.append(step)
