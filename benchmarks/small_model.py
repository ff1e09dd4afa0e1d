"""The embedded model on a fixed set of difficulty-1 tasks per bundled env: success (95 % bootstrap CI), seconds,
tokens and model calls per task, ``context_exceeded`` and ``stuck`` counts, and how often each harness guard fired,
under chosen conditions and harness presets.

The task set is fixed: the first ``--tasks`` (default 20) difficulty-1 tasks of each env in the canonical stream order
(order seed 0). Each (env, condition, harness) is one resumable run folder under ``--out``
(``<env>-<condition>-<harness label>``); rerunning the script resumes, a larger ``--tasks`` extends the runs, and the
table is printed from the run logs. ``--harness`` names the presets (``paper``: no guard, the env's docs as the
benchmark gives them; ``small-model``: every feature; see ``skilltransfer.agents.harness``); ``--without g1,g2``
runs each listed feature left out of ``small-model`` alone (a leave-one-out row per feature).

    python benchmarks/small_model.py [--envs apps,office,datasci] [--conditions task,subtask+text] [--tasks 20]
        [--harness small-model,paper] [--without stuck_detection,...] [--step-limit N] [--out runs/bench-small-model]
        [--threads N]
    python benchmarks/small_model.py --table-only --out runs/bench-small-model   # the table of what ran so far

``--envs ...,scienceworld`` (needs Java) adds ScienceWorld: its difficulty-1 tasks are the shortest gold-path tercile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from skilltransfer.agents.harness import BY_NAME
from skilltransfer.envs.registry import get_env, stream_order
from skilltransfer.llm import make_model
from skilltransfer.log import RunFolder
from skilltransfer.memory.embedders import make_embedder
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import ModelSpec, StreamConfig


def difficulty_one(env: Any, n: int) -> list[Any]:
    """The first ``n`` difficulty-1 tasks of ``env`` in the canonical stream order."""
    return [t for t in stream_order(env.tasks(), 0) if t.difficulty == 1][:n]


def stream_config(env_name: str, condition: str, harness: str, without: str | None, out: str,
                  step_limit: int | None = None) -> StreamConfig:
    """The stream of one cell: ``harness`` (a preset), or ``small-model`` with the feature ``without`` off; a
    ``step_limit`` other than the agent's 50 is in the run name (``-steps20``)."""
    agent: dict[str, Any] = {"harness": harness}
    mask: bool | None = None
    env_args: dict[str, Any] = {}
    if without is not None:
        spec = BY_NAME[without]
        if spec.where == "agent":
            agent[spec.switch] = spec.off
        elif spec.where == "stream":
            mask = False
        else:
            env_args[spec.switch] = spec.off
    config = StreamConfig(run="pending", runs_dir=out, condition=condition, agent=agent, mask_instance_names=mask,
                          env={"env": env_name, "args": env_args}, model=ModelSpec(name="local"),
                          embedder="minilm" if "+" in condition else "", limits={"step_limit": step_limit})
    steps = f"-steps{step_limit}" if step_limit is not None else ""
    return config.model_copy(update={"run": f"{env_name}-{condition}-{config.harness_label()}{steps}"})


def run_one(config: StreamConfig, n_tasks: int, model: Any, embedder: Any) -> Path:
    env = get_env(config.env.name, **config.env.args)
    tasks = difficulty_one(env, n_tasks)
    memory = "+" in config.condition

    def report(record: Any) -> None:
        print(f"  [{config.run}] {record.position + 1}/{len(tasks)} {record.task_id}: "
              f"{'success' if record.success else 'failure'} ({record.exit_status}) {record.latency_s:.0f} s, "
              f"{record.prompt_tokens + record.completion_tokens:,} tokens, {record.model_calls} calls", flush=True)

    print(f"{config.run}: harness {config.harness_label()}: {', '.join(config.agent.guards or []) or 'no guard'}",
          flush=True)
    run_stream(env, model, config, embedder=embedder if memory else None, tasks=tasks, on_task=report)
    return config.path


def guard_counts(path: Path) -> Counter[str]:
    """How often each guard decided something other than accept, over the run's finished trajectories."""
    counts: Counter[str] = Counter()
    for trajectory in sorted((path / "trajectories").glob("*.json")):
        data = json.loads(trajectory.read_text())
        if data.get("status") != "finished":
            continue
        for step in data.get("steps", []):
            counts.update(record["guard"] for record in step.get("guards", []))
    return counts


def row(path: Path) -> dict[str, Any]:
    records = RunFolder(path).read_records()
    n = len(records)
    rate, low, high = bootstrap_ci([float(r.success) for r in records], level=0.95, seed=0) if n else (0.0, 0.0, 0.0)

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    return {
        "run": path.name, "tasks": n, "solved": sum(r.success for r in records), "success": rate, "ci": (low, high),
        "s_per_task": mean([r.latency_s for r in records]),
        "tokens_per_task": mean([float(r.prompt_tokens + r.completion_tokens) for r in records]),
        "calls_per_task": mean([float(r.model_calls) for r in records]),
        "context_exceeded": sum(r.exit_status == "context_exceeded" for r in records),
        "stuck": sum(r.exit_status == "stuck" for r in records),
        "guards": guard_counts(path),
    }


def print_table(paths: list[Path]) -> None:
    print("| run | tasks | success (95 % CI) | s/task | tokens/task | calls/task | context_exceeded | stuck | "
          "guards fired (decisions) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in paths:
        r = row(path)
        low, high = r["ci"]
        fired = ", ".join(f"{name} {n}" for name, n in r["guards"].most_common()) or "-"
        print(f"| {r['run']} | {r['tasks']} | {r['solved']}/{r['tasks']} ({r['success']:.0%}; {low:.0%}-{high:.0%}) | "
              f"{r['s_per_task']:.0f} | {r['tokens_per_task']:,.0f} | {r['calls_per_task']:.1f} | "
              f"{r['context_exceeded']} | {r['stuck']} | {fired} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="apps,office,datasci")
    parser.add_argument("--conditions", default="task,subtask+text")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--step-limit", type=int, default=None,
                        help="executor steps per task (default: the agent's 50)")
    parser.add_argument("--harness", default="small-model", help="presets, comma-separated (paper, small-model)")
    parser.add_argument("--without", default="", help="features to leave out of small-model, one run each")
    parser.add_argument("--out", default="runs/bench-small-model")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache", default=None, help="response cache file (default: <out>/cache.sqlite)")
    parser.add_argument("--table-only", action="store_true", help="print the table of the runs under --out")
    args = parser.parse_args()
    if args.table_only:
        print_table(sorted(p for p in Path(args.out).iterdir() if (p / "config.json").is_file()))
        return
    cells = [(h, None) for h in args.harness.split(",") if h] + [("small-model", w) for w in args.without.split(",")
                                                                   if w]
    configs = [stream_config(env, condition, harness, without, args.out, args.step_limit)
               for env in args.envs.split(",") for condition in args.conditions.split(",")
               for harness, without in cells]
    model = make_model({"name": "local", "threads": args.threads,
                        "cache_path": args.cache or str(Path(args.out) / "cache.sqlite")})
    embedder = make_embedder("minilm", cache=True)
    start = time.perf_counter()
    try:
        paths = [run_one(config, args.tasks, model, embedder) for config in configs]
    finally:
        model.close()
    print(f"\nwall time {time.perf_counter() - start:.0f} s")
    print_table(paths)


if __name__ == "__main__":
    main()
