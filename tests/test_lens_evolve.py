"""Registry evolution with a fake round runner and scripted writers (test doubles): J never falls, worse candidates
are rejected, the final pair is saved."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from helpers_lens import email_graph

from skilltransfer.lens.evolve import (
    Edit,
    EvolveConfig,
    GapReport,
    ModelWriter,
    TaskOutcome,
    apply_edits,
    evolve,
    gap_reports,
    parse_edits,
    save_evolution,
)
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.protocols import TaskSpec


def task(tid: str, needs: str) -> TaskSpec:
    return TaskSpec(id=tid, instruction=f"a task that needs {needs}", difficulty=1, template="t",
                    metadata={"needs": needs})


DEV = [task("d1", "vendor"), task("d2", "invoice"), task("d3", "vendor")]
VAL = [task("v1", "vendor"), task("v2", "invoice"), task("v3", "travel")]


class FakeRounds:
    """A documented test double of the task runner: a task succeeds when a routing note or a unit's text mentions
    what it needs; every routing note costs 2,000 tokens per task on top of 1,000."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, graph: SkillGraph, tasks: Sequence[TaskSpec]) -> list[TaskOutcome]:
        self.calls.append(tuple(t.id for t in tasks))
        texts = " ".join([*graph.routing_notes, *(unit.text for unit in graph)])
        return [TaskOutcome(t.id, t.instruction, t.metadata["needs"] in texts, 1000 + 2000 * len(graph.routing_notes),
                            "" if t.metadata["needs"] in texts else f"no skill about {t.metadata['needs']}",
                            ({"visits": [{"unit": "x1", "decision": "SKIP"}], "rewrites": {}},))
                for t in tasks]


def scripted_writer(plan: list[list[list[Edit]]]):
    """Round r's candidate edit sets are ``plan[r]``; records the reports it was given."""
    seen: list[list[GapReport]] = []

    def write(graph: SkillGraph, reports: list[GapReport]) -> list[list[Edit]]:
        seen.append(reports)
        return plan[len(seen) - 1]

    write.seen = seen  # type: ignore[attr-defined]
    return write


