"""Agents: the task-level ReAct agent and the subtask-level planner/executor/summarizer agent (one shared loop)."""

from skilltransfer.agents.agent import Agent, AgentEvent, AgentResult
from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.context import ContextFit, ContextFitter
from skilltransfer.agents.exceptions import ContextExceeded, FormatError, LimitsExceeded, Submitted
from skilltransfer.agents.executor import Executor, ExecutorRun
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.replies import parse_action, parse_plan
from skilltransfer.agents.roles import Planner, Summarizer
from skilltransfer.agents.steps import CallLog, TrajectoryText
from skilltransfer.log import ActionStep, InductionStep, ModelCall, PlanStep, RetrievalStep, Step, SummaryStep

__all__ = [
    "ActionStep", "Agent", "AgentConfig", "AgentEvent", "AgentPrompts", "AgentResult", "CallLog", "ContextExceeded",
    "ContextFit", "ContextFitter", "Executor", "ExecutorRun", "FormatError", "InductionStep", "LimitsExceeded",
    "ModelCall", "PlanStep", "Planner", "RetrievalStep", "Step", "Submitted", "SummaryStep", "Summarizer",
    "TrajectoryText", "parse_action", "parse_plan",
]
