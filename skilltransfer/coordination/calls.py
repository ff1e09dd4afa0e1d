"""Call logs for coordinated runs: the agent's fitting policy (role budgets, kept steps), one log per context."""

from __future__ import annotations

from skilltransfer.agents.config import AgentConfig, role_budgets
from skilltransfer.agents.context import ContextFitter
from skilltransfer.agents.steps import CallLog, EventSink


def new_call_log(config: AgentConfig, on_event: EventSink | None = None) -> CallLog:
    """A call log that fits prompts as the agent's does (`skilltransfer.agents.Agent.run`)."""
    budgets, capped = role_budgets(config)
    fitter = ContextFitter(budgets, config.context_keep_steps, cap_to_window=capped)
    return CallLog(fitter=fitter, on_event=on_event)
