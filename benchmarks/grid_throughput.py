"""Throughput of the grid runner: many streams against one mock endpoint with a fixed answer latency.

S streams (the counter env of ``tests/helpers_tinyenv.py``, T tasks each, hash embedder) share one endpoint whose
limit is S: the mock server playing the counter world's roles, in its own process as a real endpoint is. Each answer
takes ``latency`` at the server, and a stream is sequential, so the endpoint's ideal is S / latency calls/s
(32 / 0.2 s = 160/s). Reports tasks/hour, calls/s and their share of the ideal over the whole grid run (target
>= 0.9; also the steady-state share, from the server's request count over the middle 60% of the run), and the
speed-up over running the streams one after another (target >= 25x; measured on the streams of
``--sequential-sample`` envs run with max_concurrency 1, scaled to S), and the grid process's CPU milliseconds per
task (``client_cpu_ms_per_task``: the client is CPU-bound on one core by the GIL). With mixed ``--conditions``
streams differ in length; ``share_of_stream_bound`` then compares the run with its longest stream's calls back to
back.

With ``--max-connections M`` the endpoint's limit is M instead of S and the ideal is min(M, S x W) / latency, W the
tasks a stream runs at once (1 with a skill memory; min(M, 16) for the no-memory baselines, whose tasks are
independent): a grid of few baseline streams keeps the endpoint as busy as many streams do, e.g.
``--conditions task --streams 4 --tasks 128 --max-connections 32 --sequential-sample 1`` (ideal 160 calls/s).

Before the timed run one client is built and closed (`warm_up`): the client's imports (once per process: a grid of
hours never sees them again) are not counted as the grid's start-up ramp.

    python benchmarks/grid_throughput.py [--streams 32] [--tasks 4] [--latency-ms 200] [--conditions subtask+text]
        [--sequential-sample 2] [--in-process] [--max-connections M] [--cli]

With ``--cli`` the timed grid is the user's command instead, ``skilltransfer grid SPEC`` in its own process with its
defaults (live view, endpoint check, cost tracking); its share is over the server's busy span (first request to
last answer: the interpreter's start and imports are not the grid's) and its CPU per task includes them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from skilltransfer.llm import make_model
from skilltransfer.runner.execute import StreamOutcome
from skilltransfer.runner.grid import GridSummary, run_grid
from skilltransfer.runner.plan import plan_streams
from skilltransfer.runner.spec import build_spec
from skilltransfer.runner.stream import parallel_width

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # the counter env (helpers_tinyenv:TinyEnv) is plugged in as module:Class
SERVER = """
import sys
sys.path.insert(0, {tests!r})
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript
from skilltransfer.llm.testing.mock_server import MockServer

def induction(_n, messages):
    return CODE_SKILL if any("Skill format: code" in str(m["content"]) for m in messages) else TEXT_SKILL

with MockServer(CounterScript(induction), latency_s={latency}) as server:
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the parent closes stdin
"""


@contextmanager
def counter_endpoint(latency_s: float, in_process: bool) -> Iterator[str]:
    """The mock server playing the counter world's roles, in its own process (as a real endpoint) or in this one."""
    code = SERVER.format(tests=str(TESTS), latency=latency_s)
    if in_process:
        namespace: dict[str, Any] = {}
        exec(code.split("with MockServer")[0], namespace)
        with namespace["MockServer"](namespace["CounterScript"](namespace["induction"]), latency_s=latency_s) as srv:
            yield srv.url
        return
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


def warm_up(url: str) -> None:
    """Build and close one client of the endpoint: its modules are imported once per process, not in the timed grid."""
    model = make_model({"name": "openai", "base_url": url, "model": "mock"})
    getattr(model, "close", lambda: None)()


def server_stats(url: str, reset: bool = False) -> dict[str, Any]:
    """The server's /stats (requests served, most in flight); {} if it has none."""
    try:
        with urllib.request.urlopen(f"{url.removesuffix('/v1')}/stats{'?reset=1' if reset else ''}") as resp:
            return dict(json.load(resp))
    except (OSError, ValueError):
        return {}


class RequestSampler:
    """Samples the server's request count every ``every_s`` seconds, for the steady-state rate mid-run."""

    def __init__(self, url: str, every_s: float = 0.25) -> None:
        self.url, self.every_s = url, every_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            count = server_stats(self.url).get("requests")
            if count is not None:
                self.samples.append((time.perf_counter(), int(count)))

    def __enter__(self) -> RequestSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def rate(self, start: float, end: float) -> float | None:
        """Requests/s between the samples nearest to the middle 60% of [start, end]."""
        lo, hi = start + 0.2 * (end - start), start + 0.8 * (end - start)
        window = [(t, n) for t, n in self.samples if lo <= t <= hi]
        if len(window) < 2:
            return None
        (t0, n0), (t1, n1) = window[0], window[-1]
        return (n1 - n0) / (t1 - t0)


