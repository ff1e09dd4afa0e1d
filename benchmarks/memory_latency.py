"""Skill-memory latency at 10,000 skills: retrieval p50/p95 and add-with-dedup latency.

Targets: retrieval <= 1 ms per query (query embedding excluded), add with dedup <= 5 ms per text skill.
Uses random unit vectors (retrieval, embedding excluded) and the hashing test double (embedding included); it loads
no model. Usage: ``python benchmarks/memory_latency.py [--skills 10000] [--dim 384] [--queries 500] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import faiss
import numpy as np

from skilltransfer.memory import HashEmbedder, Skill, SkillMemory

WORDS = ("email send contact calendar event meeting invite spreadsheet column sum average chart pdf report "
         "file folder rename copy search filter sort date time user account payment note todo list reply "
         "forward attach download upload table row merge split convert format title summary").split()


class RandomUnitEmbedder:
    """Maps each text to a fixed random unit vector (seeded by the text); isolates index cost from embedding cost."""

    def __init__(self, dim: int) -> None:
        self._dim = dim

    @property
    def id(self) -> str:
        return f"random-unit:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(self._dim) for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self._dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def make_skills(n: int, seed: int, prefix: str) -> list[Skill]:
    rng = np.random.default_rng(seed)
    skills = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=10))
        skills.append(Skill(name=f"{prefix}-{i}", description=f"{prefix} {i}: {words}", body=f"Steps for {words}."))
    return skills


def timed_ms(fn: Callable[[], object], repeats: int) -> np.ndarray:
    out = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        fn()
        out[i] = (time.perf_counter() - start) * 1000
    return out


def report(label: str, ms: np.ndarray, target: float) -> None:
    p50, p95 = np.percentile(ms, [50, 95])
    verdict = "ok" if p50 <= target else "OVER TARGET"
    print(f"{label:<58} p50 {p50:7.3f} ms   p95 {p95:7.3f} ms   (target <= {target:g} ms: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384, help="embedding dim (all-MiniLM-L6-v2 has 384)")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1,
                        help="FAISS OpenMP threads (1 avoids thread wake-up cost on single-query searches)")
    args = parser.parse_args()
    faiss.omp_set_num_threads(args.threads)
    print(f"FAISS OpenMP threads: {args.threads}")
    rng = np.random.default_rng(0)

    t0 = time.perf_counter()
    memory = SkillMemory(RandomUnitEmbedder(args.dim))
    memory.add_many(make_skills(args.skills, 1, "rand"))
    print(f"built random-vector memory of {len(memory)} skills, dim {args.dim}, "
          f"in {time.perf_counter() - t0:.1f} s (add_many incl. dedup)")
    queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    it = iter(range(10**9))
    report("retrieve k=5, query embedding excluded (random vectors)",
           timed_ms(lambda: memory.search_vectors(queries[next(it) % len(queries)], 5), args.queries), 1.0)
    t0 = time.perf_counter()
    memory.search_vectors(queries, 5)
    print(f"{'  batched: search_vectors of all queries at once':<58} "
          f"{(time.perf_counter() - t0) * 1000 / len(queries):.3f} ms/query")

    hashed = SkillMemory(HashEmbedder(args.dim))
    t0 = time.perf_counter()
    hashed.add_many(make_skills(args.skills, 2, "hash"))
    print(f"built hash-embedder memory of {len(hashed)} skills in {time.perf_counter() - t0:.1f} s")
    texts = [f"please {' '.join(rng.choice(WORDS, size=8))}" for _ in range(args.queries)]
    it = iter(range(10**9))
    report("retrieve k=5, query embedding included (hash embedder)",
           timed_ms(lambda: hashed.retrieve(texts[next(it) % len(texts)], 5), args.queries), 1.0)
    vectors = hashed.embedder.embed(texts)
    it = iter(range(10**9))
    report("retrieve k=5, query embedding excluded (hash vectors)",
           timed_ms(lambda: hashed.search_vectors(vectors[next(it) % len(vectors)], 5), args.queries), 1.0)

    new = iter(make_skills(args.adds, 3, "new"))
    actions: Counter[str] = Counter()
    adds = timed_ms(lambda: actions.update([hashed.add(next(new)).action]), args.adds)
    report(f"add text skill with dedup into {args.skills} skills (hash emb.)", adds, 5.0)
    dups = iter([skill.model_copy(update={"id": "", "name": "dup"}) for _, skill in zip(range(args.adds), hashed,
                                                                                        strict=False)])
    dup_ms = timed_ms(lambda: actions.update([hashed.add(next(dups)).action]), args.adds)
    report("add near-duplicate text skill (dedup drop path)", dup_ms, 5.0)
    print(f"add actions: {dict(actions)}")


if __name__ == "__main__":
    main()
