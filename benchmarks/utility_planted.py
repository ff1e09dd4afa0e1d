"""Planted off-domain skills: does each specificity mode rank them last, and does it keep in-domain skills apart?

The demo library (``data/demo_library``) plus planted off-domain skills (cooking, gardening, astronomy trivia, …,
defined below) is scored against each bundled env's task instructions (``apps``, ``office``, ``datasci``) and, when
present, the 300 real OfficeBench instructions, under every specificity mode. Per task set and mode it prints the
ranks of the planted skills (1 = highest utility), their largest utility, how many skills are flagged off-domain
(planted / other), and the tie share: the fraction of skills *not* flagged off-domain whose utility equals another
such skill's (exactly, and at the 3 decimals ``score`` prints). The ``shown`` line is the ranking ``score`` prints
first (skills inside the embedder's null last, then the knn utility, `ScoreReport.by_relevance`): the planted ranks
under it and how many skills the absolute (null) flag catches. ``--library PATH`` scores another library the same
way (without planting), e.g. a checkout of a public SKILL.md collection.

    python benchmarks/utility_planted.py [--embedder minilm] [--officebench ../shared/officebench/tasks]
                                         [--library PATH ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from skilltransfer.envs.registry import get_env
from skilltransfer.memory import Skill, load_library, make_embedder
from skilltransfer.metrics.null_texts import NULL_TEXTS
from skilltransfer.metrics.task_texts import load_task_texts
from skilltransfer.metrics.utility import SPECIFICITY_MODES, null_threshold, task_reference, utility_scores

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OFFICEBENCH = REPO.parent / "shared" / "officebench" / "tasks"
PLANTED = {
    "roast-chicken": "Roast a whole chicken with garlic, lemon and thyme until the skin is crisp.",
    "prune-roses": "Prune rose bushes in late winter, cutting above an outward-facing bud.",
    "astronomy-trivia": "Answer trivia about the planets: which moon of Saturn is the largest and how long a day "
                        "lasts on Mars.",
    "knit-scarf": "Knit a striped scarf in garter stitch, casting on and binding off loosely.",
    "football-offside": "Explain the offside rule in football with examples from famous matches.",
    "wine-pairing": "Pick a wine to pair with a dinner menu of fish, cheese and dessert.",
    "birdwatching-log": "Identify garden birds by their song and plumage and keep a sightings diary.",
    "yoga-sequence": "Plan a twenty-minute morning yoga sequence of sun salutations and stretches.",
}
"""Planted off-domain skills (name -> description): unrelated to every bundled env and to OfficeBench."""


def planted_skills() -> list[Skill]:
    return [Skill(name=name, description=text, body="1. (planted off-domain skill)") for name, text in PLANTED.items()]


def tie_share(values: np.ndarray, decimals: int | None = None) -> float:
    """Fraction of values equal to at least one other value (optionally after rounding)."""
    if len(values) < 2:
        return 0.0
    keys = np.round(values, decimals) if decimals is not None else values
    _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    return float(np.mean(counts[inverse] > 1))


def task_sets(officebench: Path | None) -> dict[str, list[str]]:
    sets = {name: [task.instruction for task in get_env(name).tasks()] for name in ("apps", "office", "datasci")}
    if officebench is not None and officebench.is_dir():
        sets["officebench"] = load_task_texts(officebench)
    return sets


def relevance_line(names: list[str], planted: set[str], skill_vecs: np.ndarray, task_vecs: np.ndarray,
                   null_vecs: np.ndarray) -> str:
    """The ranking ``score`` shows first (inside the null last, then knn utility): planted ranks and the null flag."""
    scores = utility_scores(skill_vecs, task_vecs, specificity_mode="pairs")
    threshold = null_threshold(null_vecs, task_vecs)
    inside = scores.best_match <= threshold
    order = sorted(range(len(names)), key=lambda i: (bool(inside[i]), -scores.relevance[i], names[i]))
    rank = {names[i]: r for r, i in enumerate(order, start=1)}
    ranks = sorted(rank[n] for n in names if n in planted)
    flagged_planted = sum(bool(inside[i]) for i, n in enumerate(names) if n in planted)
    text = f"planted ranks {ranks[0]}-{ranks[-1]} of {len(names)}, " if ranks else ""
    return (f"  {'shown':8s} {text}inside the null (threshold {threshold:.3f}) {flagged_planted}/{len(ranks)} planted "
            f"+ {int(inside.sum()) - flagged_planted}/{len(names) - len(ranks)} others; first: {names[order[0]]}")


def evaluate(names: list[str], planted: set[str], skill_vecs: np.ndarray, task_vecs: np.ndarray) -> list[str]:
    """One line per mode: planted ranks, their largest utility, flags, tie shares."""
    lines = []
    domain = task_reference(task_vecs, mode="knn")
    for mode in SPECIFICITY_MODES:
        start = time.perf_counter()
        scores = utility_scores(skill_vecs, task_vecs, specificity_mode=mode, domain_reference=domain)
        elapsed = time.perf_counter() - start
        order = sorted(range(len(names)), key=lambda i: (-scores.utility[i], names[i]))
        rank = {names[i]: r for r, i in enumerate(order, start=1)}
        kept = ~scores.off_domain
        planted_idx = [i for i, name in enumerate(names) if name in planted]
        flagged_planted = sum(bool(scores.off_domain[i]) for i in planted_idx)
        flagged_other = int(scores.off_domain.sum()) - flagged_planted
        ranks = sorted(rank[names[i]] for i in planted_idx)
        planted_text = (f"planted ranks {ranks[0]}-{ranks[-1]} of {len(names)} (max utility "
                        f"{max(scores.utility[i] for i in planted_idx):.3f}), " if planted_idx else "")
        lines.append(
            f"  {mode:8s} {planted_text}flagged off-domain {flagged_planted}/{len(planted_idx)} planted + "
            f"{flagged_other}/{len(names) - len(planted_idx)} others; not flagged {int(kept.sum())}: tie share "
            f"{tie_share(scores.utility[kept]):.2f} exact, {tie_share(scores.utility[kept], 3):.2f} at 3 decimals; "
            f"at utility 0: {int(np.sum(scores.utility == 0))} ({elapsed * 1000:.0f} ms)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--officebench", type=Path, default=DEFAULT_OFFICEBENCH)
    parser.add_argument("--library", type=Path, action="append", default=[], help="another library to score")
    parser.add_argument("--cache", default=None, help="embedding cache file (default: none)")
    args = parser.parse_args()

    embedder = make_embedder(args.embedder, cache=args.cache or False)
    demo = [*load_library(REPO / "data" / "demo_library"), *planted_skills()]
    libraries = {"demo+planted": demo, **{str(path): load_library(path) for path in args.library}}
    sets = task_sets(args.officebench)
    null_vecs = embedder.embed(list(NULL_TEXTS))
    for set_name, texts in sets.items():
        task_vecs = embedder.embed(texts)
        domain = task_reference(task_vecs, mode="knn")
        print(f"{set_name}: {len(texts)} tasks, k = {domain.k}, off-domain threshold "
              f"{domain.quantile_floor(0.05):.3f}")
        for lib_name, skills in libraries.items():
            names = [skill.name for skill in skills]
            skill_vecs = embedder.embed([skill.description for skill in skills])
            print(f" {lib_name} ({len(skills)} skills)")
            for line in evaluate(names, set(PLANTED) if lib_name == "demo+planted" else set(), skill_vecs,
                                 task_vecs):
                print(line)
            print(relevance_line(names, set(PLANTED) if lib_name == "demo+planted" else set(), skill_vecs,
                                 task_vecs, null_vecs))


if __name__ == "__main__":
    main()
