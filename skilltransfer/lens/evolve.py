"""Registry evolution: refine the skill graph (agent registry) and its routing notes (verifier registry) together.

``evolve(graph, dev_tasks, val_tasks, run_round, writer)`` runs, for each round:

1. ``run_round(graph, dev_tasks)`` -> one `TaskOutcome` per task (the task runner; injected, phase B wires in the
   stream runner);
2. ``gap_builder(graph, outcomes)`` -> `GapReport`s from the failed tasks (default `gap_reports`: the task, why it
   failed and which units routing visited with which decision);
3. ``writer(graph, reports)`` -> candidate edit sets (`Edit`: add or drop a routing note, replace a unit's text; the
   default `ModelWriter` asks a model, prompts ``writer``/``writer_user``);
4. each candidate (the current pair with one edit set applied to a copy) is evaluated on the validation split with
   ``run_round(candidate, val_tasks)``; the best one is **committed only if its J is higher than the current pair's
   J by more than** ``min_gain``; otherwise the current pair stays (the fallback).

**Objective**: J = success rate - lambda * cost, with cost = mean tokens per task (as the outcomes report them: agent
and routing calls) / ``cost_unit_tokens``; defaults lambda = 0.05 and 10,000 tokens, so 10k more tokens per task must
buy 5 points of success. The current pair's J is the one measured when it was evaluated (the baseline once before
round 1, a candidate when it was committed); it is never re-measured, so the logged J per round never decreases by
construction, even with a noisy model.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.prompts import lens_prompt
from skilltransfer.protocols import ChatModel, TaskSpec
from skilltransfer.util.files import atomic_write_text

_NOTE = re.compile(r"^NOTE\s*:\s*(.+)$", re.IGNORECASE)
_DROP = re.compile(r"^DROP\s+NOTE\s*#?\s*(\d+)", re.IGNORECASE)
_UNIT = re.compile(r"^UNIT\s+`?([\w.-]+?)`?\s*:\s*(.+)$", re.IGNORECASE)
_BULLET = re.compile(r"^[\s>*_\-\u2022]*(?:\d+[.)]\s+)?")


@dataclass(frozen=True)
class TaskOutcome:
    """One task's result as the round runner reports it."""

    task_id: str
    instruction: str
    success: bool
    tokens: int = 0
    """Every model token the task spent (agent and routing calls)."""
    failure: str = ""
    """Why it failed, in a few lines (exit status, last error or observation)."""
    routes: tuple[dict[str, Any], ...] = ()
    """The task's routing logs (`RouteLog.to_dict()`), one per query."""


@dataclass(frozen=True)
class GapReport:
    """What went wrong on one failed task, for the writer."""

    task_id: str
    instruction: str
    failure: str
    units: tuple[tuple[str, str, str, str], ...]
    """(unit id, layer, decision, text) of the units routing visited for the task."""

    def render(self) -> str:
        lines = [f"Task {self.task_id}: {self.instruction}", f"Failure: {self.failure or '(not given)'}",
                 "Routed units:" if self.units else "Routed units: none"]
        lines += [f"- {uid} ({layer}, {decision}): {text}" for uid, layer, decision, text in self.units]
        return "\n".join(lines)


class Edit(BaseModel):
    """One proposed change to the pair."""

    kind: Literal["add_note", "drop_note", "set_unit"]
    text: str = ""
    """The note to add, or the unit's new text."""
    note: int | None = None
    """The 1-based number of the note to drop."""
    unit: str | None = None
    """The unit to rewrite."""


class EvolveConfig(BaseModel):
    """Settings of registry evolution (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(default=3, ge=1)
    lam: float = Field(default=0.05, ge=0.0)
    """lambda: weight of the cost in J."""
    cost_unit_tokens: float = Field(default=10_000, gt=0)
    """cost = mean tokens per task / this."""
    min_gain: float = Field(default=0.0, ge=0.0)
    """A candidate commits only when its J exceeds the current J by more than this."""
    max_gap_reports: int = Field(default=8, ge=1)
    """Failed tasks reported to the writer per round (the first ones)."""


class Evaluation(BaseModel):
    """The objective over one set of outcomes."""

    n: int
    success: float
    mean_tokens: float
    cost: float
    j: float


class CandidateLog(BaseModel):
    """One candidate of a round: its edits and, if any applied, its evaluation."""

    applied: list[Edit]
    rejected: list[tuple[Edit, str]] = Field(default_factory=list)
    evaluation: Evaluation | None = None


class RoundLog(BaseModel):
    """One evolution round (a line of ``evolution.jsonl``)."""

    round: int
    dev: Evaluation
    gap_reports: int
    candidates: list[CandidateLog] = Field(default_factory=list)
    committed: int | None = None
    """Index of the committed candidate (None: the current pair was kept)."""
    j_before: float
    j: float
    """J of the pair kept after this round (never below ``j_before``)."""
    seconds: float = 0.0


@dataclass
class EvolutionResult:
    """The final pair, the baseline's evaluation and the rounds."""

    graph: SkillGraph
    baseline: Evaluation
    rounds: list[RoundLog]

    @property
    def j(self) -> float:
        return self.rounds[-1].j if self.rounds else self.baseline.j


