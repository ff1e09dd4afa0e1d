"""The degree-corrected walk and the verifier's recursive routing, with scripted verifiers (test doubles)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest
from helpers_lens import email_graph, hand_graph

from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.route import RouteConfig, clean_rewrite, parse_decision, route
from skilltransfer.lens.walk import WalkConfig, expand, walk_scores
from skilltransfer.llm.context import ContextLengthError, approx_tokens, estimate_tokens, messages_tokens
from skilltransfer.llm.testing import ScriptedModel

NO_WALK = RouteConfig(mode="no-walk")


def verifier(decisions: dict[str, str], rewrites: dict[str, str] | None = None,
             default: str = "SKIP") -> Callable[[list[dict]], str]:
    """A scripted verifier/rewriter: the decision for a unit's text, or its rewrite."""

    def reply(messages: list[dict]) -> str:
        user = messages[1]["content"]
        if messages[0]["content"].startswith("You adapt"):
            first = re.search(r"\):\n(.*)", user).group(1).strip()  # type: ignore[union-attr]
            return f"Adapted: {(rewrites or {}).get(first, 'adapted ' + first)}"
        text = re.search(r"Unit \(.*\):\n(.*)\n", user).group(1)  # type: ignore[union-attr]
        return f"DECISION: {decisions.get(text, default)}"

    return reply


def fixed_seeds(graph: SkillGraph, seeds: list[tuple[str, float]]) -> SkillGraph:
    graph.top_units = lambda query, k: seeds[:k]  # type: ignore[method-assign]
    return graph


# ----------------------------------------------------------------- the walk
def hub_graph() -> SkillGraph:
    """Seed S (under root R) with leaves a, b and a hub primitive H shared by 30 other skills."""
    spec = {"main": [("R", "policy", "root"), ("S", "procedure", "seed"), ("a", "primitive", "a"),
                     ("b", "primitive", "b"), ("H", "primitive", "hub")]}
    edges = [("R", "S"), ("S", "a"), ("S", "b"), ("S", "H")]
    for i in range(30):
        spec[f"o{i}"] = [(f"R{i}", "policy", f"r{i}"), (f"P{i}", "procedure", f"p{i}"), (f"q{i}", "primitive", f"q{i}"),
                         ("H", "primitive", "hub")]
        edges += [(f"R{i}", f"P{i}"), (f"P{i}", f"q{i}"), (f"P{i}", "H")]
    graph = hand_graph(spec, edges)
    graph.validate()
    return graph


def hub_share(scores: dict[str, float]) -> float:
    other = sum(weight for uid, weight in scores.items() if uid not in {"R", "S", "a", "b"})
    return other / sum(scores.values())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_degree_correction_keeps_the_walk_out_of_a_hub(seed: int) -> None:
    graph = hub_graph()
    corrected = WalkConfig(degree_exponent=1.0, seed=seed, expand_k=3)
    assert hub_share(walk_scores(graph, [("S", 1.0)], corrected)) < 0.05
    assert {uid for uid, _ in expand(graph, [("S", 1.0)], corrected)} == {"R", "a", "b"}
    plain = corrected.model_copy(update={"degree_exponent": 0.0})
    assert hub_share(walk_scores(graph, [("S", 1.0)], plain)) > 0.2  # the plain walk is drawn into the hub


def test_the_walk_is_seeded_and_weighted_by_the_seeds_cosine() -> None:
    graph = hub_graph()
    config = WalkConfig(seed=7)
    assert walk_scores(graph, [("S", 0.8)], config) == walk_scores(graph, [("S", 0.8)], config)
    assert walk_scores(graph, [("S", 0.8)], config) != walk_scores(graph, [("S", 0.8)], WalkConfig(seed=8))
    half = walk_scores(graph, [("S", 0.4)], config)
    assert half == pytest.approx({uid: w / 2 for uid, w in walk_scores(graph, [("S", 0.8)], config).items()})
    assert expand(graph, [("S", 0.0)], config) == []
    assert expand(graph, [], config) == []


