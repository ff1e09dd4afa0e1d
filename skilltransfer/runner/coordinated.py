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
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.agents.steps import new_call_log
from skilltransfer.coordination import CoordinationResult, PlanFolder, PlanWriter, run_plan
from skilltransfer.coordination.plan import Plan
from skilltransfer.log import ActionStep
from skilltransfer.protocols import Episode
from skilltransfer.settings.config import StreamConfig


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

    def task(self, episode: Episode, *, stream_position: int, run_id: str,
             on_event: Callable[[AgentEvent], None] | None = None) -> CoordinatedRun:
        """One task's run (``run()``, then ``finish(succeeded)`` once evaluated); the episode is left open."""
        return CoordinatedRun(self, episode, stream_position=stream_position, run_id=run_id, on_event=on_event)


class CoordinatedRun:
    """One task of a coordinated stream (the per-task half of `CoordinatedTask`; see the module docstring)."""

    def __init__(self, owner: CoordinatedTask, episode: Episode, *, stream_position: int, run_id: str,
                 on_event: Callable[[AgentEvent], None] | None) -> None:
        self.owner, self.episode, self.on_event = owner, episode, on_event
        agent = owner.agent
        self.so_far = AgentResult(task_id=episode.task.id, calls=new_call_log(agent.config, self._relay))
        """Retrieval and plan writer, then the live view of the run."""
        self.skills = agent.skills(episode, self.so_far, Harness(), stream_position=stream_position, run_id=run_id)
        self.plan: dict[str, Any] = {}
        """The task's `plan_info` (once its plan is read or written)."""

    def _relay(self, kind: str, data: dict[str, Any]) -> None:
        step = data.get("step")
        if kind == "step_end" and isinstance(step, ActionStep):
            self.so_far.pending.append(step)
        if self.on_event is not None:
            self.on_event(AgentEvent(kind, self.episode.task.id, self.so_far, step_index=data.get("index"),
                                     step_limit=self.owner.settings.step_limit, role=data.get("role"),
                                     tokens=int(data.get("tokens", 0))))

    def run(self) -> CoordinationResult:
        """Solve the task from its frozen plan."""
        start = time.perf_counter()
        owner, episode, so_far = self.owner, self.episode, self.so_far
        task = episode.task
        self._relay("task_start", {})
        hits = self.skills.retrieve(task.instruction, "instruction", None).hits
        skills = [skill for skill, _ in hits]

        def write() -> Plan:
            plan = owner.writer.write(task, episode.docs(), skills, calls=so_far.calls)
            return plan.with_packages(skills)

        plan, written = owner.folder.plan_for(task.id, write)
        self.plan = plan_info(plan, owner.folder.path_for(task.id), written)
        result = run_plan(owner.interface, episode, owner.agent.model, plan, plan.packages,
                          agent_config=owner.agent.config, config=owner.settings, on_event=self._relay)
        result.steps[:0] = so_far.steps
        result.calls.calls[:0] = so_far.calls.calls
        result.prompt_ids = {"plan_writer": owner.writer.prompt_id, **result.prompt_ids}
        self.skills.result = result
        if owner.agent.config.level == "subtask" and owner.interface == "metaskill":
            for position, node in enumerate(plan.nodes):
                steps = [s for s in result.actions if s.subtask_index == position]
                self.skills.induce(node.instructions, steps, position)
        else:
            self.skills.induce(task.instruction, result.actions, None)
        result.latency_s = time.perf_counter() - start
        self._relay("task_end", {})
        return result

    def finish(self, succeeded: bool) -> None:
        """Once the task is evaluated: induce what waited for its verdict."""
        self.skills.induce_deferred(succeeded)
