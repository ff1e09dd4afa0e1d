"""Planted surrogate relation: does the report's ``utility_effects`` analysis recover how well a cheap diagnostic
ranks skills by their randomised effect, and report no association where there is none?

The world is `benchmarks/skill_effects.py`'s (its environment, scripted agent and success coin: a task names one
topic, retrieval (top-4) gives that topic's four skills as candidates, each candidate is withheld with probability
``--mask-rate``, the agent submits the names of the skills shown, and the episode succeeds when a uniform fixed by
the task and replicate is below 0.5 plus the planted effects of the skills shown), with a library whose skills
differ in how much they bear on the tasks:

- ``--groups`` topics (default 6); each has its own eight-word vocabulary, and each task of a topic names the topic
  and three of its words ("alpha: ledger, invoice, audit"), so tasks of one topic differ from each other;
- the skill of topic g at level j (j = 0..3) names its topic twice and ``2 j`` words of the topic's vocabulary, the
  rest of its six content words off-domain chores (knead, prune, ...). Its **designed relevance** is
  ``r = (j + g / groups) / 4``: the level, with a topic offset that keeps every skill's value distinct;
- **planted world**: a skill's effect on success when shown is the monotone function ``tau = -0.25 + 0.5 r`` of its
  designed relevance (a topic's shown effects then keep the success probability inside [0.125, 0.85], so the
  effects add exactly);
- **null world**: the same effect values, each topic's four permuted among its skills so that their rho with both
  diagnostics below is as near 0 as 200,000 seeded permutations get (|rho| < 0.003 at the default; printed).

The diagnostics tested are the two utilities ``score`` computes: ``utility`` (the paper's, pair specificity x
abstractness) and ``relevance`` (the knn utility ``score`` ranks by), computed as ``report`` computes them:
`score_library` over the library against the tasks' instructions with the run's embedder (``hash:1024``, whose
retrieval keeps every task's candidates inside its topic; checked). They track the designed relevance only as far
as the embedder lets them (here the paper's utility ranks the off-domain skills *highest*), so the **planted rho**
of a diagnostic is defined as Spearman's rho between its measured values and the planted effects over the
library's 24 skills: a number fixed before any task runs (printed; -0.71 for utility and +0.94 for relevance at the
default). Each replicate is one masked stream per world through the real stream (`run_stream`, a frozen library,
the masking retriever, the run log) and the real analysis (`skilltransfer.metrics.surrogate.surrogate_analysis`,
the report's code, its deattenuated 95 % interval). Over replicates and both diagnostics:

- **rho recovered R%**: planted world, the share of intervals that lie entirely on the planted rho's side of zero
  (the association detected, with its sign);
- **CI coverage C%**: planted world, the share of intervals that contain the planted rho;
- **null rejected N%**: null world, the share of intervals that exclude 0.

Per world and diagnostic it also prints the mean estimate and the same shares for the plain basic and percentile
intervals of the same replicates (the noise of the estimated effects attenuates rho: the percentile interval sits
below the truth, the basic one undercovers). Targets: R >= 90, C in [90, 99], N <= 5.

``--power`` prints instead the power table of docs/utility-effects.md: per planted rho and tasks per skill, the
share of simulated replicates whose interval excludes 0 (and covers the planted rho), outcomes drawn directly from
the same model of the world (24 skills in topics of four, one per quarter of the effects, effects evenly spaced
over +-``--spread``, the diagnostic a Gaussian copula of them; the same estimator, no stream). Last line:

    utility vs effect: rho recovered R%, CI coverage C%, null rejected N%

    python benchmarks/utility_effects.py [--tasks-per-skill 100] [--replicates 30] [--mask-rate 0.5] [--groups 6]
    python benchmarks/utility_effects.py --power [--power-replicates 200] [--tasks 25,50,100,200,400]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import faiss
import numpy as np

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import HashEmbedder, Skill, export_jsonl
from skilltransfer.metrics.effects import Draw, TaskDraws, effect_replicates
from skilltransfer.metrics.scoring import score_library
from skilltransfer.metrics.surrogate import (
    INTERVALS,
    MIN_RELIABILITY,
    rank_correlation,
    surrogate_analysis,
)
from skilltransfer.metrics.validation import spearman, spearman_rows
from skilltransfer.protocols import TaskSpec
from skilltransfer.report.effects import task_draws
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig


def _load_world() -> ModuleType:
    """benchmarks/skill_effects.py, whose environment, agent and coin this world reuses."""
    path = Path(__file__).resolve().parent / "skill_effects.py"
    spec = importlib.util.spec_from_file_location("skill_effects_world", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


WORLD = _load_world()
TOPICS: tuple[str, ...] = WORLD.TOPICS
LEVELS = 4
DIM = 1024
EMBEDDER = f"hash:{DIM}"
HEADLINE = ("utility", "relevance")
"""The diagnostics of the last line: the paper's utility (pair specificity) and the knn utility."""
VOCABULARY = {
    "alpha": ("ledger", "invoice", "audit", "payroll", "receipt", "refund", "budget", "voucher"),
    "bravo": ("kernel", "socket", "daemon", "firewall", "router", "packet", "subnet", "gateway"),
    "charlie": ("tenant", "lease", "deposit", "landlord", "eviction", "rental", "mortgage", "escrow"),
    "delta": ("glacier", "moraine", "crevasse", "icefall", "serac", "firn", "cirque", "nunatak"),
    "echo": ("enzyme", "protein", "plasmid", "ligand", "peptide", "codon", "ribosome", "antibody"),
    "foxtrot": ("sonnet", "stanza", "couplet", "meter", "rhyme", "ballad", "villanelle", "haiku"),
}
"""Each topic's words: its tasks ask for three, its skills name ``2 j`` of them."""
OFF_DOMAIN = ("knead", "sourdough", "prune", "trellis", "compost", "darn", "crochet", "marinade", "whittle",
              "birdsong", "origami", "kayak")
