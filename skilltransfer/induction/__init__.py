"""Skill induction: one skill per finished trajectory or sub-trajectory, from one shared prompt."""

from skilltransfer.induction.inducer import (
    PROMPT_VARIANTS,
    ContractReply,
    Induced,
    Inducer,
    InductionConfig,
    InductionError,
    parse_contract_reply,
    parse_skill_reply,
)

__all__ = ["PROMPT_VARIANTS", "ContractReply", "Induced", "Inducer", "InductionConfig", "InductionError",
           "parse_contract_reply", "parse_skill_reply"]
