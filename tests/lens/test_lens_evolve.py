"""Registry evolution with fake round runners and scripted writers (test doubles): paired validation against an
incumbent run afresh, the commit test, the writer's tokens in J, the test split, and scripted noise (no-op edits
commit at most at the stated rate; a planted gain commits)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers_lens import email_graph

from skilltransfer.errors import InputError
from skilltransfer.lens.evolve import (
    Edit,
    EvolveConfig,
    GapReport,
    ModelWriter,
    TaskOutcome,
    WriterConfig,
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
VAL = [task(f"v{i}", needs) for i, needs in enumerate(["vendor"] * 6 + ["invoice"] * 6 + ["travel"] * 2)]
TEST = [task("t1", "vendor"), task("t2", "invoice"), task("t3", "travel")]


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


class Writer:
    """Round r's candidate edit sets are ``plan[r]``; records the reports it was given and spends 100 tokens per
    candidate (a test double of `ModelWriter`)."""

    def __init__(self, plan: list[list[list[Edit]]]) -> None:
        self.plan, self.seen, self.tokens = plan, [], 0

    def __call__(self, graph: SkillGraph, reports: list[GapReport]) -> list[list[Edit]]:
        self.seen.append(reports)
        proposals = self.plan[len(self.seen) - 1]
        self.tokens += 100 * len(proposals)
        return proposals


def test_evolution_commits_paired_improvements_and_reevaluates_the_incumbent(tmp_path: Path) -> None:
    graph = email_graph()
    good_note = Edit(kind="add_note", text="Prefer units about the vendor.")
    plan = [
        [[good_note]],                                                            # round 1: + 6 vendor tasks
        [[Edit(kind="drop_note", note=1)],                                        # round 2: both worse -> keep
         [Edit(kind="add_note", text="Be careful."), Edit(kind="add_note", text="Think twice.")]],
        [[Edit(kind="set_unit", unit="c2", text="Create the calendar event"),     # round 3: no task gained -> no
          Edit(kind="set_unit", unit="nope", text="x")],
         [Edit(kind="set_unit", unit="c2", text="Create the invoice event")]],    # + 6 invoice tasks -> commit
    ]
    writer = Writer(plan)
    rounds = FakeRounds()
    logs = []
    result = evolve(graph, DEV, VAL, rounds, writer, test_tasks=TEST, config=EvolveConfig(rounds=3, resamples=2000),
                    on_round=logs.append)
    assert result.baseline.success == 0.0
    assert [log.committed for log in result.rounds] == [0, None, 1]
    first, second, third = result.rounds
    assert first.incumbent == result.baseline  # round 1 pairs with the baseline (no selection has used it)
    gain = first.candidates[0].gain
    assert gain["passed"]
    assert gain["alpha"] == 0.05
    assert gain["n"] == len(VAL)
    assert gain["p_value"] < 0.05
    assert second.incumbent is not None
    assert second.incumbent.success == 6 / 14
    assert all(not c.gain["passed"] for c in second.candidates)
    assert second.j == second.j_before
    assert [c.gain["alpha"] for c in third.candidates] == [0.025, 0.025]  # Bonferroni over the round's candidates
    assert not third.candidates[0].gain["passed"]  # J fell (nothing gained): not committed
    assert third.candidates[0].rejected[0][1] == "unknown unit nope"
    assert third.j == third.candidates[1].evaluation.j
    # J carries the writer's tokens: a candidate its share of its round's, over the validation tasks
    assert first.writer_tokens == 100
    assert first.candidates[0].writer_tokens == 100
    assert third.candidates[0].evaluation.refinement_tokens == 100
    val_j = third.candidates[0].evaluation
    assert val_j.j == pytest.approx(val_j.success - 0.05 * (val_j.mean_tokens + 100 / len(VAL)) / 10_000)
    assert result.writer_tokens == 500
    assert result.graph.routing_notes == [good_note.text]
    assert result.graph.units["c2"].text == "Create the invoice event"
    assert graph.routing_notes == []
    assert graph.units["c2"].text == "Create the calendar event"
    assert logs == result.rounds
    assert [r.task_id for r in writer.seen[0]] == ["d1", "d2", "d3"]
    assert writer.seen[0][0].units == (("x1", "primitive", "SKIP", "Search contacts for the name"),)
    val_ids, dev_ids, test_ids = (tuple(t.id for t in split) for split in (VAL, DEV, TEST))
    assert rounds.calls == [val_ids,                                  # baseline
                            dev_ids, val_ids,                         # round 1: one candidate
                            dev_ids, val_ids, val_ids, val_ids,       # round 2: incumbent afresh + 2 candidates
                            dev_ids, val_ids, val_ids, val_ids,       # round 3
                            test_ids, test_ids]                       # the initial and the final pair, once each
    assert result.test is not None
    assert not result.test.same_pair
    assert result.test.initial.success == 0.0
    assert result.test.final.success == 2 / 3
    assert result.test.final.refinement_tokens == 500
    assert result.test.gain == pytest.approx(result.test.final.j - result.test.initial.j)

    save_evolution(result, tmp_path / "evo")
    reloaded = SkillGraph.load(tmp_path / "evo" / "graph", HashEmbedder(64))
    assert reloaded.routing_notes == [good_note.text]
    lines = [json.loads(line) for line in (tmp_path / "evo" / "evolution.jsonl").read_text().splitlines()]
    assert len(lines) == 5
    assert lines[0]["baseline"]["j"] == result.baseline.j
    assert [line["j"] for line in lines[1:4]] == [log.j for log in result.rounds]
    assert lines[4]["test"]["final"]["success"] == 2 / 3


def test_few_validation_tasks_cannot_commit_and_a_round_without_failures() -> None:
    graph = email_graph()
    graph.routing_notes = ["vendor invoice travel"]  # every task succeeds
    writer = Writer([[[Edit(kind="add_note", text="unused")]]] * 2)
    rounds = FakeRounds()
    result = evolve(graph, DEV, VAL, rounds, writer, test_tasks=TEST, config=EvolveConfig(rounds=2))
    assert writer.seen == []  # no failures: no reports, no candidates, no incumbent re-run
    assert [log.committed for log in result.rounds] == [None, None]
    assert [log.incumbent for log in result.rounds] == [None, None]
    assert result.j == result.baseline.j
    assert result.logged_gain == 0
    assert result.rounds[0].gap_reports == 0
    assert result.test is not None
    assert result.test.same_pair
    assert result.test.gain == 0
    assert rounds.calls[-1] == tuple(t.id for t in TEST)
    assert rounds.calls[-2] != rounds.calls[-1]

    # 3 validation tasks: even a candidate that fixes one of them for sure cannot pass an exact test at 5 %
    fixes = Writer([[[Edit(kind="add_note", text="use the vendor")]]])
    small = evolve(email_graph(), DEV, VAL[:1] + VAL[6:8], FakeRounds(), fixes, config=EvolveConfig(rounds=1))
    assert small.rounds[0].committed is None
    assert small.rounds[0].candidates[0].gain["p_value"] >= 0.125
    margin = evolve(email_graph(), DEV, VAL, FakeRounds(), Writer([[[Edit(kind="add_note", text="use the vendor")]]]),
                    config=EvolveConfig(rounds=1, min_gain=0.5))
    assert margin.rounds[0].committed is None  # +6/14 success is below the required gain


def test_splits_must_be_disjoint_and_not_empty() -> None:
    with pytest.raises(InputError, match="validation and test splits share tasks: v1"):
        evolve(email_graph(), DEV, VAL, FakeRounds(), Writer([]), test_tasks=[VAL[1]])
    with pytest.raises(InputError, match="development and test"):
        evolve(email_graph(), DEV, VAL, FakeRounds(), Writer([]), test_tasks=[DEV[0]])
    with pytest.raises(InputError, match="needs development and validation tasks"):
        evolve(email_graph(), DEV, [], FakeRounds(), Writer([]))


class NoisyWorld:
    """Scripted evaluations (a documented test double): every task run succeeds with probability 0.4, independently,
    unless the pair holds the planted note (0.6); 3,000 tokens per run."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, graph: SkillGraph, tasks: Sequence[TaskSpec]) -> list[TaskOutcome]:
        p = 0.6 if "PLANTED" in graph.routing_notes else 0.4
        return [TaskOutcome(t.id, t.instruction, bool(self.rng.random() < p), 3000) for t in tasks]