# ----------------------------------------------------------------- routing decisions
def test_each_decision_path_and_what_enters_the_context() -> None:
    graph = fixed_seeds(email_graph(), [("p1", 0.9), ("p2", 0.5)])
    graph.routing_notes = ["Skip anything about baking."]
    decisions = {"Email a report file to a colleague": "DECOMPOSE", "Find the colleague's address first": "ACCEPT",
                 "Send the email with the report attached": "DECOMPOSE", "Attach the report file": "REWRITE",
                 "Bake bread at 220 degrees": "SKIP", "Invite a colleague to a meeting": "DECOMPOSE",
                 "Create the calendar event": "DECOMPOSE"}
    model = ScriptedModel(verifier(decisions, {"Attach the report file": "Attach sales.xlsx"}))
    routed = route(graph, "email sales.xlsx to Bob", model, NO_WALK)
    log = routed.log
    assert [(v.unit, v.decision, v.depth, v.via) for v in log.visits] == [
        ("p1", "DECOMPOSE", 0, None), ("s1", "ACCEPT", 1, "p1"), ("s2", "DECOMPOSE", 1, "p1"),
        ("x2", "REWRITE", 2, "s2"), ("x3", "SKIP", 2, "s2"), ("p2", "DECOMPOSE", 0, None),
        ("c2", "DECOMPOSE", 1, "p2")]  # c2's child x1 lies in s1's accepted subtree: never visited
    assert log.context_units == ["s1", "x2"]
    assert log.retrieved_tree == 9  # both skills' units, the shared x1 once
    assert log.rewrites == {"x2": "Attach sales.xlsx"}
    assert "Find the colleague's address first\n  - Look up the colleague in the contacts by name\n    - Search " \
           "contacts for the name" in routed.text
    assert "Attach sales.xlsx" in routed.text
    assert "(adapted to this task)" in routed.text
    for absent in ("Bake bread", "Attach the report file", "Create the calendar event", "Email a report file"):
        assert absent not in routed.text
    assert log.verifier_calls == len(model.calls) == 8
    assert log.adaptation_cost == 8
    assert log.verifier_prompt_tokens == sum(messages_tokens(call) for call in model.calls)
    assert log.verifier_completion_tokens > 0
    assert log.context_tokens > 0
    assert log.expanded == []
    assert "1. Skip anything about baking." in model.calls[0][0]["content"]
    assert set(log.prompts) == {"verify", "verify_user", "rewrite", "rewrite_user"}
    assert all(params["max_tokens"] == 16 for params, call in zip(model.params, model.calls, strict=True)
               if not call[0]["content"].startswith("You adapt"))


def test_a_shared_child_is_routed_once_and_a_cycle_terminates() -> None:
    graph = fixed_seeds(email_graph(), [("p1", 0.9), ("p2", 0.5)])
    model = ScriptedModel(verifier({}, default="DECOMPOSE"))
    log = route(graph, "q", model, NO_WALK).log
    assert [v.unit for v in log.visits].count("x1") == 1
    leaves = {v.unit: v.how for v in log.visits if not graph.children(v.unit)}
    assert set(leaves.values()) == {"leaf-decompose"}
    assert set(log.rewrites) == set(leaves)

    cyclic = hand_graph({"s": [("p", "policy", "root"), ("a", "procedure", "a"), ("b", "procedure", "b")]},
                        [("p", "a"), ("a", "b"), ("b", "a")])
    assert cyclic.find_cycle() == ["a", "b", "a"]
    fixed_seeds(cyclic, [("p", 1.0), ("b", 0.5)])
    log = route(cyclic, "q", ScriptedModel(verifier({}, default="DECOMPOSE")), NO_WALK).log
    assert [(v.unit, v.decision) for v in log.visits] == [("p", "DECOMPOSE"), ("a", "DECOMPOSE"),
                                                          ("b", "DECOMPOSE")]
    assert log.context_units == []


def test_the_token_budget_keeps_the_best_ranked_units_in_graph_order() -> None:
    graph = fixed_seeds(email_graph(), [("x3", 0.9), ("c2", 0.8), ("x2", 0.7), ("s1", 0.6)])
    full = route(graph, "q", ScriptedModel(verifier({}, default="ACCEPT")), NO_WALK)
    tokens = {item.unit: estimate_tokens(item.text) for item in full.units}
    assert set(tokens) == {"x3", "c2", "x2", "s1"}
    assert full.log.cut_units == []
    budget = tokens["x3"] + tokens["c2"] + 1
    cut = route(graph, "q", ScriptedModel(verifier({}, default="ACCEPT")),
                NO_WALK.model_copy(update={"token_budget": budget}))
    assert cut.log.context_units == ["x3", "c2"]  # the two best-ranked, in graph order
    assert cut.log.cut_units == ["x2", "s1"]
    assert cut.log.context_tokens <= budget