RoundRunner = Callable[[SkillGraph, Sequence[TaskSpec]], list[TaskOutcome]]
GapBuilder = Callable[[SkillGraph, list[TaskOutcome]], list[GapReport]]
Writer = Callable[[SkillGraph, list[GapReport]], list[list[Edit]]]


def evaluate(outcomes: Sequence[TaskOutcome], config: EvolveConfig) -> Evaluation:
    """J = success rate - lambda * mean tokens / cost_unit_tokens over the outcomes (0 outcomes: J = 0)."""
    n = len(outcomes)
    success = sum(o.success for o in outcomes) / n if n else 0.0
    mean_tokens = sum(o.tokens for o in outcomes) / n if n else 0.0
    cost = mean_tokens / config.cost_unit_tokens
    return Evaluation(n=n, success=success, mean_tokens=mean_tokens, cost=cost, j=success - config.lam * cost)


def gap_reports(graph: SkillGraph, outcomes: list[TaskOutcome], limit: int = 8) -> list[GapReport]:
    """One report per failed task (the first ``limit``): its failure and the units routing visited for it."""
    reports = []
    for outcome in [o for o in outcomes if not o.success][:limit]:
        units: dict[str, tuple[str, str, str, str]] = {}
        for log in outcome.routes:
            rewrites = log.get("rewrites") or {}
            for visit in log.get("visits") or []:
                uid = visit.get("unit")
                if uid in graph.units and uid not in units:
                    text = graph.units[uid].text
                    if uid in rewrites:
                        text += f" [rewritten as: {rewrites[uid]}]"
                    units[uid] = (uid, graph.units[uid].layer, str(visit.get("decision")), text)
        reports.append(GapReport(outcome.task_id, outcome.instruction, outcome.failure, tuple(units.values())))
    return reports


def apply_edits(graph: SkillGraph, edits: Sequence[Edit]) -> tuple[SkillGraph, list[Edit], list[tuple[Edit, str]]]:
    """Apply edits to a copy of the pair; returns (the copy, applied edits, rejected edits with the reason).

    Notes are numbered as they stand before this edit set (dropping note 2 then note 3 drops the original 2 and 3).
    """
    out = graph.copy()
    applied: list[Edit] = []
    rejected: list[tuple[Edit, str]] = []
    drop: set[int] = set()
    for edit in edits:
        if edit.kind == "add_note":
            text = " ".join(edit.text.split())
            if not text or text in out.routing_notes:
                rejected.append((edit, "empty or already a note"))
                continue
            out.routing_notes.append(text)
        elif edit.kind == "drop_note":
            if edit.note is None or not 1 <= edit.note <= len(graph.routing_notes) or edit.note in drop:
                rejected.append((edit, f"no note {edit.note}"))
                continue
            drop.add(edit.note)
        else:
            text = edit.text.strip()
            if edit.unit not in out.units or not text:
                rejected.append((edit, f"unknown unit {edit.unit}" if edit.unit not in out.units else "empty text"))
                continue
            out.set_text(edit.unit, text)
        applied.append(edit)
    kept = [note for i, note in enumerate(graph.routing_notes, start=1) if i not in drop]
    out.routing_notes = kept + out.routing_notes[len(graph.routing_notes):]
    return out, applied, rejected


def parse_edits(reply: str, max_edits: int) -> list[Edit]:
    """The writer's edit lines (``NOTE: ...``, ``DROP NOTE n``, ``UNIT <id>: ...``); other lines are ignored."""
    edits: list[Edit] = []
    for raw in reply.split("\n"):
        line = _BULLET.sub("", raw.replace("**", "").strip(), count=1).strip()
        if match := _DROP.match(line):
            edits.append(Edit(kind="drop_note", note=int(match.group(1))))
        elif match := _UNIT.match(line):
            edits.append(Edit(kind="set_unit", unit=match.group(1), text=match.group(2).strip()))
        elif match := _NOTE.match(line):
            edits.append(Edit(kind="add_note", text=match.group(1).strip()))
    return edits[:max_edits]