class NoOpWriter:
    """Two candidates per round that change nothing the world reads (round 1's first: the planted note if asked)."""

    def __init__(self, plant: bool) -> None:
        self.plant, self.calls, self.tokens = plant, 0, 0

    def __call__(self, graph: SkillGraph, reports: list[GapReport]) -> list[list[Edit]]:
        self.calls += 1
        out = [[Edit(kind="add_note", text=f"no-op {self.calls}.{i}")] for i in range(2)]
        if self.plant and self.calls == 1:
            out[0] = [Edit(kind="add_note", text="PLANTED")]
        return out


@pytest.mark.slow
def test_noise_alone_commits_at_most_the_stated_rate_and_a_planted_gain_commits() -> None:
    dev = [task(f"d{i}", "x") for i in range(5)]
    val = [task(f"v{i}", "x") for i in range(20)]
    cfg = EvolveConfig(rounds=3, val_repeats=8, resamples=1000)
    commits = rounds = planted = 0
    gains = []
    for seed in range(40):
        noise = evolve(email_graph(), dev, val, NoisyWorld(seed), NoOpWriter(False), config=cfg)
        commits += noise.commits
        rounds += len(noise.rounds)
        gains.append(noise.logged_gain)
        real = evolve(email_graph(), dev, val, NoisyWorld(1000 + seed), NoOpWriter(True), config=cfg)
        planted += "PLANTED" in real.graph.routing_notes
    assert commits / rounds <= 0.05 + 0.03  # the stated rate (alpha per round), with room for 120 rounds' noise
    assert abs(float(np.mean(gains))) < 0.02
    assert planted / 40 >= 0.8


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


def test_writer_sends_no_cap_under_paper_unless_one_is_set() -> None:
    """The ``paper`` harness sends no hidden completion cap (issue 37): `WriterConfig.uncapped` drops the default
    400, keeps one the user set, and the writer then sends none."""
    assert WriterConfig().max_tokens == 400
    assert WriterConfig().uncapped().max_tokens is None
    assert WriterConfig(max_tokens=900).uncapped().max_tokens == 900
    report = GapReport("d1", "email Bob", "wrong address", (("x1", "primitive", "ACCEPT", "Search contacts"),))
    for config, sent in ((WriterConfig(), {"max_tokens": 400}), (WriterConfig().uncapped(), {})):
        model = ScriptedModel(["NOTE: check the address"])
        ModelWriter(model, config)(email_graph(), [report])
        assert {k: v for k, v in model.params[0].items() if k == "max_tokens"} == sent
