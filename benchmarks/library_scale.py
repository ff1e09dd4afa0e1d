"""Library scale: ``skilltransfer score`` of a marketplace-size skill library, and retrieval from a larger one.

A seeded generator writes a library of ``--skills`` Agent Skills folders (``<name>/SKILL.md`` with ``name`` and
``description`` front matter and a short body; descriptions composed from an office/data/dev vocabulary, so skills
share words and topics as real catalogues do) and ``--tasks`` task instructions (``tasks.jsonl``) into a temporary
folder. Then, as a user runs it (the CLI's defaults, the real embedder ``minilm`` = all-MiniLM-L6-v2):

- **cold**: ``skilltransfer score LIB --tasks tasks.jsonl --out report.json`` in a fresh process with an empty
  embedding cache (``$SKILLTRANSFER_CACHE`` in the temporary folder): reading the library, embedding every text,
  scoring, the screen and the file;
- **warm**: the same command again (every embedding from the cache);
- **screen**: the seconds ``score`` takes to lay out and print its screen (the first 50 skills' table, the summary)
  for that report, timed in this process on a 120-column console writing to memory;
- **peak**: the larger peak RSS of the two processes;
- **retrieval**: a frozen ``SkillMemory`` of ``--retrieval-skills`` skills (seeded random unit vectors, dim 384:
  the index cost alone, the query's embedding excluded), the p50 of ``--queries`` single-query searches on one
  thread (a stream's setting), with the index the memory chooses at that size and its recall@5 against exact search
  (`skilltransfer.memory.ann`); and, as a check of what the IVF index trades on real embeddings, its recall@5 on
  the generated library's 10,000 MiniLM vectors (index ``ivf`` forced) with the tasks as queries.

The last line:

    library scale: score 10000 skills x 300 tasks cold C s, warm W s, screen S s, peak M MiB; \
retrieval p50 P ms at 100000

Targets on the 2-core machine: warm <= 10 s, cold <= 60 s, screen <= 1 s, peak <= 2 GiB, p50 <= 5 ms.

    python benchmarks/library_scale.py [--skills 10000] [--tasks 300] [--retrieval-skills 100000] [--queries 500]
        [--embedder minilm] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VERBS = ("summarise", "convert", "merge", "split", "validate", "extract", "rename", "schedule", "draft", "review",
         "translate", "deduplicate", "plot", "forecast", "classify", "archive", "audit", "reconcile", "tag", "export")
OBJECTS = ("invoices", "meeting notes", "spreadsheets", "pdf reports", "calendar events", "email threads",
           "customer records", "sales figures", "expense claims", "contracts", "slide decks", "survey results",
           "log files", "unit tests", "pull requests", "api responses", "sensor readings", "lab results",
           "shipping manifests", "support tickets", "budgets", "timesheets", "press releases", "job postings")
TOOLS = ("Excel", "Word", "PowerPoint", "Outlook", "Google Sheets", "Notion", "Slack", "Jira", "GitHub",
         "Salesforce", "pandas", "SQL", "a REST API", "the shell", "a PDF toolkit", "a calendar app")
QUALIFIERS = ("by date", "by customer", "by region", "with totals", "into a table", "for a weekly digest",
              "before sending", "with charts", "in bulk", "for compliance", "as CSV", "with citations",
              "for a manager", "with a template", "across folders", "after a deadline")
DOMAINS = ("finance", "sales", "hr", "legal", "engineering", "research", "operations", "marketing", "support",
           "logistics", "healthcare", "education")


def skill(rng: np.random.Generator, index: int) -> tuple[str, str]:
    """A generated skill's name and description."""
    verb, obj, tool, qual, domain = (rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(TOOLS),
                                     rng.choice(QUALIFIERS), rng.choice(DOMAINS))
    second = rng.choice(VERBS)
    name = f"{verb}-{re.sub(r'[^a-z]+', '-', str(obj))}-{index}"
    return name, (f"Use when a {domain} user asks to {verb} {obj} {qual} with {tool}; also helps {second} them. "
                  f"Covers edge cases such as empty {obj} and mixed formats.")


def task_instruction(rng: np.random.Generator) -> str:
    verb, obj, tool, qual = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(TOOLS), rng.choice(QUALIFIERS)
    person = rng.choice(("Alice", "Bob", "Carol", "Dan", "Erin", "Frank"))
    return f"{person} needs you to {verb} the {obj} {qual} using {tool} and save the result in the shared folder."


def write_library(folder: Path, skills: int, seed: int = 0) -> None:
    """``skills`` generated SKILL.md folders under ``folder``."""
    rng = np.random.default_rng(seed)
    for index in range(skills):
        name, description = skill(rng, index)
        package = folder / name
        package.mkdir(parents=True)
        (package / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n"
                                          f"1. Read the input.\n2. {description}\n3. Check the output.\n")


