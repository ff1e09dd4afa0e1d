"""Blinded pairwise judging of two runs' final artifacts (MetaSkill, seed 003 §3): run folders -> artifacts ->
LLM verdicts in both presentation orders -> W/T/L, preference with a task-bootstrap CI, position bias."""

from skilltransfer.judge.judge import (
    JudgeReport,
    Judgment,
    PairwiseJudge,
    first_order,
    judge_runs,
    load_judge_prompt,
    parse_verdict,
    shared_tasks,
    unblind,
)
from skilltransfer.judge.runs import RunArtifacts, TaskArtifact, load_run

__all__ = ["JudgeReport", "Judgment", "PairwiseJudge", "RunArtifacts", "TaskArtifact", "first_order", "judge_runs",
           "load_judge_prompt", "load_run", "parse_verdict", "shared_tasks", "unblind"]
