"""Harness overhead: a 100-task stream with a zero-latency scripted model.

Reports agent steps (executor actions) per second excluding model time (target >= 200) and the share of wall time
spent outside the model, split into the env (episode start, code execution, evaluation, clean-up) and the rest of
the harness (prompts, parsing, memory retrieval/induction, logging). The default world is the tiny counter env of
``tests/helpers_tinyenv.py`` driven by its role-aware script (every role plays, skills are induced and retrieved);
``--env apps|office|datasci`` runs a real env with an oracle executor (one action per task: its reference solution).
The hashing embedder (a test double) is used so no model is loaded.

Usage: ``python benchmarks/harness_overhead.py [--tasks 100] [--condition subtask+text] [--env tiny] [--sandboxed]
[--dir /dev/shm]`` (``--dir`` puts the run and workspaces on another file system, to separate disk from CPU cost).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, TinyEnv, role_of  # noqa: E402

from skilltransfer.llm.testing import ScriptedModel  # noqa: E402
from skilltransfer.memory.embedders import HashEmbedder  # noqa: E402
from skilltransfer.protocols import Completion  # noqa: E402
from skilltransfer.runner.build import single_thread_faiss  # noqa: E402
from skilltransfer.runner.stream import run_stream  # noqa: E402
from skilltransfer.settings.config import StreamConfig, parse_condition  # noqa: E402


class Timer:
    """Accumulated seconds and calls of one kind of work."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def time(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


class TimedModel:
    """A ChatModel wrapper that adds up the time spent inside ``complete``."""

    def __init__(self, inner: Any, timer: Timer) -> None:
        self.inner, self.timer, self.model = inner, timer, getattr(inner, "model", "scripted")

    def complete(self, messages: list[dict[str, Any]], **params: Any) -> Completion:
        return self.timer.time(self.inner.complete, messages, **params)


class TimedEpisode:
    """An Episode wrapper timing start-to-close env work."""

    def __init__(self, inner: Any, timer: Timer) -> None:
        self.inner, self.timer = inner, timer
        self.task = inner.task

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        return (lambda *a, **k: self.timer.time(attr, *a, **k)) if callable(attr) else attr


class TimedEnv:
    """An env wrapper timing ``start`` and every episode call."""

    def __init__(self, inner: Any, timer: Timer) -> None:
        self.inner, self.timer = inner, timer

    def tasks(self, split: str | None = None) -> Any:
        return self.inner.tasks()

    def start(self, task: Any) -> TimedEpisode:
        return TimedEpisode(self.timer.time(self.inner.start, task), self.timer)


def build(env_name: str, n: int, condition: str, workdir: Path, sandboxed: bool) -> tuple[Any, Any, list[Any]]:
    _, fmt = parse_condition(condition)
    if env_name == "tiny":
        env = TinyEnv([(i * 7) % 23 + 1 for i in range(n)], workdir=workdir, sandboxed=sandboxed)
        script = CounterScript(CODE_SKILL if fmt == "code" else TEXT_SKILL)
        return env, ScriptedModel(script), env.tasks()
    from skilltransfer.envs.registry import get_env, stream_order

    env = get_env(env_name, seed=0, workdir=workdir, sandboxed=sandboxed)
    tasks = stream_order(env.tasks())[:n]
    by_instruction = {t.instruction: t for t in tasks}

    def oracle(messages: list[dict[str, Any]]) -> str:
        if role_of(messages) == "induction":
            return CODE_SKILL if fmt == "code" else TEXT_SKILL
        if role_of(messages) == "planner":
            return "DONE" if "(none yet)" not in messages[1]["content"] else "SUBTASK: Solve the whole task."
        task = next(t for text, t in by_instruction.items() if text in messages[1]["content"])
        return f"Solve it.\n```python\n{env.reference_solution(task)}\n```"

    return env, ScriptedModel(oracle), tasks


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--condition", default="subtask+text")
    parser.add_argument("--env", default="tiny", help="tiny (counter world), apps, office or datasci")
    parser.add_argument("--sandboxed", action="store_true", help="run agent code in the sandbox")
    parser.add_argument("--dir", default=None, help="where run and workspace folders go (default: the temp dir)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    single_thread_faiss()  # as `skilltransfer run` does
    model_timer, env_timer = Timer(), Timer()
    with tempfile.TemporaryDirectory(prefix="harness-overhead-", dir=args.dir) as tmp:
        env, model, tasks = build(args.env, args.tasks, args.condition, Path(tmp) / "ws", args.sandboxed)
        config = StreamConfig(run="bench", runs_dir=str(Path(tmp) / "runs"), condition=args.condition)
        start = time.perf_counter()
        summary = run_stream(TimedEnv(env, env_timer), TimedModel(model, model_timer), config,
                             embedder=HashEmbedder(256), tasks=tasks)
        wall = time.perf_counter() - start
    records = summary.records
    steps = sum(r.steps for r in records)
    outside = wall - model_timer.seconds
    harness = outside - env_timer.seconds
    result = {
        "env": args.env, "condition": args.condition, "sandboxed": args.sandboxed, "tasks": len(records),
        "success": sum(r.success for r in records) / len(records), "agent_steps": steps,
        "model_calls": model_timer.calls, "wall_s": round(wall, 3), "model_s": round(model_timer.seconds, 3),
        "env_s": round(env_timer.seconds, 3), "harness_s": round(harness, 3),
        "steps_per_s_excl_model": round(steps / outside, 1) if outside > 0 else float("inf"),
        "calls_per_s_excl_model": round(model_timer.calls / outside, 1) if outside > 0 else float("inf"),
        "share_outside_model": round(outside / wall, 4),
        "ms_per_task_excl_model": round(1000 * outside / len(records), 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['tasks']} tasks ({args.env}, {args.condition}{', sandboxed' if args.sandboxed else ''}): "
              f"{steps} agent steps, {model_timer.calls} model calls, success {result['success']:.0%}")
        print(f"wall {wall:.2f} s = model {model_timer.seconds:.2f} s + env {env_timer.seconds:.2f} s + "
              f"harness {harness:.2f} s; {100 * outside / wall:.1f}% of wall time outside the model")
        print(f"agent steps per second excluding model time: {result['steps_per_s_excl_model']} (target >= 200); "
              f"model calls per second excluding model time: {result['calls_per_s_excl_model']}")
    return result


if __name__ == "__main__":
    main()