class WriterConfig(BaseModel):
    """Settings of the model-backed writer."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(default=1, ge=1)
    """Candidate edit sets per round (one model call each)."""
    max_edits: int = Field(default=5, ge=1)
    max_tokens: int = Field(default=400, ge=16)
    prompt_dir: str | None = None
    model_params: dict[str, Any] = Field(default_factory=dict)


class ModelWriter:
    """The writer role over a chat model: gap reports -> candidate edit sets.

    Args:
        model: the chat model.
        config: settings.
    """

    def __init__(self, model: ChatModel, config: WriterConfig | None = None) -> None:
        self.model = model
        self.config = config or WriterConfig()
        self.system = lens_prompt("writer", self.config.prompt_dir)
        self.user = lens_prompt("writer_user", self.config.prompt_dir)
        self.tokens = 0
        """Prompt and completion tokens spent so far."""

    def __call__(self, graph: SkillGraph, reports: list[GapReport]) -> list[list[Edit]]:
        cfg = self.config
        notes = "\n".join(f"{i}. {note}" for i, note in enumerate(graph.routing_notes, start=1)) or "(none yet)"
        messages = [{"role": "system", "content": self.system.render(max_edits=cfg.max_edits)},
                    {"role": "user", "content": self.user.render(
                        notes=notes, reports="\n\n".join(report.render() for report in reports))}]
        out = []
        for _ in range(cfg.candidates):
            done = self.model.complete(messages, **{"max_tokens": cfg.max_tokens, **cfg.model_params})
            self.tokens += done.prompt_tokens + done.completion_tokens
            out.append(parse_edits(done.text, cfg.max_edits))
        return out


def evolve(graph: SkillGraph, dev_tasks: Sequence[TaskSpec], val_tasks: Sequence[TaskSpec], run_round: RoundRunner,
           writer: Writer, *, gap_builder: GapBuilder | None = None, config: EvolveConfig | None = None,
           on_round: Callable[[RoundLog], None] | None = None) -> EvolutionResult:
    """Evolve the pair (graph + routing notes) for ``config.rounds`` rounds (see the module docstring).

    Args:
        graph: the starting pair (not modified).
        dev_tasks: the tasks each round runs to find failures.
        val_tasks: the tasks candidates and the baseline are evaluated on.
        run_round: runs tasks with a pair and reports their outcomes.
        writer: proposes candidate edit sets from gap reports.
        gap_builder: builds gap reports (default `gap_reports` with ``config.max_gap_reports``).
        config: settings.
        on_round: called with each round's log as it ends.
    """
    cfg = config or EvolveConfig()
    build = gap_builder or (lambda g, outcomes: gap_reports(g, outcomes, cfg.max_gap_reports))
    current = graph.copy()
    baseline = evaluate(run_round(current, val_tasks), cfg)
    current_j = baseline.j
    rounds: list[RoundLog] = []
    for number in range(1, cfg.rounds + 1):
        start = time.perf_counter()
        outcomes = run_round(current, dev_tasks)
        reports = build(current, outcomes)
        log = RoundLog(round=number, dev=evaluate(outcomes, cfg), gap_reports=len(reports), j_before=current_j,
                       j=current_j)
        best: tuple[float, int, SkillGraph] | None = None
        for edits in writer(current, reports) if reports else []:
            candidate, applied, rejected = apply_edits(current, edits)
            entry = CandidateLog(applied=applied, rejected=rejected)
            if applied:
                entry.evaluation = evaluate(run_round(candidate, val_tasks), cfg)
                if best is None or entry.evaluation.j > best[0]:
                    best = (entry.evaluation.j, len(log.candidates), candidate)
            log.candidates.append(entry)
        if best is not None and best[0] > current_j + cfg.min_gain:
            current_j, log.committed, current = best[0], best[1], best[2]
        log.j = current_j
        log.seconds = time.perf_counter() - start
        assert log.j >= log.j_before, "J decreased: the fallback must keep the current pair"
        rounds.append(log)
        if on_round is not None:
            on_round(log)
    return EvolutionResult(graph=current, baseline=baseline, rounds=rounds)


def save_evolution(result: EvolutionResult, out: str | Path) -> Path:
    """Write ``out/graph/`` (the final pair: graph folder with its routing notes) and ``out/evolution.jsonl`` (a
    baseline line, then one line per round)."""
    out = Path(out)
    result.graph.save(out / "graph")
    lines = [json.dumps({"baseline": result.baseline.model_dump()})]
    lines += [log.model_dump_json() for log in result.rounds]
    atomic_write_text(out / "evolution.jsonl", "\n".join(lines) + "\n")
    return out
