"""Hand-built skill graphs for the lens tests (a test helper)."""

from __future__ import annotations

from skilltransfer.lens.graph import SkillGraph, Unit
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.skill import Skill


def hand_graph(spec: dict[str, list[tuple[str, str, str]]], edges: list[tuple[str, str]] = (),
               embedder: HashEmbedder | None = None) -> SkillGraph:
    """A graph from ``{skill name: [(unit id, layer, text), ...]}`` (the first unit is the skill's root) plus edges.

    Units listed again under another skill are shared (not re-added); edges are added as given, unvalidated.
    """
    graph = SkillGraph(embedder or HashEmbedder(64))
    for name, units in spec.items():
        skill = Skill(name=name, description=units[0][2], body="")
        for position, (uid, layer, text) in enumerate(units):
            if uid in graph.units:
                graph.units[uid].sources.append(skill.id)
                continue
            unit = Unit(id=uid, layer=layer, text=text, sources=[skill.id])
            if position == 0:
                graph.add_skill(skill, unit)
            else:
                graph.add_unit(unit)
    for parent, child in edges:
        graph.add_edge(parent, child)
    return graph


def email_graph() -> SkillGraph:
    """Two skills sharing a primitive: send-report (policy p1) and invite (policy p2)."""
    return hand_graph(
        {"send-report": [("p1", "policy", "Email a report file to a colleague"),
                         ("s1", "strategy", "Find the colleague's address first"),
                         ("c1", "procedure", "Look up the colleague in the contacts by name"),
                         ("x1", "primitive", "Search contacts for the name"),
                         ("s2", "strategy", "Send the email with the report attached"),
                         ("x2", "primitive", "Attach the report file"),
                         ("x3", "primitive", "Bake bread at 220 degrees")],
         "invite": [("p2", "policy", "Invite a colleague to a meeting"),
                    ("c2", "procedure", "Create the calendar event"),
                    ("x1", "primitive", "Search contacts for the name")]},
        [("p1", "s1"), ("s1", "c1"), ("c1", "x1"), ("p1", "s2"), ("s2", "x2"), ("s2", "x3"),
         ("p2", "c2"), ("c2", "x1")])
