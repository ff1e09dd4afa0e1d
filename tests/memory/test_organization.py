"""Library organisations: flat and task-tree builds, validation (every error case), persistence, navigation, the
LLM-built tree/graph with a scripted model (lenient parsing, repairs, retries, fallback), and ``library organize``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers_cli import main_cli as _cli

from skilltransfer.errors import InputError
from skilltransfer.induction.organize import Organizer, parse_groups
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.llm.retry import ModelCallError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import HashEmbedder, Skill, SkillMemory, export_jsonl, load_library
from skilltransfer.memory.organization import (
    LibraryView,
    NodeNotFound,
    Organization,
    RoutingNode,
    flat_organization,
    load_organization,
    save_organization,
    task_tree,
    validate,
)
from skilltransfer.skill import Provenance

TASKS = ["t1", "t1", "t2", "t2", None, "t3"]
SKILLS = [Skill(name=f"s{i}", description=f"Skill number {i}.", body=f"step {i}",
                provenance=Provenance(source_task_id=task), inputs="a name" if i == 0 else "")
          for i, task in enumerate(TASKS)]
IDS = [skill.id for skill in SKILLS]


def tree_data() -> dict:
    """A valid height-3 tree: top -> (A -> s0 s1, B -> s2 s3), C -> s4 s5."""
    nodes = [("top", "upper", ["A", "B"], []), ("A", "first", [], IDS[0:2]), ("B", "second", [], IDS[2:4]),
             ("C", "third", [], IDS[4:6])]
    return {"kind": "tree", "roots": ["top", "C"], "root_skills": [],
            "nodes": [{"name": n, "description": d, "children": list(c), "skills": list(s)} for n, d, c, s in nodes]}


def test_flat_and_task_tree_are_valid() -> None:
    flat = flat_organization(SKILLS)
    validate(flat, SKILLS)
    assert LibraryView(flat, SKILLS).top().count("- [skill]") == 6
    tree = task_tree(SKILLS)
    validate(tree, SKILLS)
    assert [n.name for n in tree.nodes] == ["task t1", "task t2", "skills without a source task", "task t3"]
    assert tree.node("task t2").skills == IDS[2:4]
    assert tree.node("task t1").description == "2 skills induced from task t1: s0, s1"
    for kind in ("tree", "graph"):
        validate(task_tree(SKILLS, kind=kind), SKILLS)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    organization = Organization.model_validate(tree_data())
    save_organization(organization, tmp_path)
    assert load_organization(tmp_path, SKILLS) == organization
    assert load_organization(tmp_path / "organization.json", SKILLS) == organization


def _broken(change) -> dict:
    data = tree_data()
    change(data)
    return data


def _node(data: dict, name: str) -> dict:
    return next(node for node in data["nodes"] if node["name"] == name)


@pytest.mark.parametrize(("data", "message"), [
    (_broken(lambda d: d["nodes"].append({"name": "a", "skills": [IDS[0]]})), "two routing nodes are named 'a'"),
    (_broken(lambda d: _node(d, "C").update(name="S4")), "routing node 'S4' has the name of a skill"),
    (_broken(lambda d: _node(d, "top")["children"].append("Z")), "routing node 'top' lists an unknown routing node"),
    (_broken(lambda d: d["root_skills"].append("sk-nope")), "the top level lists an unknown skill id 'sk-nope'"),
    (_broken(lambda d: _node(d, "A")["skills"].append(IDS[0])), "lists the skill '" + IDS[0] + "' twice"),
    (_broken(lambda d: d["nodes"].append({"name": "E", "children": []}) or d["roots"].append("E")),
     "routing node 'E' is empty"),
    (_broken(lambda d: _node(d, "B")["skills"].append(IDS[0])), "skill 's0' has 2 parents (A, B); a tree allows one"),
    (_broken(lambda d: d["roots"].append("A")), "routing node 'A' has 2 parents"),
    (_broken(lambda d: d.update(kind="graph") or _node(d, "A")["children"].append("top")), "cycle top -> A -> top"),
    (_broken(lambda d: d.update(kind="graph") or _node(d, "A")["children"].append("A")), "cycle A -> A"),
    (_broken(lambda d: d["roots"].remove("C")), "routing node 'C' cannot be reached from the top"),
    (_broken(lambda d: _node(d, "C")["skills"].pop()), "skill 's5' (" + IDS[5] + ") cannot be reached"),
    (_broken(lambda d: d.update(kind="task-tree")), "a task tree is two levels deep, but routing node 'top'"),
    (_broken(lambda d: d.update(kind="task-tree", roots=["A", "B", "C"], nodes=d["nodes"][1:], root_skills=[IDS[0]])
             or _node(d, "A")["skills"].remove(IDS[0])), "a task tree has no skills at the top"),
    (_broken(lambda d: d.update(kind="flat")), "a flat library has no routing nodes"),
    (_broken(lambda d: d.update(format_version=2)), "format_version 2 is not supported"),
])
def test_invalid_organisations_are_one_line_errors(tmp_path: Path, data: dict, message: str) -> None:
    (tmp_path / "organization.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"organization.json: invalid \S+ organisation: .*" + re.escape(message)):
        load_organization(tmp_path, SKILLS)


@pytest.mark.parametrize(("text", "message"), [
    ("{", r"organization.json:1: broken JSON"),
    ('{"kind": "forest"}', r"field 'kind'"),
    ('{"kind": "tree", "colour": 1}', r"field 'colour'"),
    ('{"kind": "tree", "nodes": [{"name": ""}]}', r"field 'nodes.0.name'"),
])
def test_malformed_organisation_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "organization.json").write_text(text)
    with pytest.raises(InputError, match=message):
        load_organization(tmp_path, SKILLS)
    with pytest.raises(InputError, match="does not exist"):
        load_organization(tmp_path / "absent", SKILLS)


def test_a_graph_allows_several_parents() -> None:
    data = _broken(lambda d: d.update(kind="graph") or _node(d, "B")["skills"].append(IDS[0])
                   or d["roots"].append("A"))
    organization = Organization.model_validate(data)
    view = LibraryView(organization, SKILLS)
    assert view.parents("s0") == ["A", "B"]
    assert view.parents("A") == ["", "top"]


def test_navigation() -> None:
    view = LibraryView(Organization.model_validate(tree_data()), SKILLS)
    assert [(e.name, e.kind) for e in view.roots()] == [("top", "node"), ("C", "node")]
    assert [e.name for e in view.children("top")] == ["A", "B"]
    assert [e.skill.id for e in view.children("A")] == IDS[0:2]
    opened = view.open("A")
    assert opened == ("## Group: A\nfirst\n- [skill] s0: Skill number 0.\n  Input: a name\n"
                      "- [skill] s1: Skill number 1.\n")
    assert view.open("top") == "## Group: top\nupper\n- [group] A: first\n- [group] B: second\n"
    assert view.open("s1") == SKILLS[1].render_card()
    assert view.top().startswith("Skill library (tree): 6 skills in 4 groups")
    with pytest.raises(NodeNotFound, match=r"no routing node or skill is named 'Top'; did you mean 'top'"):
        view.open("Top")
    with pytest.raises(NodeNotFound):
        view.children("s0")


def test_subset_keeps_paths_to_the_chosen_skills() -> None:
    view = LibraryView(Organization.model_validate(tree_data()), SKILLS)
    small = view.subset([IDS[2], IDS[5]])
    kept = [SKILLS[2], SKILLS[5]]
    validate(small, kept)
    sub = LibraryView(small, kept)
    assert [e.name for e in sub.roots()] == ["top", "C"]
    assert [e.name for e in sub.children("top")] == ["B"]


# ------------------------------------------------------------------------------------------------ LLM builds
def test_parse_groups_is_lenient() -> None:
    names = ["alpha", "beta", "gamma", "delta", "eps_1"]
    reply = ("Sure! Here they are.\n**GROUP 1:** Mail things\n**DESCRIPTION:** Email work.\n**MEMBERS:** 1, 3-4, 9\n\n"
             "- Group 2 - Other\nDescription: the rest\nItems: beta and eps_1\n"
             "GROUP: Empty\nDESCRIPTION: none\nMEMBERS: none\n")
    groups, notes = parse_groups(reply, names)
    assert [(g.name, g.description, g.members) for g in groups] == [
        ("Mail things", "Email work.", [0, 2, 3]), ("Other", "the rest", [1, 4])]
    assert any("ignored item numbers 9" in note for note in notes)
    assert any("'Empty': no valid members" in note for note in notes)
    groups, _ = parse_groups("GROUP: G\nDESCRIPTION: d\n2, 5", names)  # members without a MEMBERS line
    assert groups[0].members == [1, 4]


def _reply(*groups: tuple[str, list[int]]) -> str:
    return "\n".join(f"GROUP: {name}\nDESCRIPTION: {name} things.\nMEMBERS: {', '.join(map(str, members))}"
                     for name, members in groups)


def test_tree_build_repairs_duplicates_and_retries_missing_items() -> None:
    model = ScriptedModel([_reply(("Mail", [1, 2, 3])),  # 4-6 missing: retried
                           _reply(("Mail", [1, 2, 3]), ("Files", [3, 4, 5, 6]))])
    organization = Organizer(model, kind="tree").organize(SKILLS)
    validate(organization, SKILLS)
    assert organization.node("Files").skills == IDS[3:6]  # item 3 stays in its first group
    assert organization.built_by["method"] == "llm"
    assert organization.built_by["calls"] == 2
    assert organization.built_by["retries"] == 1
    retry = model.calls[1]
    assert retry[-2] == {"role": "assistant", "content": _reply(("Mail", [1, 2, 3]))}
    assert "items 4, 5, 6 are in no group" in retry[-1]["content"]
    assert any("already in an earlier group" in note for note in organization.built_by["notes"])
    assert "Put every item in exactly ONE group." in model.calls[0][0]["content"]


def test_leftovers_go_to_other_skills_after_the_retries() -> None:
    model = ScriptedModel([_reply(("Mail", [1, 2]))] * 3)
    organization = Organizer(model, kind="tree", retries=2).organize(SKILLS)
    assert organization.node("other skills").skills == IDS[2:]
    assert len(model.calls) == 3


def test_no_usable_reply_falls_back_to_the_task_tree() -> None:
    model = ScriptedModel(["I cannot do that."] * 2)
    organization = Organizer(model, kind="graph", retries=1).organize(SKILLS)
    validate(organization, SKILLS)
    assert organization.kind == "graph"
    assert organization.built_by["method"] == "fallback:task-tree"
    assert "no usable grouping in 2 replies" in organization.built_by["reason"]
    assert [n.name for n in organization.nodes] == [n.name for n in task_tree(SKILLS).nodes]


def test_graph_keeps_several_parents_and_renames_clashing_groups() -> None:
    model = ScriptedModel([_reply(("s0", [1, 2, 3]), ("Files", [3, 4, 5, 6]))])
    organization = Organizer(model, kind="graph").organize(SKILLS)
    view = LibraryView(organization, SKILLS)
    assert [e.name for e in view.roots()] == ["s0 (2)", "Files"]
    assert view.parents("s2") == ["s0 (2)", "Files"]
    assert "one group, or several" in model.calls[0][0]["content"]


def test_height_three_groups_the_groups() -> None:
    first = _reply(("Mail", [1, 2]), ("Files", [3, 4]), ("Sheets", [5, 6]))
    model = ScriptedModel([first, _reply(("Office", [2, 3]), ("Comms", [1]))])
    organization = Organizer(model, kind="tree", height=3).organize(SKILLS)
    view = LibraryView(organization, SKILLS)
    assert [e.name for e in view.roots()] == ["Office", "Comms"]
    assert [e.name for e in view.children("Office")] == ["Files", "Sheets"]
    assert "skill groups" in model.calls[1][0]["content"]
    assert "1. Mail: Mail things." in model.calls[1][1]["content"]
    failing = ScriptedModel([first, "nothing", "nothing", "nothing"])
    flat_top = Organizer(failing, kind="tree", height=3).organize(SKILLS)
    assert flat_top.roots == ["Mail", "Files", "Sheets"]
    assert any("second level not built" in note for note in flat_top.built_by["notes"])


def test_batches_are_merged_by_group_name() -> None:
    skills = [Skill(name=f"k{i}", description=f"d{i}", body="b") for i in range(10)]
    model = ScriptedModel([_reply(("Alpha", list(range(1, 9)))), _reply(("alpha", [1]), ("Beta", [2]))])
    organization = Organizer(model, batch_size=8).organize(skills)
    assert organization.node("Alpha").skills == [s.id for s in skills[:9]]
    assert organization.node("Beta").skills == [skills[9].id]
    assert "# Items (2)" in model.calls[1][1]["content"]


def test_a_prompt_too_long_halves_the_batch() -> None:
    skills = [Skill(name=f"k{i}", description=f"d{i}", body="b") for i in range(16)]

    def reply(messages: list[dict]) -> str:
        count = int(re.search(r"# Items \((\d+)\)", messages[1]["content"]).group(1))
        if count > 8:
            raise ContextLengthError("maximum context length is 512 tokens")
        return _reply(("Half", list(range(1, count + 1))))

    organization = Organizer(ScriptedModel(reply), batch_size=16).organize(skills)
    assert organization.node("Half").skills == [s.id for s in skills]
    assert any("too long" in note for note in organization.built_by["notes"])
    small = [Skill(name=f"k{i}", description=f"d{i}", body="b") for i in range(9)]
    organization = Organizer(ScriptedModel(reply), batch_size=9).organize(small)
    assert organization.built_by["method"] == "fallback:task-tree"
    assert "does not fit" in organization.built_by["reason"]


def test_endpoint_errors_propagate() -> None:
    def down(messages: list[dict]) -> str:
        raise ModelCallError("model endpoint http://x failed after 3 attempts")

    with pytest.raises(ModelCallError, match="failed after 3 attempts"):
        Organizer(ScriptedModel(down)).organize(SKILLS)


# ------------------------------------------------------------------------------------------------ the command


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return export_jsonl(SKILLS, tmp_path / "lib.jsonl")


def test_organize_tree_end_to_end(tmp_path: Path, library: Path, monkeypatch, capsys) -> None:
    script = tmp_path / "replies.jsonl"
    script.write_text(json.dumps(_reply(("Mail", [1, 2, 3]), ("Files", [4, 5, 6]))) + "\n")
    out = tmp_path / "organised"
    code, stdout, err = _cli(["library", "organize", str(library), "--as", "tree", "--out", str(out),
                              "--model", f"scripted:{script}"], monkeypatch, capsys)
    assert code == 0, err
    assert "- [group] Mail: Mail things." in stdout
    assert "built by: llm (1 model calls, 0 retries)" in stdout
    assert sorted(p.name for p in out.iterdir()) == ["organization.json", *sorted(s.name for s in SKILLS)]
    view = LibraryView.load(out)
    assert [s.id for s in view.skills] == IDS  # the skills keep their ids
    assert view.skill("s0").inputs == "a name"
    assert [e.name for e in view.children("Files")] == ["s3", "s4", "s5"]
    code, stdout, _ = _cli(["library", "show", str(out), "--node", "Mail"], monkeypatch, capsys)
    assert (code, stdout) == (0, view.open("Mail"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_organize_task_tree_from_a_memory_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    memory = SkillMemory(HashEmbedder(dim=32))
    memory.add_many(SKILLS)
    memory.save(tmp_path / "mem")
    out = tmp_path / "tt"
    out.mkdir()  # an existing empty folder is fine
    code, stdout, err = _cli(["library", "organize", str(tmp_path / "mem"), "--as", "task-tree", "--out", str(out)],
                             monkeypatch, capsys)
    assert code == 0, err
    assert "Skill library (task-tree): 6 skills in 4 groups" in stdout
    assert load_organization(out, load_library(out)).kind == "task-tree"


@pytest.mark.parametrize(("args", "message"), [
    (["--as", "forest"], "error: Invalid value for '--as': Value error, 'forest' is not one of 'tree', 'graph'"),
    (["--as", "tree", "--model", "scripted"], "needs replies: --model scripted:<file.jsonl>"),
    (["--as", "tree", "--model", "mock"], "--model 'mock' is not a model string; write one of: openai/<id>"),
    (["--as", "task-tree", "--out", "{tmp}/full"], "--out: exists and is not empty"),
    (["--as", "task-tree", "--out", "{tmp}/lib.jsonl"], "--out: exists and is not a folder"),
    (["--as", "tree", "--height", "4"], "--height"),
])
def test_organize_errors(tmp_path: Path, library: Path, monkeypatch, capsys, args: list[str], message: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "r.jsonl").write_text('"GROUP: a\\nMEMBERS: 1"\n')
    argv = ["library", "organize", str(library), "--out", str(tmp_path / "new"), *args]
    code, _, err = _cli([a.replace("{tmp}", str(tmp_path)) for a in argv], monkeypatch, capsys)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_show_errors(tmp_path: Path, library: Path, monkeypatch, capsys) -> None:
    code, _, err = _cli(["library", "show", str(tmp_path)], monkeypatch, capsys)
    assert code == 2
    assert "error:" in err
    save_organization(task_tree(SKILLS), tmp_path / "lib")
    from skilltransfer.memory import export_skill_md

    export_skill_md(SKILLS, tmp_path / "lib")
    code, _, err = _cli(["library", "show", str(tmp_path / "lib"), "--node", "task t9"], monkeypatch, capsys)
    assert code == 2
    assert "--node: no routing node or skill is named 'task t9'; did you mean 'task t3', 'task t2', 'task t1'?" in err


def test_tree_node_invariants_hold_for_routing_node_model() -> None:
    with pytest.raises(ValueError, match="name"):
        RoutingNode(name="")
