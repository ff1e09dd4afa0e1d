"""The MetaSkill runtime's cost: overhead per node with a zero-latency model, and wall time vs K with a fixed-latency
model.

Both parts run the tiny counter world (``tests/helpers_tinyenv.py``, in-process runner) with the scripted
coordination policy of ``tests/helpers_compose.py`` (each node: one action, then ``SUBTASK DONE``; a finishing
context calls ``complete_task``). The plan is ``--width`` independent nodes plus one node bound to all of them.

1. *Overhead*: a zero-latency model; the runtime's own time per node = (wall - time inside env actions - time inside
   the model) / nodes, i.e. scheduling, prompt rendering, executor bookkeeping, audit, threads. Median of
   ``--repeats`` episodes at K = 1. At K = 4 only the wall time per node is printed: with threads, the clock inside
   a model call also runs while other threads hold the GIL, so subtracting it would understate the overhead.
2. *Wall time vs K*: every model call takes ``--latency-ms``; wall time at K = 1, 2, 4 (and the speed-up over K = 1).
   The ideal for W parallel nodes of c calls each plus a sink and a finishing call is
   (ceil(W/K)*c + c + 1) * latency.

Usage: ``python benchmarks/composition_runtime.py [--width 8] [--latency-ms 200] [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers_compose import ComposeScript, wide_plan  # noqa: E402
from helpers_tinyenv import TinyEnv  # noqa: E402

from skilltransfer.coordination import CoordinationConfig, MetaSkillRuntime  # noqa: E402
from skilltransfer.llm.testing import ScriptedModel  # noqa: E402
from skilltransfer.protocols import Completion  # noqa: E402


class TimedModel:
    """A ScriptedModel that adds up the seconds spent inside it."""

    def __init__(self, script: Any) -> None:
        self.inner = ScriptedModel(script)
        self.seconds = 0.0

    def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        start = time.perf_counter()
        try:
            return self.inner.complete(messages, **params)
        finally:
            self.seconds += time.perf_counter() - start


def episode_run(env: TinyEnv, width: int, k: int, latency_s: float) -> dict[str, float]:
    """One episode under the runtime: wall, model and env seconds, nodes, success."""
    task = env.tasks()[0]
    episode = env.start(task)
    env_seconds = [0.0]
    original = episode.step

    def timed_step(action: str) -> Any:
        start = time.perf_counter()
        try:
            return original(action)
        finally:
            env_seconds[0] += time.perf_counter() - start

    episode.step = timed_step  # type: ignore[method-assign]
    model = TimedModel(ComposeScript(latency_s=latency_s))
    runtime = MetaSkillRuntime(model, {}, config=CoordinationConfig(max_parallel=k, step_limit=10 * width + 10))
    start = time.perf_counter()
    result = runtime.run(episode, wide_plan(width, task_id=task.id, add=1))
    wall = time.perf_counter() - start
    success = episode.evaluate().success
    episode.close()
    return {"wall": wall, "model": model.seconds, "env": env_seconds[0], "nodes": width + 1.0,
            "success": float(success), "peak": float(result.audit.peak_parallel)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = TinyEnv([args.width], workdir=Path(tmp))
        print(f"plan: {args.width} parallel nodes + 1 sink; tiny counter world, in-process runner")
        print("\n1. overhead per node, zero-latency model (median of episodes)")
        for k in (1, 4):
            runs = [episode_run(env, args.width, k, 0.0) for _ in range(args.repeats)]
            assert all(r["success"] for r in runs), "the scripted episode must succeed"
            per_node = [(r["wall"] - r["env"] - r["model"]) / r["nodes"] * 1000 for r in runs]
            env_node = [r["env"] / r["nodes"] * 1000 for r in runs]
            wall_node = [r["wall"] / r["nodes"] * 1000 for r in runs]
            own = (f"runtime {statistics.median(per_node):.2f} ms/node (p90 "
                   f"{sorted(per_node)[int(0.9 * len(per_node))]:.2f}); " if k == 1 else "")
            print(f"  K={k}: {own}env actions {statistics.median(env_node):.2f} ms/node; wall "
                  f"{statistics.median(wall_node):.2f} ms/node")
        latency = args.latency_ms / 1000
        print(f"\n2. wall time vs K, every model call {args.latency_ms:.0f} ms")
        base = None
        for k in (1, 2, 4):
            run = episode_run(env, args.width, k, latency)
            ideal = (math.ceil(args.width / k) * 2 + 2 + 1) * latency
            base = base or run["wall"]
            print(f"  K={k}: {run['wall']:.2f} s (ideal {ideal:.2f} s), speed-up {base / run['wall']:.2f}x, peak "
                  f"{run['peak']:.0f} nodes at once, success {bool(run['success'])}")


if __name__ == "__main__":
    main()
