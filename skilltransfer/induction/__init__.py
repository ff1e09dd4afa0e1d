"""Skill induction: one skill per finished trajectory or sub-trajectory, from one shared prompt."""

from skilltransfer.induction.inducer import (
    PROMPT_VARIANTS,
    Induced,
    Inducer,
    InductionConfig,
    InductionError,
    parse_skill_reply,
)

__all__ = ["PROMPT_VARIANTS", "Induced", "Inducer", "InductionConfig", "InductionError", "parse_skill_reply"]
