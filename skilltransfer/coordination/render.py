"""How a plan enters prompts: as a numbered procedure (nl-sop), as a graph (prompt-graph), and, per node, its bound
inputs and skill package (metaskill)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from skilltransfer.coordination.plan import Plan, PlanNode, referenced_nodes
from skilltransfer.coordination.prompts import CoordinationPrompts
from skilltransfer.skill import Skill


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to its first ``limit`` characters plus a line saying how much was cut, and whether it was."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters cut]", True


def render_procedure(plan: Plan) -> str:
    """The plan as numbered steps in dependency order; bindings become "use the result of step N as name"."""
    order = plan.topological_order()
    number = {node_id: index for index, node_id in enumerate(order, start=1)}
    lines = []
    for node_id in order:
        node = plan.node(node_id)
        parts = [node.instructions.strip()]
        if node.skill:
            parts.append(f"Follow the skill package `{node.skill}`.")
        uses = [f"the result of step {number[source]} as `{name}`" for name, source in referenced_nodes(node.bindings)]
        if uses:
            parts.append(f"Use {', '.join(uses)}.")
        if node.expected_output.strip():
            parts.append(f"Result: {node.expected_output.strip()}")
        lines.append(f"{number[node_id]}. {' '.join(parts)}")
    return "\n".join(lines)


def render_graph(plan: Plan) -> str:
    """The plan's nodes as JSON (id, skill, instructions, depends_on, bindings, expected_output), one node a line."""
    rows = [json.dumps(node.model_dump(), ensure_ascii=False) for node in plan.nodes]
    return "{\"nodes\": [\n  " + ",\n  ".join(rows) + "\n]}"


def render_skills(prompts: CoordinationPrompts, skills: Sequence[Skill]) -> str:
    """The skill packages section of a host prompt ('' when the plan names none)."""
    if not skills:
        return ""
    return prompts.skill_packages.render(skills="\n".join(skill.render() for skill in skills))


def render_inputs(prompts: CoordinationPrompts, node: PlanNode, outputs: Mapping[str, str],
                  max_chars: int) -> tuple[str, dict[str, dict[str, Any]]]:
    """A node's bound inputs section and what was bound (for the audit).

    Each binding is a heading ``## <name> (the result of <node>)`` followed by the predecessor's output text exactly
    as stored, cut to ``max_chars`` (the cut said). A predecessor without a stored output (never the case when the
    scheduler is right) is rendered as "(not available ...)" and recorded as ``missing`` for the audit.
    """
    parts, bound = [], {}
    for name, source in referenced_nodes(node.bindings):
        if source not in outputs:
            parts.append(f"## {name} (the result of {source})\n(not available: {source} has not finished)")
            bound[name] = {"ref": f"outputs.{source}", "node": source, "chars": 0, "truncated": False,
                           "missing": True}
            continue
        text, cut = cut_text(outputs[source], max_chars)
        parts.append(f"## {name} (the result of {source})\n{text}")
        bound[name] = {"ref": f"outputs.{source}", "node": source, "chars": len(outputs[source]), "truncated": cut,
                       "missing": False}
    if not parts:
        return "", bound
    return prompts.node_inputs.render(inputs="\n\n".join(parts)), bound


def render_node_skill(prompts: CoordinationPrompts, skill: Skill | None) -> str:
    """A node's skill package section ('' without a skill)."""
    return prompts.node_skill.render(skill=skill.render()) if skill is not None else ""
