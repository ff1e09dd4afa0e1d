"""Scale benchmark: skill utility for 100,000 skills x 10,000 tasks (seeded random unit vectors, dim 384).

Targets on a 2-core machine: <= 60 s wall time and <= 2 GB peak RSS. Prints the timings of the passes (task-side
reference of the mode; the k-th-neighbour reference of the off-domain flag, shared with mode "knn"; skill x task
tiles, with the retrieval counts ``score`` takes from them: nearest skill and top-5 per task, best task per skill)
and the process's peak RSS. ``--no-retrieval`` leaves the counts out (the utility alone).

    python benchmarks/utility_scale.py [--skills 100000] [--tasks 10000] [--dim 384] [--mode pairs|nearest|knn]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np

from skilltransfer.metrics.retrieval import RetrievalAccumulator
from skilltransfer.metrics.utility import (
    OFF_DOMAIN_QUANTILE,
    SPECIFICITY_MODES,
    best_match_and_abstractness,
    task_reference,
)


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--mode", choices=SPECIFICITY_MODES, default="pairs")
    parser.add_argument("--tau", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-retrieval", action="store_true", help="skip the retrieval counts")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    skills = unit_vectors(rng, args.skills, args.dim)
    tasks = unit_vectors(rng, args.tasks, args.dim)
    print(f"{args.skills:,} skills x {args.tasks:,} tasks, dim {args.dim}, mode {args.mode}, tau {args.tau}; "
          f"inputs {(skills.nbytes + tasks.nbytes) / 2**20:.0f} MiB, RSS after setup {peak_rss_mib():.0f} MiB")

    start = time.perf_counter()
    reference = task_reference(tasks, mode=args.mode, seed=args.seed)
    t_ref = time.perf_counter() - start
    domain = reference if args.mode == "knn" else task_reference(tasks, mode="knn")
    t_domain = time.perf_counter() - start - t_ref
    retrieval = None if args.no_retrieval else RetrievalAccumulator(args.skills, args.tasks, k=5)
    best, abstract = best_match_and_abstractness(skills, tasks, tau=args.tau,
                                                 on_tile=retrieval.add if retrieval is not None else None)
    t_skills = time.perf_counter() - start - t_ref - t_domain
    spec = reference.specificity(best.astype(np.float32))
    util = spec * abstract
    off_domain = best.astype(np.float32) < domain.quantile_floor(OFF_DOMAIN_QUANTILE)
    total = time.perf_counter() - start

    kind = "sampled" if reference.sampled else "exact"
    print(f"task reference: {t_ref:.1f} s ({len(reference.values):,} {kind} values of "
          f"{reference.n_pairs_total:,} pairs)")
    print(f"off-domain reference (k = {domain.k}): {t_domain:.1f} s; {int(off_domain.sum()):,} skills flagged")
    with_counts = "" if retrieval is None else (
        f" with the retrieval counts (top-5: {int((retrieval.counts().nearest > 0).sum()):,} skills are some task's "
        "nearest)")
    print(f"skill x task pass: {t_skills:.1f} s ({args.skills * args.tasks / t_skills / 1e6:.0f} M cosines/s)"
          f"{with_counts}")
    print(f"total: {total:.1f} s (target <= 60 s); peak RSS: {peak_rss_mib():.0f} MiB (target <= 2048 MiB)")
    print(f"utility mean {util.mean():.4f}, specificity mean {spec.mean():.4f}, "
          f"abstractness mean {abstract.mean():.4f}, "
          f"best match mean {best.mean():.4f}")


if __name__ == "__main__":
    main()
