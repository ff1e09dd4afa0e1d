"""The ``datasci`` environment: KramaBench-like data-science questions over generated, messy domain files."""

from skilltransfer.envs.datasci.env import DataSciEnv
from skilltransfer.envs.datasci.scoring import score_answer

__all__ = ["DataSciEnv", "score_answer"]
