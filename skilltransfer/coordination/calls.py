"""Call logs for coordinated runs: the agent's fitting policy (role budgets, kept steps), one log per context."""

from __future__ import annotations

from skilltransfer.agents.config import ROLE_MAX_TOKENS, AgentConfig
from skilltransfer.agents.context import ContextFitter
from skilltransfer.agents.steps import CallLog, EventSink


def new_call_log(config: AgentConfig, on_event: EventSink | None = None) -> CallLog:
    """A call log that fits prompts as the agent's does (`skilltransfer.agents.Agent.run`)."""
    budgets = config.role_max_tokens
    fitter = ContextFitter(dict(ROLE_MAX_TOKENS if budgets is None else budgets), config.context_keep_steps,
                           cap_to_window=budgets is None)
    return CallLog(fitter=fitter, on_event=on_event)
