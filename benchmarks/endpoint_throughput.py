"""Throughput of the OpenAI-compatible client with many concurrent callers against the mock server.

N callers (threads) share one endpoint; each answer takes ``latency`` at the server, so the ideal rate is
N / latency calls/s (32 / 0.2 s = 160/s). Reports the achieved rate, its share of the ideal (target >= 0.9) and the
speed-up over one caller, plus the most requests the server saw in flight. The server runs in its own process (as a
real one does) unless ``--in-process``.

    python benchmarks/endpoint_throughput.py [--callers 32] [--latency-ms 200] [--seconds 4] [--in-process]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.testing.mock_server import MockServer

MESSAGES = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Next action?"}]


def run(url: str, callers: int, seconds: float, warmup_s: float = 0.5) -> float:
    """Steady-state calls/s of ``callers`` threads calling in a loop (one shared model): completions inside a
    ``seconds`` window that starts after ``warmup_s``; callers start spread over one server latency, as
    independent agent streams are not in lockstep."""
    model = OpenAIChatModel(ModelConfig(base_url=url, model="mock", max_concurrency=callers,
                                        timeout_s=30, backoff_base_s=0))
    model.complete(MESSAGES)  # warm the connection pool
    errors: list[BaseException] = []
    done: list[float] = []
    start = time.perf_counter() + 0.2
    window = (start + warmup_s, start + warmup_s + seconds)

    def caller(offset: float) -> None:
        time.sleep(max(0.0, start + offset - time.perf_counter()))
        try:
            while time.perf_counter() < window[1]:
                model.complete(MESSAGES)
                done.append(time.perf_counter())
        except BaseException as exc:  # reported after the run
            errors.append(exc)

    spread = warmup_s / 2
    threads = [threading.Thread(target=caller, args=(spread * i / callers,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    model.close()
    if errors:
        raise errors[0]
    return sum(window[0] <= t < window[1] for t in done) / seconds


@contextmanager
def mock_endpoint(latency_s: float, in_process: bool) -> Iterator[tuple[str, Callable[[bool], int]]]:
    """A mock server (its own process unless ``in_process``): yields its URL and a max-in-flight reader."""
    if in_process:
        with MockServer(None, latency_s=latency_s) as server:
            def in_flight(reset: bool) -> int:
                value = server.max_in_flight
                if reset:
                    server.max_in_flight = 0
                return value

            yield server.url, in_flight
        return
    proc = subprocess.Popen([sys.executable, "-m", "skilltransfer.llm.testing.mock_server",
                             "--latency-ms", str(latency_s * 1000)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        root = url.removesuffix("/v1")

        def in_flight(reset: bool) -> int:
            with urllib.request.urlopen(f"{root}/stats{'?reset=1' if reset else ''}") as resp:
                return int(json.load(resp)["max_in_flight"])

        yield url, in_flight
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=4.0, help="measurement window per run")
    parser.add_argument("--in-process", action="store_true",
                        help="run the mock server in this process (shares the GIL with the callers)")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    with mock_endpoint(latency, args.in_process) as (url, in_flight):
        single = run(url, 1, args.seconds)
        in_flight(True)
        many = run(url, args.callers, args.seconds)
        most = in_flight(False)
    ideal = args.callers / latency
    result = {"callers": args.callers, "latency_ms": args.latency_ms, "window_s": args.seconds,
              "server": "in-process" if args.in_process else "separate process",
              "calls_per_s": round(many, 1), "ideal_calls_per_s": round(ideal, 1),
              "share_of_ideal": round(many / ideal, 3), "single_caller_calls_per_s": round(single, 2),
              "speedup_over_one_caller": round(many / single, 1), "max_in_flight_at_server": most,
              "target_met": many / ideal >= 0.9}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
