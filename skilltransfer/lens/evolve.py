"""Registry evolution: refine the skill graph (agent registry) and its routing notes (verifier registry) together.

``evolve(graph, dev_tasks, val_tasks, run_round, writer, test_tasks=...)`` runs, for each round:

1. ``run_round(graph, dev_tasks)`` -> one `TaskOutcome` per task (the task runner; injected: the stream runner in
   `skilltransfer.runner.evolve`, scripted outcomes in tests and ``benchmarks/evolution_noise.py``);
2. ``gap_builder(graph, outcomes)`` -> `GapReport`s from the failed tasks (default `gap_reports`: the task, why it
   failed and which units routing visited with which decision);
3. ``writer(graph, reports)`` -> candidate edit sets (`Edit`: add or drop a routing note, replace a unit's text; the
   default `ModelWriter` asks a model, prompts ``writer``/``writer_user``);
4. **paired validation**: the incumbent pair and each candidate (the incumbent with one edit set applied to a copy)
   are run on the same validation tasks, ``val_repeats`` passes each; round 1's incumbent evaluation is the baseline
   (made before any selection), every later round runs the incumbent afresh, so no score a selection was made on
   is ever reused;
5. **the commit test**: per validation task, the candidate's J minus the incumbent's (means over the passes) is one
   paired difference; a candidate passes when a one-sided test at level ``alpha / k`` (k = candidates evaluated in
   the round: Bonferroni, so a round of no-op edits commits with probability at most ``alpha``) finds the mean
   difference minus ``min_gain`` above 0 (`skilltransfer.metrics.paired_gain`: ``sign-flip``, the paired
   randomisation test, by default; ``bootstrap``: the percentile lower bound above 0). The passing candidate with
   the largest mean difference is committed; otherwise the incumbent stays (the fallback).

After the last round, with ``test_tasks`` (disjoint from both other splits; checked), the initial and the final pair
are each run once on the test split (one run when no candidate was committed: they are the same pair).

**Objective**: J = success rate - lambda * cost, cost = (mean tokens per task + refinement tokens per task) /
``cost_unit_tokens``. Task tokens are every model token a task spent (agent and routing calls, as the outcomes
report them); refinement tokens are the writer's: a candidate carries its share of its round's writer calls, the final
pair on the test split all writer tokens of the evolution, each spread over the evaluation's distinct tasks. Defaults
lambda = 0.05 and 10,000 tokens (10k more tokens per task must buy 5 points of success).

**What the log's J means**: each round logs the J of the pair it kept as measured in that round (the incumbent's
fresh evaluation, or the committed candidate's), so J can fall from round to round; only the test split's initial
and final J are free of the selection.
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

from skilltransfer.errors import InputError
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.prompts import lens_prompt
from skilltransfer.metrics.stats import PairedGain, bootstrap_ci, paired_gain
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

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    rounds: int = Field(default=3, ge=1)
    lam: float = Field(default=0.05, ge=0.0)
    """lambda: weight of the cost in J."""
    cost_unit_tokens: float = Field(default=10_000, gt=0)
    """cost = mean tokens per task / this."""
    commit_test: Literal["sign-flip", "bootstrap"] = "sign-flip"
    """The paired test a candidate must pass (`skilltransfer.metrics.paired_gain`)."""
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """One-sided level per round, split evenly over the round's evaluated candidates (Bonferroni)."""
    min_gain: float = Field(default=0.0, ge=0.0)
    """A candidate must beat the incumbent's J by more than this (the test is run on the differences minus it)."""
    val_repeats: int = Field(default=1, ge=1)
    """Passes of the validation split per evaluation (incumbent and candidates alike): more passes, more power."""
    resamples: int = Field(default=10_000, ge=100)
    """Resamples of the commit test."""
    seed: int = 0
    """Seed of the commit test's resampling."""
    max_gap_reports: int = Field(default=8, ge=1)
    """Failed tasks reported to the writer per round (the first ones)."""


class Evaluation(BaseModel):
    """The objective over one evaluation (one or more passes of a split)."""

    n: int
    """Distinct tasks."""
    runs: int = 0
    """Task runs (tasks x passes)."""
    success: float
    mean_tokens: float
    """Task tokens per task run."""
    refinement_tokens: int = 0
    """Writer tokens charged to this evaluation (spread over its ``n`` tasks)."""
    cost: float
    j: float
    per_task: dict[str, float] = Field(default_factory=dict)
    """Task id -> its J (mean over the passes, refinement share included): the paired test's input."""


