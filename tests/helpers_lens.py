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


# --------------------------------------------------------------------------------------------- a scripted lens policy
VERIFIER_MARK, REWRITER_MARK, DECOMPOSER_MARK = ("You decide how much of a stored skill", "You adapt one part",
                                                 "You split a reusable skill")


def unit_text(messages: list[dict]) -> str:
    """The unit text of a verifier prompt."""
    user = messages[1]["content"]
    return user.split("):\n", 1)[1].split("\n\nIts parts:", 1)[0].strip()


class LensCounterScript:
    """Wraps a `CounterScript` (helpers_tinyenv) and plays the lens roles too (a test double).

    Verifier: DECOMPOSE units with parts; of the others, SKIP units mentioning ``skip_word``, REWRITE units mentioning
    ``rewrite_word``, ACCEPT the rest. Rewriter: the unit's first line with ``(adapted)``. Decomposer: a policy, one
    strategy, one procedure per numbered body line and a primitive per ``Caveat`` line, from the skill in the prompt.
    """

    def __init__(self, inner, *, skip_word: str = "bread", rewrite_word: str = "Caveat") -> None:
        self.inner, self.skip_word, self.rewrite_word = inner, skip_word, rewrite_word
        self.lens_roles: list[str] = []
        self.verified: list[tuple[str, str]] = []
        """(unit text, decision) per verifier call."""

    def __call__(self, messages: list[dict]) -> str:
        system = messages[0]["content"]
        if system.startswith(VERIFIER_MARK):
            self.lens_roles.append("verifier")
            text, user = unit_text(messages), messages[1]["content"]
            has_parts = "\n- (" in user.split("Its parts:", 1)[1]
            decision = ("DECOMPOSE" if has_parts else "SKIP" if self.skip_word in text
                        else "REWRITE" if self.rewrite_word in text else "ACCEPT")
            self.verified.append((text, decision))
            return f"DECISION: {decision}"
        if system.startswith(REWRITER_MARK):
            self.lens_roles.append("rewriter")
            part = messages[1]["content"].split("):\n", 1)[1].strip().split("\n")[0]
            return f"{part} (adapted)"
        if system.startswith(DECOMPOSER_MARK):
            self.lens_roles.append("decomposer")
            user = messages[1]["content"]
            description = user.split("Description: ", 1)[1].split("\n", 1)[0]
            body = user.split("Body:", 1)[1]
            steps = [line.split(".", 1)[1].strip() for line in body.split("\n") if line[:1].isdigit() and "." in line]
            extra = [line.strip() for line in body.split("\n") if line.strip().startswith("Caveat")]
            return "\n".join([f"POLICY: {description}", f"STRATEGY: Plan: {description}",
                              *[f"PROCEDURE: {step}" for step in steps], *[f"PRIMITIVE: {e}" for e in extra]])
        return self.inner(messages)
