"""The host interfaces: one executor coordinates the whole plan in its own context.

* ``nl-sop``: the plan as a numbered natural-language procedure (dependency order; bindings become "use the result
  of step N as `name`").
* ``prompt-graph``: the plan's nodes, dependencies and bindings as a JSON graph in the prompt.

Both show the skill packages the plan names (code skills are also defined in the namespace) and give the host the
whole task's step budget; the host calls ``complete_task`` itself. A host run that ends without submitting (step
budget, stuck, context exceeded) is retried like a metaskill node (``retries``, the same setting) while steps are
left in the task's budget (a run that spent it all leaves none): in a fresh context
told why the last one ended, with what is left of the task's budget. Their audit is built from the ``STEP DONE <n>``
/ ``NODE DONE <id>`` lines the host writes over all its runs (`skilltransfer.coordination.audit.reported_audit`), with
each run's exit status (``host_attempts``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.executor import Executor
from skilltransfer.agents.harness.presets import make_harness
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.steps import EventSink, new_call_log
from skilltransfer.agents.views import RunContext
from skilltransfer.coordination.audit import reported_audit
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
    attempts: list[dict[str, Any]] = []
    harness = make_harness(agent_config, agent_prompts)  # one per task: a once-per-task guard spans the attempts
    try:
        load_code_skills(episode, skills)
        message = host_message(interface, prompts, plan, episode.task.instruction, skills)
        used = 0
        for attempt in range(1 + config.retries):
            left = config.step_limit - used
            if left <= 0:
                break
            note = "" if not attempts else (
                f"\n\n(An earlier attempt at this task ended with {attempts[-1]['exit_status']} after "
                f"{attempts[-1]['steps']} steps: {attempts[-1]['message']}. The environment keeps what it did. "
                "Start afresh.)")
            run = Executor(model, agent_prompts, agent_config, calls, harness=harness).run(
                RunContext(episode, message + note, budget=left, first_index=used))
            used += run.used
            result.steps.extend(run.steps)
            result.contexts.append(run.messages)
            result.exit_status = run.exit_status
            attempts.append({"attempt": attempt + 1, "exit_status": run.exit_status, "steps": run.used,
                             "message": " ".join(run.result.split())[:200]})
            if run.exit_status == "submitted":
                break
        audit = reported_audit(plan, interface, [step.reply for step in result.actions],
                               by_number=interface == "nl-sop")
        audit.submitted_by = "host" if result.exit_status == "submitted" else None
        audit.host_attempts = attempts
        result.audit = audit
    finally:
        result.latency_s = time.perf_counter() - start
    return result
