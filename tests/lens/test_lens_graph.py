"""The skill graph: build, save/load round trips, validation errors, merging; decomposition with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers_lens import email_graph, hand_graph

from skilltransfer.errors import InputError
from skilltransfer.lens.decompose import (
    DecomposeConfig,
    Decomposer,
    build_outline,
    decompose_library,
    fallback_outline,
    merge_near_duplicates,
    parse_outline,
)
from skilltransfer.lens.graph import GraphError, SkillGraph
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.skill import Skill

EMAIL = Skill(name="send-email", description="Send an email with an attachment to a contact.",
              body="1. Look up the address.\n2. Attach the file.\n\nCaveat: never guess an address.")
INVITE = Skill(name="invite", description="Invite a contact to a meeting.", body="1. Look up the address.\n2. Invite.")
GOOD = ("Here is the hierarchy:\n"
        "POLICY: Send a file to a contact by email.\n"
        "- **STRATEGY**: Resolve the recipient first.\n"
        "  1. Procedure: Look up the recipient in the contacts.\n"
        "     primitive - Search contacts by name.\n"
        "STRATEGY: Send the message.\n"
        "PRIMITIVE: Attach the file.\n"
        "Hope this helps!")


# ----------------------------------------------------------------- graph structure and persistence
def test_graph_round_trip_keeps_units_edges_roots_notes_and_embeddings(tmp_path: Path) -> None:
    graph = email_graph()
    graph.routing_notes = ["Skip baking units for office tasks."]
    ids, matrix = graph.matrix()
    graph.save(tmp_path / "g")
    loaded = SkillGraph.load(tmp_path / "g", HashEmbedder(64))
    assert [u.model_dump() for u in loaded] == [u.model_dump() for u in graph]
    assert list(loaded.edges()) == list(graph.edges())
    assert loaded.children("s2") == ["x2", "x3"]
    assert loaded.parents("x1") == ["c1", "c2"]
    assert loaded.roots == graph.roots
    assert loaded.routing_notes == graph.routing_notes
    assert np.array_equal(loaded.matrix()[1], matrix)
    assert loaded.matrix()[0] == ids
    assert loaded.counts() == {**graph.counts(), "shared_units": 1}
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert manifest["embedder"] == HashEmbedder(64).id
    assert manifest["counts"]["units"] == 9
    assert {s.name for s in loaded.skills.values()} == {"send-report", "invite"}
    assert loaded.order()["p1"] == 0
    assert loaded.order()["p2"] == 7


def test_load_refuses_another_embedder_and_broken_files(tmp_path: Path) -> None:
    email_graph().save(tmp_path / "g")
    with pytest.raises(InputError, match=r"built with embedder 'hash:dim=64:char=1' but the given embedder is"):
        SkillGraph.load(tmp_path / "g", HashEmbedder(32))
    edges = tmp_path / "g" / "edges.jsonl"
    lines = edges.read_text().splitlines()
    edges.write_text("\n".join([*lines[:2], '{"parent": "p1", "child": "nope"}', *lines[2:]]) + "\n")
    with pytest.raises(GraphError, match=r"edges.jsonl:3: edge p1 -> nope: unknown unit nope"):
        SkillGraph.load(tmp_path / "g", HashEmbedder(64))
    edges.write_text("{not json\n")
    with pytest.raises(InputError, match=r"edges.jsonl:1: broken line"):
        SkillGraph.load(tmp_path / "g", HashEmbedder(64))
    with pytest.raises(InputError, match="not a saved skill graph: manifest.json is missing"):
        SkillGraph.load(tmp_path, HashEmbedder(64))


def test_load_reports_a_structural_error_of_the_saved_folder(tmp_path: Path) -> None:
    email_graph().save(tmp_path / "g")
    edges = tmp_path / "g" / "edges.jsonl"
    edges.write_text(edges.read_text() + '{"parent": "x1", "child": "c1"}\n')  # c1 -> x1 -> c1
    with pytest.raises(GraphError) as err:
        SkillGraph.load(tmp_path / "g", HashEmbedder(64))
    assert "\n" not in str(err.value)
    assert "goes up a layer (primitive -> procedure)" in str(err.value)


@pytest.mark.parametrize(("edges", "message"), [
    ([("p1", "p1")], "self-loop at unit p1"),
    ([("a", "p1")], "edge a -> p1 goes up a layer (procedure -> policy)"),
    ([("a", "b"), ("b", "a")], "cycle: a -> b -> a"),
    ([], "unit a is not reachable from any skill's root (and 1 more)"),
])
def test_validate_names_the_first_broken_rule(edges: list[tuple[str, str]], message: str) -> None:
    graph = hand_graph({"s": [("p1", "policy", "root")]})
    for uid in ("a", "b"):
        graph.add_unit(type(graph.units["p1"])(id=uid, layer="procedure", text=uid))
    for parent, child in edges:
        graph.add_edge(parent, child)
    with pytest.raises(GraphError) as err:
        graph.validate()
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_save_refuses_an_invalid_graph_and_writes_nothing(tmp_path: Path) -> None:
    graph = email_graph()
    graph.add_edge("x1", "x2")
    graph.add_edge("x2", "x1")
    with pytest.raises(GraphError, match="cycle"):
        graph.save(tmp_path / "g")
    assert not any(tmp_path.iterdir())


def test_merge_shares_a_child_and_refuses_to_close_a_cycle() -> None:
    graph = hand_graph({"a": [("pa", "policy", "A"), ("ca", "procedure", "look up the contact")],
                        "b": [("pb", "policy", "B"), ("cb", "procedure", "look up the contact"),
                              ("cc", "procedure", "then send")]},
                       [("pa", "ca"), ("pb", "cc"), ("pb", "cb")])
    graph.merge("ca", "cb")
    assert graph.parents("ca") == ["pa", "pb"]
    assert graph.children("pb") == ["cc", "ca"]
    assert graph.units["ca"].sources == [graph.units["pa"].sources[0], graph.units["pb"].sources[0]]
    assert graph.units["ca"].merged_from == ["cb"]
    assert "cb" not in graph.units
    graph.add_edge("ca", "cc")
    with pytest.raises(GraphError, match="one lies below the other"):
        graph.merge("cc", "ca")
    graph.validate()


# ----------------------------------------------------------------- decomposition
def test_parse_outline_tolerates_bullets_case_and_emphasis_and_builds_the_tree() -> None:
    items, ignored = parse_outline(GOOD)
    assert items == [("policy", "Send a file to a contact by email."), ("strategy", "Resolve the recipient first."),
                     ("procedure", "Look up the recipient in the contacts."), ("primitive", "Search contacts by name."),
                     ("strategy", "Send the message."), ("primitive", "Attach the file.")]
    assert ignored == 2
    outline, dropped = build_outline(items, "desc", max_units=40)
    assert [(layer, parent) for layer, _, parent in outline] == [
        ("policy", None), ("strategy", 0), ("procedure", 1), ("primitive", 2), ("strategy", 0), ("primitive", 4)]
    assert dropped == 0


def test_build_outline_root_rules_and_the_unit_cap() -> None:
    items = [("procedure", "a"), ("policy", "the root"), ("policy", "a second policy"), ("primitive", "b"),
             ("primitive", "c"), ("primitive", "d")]
    outline, dropped = build_outline(items, "desc", max_units=3)  # type: ignore[arg-type]
    assert outline == [("policy", "the root", None), ("procedure", "a", 0), ("strategy", "a second policy", 0),
                       ("primitive", "b", 2)]
    assert dropped == 2
    outline, _ = build_outline([("primitive", "x")], "the description", max_units=5)
    assert outline == [("policy", "the description", None), ("primitive", "x", 0)]


def test_decomposer_retries_with_the_reason_then_uses_the_model_reply() -> None:
    model = ScriptedModel(["Sure! I will split it.", "POLICY: p\nSTRATEGY: only one", GOOD])
    outline, record = Decomposer(model)(EMAIL)
    assert record.status == "model"
    assert record.attempts == 3
    assert len(outline) == 6
    assert "no line starts with a layer tag" in model.calls[1][-1]["content"]
    assert "only 1 unit(s) below the POLICY line" in model.calls[2][-1]["content"]
    assert model.calls[2][-2] == {"role": "assistant", "content": "POLICY: p\nSTRATEGY: only one"}
    assert model.params[0]["max_tokens"] == 512


def test_decomposer_falls_back_after_the_retries_and_on_an_overlong_prompt() -> None:
    outline, record = Decomposer(ScriptedModel(["no"] * 3), DecomposeConfig(retries=2))(EMAIL)
    assert record.status == "fallback"
    assert record.attempts == 3
    assert "no line starts" in record.reason
    assert outline == [("policy", EMAIL.description, None), ("procedure", "Look up the address.", 0),
                       ("procedure", "Attach the file.", 0), ("procedure", "Caveat: never guess an address.", 0)]

    def too_long(messages: object) -> str:
        raise ContextLengthError("prompt of 9000 tokens exceeds 8192")

    outline, record = Decomposer(ScriptedModel(too_long))(EMAIL)
    assert record.status == "fallback"
    assert record.attempts == 0
    assert "does not fit" in record.reason


def test_fallback_of_a_code_skill_gives_functions_and_their_api_calls() -> None:
    body = ('def send(apis, name: str) -> None:\n    """Email a contact."""\n'
            '    who = apis.contacts.search(query=name)\n    apis.email.send(to=who)\n    apis.email.send(to=who)\n')
    skill = Skill(name="send", description="Send mail.", body=body, format="code")
    assert fallback_outline(skill, 40) == [("policy", "Send mail.", None),
                                          ("procedure", "Call send(apis, name: str): Email a contact.", 0),
                                          ("primitive", "Call apis.contacts.search(...).", 1),
                                          ("primitive", "Call apis.email.send(...).", 1)]


def test_decompose_library_merges_near_duplicates_across_skills_but_never_roots(tmp_path: Path) -> None:
    def reply(messages: list[dict]) -> str:
        if "Name: send-email" in messages[1]["content"]:
            return "POLICY: Same root text.\nPROCEDURE: Look up the address in the contacts.\nPRIMITIVE: Attach it."
        return "POLICY: Same root text.\nPROCEDURE: Look up the address in the contacts.\nPRIMITIVE: Invite them."

    graph, records = decompose_library([EMAIL, INVITE], ScriptedModel(reply), HashEmbedder(64),
                                       info={"model": "scripted"})
    assert [r.status for r in records] == ["model", "model"]
    assert graph.counts()["by_layer"] == {"policy": 2, "strategy": 0, "procedure": 1, "primitive": 2}
    shared = next(u for u in graph if u.layer == "procedure")
    assert graph.parents(shared.id) == [graph.roots[EMAIL.id], graph.roots[INVITE.id]]
    assert shared.sources == [EMAIL.id, INVITE.id]
    assert len(graph.info["merges"]) == 1
    assert [graph.units[c].text for c in graph.children(shared.id)] == ["Attach it.", "Invite them."]
    assert graph.info["model"] == "scripted"
    assert set(graph.info["prompts"]) == {"decompose", "decompose_user", "decompose_retry"}
    graph.save(tmp_path / "g")
    assert SkillGraph.load(tmp_path / "g", HashEmbedder(64)).counts() == graph.counts()
    unmerged, _ = decompose_library([EMAIL, INVITE], ScriptedModel(reply), HashEmbedder(64),
                                    DecomposeConfig(merge_threshold=1.01))
    assert unmerged.counts()["units"] == 6
    assert unmerged.counts()["shared_units"] == 0


def test_merge_threshold_is_a_cosine_bound() -> None:
    graph = hand_graph({"a": [("pa", "policy", "A"), ("ca", "procedure", "look up the contact email address")],
                        "b": [("pb", "policy", "B"), ("cb", "procedure", "look up the contact email")]},
                       [("pa", "ca"), ("pb", "cb")])
    ids, matrix = graph.matrix()
    cosine = float(matrix[ids.index("ca")] @ matrix[ids.index("cb")])
    assert 0.5 < cosine < 0.99
    assert merge_near_duplicates(graph.copy(), cosine + 0.001) == []
    assert merge_near_duplicates(graph, cosine - 0.001) == [{"kept": "ca", "merged": "cb",
                                                              "cosine": round(cosine, 4)}]
