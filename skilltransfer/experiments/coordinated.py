"""One task of a coordinated stream (``coordination`` other than ``none``): its frozen plan, one coordination
interface over it, then induction as the agent of the stream's level does it.

1. **retrieval**, as the agent does before a task: the top-k skills for the instruction (a `RetrievalStep`; code
   skills are loaded into the namespace);
2. **the plan**: the task's file in the plan folder (`StreamConfig.plan_dir`), else written now by the `PlanWriter`
   from the task, the env docs and the retrieved skills, frozen with the skill packages it names and saved (the
   writer's calls go into the task's call log; streams sharing the folder replay it);
3. ``run_plan(interface, ...)`` carries it out with the plan's frozen packages (instead of ``agent.run``);
4. **induction** (when the stream induces): at subtask level under ``metaskill``, one skill per plan node from that
   node's steps (its instructions as the goal); otherwise one skill per task from all its steps (the host interfaces
   run one context, so their steps have no per-node boundary).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skilltransfer.agents.agent import Agent
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.agents.steps import ActionStep
from skilltransfer.coordination import CoordinationResult, PlanFolder, PlanWriter, run_plan
from skilltransfer.coordination.calls import new_call_log
from skilltransfer.coordination.plan import Plan
from skilltransfer.experiments.config import StreamConfig
from skilltransfer.protocols import Episode


def plan_info(plan: Plan, path: Path, written: bool) -> dict[str, Any]:
    """What a trajectory records of the plan it ran: file, fingerprint, whether written now, and how."""
    return {"file": str(path), "fingerprint": plan.fingerprint, "written_now": written, "nodes": len(plan.nodes),
            "packages": [s.name for s in plan.packages], "writer": plan.origin.writer,
            "fallback": plan.origin.fallback}


class CoordinatedTask:
    """Runs the tasks of a coordinated stream (see the module docstring).

    Args:
        agent: the stream's agent: its model, memory, inducer and settings are used (not its ``run``).
        config: the stream's settings (``coordination``, ``plan_dir``, ``coordination_config()``).
    """

    def __init__(self, agent: Agent, config: StreamConfig) -> None:
        self.agent = agent
        self.interface = config.coordination
        self.folder = PlanFolder(config.plan_dir)
        self.settings = config.coordination_config()
        self.writer = PlanWriter(agent.model)
        self.plan: dict[str, Any] = {}
        """The last task's `plan_info`."""

    def run(self, episode: Episode, *, stream_position: int, run_id: str,
            on_event: Callable[[AgentEvent], None] | None = None) -> CoordinationResult:
        """Solve one task from its frozen plan; the episode is left open (the caller evaluates and closes it)."""
        start = time.perf_counter()
        self.plan = {}
        agent, task = self.agent, episode.task
        so_far = AgentResult(task_id=task.id, calls=new_call_log(agent.config))  # retrieval + plan writer; live view
        step_limit = self.settings.step_limit

        def relay(kind: str, data: dict[str, Any]) -> None:
            step = data.get("step")
            if kind == "step_end" and isinstance(step, ActionStep):
                so_far.pending.append(step)
            if on_event is not None:
                on_event(AgentEvent(kind, task.id, so_far, step_index=data.get("index"), step_limit=step_limit,
                                    role=data.get("role"), tokens=int(data.get("tokens", 0))))

        so_far.calls.on_event = relay
        relay("task_start", {})
        hits = agent.retrieve(episode, so_far, task.instruction, "instruction", None)
        skills = [skill for skill, _ in hits]

        def write() -> Plan:
            plan = self.writer.write(task, episode.docs(), skills, calls=so_far.calls)
            return plan.with_packages(skills)

        plan, written = self.folder.plan_for(task.id, write)
        self.plan = plan_info(plan, self.folder.path_for(task.id), written)
        result = run_plan(self.interface, episode, agent.model, plan, plan.packages, agent_config=agent.config,
                          config=self.settings, on_event=relay)
        result.steps[:0] = so_far.steps
        result.calls.calls[:0] = so_far.calls.calls
        result.prompt_ids = {"plan_writer": self.writer.prompt_id, **result.prompt_ids}
        self._induce(episode, result, plan, {"stream_position": stream_position, "run_id": run_id})
        result.latency_s = time.perf_counter() - start
        relay("task_end", {})
        return result

    def _induce(self, episode: Episode, result: CoordinationResult, plan: Plan, origin: dict[str, Any]) -> None:
        agent = self.agent
        if agent.config.level == "subtask" and self.interface == "metaskill":
            for position, node in enumerate(plan.nodes):
                steps = [s for s in result.actions if s.subtask_index == position]
                agent.induce(episode, result, node.instructions, steps, position, origin)
        else:
            agent.induce(episode, result, episode.task.instruction, result.actions, None, origin)
