"""Skill-utility metrics (specificity, abstractness, utility), the statistics of the transfer analyses, and
per-context-window accounting.

The names below are imported from their modules on first use (PEP 562), so a command that needs the utility alone
does not import scipy (``score`` starts a second sooner)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        stratified_bootstrap_ci,
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

_HOME = {
    "PairwisePreference": "skilltransfer.metrics.pairwise",
    "PositionBias": "skilltransfer.metrics.pairwise",
    "pairwise_preference": "skilltransfer.metrics.pairwise",
    "position_bias": "skilltransfer.metrics.pairwise",
    "ScoreReport": "skilltransfer.metrics.scoring",
    "SkillScore": "skilltransfer.metrics.scoring",
    "score_library": "skilltransfer.metrics.scoring",
    "skill_text": "skilltransfer.metrics.scoring",
    "write_report": "skilltransfer.metrics.scoring",
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
    "load_task_texts": "skilltransfer.metrics.task_texts",
    "DEFAULT_MAX_PAIRS": "skilltransfer.metrics.utility",
    "DEFAULT_TAU": "skilltransfer.metrics.utility",
    "OFF_DOMAIN_QUANTILE": "skilltransfer.metrics.utility",
    "SPECIFICITY_MODES": "skilltransfer.metrics.utility",
    "TaskReference": "skilltransfer.metrics.utility",
    "UtilityScores": "skilltransfer.metrics.utility",
    "abstractness": "skilltransfer.metrics.utility",
    "best_match": "skilltransfer.metrics.utility",
    "best_match_and_abstractness": "skilltransfer.metrics.utility",
    "knn_k": "skilltransfer.metrics.utility",
    "specificity": "skilltransfer.metrics.utility",
    "task_reference": "skilltransfer.metrics.utility",
    "utility": "skilltransfer.metrics.utility",
    "utility_scores": "skilltransfer.metrics.utility",
    "ContextAccount": "skilltransfer.metrics.windows",
    "ContextWindow": "skilltransfer.metrics.windows",
}
"""Each exported name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
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
