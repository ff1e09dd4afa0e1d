"""Validation of code skills before they enter a memory: parse, find the function, load it in the sandbox.

A code skill is accepted only if its body parses, defines its entry-point function, and executes (``exec`` of the
whole body: imports and top-level statements run) in a fresh sandbox worker (``skilltransfer.sandbox``: separate
process group, resource limits, no network, writes confined to a scratch folder) within a time limit, after which the
function must be callable. Nothing here raises on a bad skill: the reason is returned so the memory can prune the
skill and log why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skilltransfer.memory.skill import parse_code_signature

if TYPE_CHECKING:
    from skilltransfer.memory.skill import Skill


def validate_code_skill(skill: Skill, timeout_s: float = 10.0) -> str | None:
    """Check that a code skill parses, defines its function, and loads in isolation.

    Args:
        skill: a skill; text skills are always valid.
        timeout_s: wall-clock limit for loading.

    Returns:
        None when valid, else a one-line reason (e.g. ``code does not parse: invalid syntax (line 3)``).
    """
    if skill.format != "code":
        return None
    if skill.code is None:
        try:
            parse_code_signature(skill.body)
        except ValueError as exc:
            return str(exc)
        return "code skill has no entry-point signature"
    try:
        parse_code_signature(skill.body, preferred_name=skill.code.function_name)
    except ValueError as exc:
        return str(exc)
    from skilltransfer.sandbox import check_code_loads  # deferred: the sandbox pulls in the env machinery

    return check_code_loads(skill.body, skill.code.function_name, timeout_s=timeout_s)
