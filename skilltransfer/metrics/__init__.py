"""Skill-utility metrics (specificity, abstractness, utility), the statistics of the transfer analyses, and
per-context-window accounting."""

from skilltransfer.metrics.pairwise import PairwisePreference, PositionBias, pairwise_preference, position_bias
from skilltransfer.metrics.scoring import ScoreReport, SkillScore, score_library, skill_text, write_report
from skilltransfer.metrics.stats import (
    PAIRED_TESTS,
    Bin,
    BinnedSpearman,
    PairedGain,
    TransferDensity,
    binned_spearman,
    bootstrap_ci,
    equal_size_bins,
    paired_gain,
    transfer_density,
)
from skilltransfer.metrics.task_texts import load_task_texts
from skilltransfer.metrics.utility import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_TAU,
    OFF_DOMAIN_QUANTILE,
    SPECIFICITY_MODES,
    TaskReference,
    UtilityScores,
    abstractness,
    best_match,
    best_match_and_abstractness,
    knn_k,
    specificity,
    task_reference,
    utility,
    utility_scores,
)
from skilltransfer.metrics.windows import ContextAccount, ContextWindow

__all__ = [
    "DEFAULT_MAX_PAIRS",
    "DEFAULT_TAU",
    "OFF_DOMAIN_QUANTILE",
    "PAIRED_TESTS",
    "SPECIFICITY_MODES",
    "Bin",
    "PairedGain",
    "PairwisePreference",
    "PositionBias",
    "BinnedSpearman",
    "ContextAccount",
    "ContextWindow",
    "ScoreReport",
    "SkillScore",
    "TaskReference",
    "TransferDensity",
    "UtilityScores",
    "abstractness",
    "best_match",
    "best_match_and_abstractness",
    "knn_k",
    "paired_gain",
    "binned_spearman",
    "bootstrap_ci",
    "equal_size_bins",
    "load_task_texts",
    "pairwise_preference",
    "position_bias",
    "score_library",
    "skill_text",
    "specificity",
    "task_reference",
    "transfer_density",
    "utility",
    "utility_scores",
    "write_report",
]
