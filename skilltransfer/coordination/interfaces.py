"""One entry point for the three coordination interfaces over a frozen plan (`run_plan`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.harness.presets import resolve_for
from skilltransfer.agents.steps import EventSink
from skilltransfer.coordination.catalog import skill_catalog
from skilltransfer.coordination.config import INTERFACES, CoordinationConfig
from skilltransfer.coordination.host import run_host
from skilltransfer.coordination.plan import Plan, check_plan
from skilltransfer.coordination.result import CoordinationResult
from skilltransfer.coordination.runtime import MetaSkillRuntime
from skilltransfer.errors import InputError
from skilltransfer.protocols import ChatModel, Episode
from skilltransfer.skill import Skill


def check_interface(name: str) -> str:
    """``name`` normalised; an unknown interface raises `InputError` listing the choices."""
    key = name.strip().lower()
    if key not in INTERFACES:
        raise InputError(f"unknown coordination interface {name!r}; choose one of: {', '.join(INTERFACES)}")
    return key


def run_plan(interface: str, episode: Episode, model: ChatModel, plan: Plan,
             skills: Iterable[Skill] | Mapping[str, Skill] | None = None, *, agent_config: AgentConfig | None = None,
             config: CoordinationConfig | None = None, on_event: EventSink | None = None) -> CoordinationResult:
    """Carry out a frozen ``plan`` on ``episode`` under one coordination interface.

    Args:
        interface: "nl-sop", "prompt-graph" or "metaskill".
        episode: the running task (left open: the caller evaluates and closes it).
        model: the executor's model.
        plan: the task's plan (validated here against ``skills`` before anything runs).
        skills: the skill packages the plan may name.
        agent_config: the executor's settings.
        config: the coordination settings.
        on_event: receives call/step events (see `MetaSkillRuntime`).

    Raises:
        InputError: an unknown interface; `PlanError` (an `InputError`): the plan is invalid.
    """
    key = check_interface(interface)
    catalog = skill_catalog(skills)
    check_plan(plan, set(catalog))
    agent_config = resolve_for(agent_config or AgentConfig(), model)  # the stream's: resolved already
    config = config or CoordinationConfig()
    if key == "metaskill":
        return MetaSkillRuntime(model, catalog, agent_config=agent_config, config=config, on_event=on_event).run(
            episode, plan)
    return run_host(key, episode, model, plan, catalog, agent_config=agent_config, config=config, on_event=on_event)
