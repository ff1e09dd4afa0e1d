"""Validation of code skills before they enter a memory: parse, restrict, find the function, load it in the sandbox.

A code skill is accepted only if its body parses, holds nothing at module level that runs code (a docstring,
imports, function/class definitions without decorators and with literal defaults, literal constants:
``skilltransfer.sandbox.codecheck``, so loading cannot behave differently in the check and in an episode), defines its
entry-point function, and loads (``exec`` of the body) in a fresh sandbox worker whose namespace is an episode's at
its start (``skilltransfer.sandbox``: separate process, resource limits, no network, writes confined to a scratch
folder) within a time limit, after which the function must be callable. Episodes apply the same restriction when a
retrieved code skill is loaded. Nothing here raises on a bad skill: the reason is returned so the memory can prune
the skill and log why.
"""

from __future__ import annotations

from skilltransfer.sandbox.codecheck import skill_body_problem
from skilltransfer.skill import Skill, parse_code_signature


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
    problem = skill_body_problem(skill.body)
    if problem is not None:
        return problem
    from skilltransfer.sandbox import check_code_loads  # deferred: starting workers is only needed here

    return check_code_loads(skill.body, skill.code.function_name, timeout_s=timeout_s)
