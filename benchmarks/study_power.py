"""Power of the curated-vs-induced study (experiments/curated-vs-induced.yaml) at its shipped size, per env.

Two estimands (docs/studies/curated-vs-induced.md):

- **an arm difference** (e.g. curated library minus induced memory): the smallest difference in success rate, in
  points, a two-sided test at 0.05 detects with 80 % power over the env's n tasks, normal approximation with
  success near 0.5 and the arms taken as independent samples (the arms run the same tasks, so a paired analysis,
  as Table 2's paired delta CI, is at least this sharp when outcomes correlate): ``(z(0.975) + z(0.8)) *
  sqrt(2 * 0.25 / n)``;
- **a library skill's effect** (the masked arms): the candidate tasks per skill needed for 80 % power to flag an
  effect of ``-effect`` at the mask rate (`tasks_for_power` of ``benchmarks/skill_effects.py``, the figure its
  validation uses), against how many tasks retrieve each skill: the top-k counts of ``skilltransfer score`` with the
  study's embedder, i.e. its candidates in the library-alone arm (beside the agent's own memory induced skills take
  some of the k places, so fewer).

    skilltransfer score data/demo_library --tasks office --split test --out office.json
    skilltransfer score data/demo_library --tasks officebench --out officebench.json
    python benchmarks/study_power.py office.json officebench.json [--mask-rate 0.3] [--effect 0.3]

Last line: ``study power: ENV n=N arm difference D pts, K of S skills powered for -E at p=P; ...``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

HERE = Path(__file__).resolve().parent


def _tasks_for_power() -> Any:
    spec = importlib.util.spec_from_file_location("skill_effects_bench", HERE / "skill_effects.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tasks_for_power


def arm_difference_points(n: int, power: float = 0.8, level: float = 0.05) -> float:
    """The detectable difference of two success rates near 0.5 over ``n`` tasks each, in points."""
    z = NormalDist().inv_cdf(1 - level / 2) + NormalDist().inv_cdf(power)
    return 100 * z * math.sqrt(2 * 0.25 / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scores", nargs="+", type=Path, help="score --out JSON files, one per env (named by file)")
    parser.add_argument("--mask-rate", type=float, default=0.3)
    parser.add_argument("--effect", type=float, default=0.3)
    args = parser.parse_args()
    needed = _tasks_for_power()(args.mask_rate, args.effect)
    summary = []
    for path in args.scores:
        report = json.loads(path.read_text())
        n, k = report["n_tasks"], report["retrieval_rule"]["top_k"]
        skills = report["skills"]
        powered = [s for s in skills if s["top_k_tasks"] >= needed]
        diff = arm_difference_points(n)
        print(f"{path.stem}: {n} tasks; an arm difference of {diff:.1f} points is detected with 80 % power; "
              f"{needed} candidate tasks per skill flag a -{args.effect} skill at mask rate {args.mask_rate}")
        for skill in sorted(skills, key=lambda s: -s["top_k_tasks"]):
            mark = "powered" if skill["top_k_tasks"] >= needed else "under-powered"
            print(f"  {skill['name']:<36} in the top {k} of {skill['top_k_tasks']:>4} tasks  {mark}")
        summary.append(f"{path.stem} n={n} arm difference {diff:.1f} pts, {len(powered)} of {len(skills)} skills "
                       f"powered for -{args.effect} at p={args.mask_rate}")
    print("study power: " + "; ".join(summary))


if __name__ == "__main__":
    main()
