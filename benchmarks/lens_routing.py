"""Routing overhead on a 10,000-unit skill graph with a zero-latency verifier.

Target: <= 50 ms per query for retrieval, walk expansion, routing recursion and context assembly, model calls
excluded (the query's embedding is timed separately). The graph is synthetic: skills of 1 policy, 2 strategies, 2
procedures per strategy and 2 own primitives per procedure, plus a pool of shared primitives attached with a Zipf law
(a few hubs with hundreds of parents), about 10,000 units in all; unit texts are random office/app words, embedded
with the hashing test double (dim 384). The verifier and rewriter are `ScriptedModel` callables (no latency) that
decide by a hash of the unit's text (30 % ACCEPT, 30 % DECOMPOSE, 15 % REWRITE, 25 % SKIP); the time spent inside
them is subtracted. Usage: ``python benchmarks/lens_routing.py [--units 10000] [--queries 200] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from typing import Any

import faiss
import numpy as np

from skilltransfer.lens.graph import SkillGraph, Unit
from skilltransfer.lens.route import RouteConfig, route
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import HashEmbedder, Skill
from skilltransfer.protocols import Completion, Message

WORDS = ("email send contact calendar event meeting invite spreadsheet column sum average chart pdf report "
         "file folder rename copy search filter sort date time user account payment note todo list reply "
         "forward attach download upload table row merge split convert format title summary").split()
DECISIONS = ["ACCEPT"] * 6 + ["DECOMPOSE"] * 6 + ["REWRITE"] * 3 + ["SKIP"] * 5


class Timed:
    """Wraps a model or an embedder and adds up the seconds spent inside it."""

    def __init__(self, inner: Any, method: str) -> None:
        self.inner, self.method, self.seconds = inner, method, 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _timed(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return getattr(self.inner, self.method)(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        return self._timed(messages, **params)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._timed(texts)


def verifier(messages: list[Message]) -> str:
    user = messages[-1]["content"]
    if "Adapted for this task" in user:
        return "Adapted: the same steps for this task."
    digest = int(hashlib.sha256(user.encode()).hexdigest()[:8], 16)
    return f"DECISION: {DECISIONS[digest % len(DECISIONS)]}"


def build(n_units: int, seed: int, embedder: Any) -> SkillGraph:
    rng = np.random.default_rng(seed)
    per_skill, pool = 15, max(1, n_units // 40)
    n_skills = (n_units - pool) // per_skill
    graph = SkillGraph(embedder)

    def text(kind: str) -> str:
        return f"{kind}: " + " ".join(rng.choice(WORDS, size=8))

    shared = [Unit(id=f"h{i}", layer="primitive", text=text("shared step")) for i in range(pool)]
    zipf = 1.0 / np.arange(1, pool + 1)
    zipf /= zipf.sum()
    for s in range(n_skills):
        root = Unit(id=f"s{s}", layer="policy", text=text("policy"))
        graph.add_skill(Skill(name=f"skill-{s}", description=root.text, body=""), root)
        for a in range(2):
            strategy = Unit(id=f"s{s}.{a}", layer="strategy", text=text("strategy"), sources=[f"skill-{s}"])
            graph.add_unit(strategy)
            graph.add_edge(root.id, strategy.id)
            for b in range(2):
                proc = Unit(id=f"s{s}.{a}.{b}", layer="procedure", text=text("procedure"), sources=[f"skill-{s}"])
                graph.add_unit(proc)
                graph.add_edge(strategy.id, proc.id)
                for c in range(2):
                    prim = Unit(id=f"s{s}.{a}.{b}.{c}", layer="primitive", text=text("step"), sources=[f"skill-{s}"])
                    graph.add_unit(prim)
                    graph.add_edge(proc.id, prim.id)
                hub = shared[int(rng.choice(pool, p=zipf))]
                if hub.id not in graph.units:
                    graph.add_unit(hub)
                graph.add_edge(proc.id, hub.id)
    return graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="FAISS threads (seed search)")
    args = parser.parse_args()
    faiss.omp_set_num_threads(args.threads)
    embedder = Timed(HashEmbedder(384), "embed")
    start = time.perf_counter()
    graph = build(args.units, args.seed, embedder)
    graph.validate()
    graph.matrix()
    hubs = sorted((len(graph.parents(u.id)) for u in graph if u.id.startswith("h")), reverse=True)
    print(f"graph: {len(graph):,} units, {graph.counts()['edges']:,} edges, {graph.counts()['shared_units']} shared "
          f"(largest hub: {hubs[0]} parents); built, validated and embedded in {time.perf_counter() - start:.1f} s")
    rng = np.random.default_rng(args.seed + 1)
    queries = [" ".join(rng.choice(WORDS, size=10)) for _ in range(args.queries)]
    for mode in ("lens", "no-walk", "rewrite-all"):
        config = RouteConfig.model_validate({"mode": mode})
        overhead, embed_ms, visits, calls, tokens, trees = [], [], [], [], [], []
        for query in queries:
            model = Timed(ScriptedModel(verifier), "complete")
            embedder.seconds = 0.0
            routed = route(graph, query, model, config)
            embed_ms.append(embedder.seconds * 1000)
            overhead.append((routed.log.route_s - model.seconds - embedder.seconds) * 1000)
            visits.append(routed.log.visited)
            calls.append(routed.log.verifier_calls)
            tokens.append(routed.log.context_tokens)
            trees.append(routed.log.retrieved_tree)
        o = np.asarray(overhead)
        print(f"{mode:<11} overhead per query (model calls and query embedding excluded): p50 {np.median(o):.1f} ms, "
              f"p95 {np.percentile(o, 95):.1f} ms, max {o.max():.1f} ms | query embedding p50 "
              f"{np.median(embed_ms):.2f} ms | per query: retrieved tree {np.mean(trees):.0f} units, visited "
              f"{np.mean(visits):.1f}, model calls {np.mean(calls):.1f}, context {np.mean(tokens):.0f} tokens")
    print("target: <= 50 ms per query")


if __name__ == "__main__":
    main()
