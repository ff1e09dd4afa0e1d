"""Executable skill composition (MetaSkill, seed 003): plans as DAGs over skill packages, the plan writer, three
coordination interfaces (nl-sop, prompt-graph, metaskill) over one frozen plan per task, and the per-task audit."""

from skilltransfer.coordination.audit import Audit, AuditLog, Constraint, NodeAttempt, NodeRecord, reported_audit
from skilltransfer.coordination.catalog import skill_catalog
from skilltransfer.coordination.config import INTERFACES, CoordinationConfig, PlanWriterConfig
from skilltransfer.coordination.folder import PlanFolder
from skilltransfer.coordination.interfaces import check_interface, run_plan
from skilltransfer.coordination.plan import (
    Plan,
    PlanError,
    PlanNode,
    PlanOrigin,
    check_plan,
    single_node_plan,
    validate_plan,
)
from skilltransfer.coordination.result import CoordinationResult
from skilltransfer.coordination.runtime import MetaSkillRuntime, SerialEpisode
from skilltransfer.coordination.writer import PlanWriter, parse_plan_reply

__all__ = [
    "INTERFACES", "Audit", "AuditLog", "Constraint", "CoordinationConfig", "CoordinationResult", "MetaSkillRuntime",
    "NodeAttempt", "NodeRecord", "Plan", "PlanError", "PlanFolder", "PlanNode", "PlanOrigin", "PlanWriter",
    "PlanWriterConfig", "SerialEpisode", "check_interface", "check_plan", "parse_plan_reply", "reported_audit",
    "run_plan", "single_node_plan", "skill_catalog", "validate_plan",
]
