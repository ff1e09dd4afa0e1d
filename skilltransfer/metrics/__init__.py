"""Skill-utility metrics (specificity, abstractness, utility), the statistics of the transfer analyses, and
per-context-window accounting.

The statistics (`pairwise`, `stats`: scipy) are imported on first use of one of their names (PEP 562), so a command
that needs the utility alone does not import scipy (``score`` starts a second sooner)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skilltransfer.metrics.scoring import ScoreReport, SkillScore, score_library, skill_text, write_report
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

if TYPE_CHECKING:
    from skilltransfer.metrics.pairwise import PairwisePreference, PositionBias, pairwise_preference, position_bias
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
        stratified_bootstrap_ci,
        transfer_density,
    )

_LAZY = {
    "PairwisePreference": "skilltransfer.metrics.pairwise",
    "PositionBias": "skilltransfer.metrics.pairwise",
    "pairwise_preference": "skilltransfer.metrics.pairwise",
    "position_bias": "skilltransfer.metrics.pairwise",
    "PAIRED_TESTS": "skilltransfer.metrics.stats",
    "Bin": "skilltransfer.metrics.stats",
    "BinnedSpearman": "skilltransfer.metrics.stats",
    "PairedGain": "skilltransfer.metrics.stats",
    "TransferDensity": "skilltransfer.metrics.stats",
    "binned_spearman": "skilltransfer.metrics.stats",
    "bootstrap_ci": "skilltransfer.metrics.stats",
    "equal_size_bins": "skilltransfer.metrics.stats",
    "paired_gain": "skilltransfer.metrics.stats",
    "stratified_bootstrap_ci": "skilltransfer.metrics.stats",
    "transfer_density": "skilltransfer.metrics.stats",
}
"""The statistics' names -> the module that defines them."""


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


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
    "stratified_bootstrap_ci",
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
