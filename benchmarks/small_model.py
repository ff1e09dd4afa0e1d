"""The embedded model on a fixed set of difficulty-1 tasks per bundled env: success, seconds and tokens per task,
``context_exceeded`` and ``stuck`` counts, under ``task`` and ``subtask+text``.

The task set is fixed: the first ``--tasks`` (default 20) difficulty-1 tasks of each env in the canonical stream order
(order seed 0). Each (env, condition) is one resumable run folder under ``--out``; rerunning the script resumes and
then prints the table from the run logs. ``--harness off`` switches the small-model harness features off (stop
sequences, stuck detection, premature-DONE, early-completion and ungrounded-answer refusals, done-on-repeat, the
closing subtask, the subtask-shaped example, the retrieval floor, focused apps docs, the apps, office and datasci
worked examples and example plans) for a before/after comparison on the same code.

    python benchmarks/small_model.py [--envs apps,office,datasci] [--conditions task,subtask+text] [--tasks 20]
        [--harness on|off] [--out runs/bench-small-model] [--threads N]

``--envs ...,scienceworld`` (needs Java) adds ScienceWorld: its difficulty-1 tasks are the shortest gold-path tercile.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from skilltransfer.envs.registry import get_env, stream_order
from skilltransfer.experiments.config import ModelSpec, StreamConfig
from skilltransfer.experiments.runlog import RunFolder
from skilltransfer.experiments.stream import run_stream
from skilltransfer.llm import make_model
from skilltransfer.memory.embedders import make_embedder

HARNESS_OFF_AGENT: dict[str, Any] = {"stop": [], "stuck_detection": False, "refuse_premature_done": False,
                                     "refuse_ungrounded_answer": False, "done_on_repeat": False,
                                     "close_unfinished": False, "refuse_early_completion": False,
                                     "subtask_example": False, "retrieval_min_score": -1,
                                     "induce_without_working_code": True, "ground_summary": False,
                                     "ground_skills": False}
HARNESS_OFF_ENV: dict[str, dict[str, Any]] = {"apps": {"focused_docs": False, "docs_example": False},
                                             "office": {"docs_example": False}, "datasci": {"docs_example": False}}


def difficulty_one(env: Any, n: int) -> list[Any]:
    """The first ``n`` difficulty-1 tasks of ``env`` in the canonical stream order."""
    return [t for t in stream_order(env.tasks(), 0) if t.difficulty == 1][:n]


def run_one(env_name: str, condition: str, args: argparse.Namespace, model: Any, embedder: Any) -> Path:
    off = args.harness == "off"
    env = get_env(env_name, **(HARNESS_OFF_ENV.get(env_name, {}) if off else {}))
    tasks = difficulty_one(env, args.tasks)
    config = StreamConfig(run=f"{env_name}-{condition}-{args.harness}", runs_dir=args.out, condition=condition,
                          agent=HARNESS_OFF_AGENT if off else {}, env=env_name, model=ModelSpec(name="local"),
                          embedder="minilm" if "+" in condition else "")

    def report(record: Any) -> None:
        print(f"  [{env_name} {condition}] {record.position + 1}/{len(tasks)} {record.task_id}: "
              f"{'success' if record.success else 'failure'} ({record.exit_status}) {record.latency_s:.0f} s, "
              f"{record.prompt_tokens + record.completion_tokens:,} tokens", flush=True)

    run_stream(env, model, config, embedder=embedder if "+" in condition else None, tasks=tasks, on_task=report)
    return config.path


def row(path: Path) -> dict[str, Any]:
    records = RunFolder(path).read_records()
    n = len(records)
    return {
        "run": path.name, "tasks": n, "success": sum(r.success for r in records) / n if n else 0.0,
        "s_per_task": statistics.fmean(r.latency_s for r in records) if n else 0.0,
        "tokens_per_task": statistics.fmean(r.prompt_tokens + r.completion_tokens for r in records) if n else 0.0,
        "context_exceeded": sum(r.exit_status == "context_exceeded" for r in records),
        "stuck": sum(r.exit_status == "stuck" for r in records),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="apps,office,datasci")
    parser.add_argument("--conditions", default="task,subtask+text")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--harness", choices=("on", "off"), default="on")
    parser.add_argument("--out", default="runs/bench-small-model")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache", default=None, help="response cache file (default: <out>/cache.sqlite)")
    args = parser.parse_args()
    model = make_model({"name": "local", "threads": args.threads,
                        "cache_path": args.cache or str(Path(args.out) / "cache.sqlite")})
    embedder = make_embedder("minilm", cache=True)
    start = time.perf_counter()
    paths = []
    try:
        for env_name in args.envs.split(","):
            for condition in args.conditions.split(","):
                paths.append(run_one(env_name, condition, args, model, embedder))
    finally:
        model.close()
    print(f"\nwall time {time.perf_counter() - start:.0f} s; harness {args.harness}")
    print("| run | tasks | success | s/task | tokens/task | context_exceeded | stuck |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        r = row(path)
        print(f"| {r['run']} | {r['tasks']} | {r['success']:.0%} | {r['s_per_task']:.0f} | "
              f"{r['tokens_per_task']:,.0f} | {r['context_exceeded']} | {r['stuck']} |")


if __name__ == "__main__":
    main()