def test_unparseable_replies_retry_then_fall_back_and_max_visits_leaves_candidates_unrouted() -> None:
    graph = fixed_seeds(email_graph(), [("x3", 0.9), ("x2", 0.8), ("c2", 0.7)])
    replies = iter(["I think it is fine", "DECISION: SKIP",  # c2 first: procedures before primitives
                    "hmm", "no idea"])
    model = ScriptedModel(lambda messages: next(replies))
    log = route(graph, "q", model, NO_WALK.model_copy(update={"max_visits": 2})).log
    assert [(v.unit, v.decision, v.how) for v in log.visits] == [("c2", "SKIP", "verifier-retry"),
                                                                 ("x3", "ACCEPT", "fallback:unparseable")]
    assert log.unrouted == ["x2"]
    assert log.context_units == ["x3"]
    assert log.verifier_calls == 4

    def too_long(messages: list[dict]) -> str:
        raise ContextLengthError("too long")

    log = route(graph, "q", ScriptedModel(too_long), NO_WALK.model_copy(update={"fallback_decision": "SKIP"})).log
    assert {v.how for v in log.visits} == {"fallback:context"}
    assert log.context_units == []


def test_rewrite_all_and_no_walk_ablations() -> None:
    graph = fixed_seeds(email_graph(), [("s2", 0.9), ("c2", 0.8)])
    model = ScriptedModel(verifier({}))
    log = route(graph, "q", model, RouteConfig(mode="rewrite-all", walk=WalkConfig(expand_k=2))).log
    assert len(log.expanded) == 2
    assert all(v.decision == "REWRITE" and v.how == "rewrite-all" for v in log.visits)
    assert all(call[0]["content"].startswith("You adapt") for call in model.calls)
    assert set(log.context_units) == set(log.rewrites) == {v.unit for v in log.visits}
    lens = route(graph, "q", ScriptedModel(verifier({}, default="ACCEPT")), RouteConfig(walk=WalkConfig(expand_k=2)))
    assert len(lens.log.expanded) == 2
    assert route(graph, "q", ScriptedModel(verifier({})), NO_WALK).log.expanded == []


@pytest.mark.parametrize("seed", range(12))
def test_the_context_holds_only_accepted_or_rewritten_units_once(seed: int) -> None:
    rng = random.Random(seed)
    graph = email_graph()
    texts = [unit.text for unit in graph]
    decisions = {text: rng.choice(["ACCEPT", "DECOMPOSE", "REWRITE", "SKIP"]) for text in texts}
    budget = rng.choice([30, 80, 1200])
    routed = route(graph, rng.choice(["email the report", "invite Bob", "bake"]), ScriptedModel(verifier(decisions)),
                   RouteConfig(token_budget=budget, seeds_k=rng.randint(1, 4), walk=WalkConfig(seed=seed)))
    chosen = {v.unit for v in routed.log.visits if v.decision in ("ACCEPT", "REWRITE")}
    context = routed.log.context_units
    assert set(context) <= chosen
    assert len(context) == len(set(context))
    assert not any(a != b and b in graph.subtree(a) for a in context for b in context)
    assert routed.log.context_tokens <= budget
    for v in routed.log.visits:
        if v.decision in ("SKIP", "DECOMPOSE") and not any(v.unit in graph.subtree(c) for c in context):
            assert f"\n{graph.units[v.unit].text}\n" not in f"\n{routed.text}"


def test_parsing_of_verifier_and_rewriter_replies() -> None:
    assert parse_decision("DECISION: rewrite") == "REWRITE"
    assert parse_decision("I would skip... Decision - ACCEPT") == "ACCEPT"
    assert parse_decision("Skip it") == "SKIP"
    assert parse_decision("no idea") is None
    assert clean_rewrite("```text\nAdapted: do X\n```") == "do X"
    assert clean_rewrite("  \n") == ""
    assert approx_tokens("abcd") == 1
