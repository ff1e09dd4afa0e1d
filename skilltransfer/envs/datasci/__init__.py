"""The ``datasci`` environment: KramaBench-like data-science questions over generated, messy domain files."""

from skilltransfer.envs.datasci.env import DataSciEnv
from skilltransfer.envs.datasci.scoring import SuccessRule, score_answer

__all__ = ["DataSciEnv", "SuccessRule", "score_answer"]
