"""Planted selection at scale: do the size study's stream and analysis recover how pick accuracy and success fall as a
library grows?

Scripted worlds (defined below) through the real stream (`run_stream` with ``library_size``: a frozen library grown
per task with near misses from a corpus, progressive disclosure, ``load_skill``, the run log with picks) and the real
analysis (`report`'s ``selection_scale`` code: `skilltransfer.report.selection.task_selection` and
`skilltransfer.metrics.selection_scale.scale_analysis`).

Each task names its own right skill (its description is the task's instruction, so retrieval ranks it first); the
pool holds the other tasks' right skills and a corpus of made-up near misses, so at size N each task chooses from
its right skill and N - 1 others. The scripted agent reads the library's size N from its prompt ("holds N skills")
and loads the right skill with probability a(N), else the first other card shown; then it submits what it loaded.
The episode succeeds with probability 0.8 after a right pick and 0.2 after a wrong one, minus a context cost of
``--context`` per doubling of N above the smallest size. Uniforms are fixed by (world, replicate, task, N).

Worlds (sizes 5, 20, 80, 320, 1280; base 5):

- **slope**: a(N) = 0.9 - 0.1 per doubling (log2(N / 5)); the context cost at its planted value;
- **collapse**: a(N) = 0.85 up to N* = 80, then 0.2 lower per doubling beyond it (a phase transition at N*);
- **null**: a(N) = 0.7 at every size, no context cost.

Planted shadowing at N is (a(5) - a(N)) x 0.6 and context overhead is the cost at N (the module docstring of
`skilltransfer.metrics.selection_scale` defines both estimands). Defined before running (docs/selection.md):

- **slope recovered R%**: the share of slope-world replicates whose estimated per-doubling slope of pick accuracy
  lies within 20 % of the planted -0.1, and of collapse-world replicates whose hinge fit puts the break at N*;
- **CI coverage C%**: the share of 95 % intervals that contain the planted value, over every replicate of the three
  worlds: the pick-accuracy slope (slope and null worlds) and shadowing and context overhead at each size above the
  base (all worlds);
- **decomposition error E pts**: the mean over worlds, sizes above the base and the two components of |mean estimate
  over the replicates - planted|, in percentage points (the split's bias);
- **null rejected N%**: the share of the null world's intervals (slope; shadowing and context overhead per size) that
  exclude 0.

Replicates are numbered from ``--first-replicate`` (0): a run from a number never used before draws fresh worlds
(every uniform and bootstrap is seeded by the replicate's number), a held-out check of figures already seen. The null
world runs ``--null-replicates`` replicates (default: ``--replicates``): N counts 9 intervals a replicate, so it needs
more replicates than R and C for the same precision.

    python benchmarks/selection_scale.py [--tasks 120] [--replicates 8] [--null-replicates R] [--first-replicate 0]
        [--context 0.01]

Last line: ``selection: slope recovered R%, CI coverage C%, decomposition error E pts, null rejected N%``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from skilltransfer.envs.base import Submission, WorkspaceEpisode
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import HashEmbedder, Skill, export_jsonl
from skilltransfer.metrics.selection import TaskSelection
from skilltransfer.metrics.selection_scale import ScaleAnalysis, scale_analysis
from skilltransfer.protocols import Check, Score, TaskSpec
from skilltransfer.report.selection import task_selection
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance

SIZES = (5, 20, 80, 320, 1280)
BASE = SIZES[0]
RIGHT_SUCCESS, WRONG_SUCCESS = 0.8, 0.2
COLLAPSE_AT = 80
WORDS = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper", "krypton",
         "lagoon", "marble", "nickel", "onyx", "pewter", "quartz", "russet", "sienna", "topaz", "umber", "violet",
         "walnut", "xenon", "yarrow", "zircon")


def uniform(*parts: Any) -> float:
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def doublings(size: int) -> float:
    return math.log2(size / BASE)


def pick_rate(world: str, size: int) -> float:
    """The planted probability of a right pick at library size ``size``."""
    if world == "slope":
        return 0.9 - 0.1 * doublings(size)
    if world == "collapse":
        return 0.85 - 0.2 * max(0.0, math.log2(size / COLLAPSE_AT))
    return 0.7


def context_cost(world: str, size: int, per_doubling: float) -> float:
    return 0.0 if world == "null" else per_doubling * doublings(size)


def planted_split(world: str, size: int, per_doubling: float) -> tuple[float, float]:
    """(shadowing, context overhead) planted at ``size`` against the base."""
    shadowing = (pick_rate(world, BASE) - pick_rate(world, size)) * (RIGHT_SUCCESS - WRONG_SUCCESS)
    return shadowing, context_cost(world, size, per_doubling)


def skill_name(i: int, prefix: str) -> str:
    return f"{prefix}-{WORDS[i % len(WORDS)]}-{i}"


def pool(tasks: int, corpus: int) -> tuple[list[Skill], list[Skill]]:
    """The right skills (one per task, induced from it) and the near-miss corpus."""
    right = [Skill(name=skill_name(i, "route"), description=f"route {WORDS[i % len(WORDS)]} request number {i}",
                   body=f"1. Handle request {i}.", provenance=Provenance(source_task_id=f"planted/{i}"))
             for i in range(tasks)]
    near = [Skill(name=skill_name(i, "nearby"), description=f"route {WORDS[(i * 7) % len(WORDS)]} parcel {i} nearby",
                  body=f"1. Something close to request {i}.") for i in range(corpus)]
    return right, near


class PlantedEnv:
    """Tasks ``planted/<i>``, each naming its right skill; success by the planted rates (module docstring)."""

    name = "planted"

    def __init__(self, world: str, replicate: int, tasks: int, per_doubling: float, workdir: Path) -> None:
        self.world, self.replicate, self.n, self.per_doubling = world, replicate, tasks, per_doubling
        self.workdir = workdir
        self._count = itertools.count()

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        return [TaskSpec(id=f"planted/{i}", instruction=f"route {WORDS[i % len(WORDS)]} request number {i}",
                         difficulty=1, template="planted", metadata={"right": skill_name(i, "route")})
                for i in range(self.n)]

    def start(self, task: TaskSpec) -> WorkspaceEpisode:
        workspace = self.workdir / f"ep{next(self._count)}"
        workspace.mkdir(parents=True)
        right = str(task.metadata["right"])

        def evaluate(ws: Path, submission: Submission) -> Score:
            picked, _, size_text = str(submission.answer or "").partition("|")
            size = int(size_text) if size_text.isdigit() else BASE
            p = (RIGHT_SUCCESS if picked == right else WRONG_SUCCESS) - context_cost(self.world, size,
                                                                                     self.per_doubling)
            ok = uniform("success", self.world, self.replicate, task.id, size) < p
            return Score(reward=float(ok), success=ok, checks=(Check(f"u < {p:.3f}", ok),))

        return WorkspaceEpisode(task, workspace, docs="complete_task(answer): finish with the skill you loaded.",
                                evaluator=evaluate, sandboxed=False)


def planted_agent(world: str, replicate: int) -> Any:
    """The scripted agent: loads the right card with probability a(N), else another card; then submits."""

    def reply(messages: list[dict[str, Any]]) -> str:
        first = next(str(m["content"]) for m in messages if m["role"] == "user" and "holds" in str(m["content"]))
        size = int(re.search(r"holds ([\d,]+) skills?", first).group(1).replace(",", ""))  # type: ignore[union-attr]
        task = re.search(r"request number (\d+)", first).group(1)  # type: ignore[union-attr]
        loaded = re.findall(r"Loaded skill '([^']+)'", "\n".join(str(m["content"]) for m in messages))
        if loaded:
            return f"Done.\n```python\ncomplete_task(answer={loaded[0] + '|' + str(size)!r})\n```"
        cards = re.findall(r"### Skill: (\S+)", first)
        right = skill_name(int(task), "route")
        others = [c for c in cards if c != right]
        chosen = right if uniform("pick", world, replicate, task, size) < pick_rate(world, size) or not others \
            else others[0]
        return f"Load it.\n```python\nload_skill({chosen!r})\n```"

    return reply


def run_world(root: Path, world: str, replicate: int, *, tasks: int, per_doubling: float,
              library: Path) -> dict[float, list[TaskSelection]]:
    """One replicate of a world: a stream per size over the same tasks; the labelled tasks by size."""
    by_size: dict[float, list[TaskSelection]] = {}
    for size in SIZES:
        run = f"{world}-{replicate}-{size}"
        env = PlantedEnv(world, replicate, tasks, per_doubling, root / "work" / run)
        config = StreamConfig(run=run, runs_dir=str(root / "runs"), condition="task", library=str(library),
                              library_size=size, embedder="hash:256", skill_exec="agent-skill",
                              near_miss={"corpus": [str(root / "corpus.jsonl")], "band": (-1.0, 1.0),
                                         "seed": replicate},
                              agent={"top_k": 5, "harness": "paper", "step_limit": 4},
                              memory={"validate_code": False})
        summary = run_stream(env, ScriptedModel(planted_agent(world, replicate)), config, embedder=HashEmbedder(256))
        by_size[float(size)] = [task_selection(record, "success") for record in summary.records]
    return by_size


@dataclass
class Tally:
    hits: int = 0
    n: int = 0

    def add(self, ok: bool) -> None:
        self.hits += int(ok)
        self.n += 1

    @property
    def pct(self) -> float:
        return 100.0 * self.hits / self.n if self.n else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=120, help="tasks per size (the same tasks at every size)")
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--null-replicates", type=int, default=None,
                        help="replicates of the null world (default: --replicates)")
    parser.add_argument("--first-replicate", type=int, default=0,
                        help="number of the first replicate (seeds every draw; a new number: held-out worlds)")
    parser.add_argument("--context", type=float, default=0.01, help="planted context cost per doubling")
    args = parser.parse_args()
    null_replicates = args.replicates if args.null_replicates is None else args.null_replicates
    faiss.omp_set_num_threads(1)
    recovered, coverage = Tally(), Tally()
    null_parts = {part: Tally() for part in ("slope", "shadowing", "context")}
    estimates: dict[tuple[str, int, str], list[float]] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="selection-scale-") as tmp:
        root = Path(tmp)
        right, near = pool(args.tasks, max(SIZES))
        library = export_jsonl(right, root / "library.jsonl")
        export_jsonl(near, root / "corpus.jsonl")
        for world in ("slope", "collapse", "null"):
            count = null_replicates if world == "null" else args.replicates
            for rep in range(args.first_replicate, args.first_replicate + count):
                analysis = scale_analysis(run_world(root, world, rep, tasks=args.tasks, per_doubling=args.context,
                                                    library=library), seed=rep)
                _score(world, analysis, args.context, recovered, coverage, estimates, null_parts)
            print(f"{world}: {count} replicates done at {time.perf_counter() - start:.0f} s", flush=True)
    elapsed = time.perf_counter() - start
    errors = []
    for (world, size, part), values in sorted(estimates.items()):
        truth = planted_split(world, size, args.context)[0 if part == "shadowing" else 1]
        errors.append(abs(float(np.mean(values)) - truth))
        print(f"{world:8s} N={size:5d} {part:9s}: planted {100 * truth:5.1f} pts, mean estimate "
              f"{100 * float(np.mean(values)):5.1f} pts over {len(values)} replicates")
    n_tasks = (2 * args.replicates + null_replicates) * len(SIZES) * args.tasks
    print(f"{n_tasks} tasks through run_stream in {elapsed:.0f} s ({args.tasks} tasks per size, {args.replicates} "
          f"replicates per world, {null_replicates} of the null world, from replicate {args.first_replicate}; sizes "
          f"{', '.join(map(str, SIZES))})")
    rejected = Tally(sum(t.hits for t in null_parts.values()), sum(t.n for t in null_parts.values()))
    print("null world, intervals excluding 0: " + ", ".join(f"{part} {tally.hits} of {tally.n}"
                                                          for part, tally in null_parts.items()))
    print(f"selection: slope recovered {recovered.pct:.0f}%, CI coverage {coverage.pct:.0f}%, decomposition error "
          f"{100 * float(np.mean(errors)):.1f} pts, null rejected {rejected.pct:.0f}%")


def _score(world: str, analysis: ScaleAnalysis, per_doubling: float, recovered: Tally, coverage: Tally,
           estimates: dict[tuple[str, int, str], list[float]], null_parts: dict[str, Tally]) -> None:
    """Tally one replicate's analysis against the planted world (module docstring)."""
    slope = next(s for s in analysis.slopes if s.metric == "pick_accuracy").slope
    if world == "slope":
        recovered.add(slope.value is not None and abs(slope.value - (-0.1)) <= 0.02)
        coverage.add(slope.covers(-0.1))
    elif world == "collapse":
        recovered.add(analysis.hinge.size == COLLAPSE_AT)
    else:
        coverage.add(slope.covers(0.0))
        null_parts["slope"].add(not slope.covers(0.0))
    for row in analysis.sizes[1:]:
        planted = planted_split(world, int(row.size), per_doubling)
        for part, estimate, truth in (("shadowing", row.shadowing, planted[0]),
                                      ("context", row.context_overhead, planted[1])):
            coverage.add(estimate.covers(truth))
            if world == "null":
                null_parts[part].add(not estimate.covers(0.0))
            if estimate.value is not None:
                estimates.setdefault((world, int(row.size), part), []).append(estimate.value)


if __name__ == "__main__":
    main()
