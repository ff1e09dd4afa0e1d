"""The task-level and subtask-level agents (seed §3.1) with skill retrieval and induction (seed §3.2).

One class runs both: the subtask-level agent cycles planner -> executor -> summarizer until the planner says DONE,
the agent calls ``complete_task``, 15 subtasks were run or the shared 50-step executor budget is spent; the task-level
agent is the special case with the whole task as its single subtask and only the executor. With a memory, skills are
retrieved before each (sub)task (top-k by description; code skills are also loaded into the episode's namespace) and,
with an inducer, one skill is induced from each finished (sub-)trajectory and added to the memory right away.

The harness (`skilltransfer.agents.harness`: the guards of ``config.harness`` / ``config.guards``, fresh per task) is
asked at named hooks: a ``DONE`` that stands may be replaced by a plan (``completion``), a planned subtask may end the
task (``subtask_planned``), retrieved skills, a trajectory about to be induced from and an induced skill may be
rewritten or refused; the planner, executor and summarizer ask their own hooks. The loop names no guard.

Every prompt is fitted to the model's context window (`skilltransfer.agents.context`). When one cannot fit: an
executor or planner prompt ends the task with exit status ``context_exceeded`` (the trajectory so far is kept and
induced from, like any failed task); a summarizer prompt keeps the previous summary (``SummaryStep.status``); an
induction prompt writes no skill (``InductionStep.status``). ``on_event`` receives `AgentEvent`s (task, subtask,
step and model-call starts and ends) for progress displays and step-by-step trajectory writes.

``config.skill_exec`` and ``config.library_organization`` decide how retrieved skills are shown and executed
(`skilltransfer.agents.skill_actions`); the default (inline, flat) is the skills section as it always was. When the
inducer needs the task's verdict (``only_successful`` or the ``contract`` variant), induction waits for it: the
(sub-)trajectories are kept in ``AgentResult.deferred`` and induced by `Agent.induce_deferred` once the caller has
evaluated the task (a subtask's trajectory is given its task's verdict).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skilltransfer.agents.config import AgentConfig, role_budgets
from skilltransfer.agents.context import ContextFitter
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.agents.executor import Executor, ExecutorRun
from skilltransfer.agents.harness import make_harness, resolve_agent
from skilltransfer.agents.harness.base import (
    End,
    GuardRecord,
    InductionView,
    Refuse,
    RunContext,
    SubtaskOutcome,
    SummaryView,
    TaskView,
)
from skilltransfer.agents.prompts import NO_HISTORY, NO_SUMMARY, AgentPrompts, history_line
from skilltransfer.agents.result import AgentEvent, AgentResult, DeferredInduction
from skilltransfer.agents.roles import Planner, Summarizer
from skilltransfer.agents.skill_actions import SkillActions, organize_retrieved
from skilltransfer.agents.steps import (
    ActionStep,
    CallLog,
    InductionStep,
    RetrievalStep,
    SummaryStep,
    TrajectoryText,
)
from skilltransfer.induction.abstraction import instance_values
from skilltransfer.induction.inducer import Induced, Inducer
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.memory.organization import LibraryView
from skilltransfer.protocols import ChatModel, Completion, Episode, Message, Retrieval, SkillRetriever, SkillStore
from skilltransfer.skill import Provenance, Skill

__all__ = ["NO_SUMMARY", "Agent", "AgentEvent", "AgentResult"]



class _LoggedModel:
    """The agent's model behind a task's call log under one role (what a `SkillRetriever` calls): every call is
    fitted and recorded like the agent's own; a prompt that cannot fit raises ``ContextLengthError``."""

    def __init__(self, model: ChatModel, calls: CallLog, role: str) -> None:
        self.model, self.calls, self.role = model, calls, role

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        try:
            return self.calls.complete(self.model, messages, self.role, **params)
        except ContextExceeded as exc:
            raise ContextLengthError(exc.message) from exc


