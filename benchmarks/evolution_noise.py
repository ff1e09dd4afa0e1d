"""Does registry evolution commit edits that change nothing, and does it commit one that really helps?

Runs `skilltransfer.lens.evolve.evolve` (the real rounds, paired validation, commit test and test split) with scripted
evaluations: each task run succeeds with probability p, independently of every other run (the world of issue 30's
simulation), p = 0.4 for every pair unless the pair holds the planted note, which raises it to 0.6. A task's tokens
are drawn from 2,000-4,000 whatever the pair; the scripted writer spends 300 tokens per candidate.

- **noise**: ``--seeds`` evolutions of ``--rounds`` rounds, each round proposing ``--candidates`` edits that change
  nothing; P = rounds that committed one (%), G = mean logged gain (the validation J the log ends with minus the
  baseline's).
- **planted**: the same, but round 1's first candidate is the planted +0.2 edit; Q = evolutions that committed it (%).

**Power.** With every run a coin flip, pairing removes nothing (tasks do not differ), and one pass of 20 tasks cannot
tell +0.2 from noise: the planted edit is committed 16 % of the time (measured with ``--sweep``: 36 % at 2 passes,
64 % at 4, 89 % at 7, 94 % at 8; no-op commits 3-5 % throughout). A normal approximation asks for about 6.3 passes
for 90 % power at 2.5 % per candidate; the default, 8 passes, leaves room for the test's discreteness. The ``bootstrap``
rule commits 5-8 % of no-op rounds at 20 tasks (above its level), so the default is ``sign-flip``.

``--kappa K`` makes tasks differ: task i's p_i ~ Beta(p K, (1 - p) K) (the planted edit adds a third of each task's
headroom, +0.2 on average), so the same tasks are easier or harder in every pass; the default (no kappa) is the iid
world. ``--sweep`` prints P/G/Q for 1-8 validation passes and both commit tests first. The last line is always::

    evolution noise: no-op commits P%, mean logged gain G, planted gain committed Q%

    python benchmarks/evolution_noise.py [--seeds 200] [--val-repeats 8] [--test sign-flip] [--kappa K] [--sweep]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from skilltransfer.lens.evolve import Edit, EvolveConfig, GapReport, TaskOutcome, evolve
from skilltransfer.lens.graph import SkillGraph, Unit
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.protocols import TaskSpec
from skilltransfer.skill import Skill

PLANTED = "PLANTED: route the reset step first."
BASE_P, PLANTED_GAIN = 0.4, 0.2
WRITER_TOKENS = 300


def tasks(prefix: str, n: int) -> list[TaskSpec]:
    return [TaskSpec(id=f"{prefix}{i}", instruction=f"task {prefix}{i}", difficulty=1, template="t")
            for i in range(n)]


def start_graph() -> SkillGraph:
    graph = SkillGraph(HashEmbedder(16))
    skill = Skill(name="reset-counter", description="Reset the counter", body="")
    graph.add_skill(skill, Unit(id="p1", layer="policy", text="Reset the counter", sources=[skill.id]))
    return graph


class World:
    """Scripted evaluations (a documented test double of the task runner): see the module docstring."""

    def __init__(self, rng: np.random.Generator, kappa: float | None, ids: Sequence[str]) -> None:
        self.rng = rng
        if kappa is None:
            self.p = dict.fromkeys(ids, BASE_P)
        else:
            self.p = dict(zip(ids, rng.beta(BASE_P * kappa, (1 - BASE_P) * kappa, len(ids)), strict=True))
        headroom = 1 - BASE_P
        self.q = {tid: p + (1 - p) * PLANTED_GAIN / headroom for tid, p in self.p.items()}

    def __call__(self, graph: SkillGraph, batch: Sequence[TaskSpec]) -> list[TaskOutcome]:
        table = self.q if PLANTED in graph.routing_notes else self.p
        out = []
        for task in batch:
            success = bool(self.rng.random() < table[task.id])
            out.append(TaskOutcome(task.id, task.instruction, success, int(self.rng.integers(2000, 4001)),
                                   "" if success else "exit status submitted; check failed"))
        return out


@dataclass
class ScriptedWriter:
    """Proposes ``candidates`` no-op notes per round (round 1's first is the planted note when ``plant``)."""

    candidates: int
    plant: bool
    tokens: int = 0
    calls: int = 0

    def __call__(self, graph: SkillGraph, reports: list[GapReport]) -> list[list[Edit]]:
        self.calls += 1
        self.tokens += WRITER_TOKENS * self.candidates
        out = [[Edit(kind="add_note", text=f"no-op note {self.calls}.{i}")] for i in range(self.candidates)]
        if self.plant and self.calls == 1:
            out[0] = [Edit(kind="add_note", text=PLANTED)]
        return out


def simulate(seeds: int, config: EvolveConfig, *, kappa: float | None, n_val: int, n_dev: int, n_test: int,
             candidates: int) -> tuple[float, float, float, float]:
    """(P %, G, Q %, mean test gain under noise) over ``seeds`` evolutions per scenario."""
    dev, val, test = tasks("d", n_dev), tasks("v", n_val), tasks("t", n_test)
    ids = [t.id for t in (*dev, *val, *test)]
    commits = rounds = planted = 0
    gains, test_gains = [], []
    for seed in range(seeds):
        for plant in (False, True):
            rng = np.random.default_rng([seed, int(plant)])
            world = World(rng, kappa, ids)
            cfg = config.model_copy(update={"seed": seed})
            result = evolve(start_graph(), dev, val, world, ScriptedWriter(candidates, plant), test_tasks=test,
                            config=cfg)
            if plant:
                planted += PLANTED in result.graph.routing_notes
                continue
            commits += result.commits
            rounds += len(result.rounds)
            gains.append(result.logged_gain)
            assert result.test is not None
            test_gains.append(result.test.gain)
    return 100 * commits / rounds, float(np.mean(gains)), 100 * planted / seeds, float(np.mean(test_gains))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=2)
    parser.add_argument("--val", type=int, default=20, help="validation tasks")
    parser.add_argument("--dev", type=int, default=10)
    parser.add_argument("--test-tasks", type=int, default=20)
    parser.add_argument("--val-repeats", type=int, default=8, help="passes of the validation split per evaluation")
    parser.add_argument("--test", choices=["sign-flip", "bootstrap"], default="sign-flip")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--kappa", type=float, default=None, help="task heterogeneity (default: iid runs)")
    parser.add_argument("--sweep", action="store_true", help="first print P/G/Q for 1-8 passes and both tests")
    args = parser.parse_args()
    shape = {"kappa": args.kappa, "n_val": args.val, "n_dev": args.dev, "n_test": args.test_tasks,
             "candidates": args.candidates}
    world = "iid runs" if args.kappa is None else f"task p ~ Beta(kappa={args.kappa})"
    print(f"world: {world}, p = {BASE_P:.1f} (planted {BASE_P + PLANTED_GAIN:.1f}); {args.val} validation tasks, "
          f"{args.candidates} candidates x {args.rounds} rounds, alpha {args.alpha} per round, {args.seeds} seeds")
    if args.sweep:
        for test in ("sign-flip", "bootstrap"):
            for repeats in range(1, 9):
                start = time.perf_counter()
                cfg = EvolveConfig(rounds=args.rounds, commit_test=test, alpha=args.alpha, val_repeats=repeats,
                                   resamples=args.resamples)
                p, g, q, t = simulate(args.seeds, cfg, **shape)
                print(f"  {test:9s} val_repeats {repeats}: no-op commits {p:.1f}%, mean logged gain {g:+.4f}, "
                      f"planted committed {q:.0f}%, mean test gain {t:+.4f} ({time.perf_counter() - start:.0f} s)",
                      flush=True)
    cfg = EvolveConfig(rounds=args.rounds, commit_test=args.test, alpha=args.alpha, val_repeats=args.val_repeats,
                       resamples=args.resamples)
    p, g, q, t = simulate(args.seeds, cfg, **shape)
    print(f"{args.test}, val_repeats {args.val_repeats}: mean test-split gain under noise {t:+.4f}")
    print(f"evolution noise: no-op commits {p:.1f}%, mean logged gain {g:+.4f}, planted gain committed {q:.0f}%")


if __name__ == "__main__":
    main()
