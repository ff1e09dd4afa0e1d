"""How often do the size study's 95 % intervals exclude 0 when nothing changes with size? The analysis alone.

`benchmarks/selection_scale.py` runs the null world through the real stream, but only a few replicates fit a session:
its ``null rejected N%`` rests on about 90 intervals, so a calibrated estimator prints anything from 1 % to 10 % (a
binomial 95 % range at 5 %). This script asks the same question of the real analysis
(`skilltransfer.metrics.selection_scale.scale_analysis`, its task-id bootstrap) on many simulated replicates of the
same null world, without the stream:

- sizes 5, 20, 80, 320, 1280; ``--tasks`` task ids, each run at every size;
- the benchmark's null world, read from it (``pick_rate("null", N)``: a right pick with probability 0.7 at every
  size; success ``RIGHT_SUCCESS`` 0.8 after a right pick, ``WRONG_SUCCESS`` 0.2 after a wrong one), no context cost.

Per replicate: the pick-accuracy slope's interval, and shadowing, context overhead and drop at each size above the
base. Defined before running: **rejected** = the share of those intervals that exclude 0 (nominal 5 %).

    python benchmarks/selection_null_calibration.py [--tasks 120] [--replicates 1000]

Last line (R replicates, I = 4R intervals per estimand above the base size):
``selection null: slope S%, shadowing H%, context C%, drop D% of R / I intervals; pooled P%``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from selection_scale import RIGHT_SUCCESS, SIZES, WRONG_SUCCESS, pick_rate  # the benchmark's null world, defined once

from skilltransfer.metrics.selection import TaskSelection
from skilltransfer.metrics.selection_scale import scale_analysis


def null_world(replicate: int, tasks: int) -> dict[float, list[TaskSelection]]:
    """One replicate of the null world: every task at every size, picks and outcomes drawn independently."""
    rng = np.random.default_rng(1000 + replicate)
    world: dict[float, list[TaskSelection]] = {}
    for size in SIZES:
        rows = []
        for task in range(tasks):
            right = bool(rng.random() < pick_rate("null", size))
            success = float(rng.random() < (RIGHT_SUCCESS if right else WRONG_SUCCESS))
            rows.append(TaskSelection(f"t{task}", ("right", "other"), ("right",) if right else ("other",),
                                      frozenset({"right"}), success, size))
        world[size] = rows
    return world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument("--replicates", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    rejected: dict[str, list[bool]] = {"slope": [], "shadowing": [], "context": [], "drop": []}
    for replicate in range(args.replicates):
        analysis = scale_analysis(null_world(replicate, args.tasks), seed=replicate)
        rejected["slope"].append(not analysis.slopes[0].slope.covers(0.0))
        for row in analysis.sizes[1:]:
            rejected["shadowing"].append(not row.shadowing.covers(0.0))
            rejected["context"].append(not row.context_overhead.covers(0.0))
            rejected["drop"].append(not row.drop.covers(0.0))
        if (replicate + 1) % 100 == 0:
            print(f"{replicate + 1} of {args.replicates} replicates, {time.perf_counter() - started:.0f} s", flush=True)
    pct = {name: 100 * float(np.mean(flags)) for name, flags in rejected.items()}
    pooled = [flag for name in ("slope", "shadowing", "context") for flag in rejected[name]]
    print(f"selection null: slope {pct['slope']:.1f}%, shadowing {pct['shadowing']:.1f}%, context "
          f"{pct['context']:.1f}%, drop {pct['drop']:.1f}% of {len(rejected['slope'])} / "
          f"{len(rejected['shadowing'])} intervals; pooled {100 * float(np.mean(pooled)):.1f}%")


if __name__ == "__main__":
    main()