"""The words that fill a skill's description where it is not about its topic."""
CONTENT_WORDS = 6


def effect_of(relevance: float) -> float:
    """The planted world's effect of a skill of designed relevance ``relevance`` (monotone increasing)."""
    return -0.25 + 0.5 * relevance


def designed_relevance(group: int, level: int, groups: int) -> float:
    return (level + group / groups) / LEVELS


def library(groups: int) -> tuple[list[Skill], dict[str, float]]:
    """The skills and each skill name's designed relevance."""
    skills, relevance = [], {}
    for g, topic in enumerate(TOPICS[:groups]):
        words = VOCABULARY[topic]
        for level in range(LEVELS):
            on = list(words[:2 * level])
            off = [OFF_DOMAIN[(g + level + i) % len(OFF_DOMAIN)] for i in range(CONTENT_WORDS - len(on))]
            name = f"{topic}_level{level}"
            skills.append(Skill(name=name, description=f"{topic} {topic}: {', '.join(on + off)}",
                                body=f"1. Handle the {topic} request ({', '.join(on + off)})."))
            relevance[name] = designed_relevance(g, level, groups)
    return skills, relevance


def instruction(topic: str, index: int) -> str:
    combos = list(itertools.combinations(VOCABULARY[topic], 3))
    a, b, c = combos[(index * 17) % len(combos)]
    return f"{topic}: {a}, {b}, {c}"


