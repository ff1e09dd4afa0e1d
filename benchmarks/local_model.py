"""Speed of the embedded model and how much of a growing ReAct context the server's prompt cache saves.

Starts the bundled Qwen2.5-Coder-1.5B-Instruct Q4_K_M (or ``--model-path``) with `LocalServer`, then:

1. prompt tokens/s: one long fresh prompt (~750 tokens), ``max_tokens=1``: by llama.cpp's log and by the wall clock
   of the call (the call's latency; with ``--logits_all True`` the log's prompt eval time missed most of it);
2. generation tokens/s: one answer of up to 64 tokens;
3. a 10-step conversation that grows like an agent's context (reply + observation appended each step): the share
   of prompt tokens the server did not have to evaluate (target >= 80 %).

Token counts come from the server's usage; evaluated prompt tokens and timings from llama.cpp's own log lines
(``prompt eval time = ... / N tokens``, ``eval time = ... / N runs``).

    python benchmarks/local_model.py [--model-path GGUF] [--steps 10] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from skilltransfer.llm.local import LocalModel, LocalServer

PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")

API_DOC = " ".join(
    f"apis.app{i}.action_{j}(name: str, limit: int = 10) -> list[dict]: returns the records of app {i} that match "
    f"the name, newest first; raises ValueError on an unknown name." for i in range(4) for j in range(4))


class LogReader:
    """Reads what the server appended to its log since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.is_file() else 0

    def new(self) -> str:
        time.sleep(0.2)  # the server flushes its timing lines right after answering
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode(errors="replace")
        self.offset += len(text.encode())
        return text


def timings(log: str) -> tuple[float, int, float, int]:
    """(prompt ms, prompt tokens evaluated, generation ms, generated tokens) summed over the log excerpt."""
    p_ms = sum(float(m.group(1)) for m in PROMPT_EVAL.finditer(log))
    p_n = sum(int(m.group(2)) for m in PROMPT_EVAL.finditer(log))
    g_ms = sum(float(m.group(1)) for m in EVAL.finditer(log))
    g_n = sum(int(m.group(2)) for m in EVAL.finditer(log))
    return p_ms, p_n, g_ms, g_n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-path", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--ram-cache", action="store_true", help="start the server with --cache (RAM state cache)")
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads (default: all cores; 1 is far faster on a busy shared machine)")
    args = parser.parse_args()
    server = LocalServer(args.model_path, ctx=args.ctx, threads=args.threads, verbose=True,
                         ram_cache=args.ram_cache)
    started = time.perf_counter()
    server.start()
    load_s = time.perf_counter() - started
    assert server.log_path is not None
    model = LocalModel(server=server)
    result: dict[str, object] = {"model": server.alias, "threads": server.threads, "ram_cache": server.ram_cache,
                                 "server_start_s": round(load_s, 1)}
    try:
        reader = LogReader(server.log_path)
        fresh = [{"role": "system", "content": "Documentation. " + API_DOC},
                 {"role": "user", "content": "Which function lists the records of app 2? Answer with its name."}]
        out = model.complete(fresh, max_tokens=1, temperature=0)
        p_ms, p_n, _, _ = timings(reader.new())
        result["prompt_tokens"] = out.prompt_tokens
        result["prompt_tokens_per_s"] = round(p_n / (p_ms / 1000), 1) if p_ms else None
        result["prompt_tokens_per_s_wall"] = round(out.prompt_tokens / out.latency_s, 1) if out.latency_s else None

        gen = [{"role": "user", "content": "Write a Python function that reverses a string, with a docstring."}]
        out = model.complete(gen, max_tokens=64, temperature=0)
        _, _, g_ms, g_n = timings(reader.new())
        result["generated_tokens"] = out.completion_tokens
        result["generation_tokens_per_s"] = round(g_n / (g_ms / 1000), 1) if g_ms else None

        messages = [{"role": "system", "content": "You are an agent that acts by writing Python. " + API_DOC},
                    {"role": "user", "content": "Task: find the newest record named 'alice' in app 1 and print it."}]
        total_prompt, total_evaluated, steps = 0, 0, []
        for step in range(args.steps):
            out = model.complete(messages, max_tokens=24, temperature=0)
            _, evaluated, _, _ = timings(reader.new())
            total_prompt += out.prompt_tokens
            total_evaluated += evaluated
            steps.append({"step": step + 1, "prompt_tokens": out.prompt_tokens, "evaluated": evaluated,
                          "latency_s": round(out.latency_s, 2)})
            messages = [*messages, {"role": "assistant", "content": out.text},
                        {"role": "user", "content": f"Observation {step + 1}: [{{'id': {step}, 'name': 'alice', "
                                                    f"'app': 1, 'created': '2024-0{step % 9 + 1}-01'}}]"}]
        result["conversation_steps"] = steps
        result["conversation_prompt_tokens"] = total_prompt
        result["conversation_prompt_tokens_evaluated"] = total_evaluated
        share = 1 - total_evaluated / total_prompt if total_prompt else 0.0
        result["prompt_cache_share"] = round(share, 3)
        result["target_met"] = share >= 0.8
    finally:
        model.close()
        server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
