"""Agents: the task-level ReAct agent and the subtask-level planner/executor/summarizer agent (one shared loop)."""

from skilltransfer.agents.agent import Agent, AgentResult
from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.exceptions import FormatError, LimitsExceeded, Submitted
from skilltransfer.agents.executor import Executor, ExecutorRun, parse_action
from skilltransfer.agents.prompts import AgentPrompts, Prompt, load_prompt
from skilltransfer.agents.roles import Planner, Summarizer, parse_plan
from skilltransfer.agents.steps import (
    ActionStep,
    CallLog,
    InductionStep,
    ModelCall,
    PlanStep,
    RetrievalStep,
    Step,
    SummaryStep,
)

__all__ = [
    "ActionStep", "Agent", "AgentConfig", "AgentPrompts", "AgentResult", "CallLog", "Executor", "ExecutorRun",
    "FormatError", "InductionStep", "LimitsExceeded", "ModelCall", "PlanStep", "Planner", "Prompt", "RetrievalStep",
    "Step", "Submitted", "SummaryStep", "Summarizer", "load_prompt", "parse_action", "parse_plan",
]