def test_evolution_commits_only_improvements_and_j_never_falls(tmp_path: Path) -> None:
    graph = email_graph()
    good_note = Edit(kind="add_note", text="Prefer units about the vendor.")
    plan = [
        [[good_note]],                                                            # round 1: + vendor -> commit
        [[Edit(kind="drop_note", note=1)],                                        # round 2: both worse -> keep
         [Edit(kind="add_note", text="Be careful."), Edit(kind="add_note", text="Think twice.")]],
        [[Edit(kind="set_unit", unit="c2", text="Create the calendar event"),     # round 3: J unchanged -> no
          Edit(kind="set_unit", unit="nope", text="x")],
         [Edit(kind="set_unit", unit="c2", text="Create the invoice event")]],    # + invoice -> commit
    ]
    writer = scripted_writer(plan)
    rounds = FakeRounds()
    logs = []
    result = evolve(graph, DEV, VAL, rounds, writer, config=EvolveConfig(rounds=3, lam=0.05, cost_unit_tokens=10_000),
                    on_round=logs.append)
    assert result.baseline.success == 0.0
    assert [log.committed for log in result.rounds] == [0, None, 1]
    js = [result.baseline.j] + [log.j for log in result.rounds]
    assert js == sorted(js)
    assert js[2] == js[1]  # round 2's candidates were worse: the current pair stayed
    worse = [c.evaluation.j for c in result.rounds[1].candidates]
    assert all(j < result.rounds[1].j_before for j in worse)
    assert result.rounds[2].candidates[0].rejected[0][1] == "unknown unit nope"
    assert result.graph.routing_notes == [good_note.text]
    assert result.graph.units["c2"].text == "Create the invoice event"
    assert graph.routing_notes == []
    assert graph.units["c2"].text == "Create the calendar event"
    assert result.j == js[-1]
    assert logs == result.rounds
    assert [r.task_id for r in writer.seen[0]] == ["d1", "d2", "d3"]
    assert writer.seen[0][0].units == (("x1", "primitive", "SKIP", "Search contacts for the name"),)
    assert rounds.calls[0] == ("v1", "v2", "v3")
    assert rounds.calls[1] == ("d1", "d2", "d3")

    save_evolution(result, tmp_path / "evo")
    reloaded = SkillGraph.load(tmp_path / "evo" / "graph", HashEmbedder(64))
    assert reloaded.routing_notes == [good_note.text]
    assert reloaded.units["c2"].text == result.graph.units["c2"].text
    lines = [json.loads(line) for line in (tmp_path / "evo" / "evolution.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert lines[0]["baseline"]["j"] == result.baseline.j
    assert [line["j"] for line in lines[1:]] == js[1:]


def test_min_gain_and_a_round_without_failures() -> None:
    graph = email_graph()
    graph.routing_notes = ["vendor invoice travel"]  # every task succeeds
    writer = scripted_writer([[[Edit(kind="add_note", text="unused")]]] * 2)
    result = evolve(graph, DEV, VAL, FakeRounds(), writer, config=EvolveConfig(rounds=2))
    assert writer.seen == []  # no failures: no reports, no candidates
    assert [log.committed for log in result.rounds] == [None, None]
    assert result.j == result.baseline.j
    assert result.rounds[0].gap_reports == 0

    fixes = scripted_writer([[[Edit(kind="add_note", text="use the vendor")]]])
    small = evolve(email_graph(), DEV, VAL, FakeRounds(), fixes, config=EvolveConfig(rounds=1, min_gain=0.5))
    assert small.rounds[0].committed is None  # +1/3 success is below the required gain


def test_apply_edits_numbers_notes_as_they_stood() -> None:
    graph = email_graph()
    graph.routing_notes = ["one", "two", "three"]
    out, applied, rejected = apply_edits(graph, [Edit(kind="drop_note", note=1), Edit(kind="drop_note", note=3),
                                                 Edit(kind="drop_note", note=3), Edit(kind="drop_note", note=9),
                                                 Edit(kind="add_note", text="two"), Edit(kind="add_note", text="four"),
                                                 Edit(kind="set_unit", unit="x1", text="  ")])
    assert out.routing_notes == ["two", "four"]
    assert len(applied) == 3
    assert [reason for _, reason in rejected] == ["no note 3", "no note 9", "empty or already a note", "empty text"]
    assert graph.routing_notes == ["one", "two", "three"]


def test_model_writer_parses_edit_lines_from_a_scripted_model() -> None:
    reply = ("Here are my edits:\n- NOTE: Decompose policies about email before accepting them.\n"
             "2. DROP NOTE #1\n**UNIT x1**: Search the contacts by full name.\nUNIT `c2`: Create the event.\n"
             "That's all.")
    model = ScriptedModel([reply])
    writer = ModelWriter(model)
    graph = email_graph()
    graph.routing_notes = ["Accept everything."]
    report = GapReport("d1", "email Bob", "wrong address", (("x1", "primitive", "ACCEPT", "Search contacts"),))
    [edits] = writer(graph, [report])
    assert edits == [Edit(kind="add_note", text="Decompose policies about email before accepting them."),
                     Edit(kind="drop_note", note=1), Edit(kind="set_unit", unit="x1", text="Search the contacts by "
                                                                                          "full name."),
                     Edit(kind="set_unit", unit="c2", text="Create the event.")]
    prompt = model.calls[0][1]["content"]
    assert "1. Accept everything." in prompt
    assert "- x1 (primitive, ACCEPT): Search contacts" in prompt
    assert "Failure: wrong address" in prompt
    assert writer.tokens > 0
    assert parse_edits(reply, max_edits=2) == edits[:2]


def test_gap_reports_cover_failed_tasks_with_their_routed_units() -> None:
    graph = email_graph()
    outcomes = [TaskOutcome("a", "ok task", True),
                TaskOutcome("b", "bad task", False, failure="exit: max_steps",
                            routes=({"visits": [{"unit": "x2", "decision": "REWRITE"}, {"unit": "gone"}],
                                     "rewrites": {"x2": "Attach sales.xlsx"}},
                                    {"visits": [{"unit": "x2", "decision": "SKIP"}]})),
                TaskOutcome("c", "other", False)]
    reports = gap_reports(graph, outcomes, limit=1)
    assert len(reports) == 1
    assert reports[0].units == (("x2", "primitive", "REWRITE", "Attach the report file [rewritten as: Attach "
                                 "sales.xlsx]"),)
    assert "Failure: exit: max_steps" in reports[0].render()
