"""Sandboxed env throughput: episode start-up time (spawn worker + setup) and steps per second with a trivial action.

Usage: ``python benchmarks/env_steps.py [--starts 20] [--steps 2000] [--in-process] [--scienceworld N]``. Prints one
JSON object. Uses an episode whose namespace holds only the ``complete_task`` service stub, so the figures measure
the sandbox machinery, not an env's own setup cost; ``--service-calls`` also times actions that call a harness
service (one round trip over the worker<->harness channel each). Target: >= 200 steps/s on 2 cores.

``--scienceworld N`` (needs Java) measures the ScienceWorld env instead, on the first N tasks of its ``dev30``
stream, each played along its gold path: the first episode's start-up (the simulator's JVM starts), start-up per task
after the first (load into the same JVM, the benchmark's first "look around", a sandbox worker), simulator steps per
second with one ``act`` per code action (as a ReAct agent acts) and with the whole path in one code action, and the
simulator's own steps per second on the harness side without the sandbox. Targets: >= 15 steps/s, <= 2 s start-up.
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

from skilltransfer.envs.base import Submission, WorkspaceEpisode
from skilltransfer.protocols import Score, TaskSpec
from skilltransfer.sandbox import Services
from skilltransfer.sandbox.services import function

TASK = TaskSpec(id="bench", instruction="count", difficulty=1, template="bench")


def _never(workspace: Path, submission: Submission) -> Score:
    return Score(reward=0.0, success=False)


def _episode(root: Path, index: int, sandboxed: bool) -> WorkspaceEpisode:
    workspace = root / f"ep{index}"
    workspace.mkdir()
    services = Services()
    services.register("echo", lambda value=None: value)
    return WorkspaceEpisode(TASK, workspace, docs="", evaluator=_never, sandboxed=sandboxed, services=services,
                            bindings={"echo": function("echo")})


def measure(starts: int, steps: int, sandboxed: bool = True, service_calls: int = 0) -> dict[str, object]:
    """Start-up seconds (median, max) over ``starts`` episodes; steps/s over ``steps`` trivial actions; with
    ``service_calls``, also service round trips per second (one call per action)."""
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
        began = time.perf_counter()
        for _ in range(service_calls):
            episode.step("counter = echo(counter + 1)")
        calls_elapsed = time.perf_counter() - began
        final = episode.step("print(counter)").output.strip()
        episode.close()
    if last != str(steps) or final != str(steps + service_calls):
        raise RuntimeError(f"expected the counter to reach {steps}, then {steps + service_calls}: {last!r}, {final!r}")
    result: dict[str, object] = {
        "sandboxed": sandboxed, "cpus": os.cpu_count(), "python": platform.python_version(),
        "startup_s_median": round(statistics.median(startup), 4), "startup_s_max": round(max(startup), 4),
        "steps": steps, "steps_per_s": round(steps / elapsed, 1), "ms_per_step": round(1000 * elapsed / steps, 3)}
    if service_calls:
        result["service_steps_per_s"] = round(service_calls / calls_elapsed, 1)
    return result


def measure_scienceworld(n_tasks: int, sandboxed: bool = True) -> dict[str, object]:
    """ScienceWorld start-up and step rates over the gold paths of the first ``n_tasks`` tasks of ``dev30``."""
    from skilltransfer.envs.opening import select_tasks
    from skilltransfer.envs.scienceworld import ScienceWorldEnv

    with tempfile.TemporaryDirectory(prefix="skilltransfer-bench-") as folder:
        env = ScienceWorldEnv(workdir=Path(folder), sandboxed=sandboxed)
        tasks = select_tasks(env, stream="dev30", limit=n_tasks)
        startup: list[float] = []
        taken = {"per_action": 0, "whole": 0, "raw": 0}
        seconds = dict.fromkeys(taken, 0.0)
        for task in tasks:
            gold = env.gold_actions(task)
            for mode in taken:
                began = time.perf_counter()
                episode = env.start(task)
                episode.step("pass")
                startup.append(time.perf_counter() - began)
                began = time.perf_counter()
                if mode == "whole":
                    episode.step(env.reference_solution(task))
                for action in gold if mode != "whole" else []:
                    if episode.done:
                        break
                    if mode == "per_action":
                        episode.step(f"print(act({action!r}))")
                    else:
                        episode.session.act(action)
                seconds[mode] += time.perf_counter() - began
                taken[mode] += len(episode.session.trace) - 1
                score = episode.evaluate()
                episode.close()
                if not score.success:
                    raise RuntimeError(f"the gold path of {task.id} did not succeed ({mode}): {score.checks}")
        env.close()
    first, later = startup[0], startup[1:]
    return {"env": "scienceworld", "sandboxed": sandboxed, "cpus": os.cpu_count(), "tasks": [t.id for t in tasks],
            "first_startup_s": round(first, 2),
            "startup_s_median": round(statistics.median(later), 3), "startup_s_max": round(max(later), 3),
            "sim_steps": taken["per_action"],
            "steps_per_s_one_act_per_action": round(taken["per_action"] / seconds["per_action"], 1),
            "steps_per_s_whole_path_per_action": round(taken["whole"] / seconds["whole"], 1),
            "steps_per_s_simulator_alone": round(taken["raw"] / seconds["raw"], 1),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20, help="episodes to start for the start-up figure")
    parser.add_argument("--steps", type=int, default=2000, help="trivial actions to time")
    parser.add_argument("--service-calls", type=int, default=1000, help="actions that call a harness service to time")
    parser.add_argument("--in-process", action="store_true", help="measure the unsandboxed runner instead")
    parser.add_argument("--scienceworld", type=int, default=0, metavar="N",
                        help="measure the ScienceWorld env on N dev30 tasks instead")
    args = parser.parse_args()
    if args.scienceworld:
        print(json.dumps(measure_scienceworld(args.scienceworld, sandboxed=not args.in_process)))
        return
    print(json.dumps(measure(args.starts, args.steps, sandboxed=not args.in_process,
                             service_calls=args.service_calls)))


if __name__ == "__main__":
    main()