class VariedEnv(WORLD.PlantedEnv):  # type: ignore[misc, name-defined]
    """`PlantedEnv` whose tasks ask for three words of their topic's vocabulary."""

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        topics = TOPICS[:self.groups]
        return [TaskSpec(id=f"planted/{i}", instruction=instruction(topics[i % len(topics)], i // len(topics)),
                         difficulty=1, template=topics[i % len(topics)])
                for i in range(self.per_topic * len(topics))]


def task_texts(groups: int, per_topic: int) -> list[str]:
    topics = TOPICS[:groups]
    return [instruction(topics[i % len(topics)], i // len(topics)) for i in range(per_topic * len(topics))]


def null_effects(planted: dict[str, float], diagnostics: dict[str, dict[str, float]], groups: int,
                 trials: int = 200_000, seed: int = 0) -> dict[str, float]:
    """The planted effects permuted within each topic (so every topic keeps its effects and the success probability
    its bounds) so that their largest |rho| with the diagnostics is the smallest of ``trials`` seeded permutations."""
    rng = np.random.default_rng(seed)
    names = sorted(planted)
    values = np.array([planted[n] for n in names])
    blocks = [np.array([i for i, n in enumerate(names) if n.startswith(f"{topic}_")]) for topic in TOPICS[:groups]]
    order = np.tile(np.arange(len(names)), (trials, 1))
    for block in blocks:
        order[:, block] = block[np.argsort(rng.random((trials, len(block))), axis=1)]
    effects = values[order]
    worst = np.max([np.abs(spearman_rows(np.array([d[n] for n in names]), effects)) for d in diagnostics.values()],
                   axis=0)
    best = effects[int(np.nanargmin(worst))]
    return {n: float(v) for n, v in zip(names, best, strict=True)}


def run_world(root: Path, replicate: int, effects: dict[str, float], *, groups: int, per_topic: int,
              mask_rate: float, tag: str) -> list[Any]:
    """One masked stream of the world whose skills have ``effects``; its records."""
    skills, _ = library(groups)
    path = export_jsonl(skills, root / f"library-{tag}{replicate}.jsonl")
    env = VariedEnv(effects, groups, per_topic, replicate, root / f"work-{tag}{replicate}")
    config = StreamConfig(run=f"{tag}{replicate}", runs_dir=str(root), condition="task+text", library=str(path),
                          embedder=EMBEDDER, mask_rate=mask_rate, mask_seed=replicate,
                          agent={"top_k": LEVELS, "harness": "paper"}, memory={"validate_code": False})
    summary = run_stream(env, ScriptedModel(WORLD.planted_agent), config, embedder=HashEmbedder(DIM))
    return summary.records


def check_retrieval(records: list[Any], names: dict[str, str], groups: int) -> None:
    """Every task's candidates are its topic's four skills (the world's design); stops the benchmark otherwise."""
    for record in records:
        topic = TOPICS[:groups][int(record.task_id.split("/")[1]) % groups]
        got = sorted(names.get(e.skill_id, e.skill_id) for e in record.exposures)
        if got != [f"{topic}_level{level}" for level in range(LEVELS)]:
            raise SystemExit(f"task {record.task_id} ({topic}): candidates {got}, not its topic's {LEVELS} skills")


def analyse(records: list[Any], groups: int, per_topic: int, seed: int) -> dict[str, dict[str, Any]]:
    """The report's analysis of one stream (`surrogate_analysis`, the deattenuated interval), and the basic and
    percentile intervals of the same replicates for comparison: per headline diagnostic and interval, (rho, low,
    high)."""
    skills, _ = library(groups)
    report = score_library(skills, task_texts(groups, per_topic), HashEmbedder(DIM))
    check_retrieval(records, {row.id: row.name for row in report.skills}, groups)
    draws = [task_draws(r) for r in records]
    analysis = surrogate_analysis(report, draws, seed=seed)
    replicates = effect_replicates(draws, seed=seed)
    column = {skill_id: j for j, skill_id in enumerate(replicates.skill_ids)}
    used = [column[j.score.id] for j in analysis.enough]
    out: dict[str, dict[str, Any]] = {}
    for row in analysis.associations:
        if row.diagnostic not in HEADLINE:
            continue
        out[row.diagnostic] = {"deattenuated": (row.rho_corrected, row.rho_low, row.rho_high)}
        d = np.array([getattr(j.score, row.diagnostic) for j in analysis.enough])
        for interval in INTERVALS[1:]:
            result = rank_correlation(d, replicates.estimates[used], replicates.replicates[:, used],
                                      interval=interval)
            out[row.diagnostic][interval] = (result.corrected, result.low, result.high)
    return out


class Tally:
    """Per diagnostic and interval: replicates, detected (CI on the planted side of 0), covered, estimates."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], list[tuple[float, bool, bool]]] = {}

    def add(self, result: dict[str, dict[str, Any]], planted: dict[str, float]) -> None:
        for diagnostic, by_interval in result.items():
            truth = planted[diagnostic]
            for interval, (rho, low, high) in by_interval.items():
                if rho is None or low is None or high is None:
                    detected = covered = False
                else:
                    detected = low > 0 if truth > 0 else high < 0 if truth < 0 else (low > 0 or high < 0)
                    covered = low <= truth <= high
                self.rows.setdefault((diagnostic, interval), []).append(
                    (float("nan") if rho is None else rho, detected, covered))

    def share(self, interval: str, column: int) -> float:
        hits = [r[column] for (d, i), rows in self.rows.items() if i == interval for r in rows]
        return 100 * sum(hits) / len(hits) if hits else float("nan")

    def lines(self, planted: dict[str, float], world: str) -> list[str]:
        out = []
        for (diagnostic, interval), rows in sorted(self.rows.items()):
            mean = float(np.nanmean([r[0] for r in rows]))
            detected = 100 * sum(r[1] for r in rows) / len(rows)
            covered = 100 * sum(r[2] for r in rows) / len(rows)
            side = "excludes 0" if world == "null" else "on the planted side of 0"
            out.append(f"{world} world, {diagnostic} (planted rho {planted[diagnostic]:+.3f}), {interval} interval: "
                       f"mean estimate {mean:+.3f}, CI {side} {detected:.0f}%, covers the planted rho {covered:.0f}% "
                       f"({len(rows)} replicates)")
        return out


# --------------------------------------------------------------------------------------------- power
def simulate_draws(effects: np.ndarray, per_skill: int, mask_rate: float, rng: np.random.Generator) -> list[TaskDraws]:
    """The world without the stream: skills in topics of four, each task a candidate for its topic's four, each
    candidate shown with probability 1 - mask_rate, success a coin at 0.5 + the shown effects."""
    tasks = []
    topics = len(effects) // LEVELS
    for g in range(topics):
        block = effects[g * LEVELS:(g + 1) * LEVELS]
        shown = rng.random((per_skill, LEVELS)) >= mask_rate
        success = rng.random(per_skill) < 0.5 + (shown * block).sum(axis=1)
        for t in range(per_skill):
            tasks.append(TaskDraws(f"{g}/{t}", {"success": float(success[t])},
                                   tuple(Draw(f"s{g * LEVELS + j:03d}", 1 - mask_rate, bool(shown[t, j]))
                                         for j in range(LEVELS))))
    return tasks


def correlated_library(rho: float, skills: int, spread: float, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """A diagnostic and effects whose Spearman rho is near ``rho`` (a Gaussian copula): effects evenly spaced over
    ``[-spread, spread]``, assigned by the rank of a latent correlated with the diagnostic."""
    d = rng.normal(size=skills)
    latent = rho * d + np.sqrt(max(0.0, 1 - rho * rho)) * rng.normal(size=skills)
    values = np.linspace(-spread, spread, skills)
    effects = np.empty(skills)
    effects[np.argsort(latent)] = values
    return d, effects


def power(args: argparse.Namespace) -> None:
    """Share of simulated replicates whose (deattenuated) interval excludes 0, per planted rho and tasks per skill."""
    rng = np.random.default_rng(0)
    sizes = [int(x) for x in args.tasks.split(",")]
    rhos = [float(x) for x in args.rhos.split(",")]
    print(f"power: {args.skills} skills in topics of {LEVELS}, effects evenly spaced over +-{args.spread}, mask "
          f"rate {args.mask_rate}, {args.power_replicates} simulated replicates per cell; share of 95 % deattenuated "
          "intervals that exclude 0 (power; no interval counts as not), and in brackets the share of the intervals "
          "given that contain the planted rho and the share of replicates given one (reliability >= "
          f"{MIN_RELIABILITY})")
    print("tasks per skill -> " + "  ".join(f"{n:>16d}" for n in sizes))
    for target in rhos:
        cells = []
        planted_values = []
        for n in sizes:
            hits = cover = given = 0
            for _ in range(args.power_replicates):
                d, effects = correlated_library(target, args.skills, args.spread, rng)
                # topics of one skill per quarter of the effects: every topic's shown effects stay in [-0.5, 0.5]
                ranked = np.argsort(effects)
                arrange = np.concatenate([ranked[g::args.skills // LEVELS] for g in range(args.skills // LEVELS)])
                d, effects = d[arrange], effects[arrange]
                truth = spearman(d, effects)
                planted_values.append(truth)
                tasks = simulate_draws(effects, n, args.mask_rate, rng)
                reps = effect_replicates(tasks, resamples=1000, seed=int(rng.integers(1 << 31)))
                order = [int(i[1:]) for i in reps.skill_ids]
                result = rank_correlation(d[order], reps.estimates, reps.replicates)
                if result.low is None or result.high is None:
                    continue
                given += 1
                hits += bool(result.low > 0 or result.high < 0)
                cover += bool(result.low <= truth <= result.high)
            coverage = f"{100 * cover / given:3.0f}%" if given else "  -"
            share = 100 * given // args.power_replicates
            cells.append(f"{100 * hits / args.power_replicates:4.0f}% ({coverage}, {share:3d}%)")
        print(f"rho {target:.1f} (planted mean {np.mean(planted_values):.2f}): " + "  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks-per-skill", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=30)
    parser.add_argument("--mask-rate", type=float, default=0.5)
    parser.add_argument("--groups", type=int, default=6, choices=range(2, len(TOPICS) + 1))
    parser.add_argument("--show", action="store_true", help="print the library's diagnostics and effects and stop")
    parser.add_argument("--power", action="store_true", help="the power table (simulated draws, no stream)")
    parser.add_argument("--power-replicates", type=int, default=200)
    parser.add_argument("--tasks", default="25,50,100,200,400", help="--power: tasks per skill")
    parser.add_argument("--rhos", default="0.3,0.5,0.7,0.9", help="--power: planted rhos")
    parser.add_argument("--skills", type=int, default=24, help="--power: skills (a multiple of 4)")
    parser.add_argument("--spread", type=float, default=0.25, help="--power: effects span +-spread")
    args = parser.parse_args()
    if args.power:
        power(args)
        return
    faiss.omp_set_num_threads(1)
    skills, relevance = library(args.groups)
    report = score_library(skills, task_texts(args.groups, args.tasks_per_skill), HashEmbedder(DIM))
    diag = {h: {row.name: getattr(row, h) for row in report.skills} for h in HEADLINE}
    planted = {n: effect_of(r) for n, r in relevance.items()}
    nulls = null_effects(planted, diag, args.groups)
    names = sorted(planted)

    def rho_of(effects: dict[str, float]) -> dict[str, float]:
        return {h: round(spearman([diag[h][n] for n in names], [effects[n] for n in names]), 9) for h in HEADLINE}

    rho_planted, rho_null = rho_of(planted), rho_of(nulls)
    if args.show:
        for s in skills:
            print(f"{s.name:18s} r={relevance[s.name]:.3f} "
                  + " ".join(f"{h}={diag[h][s.name]:.3f}" for h in HEADLINE)
                  + f" tau={planted[s.name]:+.3f} null={nulls[s.name]:+.3f}  {s.description}")
        print(f"planted rho {rho_planted}, null rho {rho_null}")
        return
    tallies = {"planted": Tally(), "null": Tally()}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="utility-effects-") as tmp:
        for rep in range(args.replicates):
            for world, effects, truth in (("planted", planted, rho_planted), ("null", nulls, rho_null)):
                records = run_world(Path(tmp), rep, effects, groups=args.groups, per_topic=args.tasks_per_skill,
                                    mask_rate=args.mask_rate, tag=world)
                tallies[world].add(analyse(records, args.groups, args.tasks_per_skill, seed=rep), truth)
                for folder in (f"{world}{rep}", f"work-{world}{rep}"):  # tens of thousands of episodes otherwise
                    shutil.rmtree(Path(tmp) / folder, ignore_errors=True)
            print(f"replicate {rep + 1}/{args.replicates}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)
    elapsed = time.perf_counter() - start
    n_tasks = 2 * args.replicates * args.tasks_per_skill * args.groups
    print(f"{args.replicates} replicates x 2 worlds x {args.tasks_per_skill * args.groups} tasks ({args.groups} topics "
          f"x {LEVELS} skills, {args.tasks_per_skill} candidate tasks per skill), mask rate {args.mask_rate}: "
          f"{n_tasks} tasks through run_stream and the analysis in {elapsed:.0f} s")
    for world, truth in (("planted", rho_planted), ("null", rho_null)):
        for line in tallies[world].lines(truth, world):
            print(line)
    recovered = tallies["planted"].share("deattenuated", 1)  # the report's interval
    coverage = tallies["planted"].share("deattenuated", 2)
    rejected = tallies["null"].share("deattenuated", 1)
    print(f"utility vs effect: rho recovered {recovered:.0f}%, CI coverage {coverage:.0f}%, "
          f"null rejected {rejected:.0f}%")


if __name__ == "__main__":
    main()
