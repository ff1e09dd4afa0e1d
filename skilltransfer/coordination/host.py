"""The host interfaces: one executor coordinates the whole plan in its own context.

* ``nl-sop``: the plan as a numbered natural-language procedure (dependency order; bindings become "use the result
  of step N as `name`").
* ``prompt-graph``: the plan's nodes, dependencies and bindings as a JSON graph in the prompt.

Both show the skill packages the plan names (code skills are also defined in the namespace) and give the host the
whole task's step budget; the host calls ``complete_task`` itself. Their audit is built from the ``STEP DONE <n>`` /
``NODE DONE <id>`` lines the host writes (`skilltransfer.coordination.audit.reported_audit`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.executor import Executor
from skilltransfer.agents.harness.base import RunContext
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.steps import EventSink
from skilltransfer.coordination.audit import reported_audit
from skilltransfer.coordination.calls import new_call_log
from skilltransfer.coordination.catalog import load_code_skills
from skilltransfer.coordination.config import CoordinationConfig
from skilltransfer.coordination.plan import Plan
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.coordination.render import render_graph, render_procedure, render_skills
from skilltransfer.coordination.result import CoordinationResult
from skilltransfer.protocols import ChatModel, Episode
from skilltransfer.skill import Skill


def host_message(interface: str, prompts: CoordinationPrompts, plan: Plan, instruction: str,
                 skills: list[Skill]) -> str:
    """The host executor's first user message for ``interface`` ("nl-sop" or "prompt-graph")."""
    section = render_skills(prompts, skills)
    if interface == "nl-sop":
        return prompts.nl_sop.render(instruction=instruction, procedure=render_procedure(plan), skills=section)
    return prompts.prompt_graph.render(instruction=instruction, graph=render_graph(plan), skills=section)


def run_host(interface: str, episode: Episode, model: ChatModel, plan: Plan, catalog: Mapping[str, Skill], *,
             agent_config: AgentConfig, config: CoordinationConfig, on_event: EventSink | None = None
             ) -> CoordinationResult:
    """Run a (validated) plan under a host interface; the episode is left open for evaluation."""
    start = time.perf_counter()
    prompts = CoordinationPrompts.load(config.prompt_dir)
    agent_prompts = AgentPrompts.load(agent_config.prompt_dir)
    skills = [catalog[name] for name in plan.skills()]
    calls = new_call_log(agent_config, on_event)
    calls.skills = [skill.render() for skill in skills]
    result = CoordinationResult(task_id=episode.task.id, calls=calls, interface=interface,
                                plan_fingerprint=plan.fingerprint,
                                prompt_ids={"host": getattr(prompts, interface.replace("-", "_")).id})
    try:
        load_code_skills(episode, skills)
        message = host_message(interface, prompts, plan, episode.task.instruction, skills)
        run = Executor(model, agent_prompts, agent_config, calls).run(RunContext(episode, message,
                                                                                 budget=config.step_limit))
        result.steps.extend(run.steps)
        result.contexts.append(run.messages)
        result.exit_status = run.exit_status
        result.audit = reported_audit(plan, interface, [step.reply for step in run.steps],
                                      by_number=interface == "nl-sop")
    finally:
        result.latency_s = time.perf_counter() - start
    return result