def grid_data(out: Path, url: str, streams: int, tasks: int, conditions: list[str], concurrency: int,
              connections: int | None = None) -> dict[str, Any]:
    """A grid of ``streams`` streams: counter envs (distinct targets) x ``conditions``; the endpoint's limit is
    ``connections`` (default ``streams``)."""
    n_envs = -(-streams // len(conditions))
    envs = {f"counter{i}": {"env": "helpers_tinyenv:TinyEnv",
                            "args": {"targets": [(i + k) % 9 + 1 for k in range(tasks)]}} for i in range(n_envs)}
    return {"name": "bench", "out": str(out), "max_concurrency": concurrency, "envs": envs, "conditions": conditions,
            "models": {"mock": {"name": "openai", "base_url": url, "model": "mock",
                                "max_concurrency": connections or streams,
                                "timeout_s": 60, "backoff_base_s": 0}},
            "embedder": "hash:64"}


def run(data: dict[str, Any], envs: int | None = None) -> tuple[float, float, GridSummary, float]:
    """(start, seconds, summary, CPU seconds of this process) of one grid run (only the first ``envs`` envs, all
    conditions, when given)."""
    spec = build_spec(data)
    if envs is not None:
        spec.phases[0].envs = dict(list(spec.phases[0].envs.items())[:envs])
    start, cpu = time.perf_counter(), time.process_time()
    summary = run_grid(spec)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if summary.failed:
        raise SystemExit(f"streams failed: {[(o.run, o.error) for o in summary.failed]}")
    return start, elapsed, summary, cpu


def run_cli(data: dict[str, Any], url: str, folder: Path) -> tuple[float, float, GridSummary, float]:
    """(start, busy seconds at the server, summary, CPU seconds of the command) of ``skilltransfer grid`` on the
    spec ``data``, run as a user runs it."""
    spec = folder / "bench.yaml"
    spec.write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "skilltransfer", "grid", str(spec), "--allow-import", "helpers_tinyenv"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"skilltransfer grid failed ({done.returncode}): {done.stderr[-2000:]}")
    stats = server_stats(url)
    busy = float(stats["last_answer_at"]) - float(stats["first_request_at"])
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    status = json.loads((Path(data["out"]) / "status.json").read_text())
    outcomes = [StreamOutcome(**row) for row in status["streams"].values()]
    start = float(stats["first_request_at"]) - (time.time() - time.perf_counter())  # on this process's perf clock
    return start, busy, GridSummary(Path(data["out"]), outcomes, busy, "thread"), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--tasks", type=int, default=16,
                        help="tasks per stream (short streams are dominated by start-up and finish ramps)")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--conditions", default="subtask+text", help="comma-separated; streams cycle through them")
    parser.add_argument("--sequential-sample", type=int, default=2,
                        help="envs whose streams (one per condition) run one after another (0: all)")
    parser.add_argument("--max-connections", type=int, default=None,
                        help="the endpoint's limit (default: --streams)")
    parser.add_argument("--cli", action="store_true",
                        help="time `skilltransfer grid SPEC` (the user's command, its own process) instead of run_grid")
    parser.add_argument("--in-process", action="store_true",
                        help="run the mock server in this process (it then shares the GIL with the streams)")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    conditions = [c for c in args.conditions.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp, counter_endpoint(latency, args.in_process) as url:
        data = grid_data(Path(tmp) / "grid", url, args.streams, args.tasks, conditions, args.streams,
                         args.max_connections)
        warm_up(url)
        server_stats(url, reset=True)
        with RequestSampler(url) as sampler:
            start, seconds, grid, cpu_s = run_cli(data, url, Path(tmp)) if args.cli else run(data)
        steady = sampler.rate(start, start + seconds)
        most = server_stats(url).get("max_in_flight")
        seq_data = grid_data(Path(tmp) / "seq", url, args.streams, args.tasks, conditions, 1, 1)  # task by task
        _, seq_seconds, seq, _ = run(seq_data, envs=args.sequential_sample or None)
    streams, calls, tasks = len(grid.outcomes), grid.model_calls, grid.tasks_ran
    connections = args.max_connections or args.streams
    widths = [parallel_width(plan.config) for plan in plan_streams(build_spec(data))]
    ideal = min(connections, sum(widths)) / latency
    bound_s = max(o.model_calls for o in grid.outcomes) * latency  # the longest stream's calls back to back
    per_stream_seq = seq_seconds / len(seq.outcomes)
    result = {
        "streams": streams, "max_connections": connections, "tasks_at_once": sum(widths),
        "tasks_per_stream": args.tasks, "conditions": conditions, "latency_ms": args.latency_ms,
        "tasks": tasks, "model_calls": calls, "seconds": round(seconds, 2),
        "tasks_per_hour": round(tasks / seconds * 3600), "calls_per_s": round(calls / seconds, 1),
        "ideal_calls_per_s": round(ideal, 1), "share_of_ideal": round(calls / seconds / ideal, 3),
        "steady_calls_per_s": round(steady, 1) if steady else None,
        "steady_share_of_ideal": round(steady / ideal, 3) if steady else None,
        "longest_stream_bound_s": round(bound_s, 2), "share_of_stream_bound": round(bound_s / seconds, 3),
        "sequential_streams_measured": len(seq.outcomes), "sequential_seconds_per_stream": round(per_stream_seq, 2),
        "sequential_calls_per_s": round(seq.model_calls / seq_seconds, 2),
        "sequential_tasks_per_hour": round(seq.tasks_ran / seq_seconds * 3600),
        "speedup_over_sequential": round(per_stream_seq * streams / seconds, 1),
        "max_in_flight_at_server": most,
        "server": "in-process" if args.in_process else "separate process",
        "timed": "skilltransfer grid (busy span at the server)" if args.cli else "run_grid",
        # CPU of the grid's process (the server's too with --in-process): less sensitive to other load than the shares
        "client_cpu_ms_per_task": round(cpu_s / tasks * 1000, 2),
    }
    result["targets_met"] = {"share_of_ideal>=0.9": result["share_of_ideal"] >= 0.9,
                             "speedup>=25": result["speedup_over_sequential"] >= 25}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