def write_tasks(path: Path, tasks: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    path.write_text("".join(json.dumps({"id": f"task-{i}", "instruction": task_instruction(rng)}) + "\n"
                            for i in range(tasks)))


def run_score(library: Path, tasks: Path, out: Path, env: dict[str, str], embedder: str) -> tuple[float, float, float]:
    """One ``skilltransfer score`` process as a user runs it: (wall seconds, CPU seconds, peak RSS MiB of the largest
    child so far). On a shared machine the CPU seconds say what the load hid: wall time on a quiet 2-core machine is
    about CPU time over the cores the embedder keeps busy."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "skilltransfer", "score", str(library), "--tasks", str(tasks),
                           "--embedder", embedder, "--out", str(out)], env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"score failed ({done.returncode}): {done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024


def screen_and_recall(library: Path, tasks: Path, cache: Path, embedder: str) -> tuple[float, float]:
    """With the warm cache: the seconds ``score``'s screen takes for the library's report, and the IVF index's
    recall@5 on the library's real embeddings with the tasks as queries."""
    from rich.console import Console

    from skilltransfer.commands.score import SCREEN_TOP, _print_report
    from skilltransfer.memory import SkillMemory
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.memory.library import read_library
    from skilltransfer.metrics.scoring import score_library
    from skilltransfer.metrics.task_texts import load_tasks

    skills = read_library(library).skills
    task_texts = [task.text for task in load_tasks(str(tasks))]
    model = make_embedder(embedder, cache=cache / "embeddings.sqlite")
    report = score_library(skills, task_texts, model)
    start = time.perf_counter()
    _print_report(report, SCREEN_TOP, Console(file=io.StringIO(), width=120))
    screen = time.perf_counter() - start
    exact = SkillMemory(model, dedup_threshold=1.01, validate_code=False, index="flat")
    exact.add_many(skills)
    ivf = exact.filter(lambda skill: True)
    ivf.config = ivf.config.model_copy(update={"index": "ivf"})
    queries = exact.embed(task_texts)
    truth = exact.search_vectors(queries, 5)
    found = ivf.search_vectors(queries, 5)
    hits = sum(len({s.id for s, _ in a} & {s.id for s, _ in b}) for a, b in zip(truth, found, strict=True))
    print(f"IVF forced on the {len(skills):,} real skill vectors: {ivf.index_info().line()}; recall@5 with the "
          f"{len(task_texts)} tasks as queries {hits / (5 * len(task_texts)):.3f}", flush=True)
    return screen, hits / (5 * len(task_texts))


def retrieval_p50(skills: int, queries: int, dim: int = 384, seed: int = 0) -> tuple[float, str]:
    """The p50 milliseconds of one-query searches of a frozen memory of ``skills`` skills, and its index's line."""
    import faiss

    from skilltransfer.memory import Skill, SkillMemory

    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, skills // 50), dim), dtype=np.float32)

    def cluster(n: int) -> np.ndarray:
        rows = centres[rng.integers(0, len(centres), n)] + 0.9 * rng.standard_normal((n, dim), dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    vectors = cluster(skills)
    table = {f"skill {i}": vectors[i] for i in range(skills)}

    class TableEmbedder:
        id, dim = f"table:{skills}", 384

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.stack([table[t] for t in texts])

    memory = SkillMemory(TableEmbedder(), dedup_threshold=1.01, validate_code=False)
    memory.add_many([Skill(id=f"s{i}", name=f"s{i}", description=f"skill {i}", body="-") for i in range(skills)])
    memory.read_only = True
    probes = cluster(queries)
    memory.search_vectors(probes[:1], 5)  # the index is built on the first search
    times = []
    for row in probes:
        start = time.perf_counter()
        memory.search_vectors(row[None, :], 5)
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times)), memory.index_info().line()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--retrieval-skills", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--keep", type=Path, help="write the library and tasks here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="library-scale-"))
    try:
        library, tasks, cache = root / "library", root / "tasks.jsonl", root / "cache"
        if not library.is_dir():
            start = time.perf_counter()
            write_library(library, args.skills)
            print(f"wrote {args.skills} skills in {time.perf_counter() - start:.1f} s", flush=True)
        write_tasks(tasks, args.tasks)
        shutil.rmtree(cache, ignore_errors=True)
        env = {**os.environ, "SKILLTRANSFER_CACHE": str(cache), "COLUMNS": "120"}
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        cold, cold_cpu, cold_peak = run_score(library, tasks, root / "cold.json", env, args.embedder)
        print(f"cold {cold:.1f} s wall, {cold_cpu:.1f} s CPU (peak {cold_peak:.0f} MiB)", flush=True)
        warm, warm_cpu, warm_peak = run_score(library, tasks, root / "warm.json", env, args.embedder)
        print(f"warm {warm:.1f} s wall, {warm_cpu:.1f} s CPU (peak so far {warm_peak:.0f} MiB)", flush=True)
        screen, _ = screen_and_recall(library, tasks, cache, args.embedder)
        print(f"screen {screen:.3f} s", flush=True)
        p50, index = retrieval_p50(args.retrieval_skills, args.queries)
        print(f"retrieval at {args.retrieval_skills}: {index}", flush=True)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
        print(f"library scale: score {args.skills} skills x {args.tasks} tasks cold {cold:.1f} s, warm {warm:.1f} s, "
              f"screen {screen:.2f} s, peak {max(cold_peak, warm_peak):.0f} MiB; retrieval p50 {p50:.2f} ms at "
              f"{args.retrieval_skills}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
