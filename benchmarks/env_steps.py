"""Sandboxed env throughput: episode start-up time (spawn worker + setup) and steps per second with a trivial action.

Usage: ``python benchmarks/env_steps.py [--starts 20] [--steps 2000] [--in-process]``. Prints one JSON object.
Uses ``skilltransfer.sandbox:scratch_setup`` (a namespace with only ``complete_task``), so the figures measure the
sandbox machinery, not an env's own setup cost. Target: >= 200 steps/s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from skilltransfer.envs.base import WorkspaceEpisode
from skilltransfer.protocols import Score, TaskSpec

SETUP = "skilltransfer.sandbox:scratch_setup"
TASK = TaskSpec(id="bench", instruction="count", difficulty=1, template="bench")


def _never(workspace: Path, answer: object) -> Score:
    return Score(reward=0.0, success=False)


def _episode(root: Path, index: int, sandboxed: bool) -> WorkspaceEpisode:
    workspace = root / f"ep{index}"
    workspace.mkdir()
    return WorkspaceEpisode(TASK, workspace, setup=SETUP, docs="", evaluator=_never, sandboxed=sandboxed)


def measure(starts: int, steps: int, sandboxed: bool = True) -> dict[str, object]:
    """Start-up seconds (median, max) over ``starts`` episodes; steps/s over ``steps`` trivial actions."""
    with tempfile.TemporaryDirectory(prefix="skilltransfer-bench-") as folder:
        root = Path(folder)
        startup = []
        for index in range(starts):
            began = time.perf_counter()
            episode = _episode(root, index, sandboxed)
            episode.step("pass")  # the first reply proves the worker is up and the namespace built
            startup.append(time.perf_counter() - began)
            episode.close()
        episode = _episode(root, starts, sandboxed)
        episode.step("counter = 0")
        began = time.perf_counter()
        for _ in range(steps):
            episode.step("counter += 1\nprint(counter)")
        elapsed = time.perf_counter() - began
        last = episode.step("print(counter)").output.strip()
        episode.close()
    if last != str(steps):
        raise RuntimeError(f"expected the counter to reach {steps}, got {last!r}")
    return {"sandboxed": sandboxed, "cpus": os.cpu_count(), "python": platform.python_version(),
            "startup_s_median": round(statistics.median(startup), 4), "startup_s_max": round(max(startup), 4),
            "steps": steps, "steps_per_s": round(steps / elapsed, 1), "ms_per_step": round(1000 * elapsed / steps, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20, help="episodes to start for the start-up figure")
    parser.add_argument("--steps", type=int, default=2000, help="trivial actions to time")
    parser.add_argument("--in-process", action="store_true", help="measure the unsandboxed runner instead")
    args = parser.parse_args()
    print(json.dumps(measure(args.starts, args.steps, sandboxed=not args.in_process)))


if __name__ == "__main__":
    main()
