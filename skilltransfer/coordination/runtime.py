"""The MetaSkill runtime: the plan's coordination is executed, each node's work stays with the model.

Each scheduling round (after one structural validation of the plan):

1. **readiness**: a pending node is ready when every node in its ``depends_on`` has completed; a pending node with a
   failed or skipped predecessor is *skipped*;
2. **dispatch**: ready nodes, in plan order, are started until K (``max_parallel``) attempts run at once; each runs
   in a thread, so model calls overlap, while the episode's actions go through one lock (`SerialEpisode`);
3. each node attempt is a **fresh executor context** (the project's `Executor` in subtask mode) seeded with the task
   (for context), the node's local instructions and expected output, its **bound inputs** (each binding's
   predecessor output text, exactly as stored) and its **skill package** (code skills are also defined in the
   namespace); it ends with ``SUBTASK DONE: <result>``, and that result is **stored** as the node's output, which
   releases its dependents.

**Failure policy**: an attempt that ends any other way (step budget, stuck, context exceeded) is retried
(``retries``, the one retry setting of every interface) in a fresh context told why the first one ended; if that
fails too, the node *fails*, every node depending on it (transitively) is *skipped*, nodes on other branches still
run, and the task ends with exit status ``node_failed`` (no finishing context, so ``complete_task`` is not called by
the runtime). An exception (an endpoint that stays down) stops dispatching, lets running attempts end, and is raised.

**A submission ends the plan**: when a node's attempt calls ``complete_task`` (the world is submitted), nothing more
is dispatched, the attempts still running end at their next step (status "stopped"), the nodes never dispatched are
"not_run", and the task's exit status is "submitted"; the audit names the node (``submitted_by``).

**Budget**: each node attempt takes at most ``node_step_limit`` steps, one at a time, from a budget of ``step_limit -
finish_step_limit`` shared by all attempts (an attempt that finds it empty mid-way ends ``limits_exceeded``; one
that starts when it is empty ends ``budget_spent`` at once, without a model call), so the task never runs more than
``step_limit`` executor steps, as under the host interfaces.

**Finishing**: when every node has completed and none called ``complete_task``, one more fresh context (the task
and every node's output) calls ``complete_task(answer=...)``, within ``finish_step_limit`` steps; its exit status
is the task's.

Everything that happened is in the `Audit` (``skilltransfer.coordination.audit``): node attempts' start/end events,
bound inputs, output sizes, and the precedence check computed from those events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.executor import Executor, ExecutorRun
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.harness.presets import make_harness, resolve_for
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.steps import CallLog, EventSink, new_call_log
from skilltransfer.agents.views import RunContext
from skilltransfer.coordination.audit import AuditLog
from skilltransfer.coordination.catalog import load_code_skills
from skilltransfer.coordination.config import CoordinationConfig
from skilltransfer.coordination.plan import Plan, PlanNode, check_plan
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.coordination.render import cut_text, render_inputs, render_node_skill
from skilltransfer.coordination.result import CoordinationResult
from skilltransfer.log import ActionStep
from skilltransfer.protocols import ChatModel, Episode, Observation, Score
from skilltransfer.skill import Skill

COMPLETED_EXITS = ("subtask_done", "submitted")


SUBMITTED_ALREADY = "The task was already submitted (another step called complete_task): nothing was run."


class SerialEpisode:
    """An episode whose actions run one at a time: ``step`` and ``load_code`` hold one lock (other members pass).
    Once an action submits the task (``complete_task``), ``on_submit`` is called and later actions are not run (their
    observation says so)."""

    def __init__(self, episode: Episode, lock: threading.Lock | None = None,
                 on_submit: Callable[[], None] | None = None) -> None:
        self.episode = episode
        self.task = episode.task
        self.lock = lock or threading.Lock()
        self.on_submit = on_submit
        self.submitted = False

    def step(self, action: str) -> Observation:
        with self.lock:
            if self.submitted:
                return Observation(SUBMITTED_ALREADY, error=True)
            observation = self.episode.step(action)
            if observation.done:
                self.submitted = True
                if self.on_submit is not None:
                    self.on_submit()
            return observation

    def load_code(self, source: str, skill_id: str | None = None) -> Observation:
        with self.lock:
            return self.episode.load_code(source, skill_id)

    def docs(self) -> str:
        return self.episode.docs()

    def evaluate(self) -> Score:
        return self.episode.evaluate()

    def close(self) -> None:
        self.episode.close()


class StepBudget:
    """Executor steps shared by concurrent node attempts, taken one at a time (`Executor`'s ``take_step``)."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.stopped = False
        """Set when the task was submitted: no step is given any more."""
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one step; False when none is left or the task was submitted."""
        with self._lock:
            if self.left <= 0 or self.stopped:
                return False
            self.left -= 1
            return True

    def stop(self) -> None:
        """The task was submitted: running attempts end at their next step."""
        with self._lock:
            self.stopped = True


@dataclass
class _Attempt:
    """What one node attempt produced."""

    run: ExecutorRun | None
    calls: CallLog
    exit_status: str
    message: str

    @property
    def ok(self) -> bool:
        return self.exit_status in COMPLETED_EXITS

    @property
    def submitted(self) -> bool:
        return self.run is not None and any(step.done for step in self.run.steps)


class MetaSkillRuntime:
    """Runs a validated plan over one episode (see the module docstring).

    Args:
        model: the executor's model (every node and the finishing context).
        catalog: skill name -> skill package (every skill the plan names must be there).
        agent_config: the executor's settings (stop sequences, observation cut, sampling parameters, fitting).
        config: the coordination settings (K, budgets, retries).
        on_event: receives ``(kind, data)`` from every context (calls and steps, with ``node``) plus "node_start" and
            "node_end"; called under a lock, from worker threads.
    """

    def __init__(self, model: ChatModel, catalog: Mapping[str, Skill], *, agent_config: AgentConfig | None = None,
                 config: CoordinationConfig | None = None, on_event: EventSink | None = None) -> None:
        self.model = model
        self.catalog = dict(catalog)
        self.agent_config = resolve_for(agent_config or AgentConfig(), model)
        self.config = config or CoordinationConfig()
        if self.config.step_limit <= self.config.finish_step_limit:
            raise ValueError(f"step_limit ({self.config.step_limit}) must exceed finish_step_limit "
                             f"({self.config.finish_step_limit}): the nodes share what is left")
        self.prompts = CoordinationPrompts.load(self.config.prompt_dir)
        self.agent_prompts = AgentPrompts.load(self.agent_config.prompt_dir)
        self.on_event = on_event
        self._event_lock = threading.Lock()

    # ------------------------------------------------------------------ events
    def _sink(self, node_id: str | None) -> EventSink | None:
        if self.on_event is None:
            return None
        target = self.on_event

        def send(kind: str, data: dict[str, Any]) -> None:
            with self._event_lock:
                target(kind, {**data, "node": node_id})

        return send

    def _emit(self, kind: str, node_id: str, **data: Any) -> None:
        sink = self._sink(node_id)
        if sink is not None:
            sink(kind, data)

    # ------------------------------------------------------------------ scheduling
    def ready(self, plan: Plan, state: Mapping[str, str]) -> list[str]:
        """Pending nodes whose every dependency completed, in plan order."""
        return [node.id for node in plan.nodes
                if state[node.id] == "pending" and all(state[dep] == "completed" for dep in node.depends_on)]

    def run(self, episode: Episode, plan: Plan) -> CoordinationResult:
        """Run ``plan`` on ``episode`` (left open for evaluation); see the module docstring."""
        check_plan(plan, set(self.catalog))
        start = time.perf_counter()
        cfg = self.config
        harness = make_harness(self.agent_config, self.agent_prompts)  # one per task: shared by its contexts
        audit = AuditLog(plan, "metaskill", cfg.max_parallel)
        budget = StepBudget(cfg.step_limit - cfg.finish_step_limit)
        env = SerialEpisode(episode, on_submit=budget.stop)  # a submission ends the plan at once
        result = CoordinationResult(task_id=episode.task.id, interface="metaskill", plan_fingerprint=plan.fingerprint,
                                    prompt_ids={"node": self.prompts.node.id, "finish": self.prompts.finish.id})
        state = {node_id: "pending" for node_id in plan.ids}
        submitted_by: str | None = None
        error = None
        try:
            with ThreadPoolExecutor(max_workers=cfg.max_parallel, thread_name_prefix="metaskill") as pool:
                running: dict[Future[list[_Attempt]], str] = {}
                while True:
                    if error is None and submitted_by is None:
                        self._skip_blocked(plan, state, audit)
                        for node_id in self.ready(plan, state)[: cfg.max_parallel - len(running)]:
                            state[node_id] = "running"
                            self._emit("node_start", node_id)
                            running[pool.submit(self._run_node, env, plan, plan.node(node_id), dict(result.outputs),
                                                budget, audit, harness)] = node_id
                    if not running:
                        break
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in sorted(done, key=lambda f: plan.ids.index(running[f])):
                        node_id = running.pop(future)
                        try:
                            attempts = future.result()
                        except BaseException as exc:  # noqa: BLE001 - re-raised once running attempts end
                            error = error or exc
                            state[node_id] = "failed"
                            continue
                        if self._merge(result, plan, node_id, attempts, state, audit, budget.stopped) \
                                and submitted_by is None:
                            submitted_by = node_id
            for node_id in plan.ids:
                if state[node_id] == "pending":
                    state[node_id] = "not_run"
                    audit.settle(node_id, "not_run", skipped_because=f"the task was submitted by {submitted_by}"
                                 if submitted_by is not None else "the run stopped")
            if error is not None:
                raise error
            if submitted_by is not None:
                result.exit_status = "submitted"
            elif any(status == "failed" for status in state.values()):
                result.exit_status = "node_failed"
            else:
                self._finish(env, plan, result, audit, harness)
                if result.exit_status == "submitted":
                    submitted_by = "finish"
        finally:
            for number, step in enumerate(s for s in result.steps if isinstance(s, ActionStep)):
                step.index = number
            result.audit = audit.audit(submitted_by=submitted_by)
            result.latency_s = time.perf_counter() - start
        return result

    def _skip_blocked(self, plan: Plan, state: dict[str, str], audit: AuditLog) -> None:
        for node_id in plan.topological_order():
            if state[node_id] != "pending":
                continue
            blocker = next((dep for dep in plan.node(node_id).depends_on if state[dep] in ("failed", "skipped")), None)
            if blocker is not None:
                state[node_id] = "skipped"
                audit.settle(node_id, "skipped", skipped_because=f"{blocker} {state[blocker]}")

    def _merge(self, result: CoordinationResult, plan: Plan, node_id: str, attempts: list[_Attempt],
               state: dict[str, str], audit: AuditLog, stopped: bool = False) -> bool:
        """Fold a finished node's attempts into the result; returns whether one called ``complete_task``. A node that
        did not complete after the task was submitted (``stopped``) was cut by the submission: "stopped"."""
        for attempt in attempts:
            if attempt.run is not None:
                result.steps.extend(attempt.run.steps)
                result.contexts.append(attempt.run.messages)
            result.calls.calls.extend(attempt.calls.calls)
        last = attempts[-1]
        if last.ok:
            state[node_id] = "completed"
            result.outputs[node_id] = last.message
            audit.settle(node_id, "completed", output_chars=len(last.message))
        else:
            state[node_id] = "stopped" if stopped else "failed"
            audit.settle(node_id, state[node_id])
        self._emit("node_end", node_id, status=state[node_id])
        return any(attempt.submitted for attempt in attempts)

    # ------------------------------------------------------------------ one node
    def _run_node(self, env: SerialEpisode, plan: Plan, node: PlanNode, outputs: dict[str, str], budget: StepBudget,
                  audit: AuditLog, harness: Harness) -> list[_Attempt]:
        """Every attempt of one node (the first, and the retry after a failure)."""
        cfg = self.config
        skill = self.catalog[node.skill] if node.skill else None
        position = plan.ids.index(node.id)
        attempts: list[_Attempt] = []
        for _ in range(1 + cfg.retries):
            if attempts and budget.stopped:
                break  # the task was submitted by another node: no retry
            record = audit.start(node.id)
            calls = new_call_log(self.agent_config, self._sink(node.id))
            calls.skills = [skill.render()] if skill is not None else []
            if budget.left <= 0:
                audit.end(record, "budget_spent", message="no executor steps left in the task's budget")
                attempts.append(_Attempt(None, calls, "budget_spent", "no executor steps left"))
                break
            try:
                if skill is not None:
                    load_code_skills(env, [skill])
                inputs, bound = render_inputs(self.prompts, node, outputs, cfg.max_binding_chars)
                audit.bind(node.id, bound)
                previous = attempts[-1] if attempts else None
                note = "" if previous is None else (
                    f"\n(An earlier attempt at this step ended with {previous.exit_status}: "
                    f"{' '.join(previous.message.split())[:200]}. Start afresh.)\n")
                message = self.prompts.node.render(
                    instruction=env.task.instruction, node_id=node.id, instructions=node.instructions.strip(),
                    expected_output=node.expected_output.strip() or "(not specified)", retry_note=note,
                    inputs=inputs, skill=render_node_skill(self.prompts, skill))
                run = Executor(self.model, self.agent_prompts, self.agent_config, calls, harness=harness,
                               take_step=budget.take).run(
                    RunContext(env, message, budget=cfg.node_step_limit, subtask_index=position, subtask_mode=True))
            except BaseException as exc:
                audit.end(record, "error", message=f"{type(exc).__name__}: {exc}")
                raise
            text = run.result.strip()
            audit.end(record, run.exit_status, steps=len(run.steps), message=text)
            attempts.append(_Attempt(run, calls, run.exit_status, text))
            if attempts[-1].ok:
                break
        return attempts

    # ------------------------------------------------------------------ finishing
    def _finish(self, env: SerialEpisode, plan: Plan, result: CoordinationResult, audit: AuditLog,
                harness: Harness) -> None:
        """A fresh context with every node's output calls ``complete_task``; its exit status is the task's."""
        cfg = self.config
        parts = []
        for node in plan.nodes:
            text, _ = cut_text(result.outputs.get(node.id, ""), cfg.max_binding_chars)
            about = f" ({node.expected_output.strip()})" if node.expected_output.strip() else ""
            parts.append(f"## {node.id}{about}\n{text}")
        message = self.prompts.finish.render(instruction=env.task.instruction, results="\n\n".join(parts))
        calls = new_call_log(self.agent_config, self._sink(None))
        audit.mark_finish(step_limit=cfg.finish_step_limit)
        run = None
        try:
            run = Executor(self.model, self.agent_prompts, self.agent_config, calls, harness=harness).run(
                RunContext(env, message, budget=cfg.finish_step_limit))
        finally:
            result.calls.calls.extend(calls.calls)
            audit.end_finish(exit_status=run.exit_status if run is not None else "error",
                             steps=len(run.steps) if run is not None else 0)
        result.steps.extend(run.steps)
        result.contexts.append(run.messages)
        result.exit_status = run.exit_status