class Agent:
    """A task-level (``config.level="task"``) or subtask-level agent.

    Args:
        model: the policy (also used by the planner, summarizer and, usually, the inducer).
        memory: a skill memory (``SkillStore``) to retrieve from; None runs without skills.
        inducer: induces one skill per finished (sub-)trajectory into ``memory`` (``skilltransfer.induction.Inducer``);
            None (or a read-only memory) disables induction.
        config: agent settings; keyword arguments override its fields.
        on_event: called with each `AgentEvent` (may be set later as the ``on_event`` attribute).
        organization: a frozen library organisation (tree/graph) the retrieved skills are shown in; skills it does
            not hold are grouped by source task (`skilltransfer.agents.skill_actions.organize_retrieved`).
        retriever: chooses each (sub)task's skills section from ``memory``; None: the top-k skills by description
            (flat reuse). The agent does not know how it chooses.
        role_models: another model for a role the retriever calls (``{"verifier": m}``); unlisted roles use ``model``.
    """

    def __init__(self, model: ChatModel, *, memory: SkillStore | None = None, inducer: Inducer | None = None,
                 config: AgentConfig | None = None, on_event: Callable[[AgentEvent], None] | None = None,
                 organization: LibraryView | None = None, retriever: SkillRetriever | None = None,
                 role_models: Mapping[str, ChatModel] | None = None, **kwargs: Any) -> None:
        self.model = model
        self.role_models = dict(role_models or {})
        self.organization = organization
        self.memory = memory
        self.retriever = retriever
        self.inducer = inducer
        self.config = resolve_agent(AgentConfig.model_validate({**(config or AgentConfig()).model_dump(), **kwargs}),
                                    "small-model")
        self.prompts = AgentPrompts.load(self.config.prompt_dir)
        self.on_event = on_event

    def run(self, episode: Episode, *, stream_position: int | None = None, run_id: str | None = None) -> AgentResult:
        """Solve one task; the episode is left open (the caller evaluates and closes it)."""
        start = time.perf_counter()
        budgets, capped = role_budgets(self.config)
        fitter = ContextFitter(budgets, self.config.context_keep_steps, cap_to_window=capped)
        result = AgentResult(task_id=episode.task.id, calls=CallLog(fitter=fitter),
                             harness=make_harness(self.config, self.prompts))
        state: dict[str, Any] = {"subtask": None}
        result.calls.on_event = lambda kind, data: self._relay(result, state, kind, data)
        origin = {"stream_position": stream_position, "run_id": run_id}
        self._relay(result, state, "task_start", {})
        try:
            if self.config.level == "task":
                self._run_task(episode, result, origin)
            else:
                self._run_subtasks(episode, result, origin, state)
        finally:
            result.latency_s = time.perf_counter() - start
            self._relay(result, state, "task_end", {})
        return result

    def _relay(self, result: AgentResult, state: dict[str, Any], kind: str, data: dict[str, Any]) -> None:
        """Turn a call log / executor event into an `AgentEvent` (and keep the executor's steps as they come)."""
        if kind == "subtask_start":
            state["subtask"] = data["index"]
        step = data.get("step")
        if kind == "step_end" and isinstance(step, ActionStep):
            result.pending.append(step)
        if self.on_event is None:
            return
        index = data.get("index") if kind == "step_start" else (step.index if isinstance(step, ActionStep) else None)
        self.on_event(AgentEvent(kind, result.task_id, result, subtask_index=state["subtask"], step_index=index,
                                 step_limit=self.config.step_limit, role=data.get("role"),
                                 tokens=int(data.get("tokens", 0))))

    # ----------------------------------------------------------------- the two levels
    def _run_task(self, episode: Episode, result: AgentResult, origin: dict[str, Any]) -> None:
        instruction = episode.task.instruction
        skills, actions = self._skills_section(episode, result, instruction, "instruction", None)
        message = self.prompts.executor_task.render(instruction=instruction, skills=skills)
        run = self._executor(result).run(RunContext(episode, message, budget=self.config.step_limit,
                                                    actions=actions))
        self._record(result, run)
        result.exit_status = run.exit_status
        self.induce(episode, result, instruction, run.steps, None, origin)

    def _executor(self, result: AgentResult) -> Executor:
        return Executor(self.model, self.prompts, self.config, result.calls, harness=result.harness)

    def _run_subtasks(self, episode: Episode, result: AgentResult, origin: dict[str, Any],
                      state: dict[str, Any]) -> None:
        instruction, cfg, calls, harness = episode.task.instruction, self.config, result.calls, result.harness
        planner = Planner(self.model, self.prompts, cfg, calls, harness)
        summarizer = Summarizer(self.model, self.prompts, cfg, calls, harness)
        executor = self._executor(result)
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
            self._relay(result, state, "subtask_start", {"index": index})
            by_instruction = plan.query == "instruction" or cfg.retrieval_query == "instruction"
            query, kind = (instruction, "instruction") if by_instruction else (plan.subtask, "subtask")
            skills, actions = self._skills_section(episode, result, query, kind, index)
            message = self.prompts.executor_subtask.render(instruction=instruction, summary=summary,
                                                           history="\n".join(history) or NO_HISTORY,
                                                           subtask=plan.subtask, skills=skills)
            run = executor.run(RunContext(episode, message, budget=cfg.step_limit - spent, first_index=used,
                                          subtask_index=index, subtask_mode=True, subtask=plan.subtask,
                                          actions=actions, earlier=result.actions))
            used += run.used
            spent += run.spent
            self._record(result, run)
            self.induce(episode, result, plan.subtask, run.steps, index, origin)
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

    @staticmethod
    def _record(result: AgentResult, run: ExecutorRun) -> None:
        ordered: list[ActionStep] = sorted([*run.steps, *run.delegated], key=lambda step: step.index)
        result.steps.extend(ordered)
        result.pending.clear()
        result.contexts.append(run.messages)

    # ----------------------------------------------------------------- memory: read before, write after
    def retrieve(self, episode: Episode, result: AgentResult, query: str, kind: str,
                 index: int | None) -> list[tuple[Skill, float]]:
        """Retrieve the skills for ``query`` (the top-k, or what the retriever chooses), load code skills into the
        namespace and record a `RetrievalStep` in ``result``; [] without a memory (or with ``top_k`` 0)."""
        return self._retrieve(episode, result, query, kind, index).hits

    def _retrieve(self, episode: Episode, result: AgentResult, query: str, kind: str, index: int | None) -> Retrieval:
        if self.memory is None or self.config.top_k <= 0:
            return Retrieval([])
        records: list[GuardRecord] = []
        if self.retriever is None:
            shaped = result.harness.retrieved(query, Retrieval(self.memory.retrieve(query, k=self.config.top_k)))
            got, records = shaped.value, shaped.records
        else:
            got = self.retriever.retrieve(query, self.config.top_k,
                                          lambda role: _LoggedModel(self.role_models.get(role, self.model),
                                                                    result.calls, role))
        step = RetrievalStep(query=query, query_kind=kind, subtask_index=index, route=got.log,
                             below_min_score=sum(len(record.removed) for record in records), guards=records)
        load_errors: dict[str, str | None] = {}
        for skill, _ in reversed(got.hits):  # worst first, so the best-ranked definition wins a name clash
            if skill.format == "code":
                observation = episode.load_code(skill.body)
                load_errors[skill.id] = observation.output if observation.error else None
        for skill, score in got.hits:
            step.skills.append({"id": skill.id, "name": skill.name, "format": skill.format, "score": round(score, 6),
                                "source_task_id": skill.provenance.source_task_id,
                                "source_position": skill.provenance.stream_position,
                                "load_error": load_errors.get(skill.id)})
        result.steps.append(step)
        return got

    def _skills_section(self, episode: Episode, result: AgentResult, query: str, kind: str,
                        index: int | None) -> tuple[str, SkillActions | None]:
        """Retrieve, then the executor prompt's skills section ('' if none) and the skill actions it offers."""
        got = self._retrieve(episode, result, query, kind, index)
        if self.memory is None or self.config.top_k <= 0:
            return "", None
        cfg = self.config
        whole = cfg.library_exposure == "whole"
        if cfg.skill_exec == "inline" and cfg.library_organization == "flat" and not whole:
            blocks = got.blocks if got.blocks is not None else [skill.render() for skill, _ in got.hits]
            result.calls.skills = blocks  # context fitting may cut the worst-ranked
            if not blocks:
                return "", None
            return self.prompts.skills_section.render(skills="\n".join(blocks)), None
        result.calls.skills = []
        hits = [skill for skill, _ in got.hits]
        skills = list(self.memory) if whole else hits  # whole: the organised library; the hits are the first view
        if not skills:
            return "", None
        organized = organize_retrieved(cfg.library_organization, skills, self.organization)
        view = LibraryView(organized, skills)
        if organized.nodes or whole:
            retrieval = result.retrievals[-1]
            retrieval.organization = {"kind": organized.kind, "built_by": organized.built_by,
                                      "nodes": len(organized.nodes), "exposure": cfg.library_exposure,
                                      "skills": len(skills)}
        workspace = getattr(episode, "workspace", None)
        actions = SkillActions(cfg.skill_exec, view, self.prompts, Path(workspace) if workspace is not None else None,
                               first_view=hits if whole else [])
        return actions.section(), actions

    def induce(self, episode: Episode, result: AgentResult, goal: str, actions: list[ActionStep],
               index: int | None, origin: dict[str, Any]) -> None:
        """Induce one skill from the finished (sub-)trajectory and add it to memory, recording an `InductionStep` in
        ``result`` (unparseable replies too); nothing without an inducer or a writable memory.

        Args:
            origin: ``stream_position`` and ``run_id`` for the skill's provenance.
        """
        if self.inducer is None or self.memory is None or self.memory.read_only:
            return
        if not any(step.action is not None for step in actions):
            return  # nothing was executed: there is no procedure to learn from
        if self._writes_sets:  # the set is induced from the whole task: its gate applies to the whole task
            result.deferred.append(DeferredInduction(goal, list(actions), index, dict(origin)))
            return
        due = result.harness.induction_due(InductionView(goal, actions, episode.docs()))
        if isinstance(due.stop, Refuse):
            result.steps.append(InductionStep(subtask_index=index, prompt_id=self.inducer.prompt_id,
                                              status=due.stop.reason, reason=due.stop.message, guards=due.records))
            return
        if self.needs_verdict:
            result.deferred.append(DeferredInduction(goal, list(actions), index, dict(origin)))
            return
        self._induce(episode, result, goal, actions, index, origin, None)

    @property
    def needs_verdict(self) -> bool:
        """Whether induction waits for the task's verdict (`InductionConfig.needs_verdict`)."""
        cfg = self.inducer.config if self.inducer is not None else None
        return cfg is not None and cfg.needs_verdict

    def induce_deferred(self, episode: Episode, result: AgentResult, succeeded: bool) -> None:
        """Induce the (sub-)trajectories kept for the verdict (see the module docstring), each with ``succeeded``."""
        pending, result.deferred = result.deferred, []
        if pending and self._writes_sets:
            self._induce_set(episode, result, pending, succeeded)
            return
        for item in pending:
            self._induce(episode, result, item.goal, item.actions, item.index, item.origin, succeeded)

    @property
    def _writes_sets(self) -> bool:
        """Whether induction writes one set of skills per task (`Inducer.induce_set`: ``skills_per_task`` at subtask
        level): every subtask's steps wait for the task's end."""
        return self.inducer is not None and self.inducer.config.skills_per_task is not None \
            and self.config.level == "subtask"

    def _induce_set(self, episode: Episode, result: AgentResult, pending: list[DeferredInduction],
                    succeeded: bool) -> None:
        """One call for the task's set of contract skills (`Inducer.induce_set`): the instruction and its subtasks
        as the goal, every subtask's steps as the trajectory; one `InductionStep` per skill of the reply."""
        assert self.inducer is not None
        assert self.memory is not None
        instruction = episode.task.instruction
        goal = instruction + "\n\nSubtasks it was carried out in:\n" + "\n".join(
            f"{n}. {item.goal}" for n, item in enumerate(pending, start=1))
        actions = [step for item in pending for step in item.actions]
        due = result.harness.induction_due(InductionView(goal, actions, episode.docs()))
        if isinstance(due.stop, Refuse):
            result.steps.append(InductionStep(subtask_index=None, prompt_id=self.inducer.prompt_id,
                                              status=due.stop.reason, reason=due.stop.message, guards=due.records))
            return
        provenance = Provenance(source_task_id=episode.task.id, **pending[0].origin)
        limits = self.inducer.config
        trajectory = TrajectoryText(actions, limits.max_observation_chars, limits.max_trajectory_chars)
        try:
            values = instance_values(instruction, trajectory.render(), episode.docs())
            induced = self.inducer.induce_set(goal, trajectory, level=self.config.level, calls=result.calls,
                                              provenance=provenance, succeeded=succeeded, values=values)
        except ContextExceeded as exc:
            result.steps.append(InductionStep(subtask_index=None, prompt_id=self.inducer.prompt_id,
                                              status="context_exceeded", reason=exc.message))
            return
        for one in induced:
            self._store(episode, result, one, goal, actions, None)

    def _induce(self, episode: Episode, result: AgentResult, goal: str, actions: list[ActionStep], index: int | None,
                origin: dict[str, Any], succeeded: bool | None) -> None:
        assert self.inducer is not None
        assert self.memory is not None
        provenance = Provenance(source_task_id=episode.task.id, subtask_index=index, **origin)
        try:
            limits = self.inducer.config
            trajectory = TrajectoryText(actions, limits.max_observation_chars, limits.max_trajectory_chars)
            values = instance_values(f"{episode.task.instruction}\n{goal}", trajectory.render(), episode.docs())
            induced = self.inducer.induce(goal, trajectory, level=self.config.level, calls=result.calls,
                                          provenance=provenance, succeeded=succeeded, values=values)
        except ContextExceeded as exc:
            result.steps.append(InductionStep(subtask_index=index, prompt_id=self.inducer.prompt_id,
                                              status="context_exceeded", reason=exc.message))
            return
        self._store(episode, result, induced, goal, actions, index)

    def _store(self, episode: Episode, result: AgentResult, induced: Induced, goal: str, actions: list[ActionStep],
               index: int | None) -> None:
        """Log one induction attempt and add its skill to memory (unless a guard refuses it)."""
        assert self.memory is not None
        step = InductionStep(subtask_index=index, prompt_id=induced.prompt_id, status=induced.status,
                             reason=induced.error, reply=induced.reply, prompt_tokens=induced.prompt_tokens,
                             completion_tokens=induced.completion_tokens)
        skill = induced.skill
        if skill is not None:
            checked = result.harness.skill_induced(InductionView(goal, actions, episode.docs()), skill)
            step.guards, skill = checked.records, checked.value
            if isinstance(checked.stop, Refuse):
                step.status, step.reason, skill = checked.stop.reason, checked.stop.message, None
        if skill is not None:
            added = self.memory.add(skill)
            step.status, step.skill_id, step.target_id = added.action, added.skill_id, added.target_id
            step.skill_name = skill.name
            step.reason = "; ".join(part for part in (added.reason, induced.error) if part)
        result.steps.append(step)




