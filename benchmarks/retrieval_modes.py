"""Retrieval modes (issue 55 §3): latency per mode at 1,000 and 10,000 skills, and retrieval quality on a labelled
public benchmark.

**Latency** (always): a library of N synthetic skills (10 words of a 46-word office vocabulary per description, a
sentence of steps as the body; `memory_latency.py`'s generator) in a `SkillMemory` with the hashing test double at
384 dimensions (MiniLM's width, so FAISS, clustering and cosines cost what they cost with MiniLM; no model loaded),
FAISS on one thread as a run sets it;
per mode x indexed text: the build on first retrieval (BM25 index, k-means clusters) and the p50 / p95 of
``retrieve(query, 5)`` over ``--queries`` queries, query embedding by the test double included (0.05 ms). MiniLM adds
its own query embedding to every mode alike (printed once when the model is installed).

**Quality** (``--skilllearnbench FOLDER``, a clone of cxcscmu/SkillLearnBench): each of its 25 libraries
(``skills/<method>/``, one method x model's skills, grouped in one folder per task) is searched with each of the 100
instructions (``tasks/<task>/<instance>/instruction.md``) whose task it has skills for; the right skills are the
library's skills for that task. Per mode x text: Hit@1, Hit@5, MRR and NDCG@10 (`skilltransfer.metrics.selection`),
averaged per task over its instances and the libraries, with a 95 % bootstrap CI over the tasks; embedder
``--embedder`` (default minilm). ``hierarchical`` routes over each library's task folders: the library is organised
by the very tasks asked, so that row is what an organisation matching the tasks buys, an upper reference.

    python benchmarks/retrieval_modes.py [--sizes 1000,10000] [--queries 200]
        [--skilllearnbench /work/ext/SkillLearnBench] [--embedder minilm]

Last line: ``retrieval modes: p50 at 10000 skills dense D ms, bm25 B ms, hybrid H ms, hierarchical R ms``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from skilltransfer.memory import HashEmbedder, Skill, SkillMemory
from skilltransfer.memory.ranking import RETRIEVAL_MODES, Ranker
from skilltransfer.metrics.selection import TaskSelection
from skilltransfer.runner.build import single_thread_faiss

WORDS = ("email send contact calendar event meeting invite spreadsheet column sum average chart pdf report "
         "file folder rename copy search filter sort date time user account payment note todo list reply "
         "forward attach download upload table row merge split convert format title summary").split()
TEXTS = ("description", "description+body")


def synthetic_skills(n: int, seed: int = 0) -> list[Skill]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=10))
        steps = " ".join(rng.choice(WORDS, size=20))
        out.append(Skill(name=f"skill-{i}", description=f"skill {i}: {words}", body=f"Steps: {steps}."))
    return out


def _memory(skills: list[Skill], embedder: object, text: str) -> SkillMemory:
    memory = SkillMemory(embedder, dedup_threshold=1.01, index_body=text == "description+body")  # type: ignore[arg-type]
    memory.add_many(skills)
    memory.read_only = True
    return memory


def latency(sizes: list[int], queries: int) -> dict[int, dict[str, float]]:
    """Per size: mode -> p50 ms (description text); prints a row per size x mode x text."""
    embedder = HashEmbedder(384)
    rng = np.random.default_rng(1)
    asked = [" ".join(rng.choice(WORDS, size=8)) for _ in range(queries)]
    p50s: dict[int, dict[str, float]] = {}
    print("size   | mode         | text             | build s | p50 ms | p95 ms")
    for size in sizes:
        skills = synthetic_skills(size)
        for text in TEXTS:
            memory = _memory(skills, embedder, text)
            for mode in RETRIEVAL_MODES:
                memory.ranker = Ranker(mode) if mode != "dense" else None  # type: ignore[arg-type]
                start = time.perf_counter()
                memory.retrieve(asked[0], 5)  # builds the mode's index
                build = time.perf_counter() - start
                times = []
                for query in asked:
                    start = time.perf_counter()
                    memory.retrieve(query, 5)
                    times.append((time.perf_counter() - start) * 1000)
                p50, p95 = float(np.percentile(times, 50)), float(np.percentile(times, 95))
                if text == "description":
                    p50s.setdefault(size, {})[mode] = p50
                print(f"{size:>6} | {mode:<12} | {text:<16} | {build:7.2f} | {p50:6.2f} | {p95:6.2f}", flush=True)
    return p50s


def minilm_query_ms() -> float | None:
    """MiniLM's embedding time of one query on one torch thread (p50 of 50), or None when the model is not
    installed."""
    try:
        import torch

        from skilltransfer.memory.embedders import make_embedder

        torch.set_num_threads(1)  # one core, as beside a model server (two threads on a loaded 2-core machine: 10x)
        model = make_embedder("minilm")
        model.embed(["warm up"])
    except Exception:  # noqa: BLE001 - the model is optional here
        return None
    times = []
    for i in range(50):
        start = time.perf_counter()
        model.embed([f"send the quarterly report to contact {i}"])
        times.append((time.perf_counter() - start) * 1000)
    return float(np.percentile(times, 50))


def skilllearnbench(folder: Path) -> tuple[dict[str, list[Skill]], list[tuple[str, str, str]]]:
    """Its libraries (method -> skills, one per SKILL.md; ids ``method/task/folder``) and its queries (task,
    instance, instruction)."""
    from skilltransfer.memory.library import parse_skill_md

    libraries: dict[str, list[Skill]] = {}
    root = folder / "skills"
    for path in sorted(root.glob("*/*/*/SKILL.md")):
        method, task = path.parts[-4], path.parts[-3]
        try:
            skill = parse_skill_md(path.relative_to(root), root=root)
        except Exception:  # noqa: BLE001 - a file the reader refuses is left out (counted below)
            continue
        libraries.setdefault(method, []).append(skill.model_copy(update={"id": f"{method}/{task}/{path.parent.name}"}))
    queries = [(path.parts[-3], path.parts[-2], path.read_text(encoding="utf-8"))
               for path in sorted((folder / "tasks").glob("*/*/instruction.md"))]
    return libraries, queries


def quality(folder: Path, embedder_name: str, seed: int = 0) -> None:
    """Per library (one method's skills, grouped by task), each instruction's right skills are that library's skills
    for its task; a metric is averaged per task over its instances and the libraries, and the 95 % CI bootstraps the
    tasks (instances of one task and the libraries' answers to one instruction are not independent)."""
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.metrics.selection import task_scores

    libraries, queries = skilllearnbench(folder)
    files = len(list((folder / "skills").glob("*/*/*/SKILL.md")))
    read = sum(len(skills) for skills in libraries.values())
    print(f"\nSkillLearnBench: {read} of {files} SKILL.md read in {len(libraries)} libraries (median "
          f"{int(np.median([len(s) for s in libraries.values()]))} skills), {len(queries)} instructions of "
          f"{len({t for t, _, _ in queries})} tasks; embedder {embedder_name}; 95 % CI over tasks")
    print("mode         | text             | Hit@1 % [CI]        | Hit@5 % [CI]        | MRR [CI]             | "
          "NDCG@10 [CI]")
    embedder = make_embedder(embedder_name, cache=True)
    for text in TEXTS:
        memories = {method: _memory(skills, embedder, text) for method, skills in libraries.items()}
        for mode in RETRIEVAL_MODES:
            per_task: dict[str, dict[str, list[float]]] = {}
            for memory in memories.values():
                memory.ranker = Ranker(mode) if mode != "dense" else None  # type: ignore[arg-type]
                right_of = {}
                for skill in memory:
                    right_of.setdefault(skill.id.split("/")[1], set()).add(skill.id)
                asked = [(task, q) for task, _, q in queries if task in right_of]
                hits = memory.retrieve_many([q for _, q in asked], 10)
                for (task, _), ranked in zip(asked, hits, strict=True):
                    scores = task_scores(TaskSelection(task, tuple(s.id for s, _ in ranked), (),
                                                       frozenset(right_of[task])))
                    for key, value in scores.items():
                        per_task.setdefault(task, {}).setdefault(key, []).append(value)

            cells = [_cell(per_task, key, scale, seed) for key, scale in (("hit1", 100), ("hit5", 100), ("mrr", 1),
                                                                          ("ndcg10", 1))]
            print(f"{mode:<12} | {text:<16} | " + " | ".join(cells), flush=True)


def _cell(per_task: dict[str, dict[str, list[float]]], key: str, scale: float, seed: int) -> str:
    """A metric's mean over tasks (each task's mean first) with its task-bootstrap 95 % CI, as a table cell."""
    from skilltransfer.metrics import bootstrap_ci

    mean, low, high = bootstrap_ci([float(np.mean(v[key])) for v in per_task.values()], seed=seed)
    if scale > 1:
        return f"{scale * mean:5.1f} [{scale * low:5.1f}, {scale * high:5.1f}]"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skilllearnbench", type=Path, default=None)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args(argv)
    single_thread_faiss()  # as a run searches (`skilltransfer.runner.build.single_thread_faiss`)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    p50s = latency(sizes, args.queries)
    query = minilm_query_ms()
    if query is not None:
        print(f"MiniLM embeds one query in {query:.2f} ms (p50), the same in every mode")
    if args.skilllearnbench is not None:
        quality(args.skilllearnbench, args.embedder)
    largest = max(p50s)
    print(f"retrieval modes: p50 at {largest} skills " + ", ".join(f"{mode} {p50s[largest][mode]:.2f} ms"
                                                              for mode in RETRIEVAL_MODES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