class CandidateLog(BaseModel):
    """One candidate of a round: its edits and, if any applied, its evaluation and paired test."""

    applied: list[Edit]
    rejected: list[tuple[Edit, str]] = Field(default_factory=list)
    writer_tokens: int = 0
    """Its share of the round's writer tokens (in its J)."""
    evaluation: Evaluation | None = None
    gain: dict[str, Any] | None = None
    """The paired test against the incumbent (`PairedGain.to_dict`)."""


class RoundLog(BaseModel):
    """One evolution round (a line of ``evolution.jsonl``)."""

    round: int
    dev: Evaluation
    gap_reports: int
    writer_tokens: int = 0
    incumbent: Evaluation | None = None
    """The incumbent on the validation split this round (round 1: the baseline); None when no candidate was run."""
    candidates: list[CandidateLog] = Field(default_factory=list)
    committed: int | None = None
    """Index of the committed candidate (None: the incumbent was kept)."""
    j_before: float
    """The incumbent's J as measured this round (or last measured, when it was not run)."""
    j: float
    """J of the pair kept after this round, as measured this round."""
    seconds: float = 0.0


class HeldOutLog(BaseModel):
    """The initial and the final pair on the test split, each run once at the end."""

    initial: Evaluation
    final: Evaluation
    same_pair: bool
    """No candidate was committed: one run stands for both (the gain is then the writer's cost alone)."""
    refinement_tokens: int
    """All writer tokens of the evolution (in the final pair's J)."""
    gain: float
    """final J - initial J."""
    paired: dict[str, Any] | None = None
    """The paired test of that gain (`PairedGain.to_dict`, at the evolution's ``alpha``); None for the same pair."""
    ci_low: float | None = None
    """95 % paired task-bootstrap CI of the gain (per-task final J minus initial J): the evolution's headline."""
    ci_high: float | None = None


@dataclass
class EvolutionResult:
    """The final pair, the baseline evaluation, the rounds and the test-split evaluation."""

    graph: SkillGraph
    baseline: Evaluation
    rounds: list[RoundLog]
    test: HeldOutLog | None = None
    writer_tokens: int = 0

    @property
    def j(self) -> float:
        """The kept pair's J as last measured on the validation split."""
        return self.rounds[-1].j if self.rounds else self.baseline.j

    @property
    def logged_gain(self) -> float:
        """The validation J the log ends with minus the baseline's."""
        return self.j - self.baseline.j

    @property
    def commits(self) -> int:
        return sum(log.committed is not None for log in self.rounds)


RoundRunner = Callable[[SkillGraph, Sequence[TaskSpec]], list[TaskOutcome]]
GapBuilder = Callable[[SkillGraph, list[TaskOutcome]], list[GapReport]]
Writer = Callable[[SkillGraph, list[GapReport]], list[list[Edit]]]
"""Gap reports -> candidate edit sets; a ``tokens`` attribute (tokens spent so far), when it has one, is read
before and after each call (`ModelWriter` keeps one)."""
TestRunner = Callable[[str, SkillGraph, Sequence[TaskSpec]], list[TaskOutcome]]
"""(``"initial"`` or ``"final"``, pair, test tasks) -> outcomes."""


def evaluate(outcomes: Sequence[TaskOutcome], config: EvolveConfig, refinement_tokens: int = 0) -> Evaluation:
    """J over the outcomes (see the module docstring); a task run several times counts once, with its mean."""
    runs = len(outcomes)
    per_run: dict[str, list[float]] = {}
    for o in outcomes:
        per_run.setdefault(o.task_id, []).append(float(o.success) - config.lam * o.tokens / config.cost_unit_tokens)
    n = len(per_run)
    share = refinement_tokens / n if n else 0.0
    success = sum(o.success for o in outcomes) / runs if runs else 0.0
    mean_tokens = sum(o.tokens for o in outcomes) / runs if runs else 0.0
    cost = (mean_tokens + share) / config.cost_unit_tokens
    penalty = config.lam * share / config.cost_unit_tokens
    per_task = {tid: sum(values) / len(values) - penalty for tid, values in per_run.items()}
    return Evaluation(n=n, runs=runs, success=success, mean_tokens=mean_tokens, refinement_tokens=refinement_tokens,
                      cost=cost, j=success - config.lam * cost, per_task=per_task)


def paired_test(candidate: Evaluation, incumbent: Evaluation, config: EvolveConfig, alpha: float) -> PairedGain:
    """The commit test of ``candidate`` against ``incumbent`` on their shared tasks (see the module docstring)."""
    shared = [tid for tid in incumbent.per_task if tid in candidate.per_task]
    diffs = [candidate.per_task[tid] - incumbent.per_task[tid] - config.min_gain for tid in shared]
    gain = paired_gain(diffs, alpha=alpha, test=config.commit_test, n_resamples=config.resamples, seed=config.seed)
    return PairedGain(n=gain.n, estimate=gain.estimate + config.min_gain, lower=gain.lower + config.min_gain,
                      p_value=gain.p_value, alpha=alpha, test=gain.test, passed=gain.passed)


def check_splits(dev: Sequence[TaskSpec], val: Sequence[TaskSpec], test: Sequence[TaskSpec] = ()) -> None:
    """Refuse empty development/validation splits and any task two splits share (one line).

    Raises:
        InputError: an empty split, or a task in two splits.
    """
    if not dev or not val:
        raise InputError(f"evolution needs development and validation tasks (got {len(dev)} and {len(val)})")
    splits = {"development": {t.id for t in dev}, "validation": {t.id for t in val}, "test": {t.id for t in test}}
    names = list(splits)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            shared = splits[first] & splits[second]
            if shared:
                raise InputError(f"{first} and {second} splits share tasks: {', '.join(sorted(shared)[:3])}")


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
    max_tokens: int | None = Field(default=400, ge=16)
    """Completion cap of one writer call (None: none sent; the ``paper`` harness sends none unless set)."""
    prompt_dir: str | None = None
    model_params: dict[str, Any] = Field(default_factory=dict)

    def uncapped(self) -> WriterConfig:
        """This config without a completion cap nobody set: what an evolution under the ``paper`` harness sends."""
        return self if "max_tokens" in self.model_fields_set else self.model_copy(update={"max_tokens": None})


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
            cap = {"max_tokens": cfg.max_tokens} if cfg.max_tokens is not None else {}
            done = self.model.complete(messages, **{**cap, **cfg.model_params})
            self.tokens += done.prompt_tokens + done.completion_tokens
            out.append(parse_edits(done.text, cfg.max_edits))
        return out


def evolve(graph: SkillGraph, dev_tasks: Sequence[TaskSpec], val_tasks: Sequence[TaskSpec], run_round: RoundRunner,
           writer: Writer, *, test_tasks: Sequence[TaskSpec] = (), gap_builder: GapBuilder | None = None,
           config: EvolveConfig | None = None, on_round: Callable[[RoundLog], None] | None = None,
           run_test: TestRunner | None = None) -> EvolutionResult:
    """Evolve the pair (graph + routing notes) for ``config.rounds`` rounds (see the module docstring).

    Args:
        graph: the starting pair (not modified).
        dev_tasks: the tasks each round runs to find failures.
        val_tasks: the tasks the incumbent and the candidates are evaluated on, paired.
        run_round: runs tasks with a pair and reports their outcomes.
        writer: proposes candidate edit sets from gap reports.
        test_tasks: the test split, run once at the end for the initial and the final pair; () skips it.
        gap_builder: builds gap reports (default `gap_reports` with ``config.max_gap_reports``).
        config: settings.
        on_round: called with each round's log as it ends.
        run_test: runs a test evaluation (default: ``run_round``).

    Raises:
        InputError: an empty development or validation split, or splits that share a task.
    """
    cfg = config or EvolveConfig()
    check_splits(dev_tasks, val_tasks, test_tasks)
    build = gap_builder or (lambda g, outcomes: gap_reports(g, outcomes, cfg.max_gap_reports))

    def validate(pair: SkillGraph, refinement: int = 0) -> Evaluation:
        outcomes = [o for _ in range(cfg.val_repeats) for o in run_round(pair, val_tasks)]
        return evaluate(outcomes, cfg, refinement)

    initial = graph.copy()
    current = initial
    baseline = validate(current)
    fresh: Evaluation | None = baseline  # an incumbent evaluation no selection has used yet
    current_j = baseline.j
    spent = 0
    rounds: list[RoundLog] = []
    for number in range(1, cfg.rounds + 1):
        start = time.perf_counter()
        outcomes = run_round(current, dev_tasks)
        reports = build(current, outcomes)
        before = int(getattr(writer, "tokens", 0))
        proposals = writer(current, reports) if reports else []
        written = int(getattr(writer, "tokens", 0)) - before
        spent += written
        log = RoundLog(round=number, dev=evaluate(outcomes, cfg), gap_reports=len(reports), writer_tokens=written,
                       j_before=current_j, j=current_j)
        staged = [apply_edits(current, edits) for edits in proposals]
        share = written // len(staged) if staged else 0
        entries = [CandidateLog(applied=applied, rejected=rejected, writer_tokens=share)
                   for _, applied, rejected in staged]
        runnable = [i for i, (_, applied, _) in enumerate(staged) if applied]
        if runnable:
            incumbent = fresh if fresh is not None else validate(current)
            fresh = None
            log.incumbent, log.j_before = incumbent, incumbent.j
            current_j = incumbent.j
            alpha = cfg.alpha / len(runnable)
            passed: list[tuple[float, int]] = []
            for i in runnable:
                evaluation = entries[i].evaluation = validate(staged[i][0], share)
                gain = paired_test(evaluation, incumbent, cfg, alpha)
                entries[i].gain = gain.to_dict()
                if gain.passed:
                    passed.append((gain.estimate, i))
            if passed:
                _, best = max(passed, key=lambda item: (item[0], -item[1]))
                chosen = entries[best].evaluation
                assert chosen is not None
                log.committed, current, current_j = best, staged[best][0], chosen.j
        log.candidates = entries
        log.j = current_j
        log.seconds = time.perf_counter() - start
        rounds.append(log)
        if on_round is not None:
            on_round(log)
    result = EvolutionResult(graph=current, baseline=baseline, rounds=rounds, writer_tokens=spent)
    if test_tasks:
        result.test = _test(initial, current, test_tasks, run_test or (lambda _, pair, tasks: run_round(pair, tasks)),
                            cfg, spent, same=result.commits == 0)
    return result


def _test(initial: SkillGraph, final: SkillGraph, tasks: Sequence[TaskSpec], run_test: TestRunner,
          cfg: EvolveConfig, spent: int, *, same: bool) -> HeldOutLog:
    """The initial and final pairs on the test split (one run when they are the same pair)."""
    first = evaluate(run_test("initial", initial, tasks), cfg) if not same else None
    final_outcomes = run_test("final", final, tasks)
    last = evaluate(final_outcomes, cfg, spent)
    if first is None:
        first = evaluate(final_outcomes, cfg)
    diffs = [last.per_task[tid] - first.per_task[tid] for tid in first.per_task if tid in last.per_task]
    _, low, high = bootstrap_ci(diffs, seed=cfg.seed) if diffs else (0.0, None, None)
    if same:
        return HeldOutLog(initial=first, final=last, same_pair=True, refinement_tokens=spent, gain=last.j - first.j,
                          ci_low=low, ci_high=high)
    gain = paired_test(last, first, cfg.model_copy(update={"min_gain": 0.0}), cfg.alpha)
    return HeldOutLog(initial=first, final=last, same_pair=False, refinement_tokens=spent, gain=last.j - first.j,
                      paired=gain.to_dict(), ci_low=low, ci_high=high)


def save_evolution(result: EvolutionResult, out: str | Path) -> Path:
    """Write ``out/graph/`` (the final pair: graph folder with its routing notes) and ``out/evolution.jsonl`` (a
    baseline line, one line per round, then a ``test`` line when the test split ran)."""
    out = Path(out)
    result.graph.save(out / "graph")
    lines = [json.dumps({"baseline": result.baseline.model_dump()})]
    lines += [log.model_dump_json() for log in result.rounds]
    if result.test is not None:
        lines.append(json.dumps({"test": result.test.model_dump()}))
    atomic_write_text(out / "evolution.jsonl", "\n".join(lines) + "\n")
    return out
