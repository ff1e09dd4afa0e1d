"""CPython 3.11's AST constructor is not thread-safe (gh-106905): every AST conversion of the harness takes one lock.

The stress test provokes the race the way it happened in a grid: 16 threads parse agent code, code skills, plans,
comparators and tracebacks through the package's own functions while a garbage collector runs Python finalisers in
between (a thread switch inside a conversion) and a grid of streams runs beside them.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript

from skilltransfer.agents.harness.grounding import called_names
from skilltransfer.coordination.writer import parse_plan_reply
from skilltransfer.envs.office.safe_lambda import compile_lambda
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.runner.grid import run_grid
from skilltransfer.runner.spec import load_spec
from skilltransfer.sandbox import skill_body_problem
from skilltransfer.util import pyast

PACKAGE = Path(__file__).resolve().parents[2] / "skilltransfer"
WORKER_RUNTIME = PACKAGE / "sandbox" / "runtime"
AGENT_CODE = "\n".join(
    f"rows = [(i, {{k: v for k, v in apis.files.list({n})}}) for i in range({n})]\nprint(len(rows), f(g(h({n}))))"
    for n in range(40))
SKILL_CODE = "\n".join(f'def step_{n}(apis, x):\n    """Step {n}."""\n    return [y * {n} for y in x]'
                       for n in range(40))
PLAN_NODES = [{"id": f"n{n}", "instructions": f"do step {n}", "needs": [f"n{n - 1}"] if n else []} for n in range(30)]
PLAN_REPLY = "```json\n" + str({"nodes": PLAN_NODES}) + "\n```"  # a Python literal, not JSON: literal_eval


def _direct_ast_calls(path: Path) -> list[str]:
    """Calls in ``path`` that convert a syntax tree without the lock: ast.parse, ast.literal_eval, compile."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                else func.id if isinstance(func, ast.Name) else "")
        if name in ("ast.parse", "ast.literal_eval", "compile"):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {name}")
    return found


def test_the_package_converts_syntax_trees_only_through_the_lock():
    """Only `skilltransfer.util.pyast` and the sandbox worker's own runtime (a process of its own) call the parser."""
    allowed = {PACKAGE / "util" / "pyast.py"}
    offenders = [hit for path in sorted(PACKAGE.rglob("*.py"))
                 if path not in allowed and WORKER_RUNTIME not in path.parents
                 for hit in _direct_ast_calls(path)]
    assert offenders == []


class _Finaliser:
    """Garbage whose collection runs Python code: a thread switch inside another thread's AST conversion."""

    alive = 0

    def __init__(self) -> None:
        _Finaliser.alive += 1

    def __del__(self) -> None:
        _Finaliser.alive -= 1
        sum(range(40))


def _churn(stop: threading.Event) -> None:
    """Keep a few thousand finaliser cycles waiting for the collector (bounded: the collector lags under load)."""
    while not stop.is_set():
        if _Finaliser.alive > 4000:
            time.sleep(0.0005)
            continue
        for _ in range(200):
            a, b = _Finaliser(), _Finaliser()
            a.other, b.other = b, a  # type: ignore[attr-defined]


def _formatted_key_error() -> str:
    """A formatted traceback: 3.11's traceback module parses the failing line (the standard library's ast.parse)."""
    try:
        {}["missing"]["deeper"]
    except KeyError as exc:
        return "".join(traceback.format_exception(exc))
    return ""


def _harness_parses(rounds: int, errors: list[BaseException]) -> None:
    for _ in range(rounds):
        try:
            assert "print" in called_names(AGENT_CODE)
            assert skill_body_problem(SKILL_CODE) is None
            assert len(parse_plan_reply(PLAN_REPLY, "t").nodes) == 30
            assert compile_lambda("lambda a, b: a + b * 2")(1, 2) == 5
            assert "KeyError" in _formatted_key_error()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)


@pytest.fixture
def racy_interpreter():
    """Thread switches as often as the interpreter allows, and a collector that runs finalisers meanwhile."""
    interval, stop = sys.getswitchinterval(), threading.Event()
    churn = threading.Thread(target=_churn, args=(stop,), daemon=True)
    sys.setswitchinterval(1e-6)
    churn.start()
    try:
        yield
    finally:
        stop.set()
        churn.join()
        sys.setswitchinterval(interval)
        gc.collect()


def _small_grid(tmp_path: Path, url: str) -> Path:
    spec = {"name": "ast-stress", "out": str(tmp_path / "out"), "max_concurrency": 6, "embedder": "hash:64",
            "envs": {"a": {"env": "helpers_tinyenv:TinyEnv", "args": {"targets": [3, 5]}},
                     "b": {"env": "helpers_tinyenv:TinyEnv", "args": {"targets": [4, 1]}}},
            "models": {"mock": {"name": "openai", "base_url": url, "model": "mock", "max_concurrency": 6,
                                "backoff_base_s": 0, "max_retries": 1}},
            "conditions": ["task+code", "subtask+code", "subtask+text"]}
    path = tmp_path / "spec.yaml"
    path.write_text(__import__("yaml").safe_dump(spec))
    return path


@pytest.mark.slow
def test_parsing_from_16_threads_while_streams_run(tmp_path, racy_interpreter):
    def induction(_n, messages):
        return CODE_SKILL if any("Skill format: code" in str(m["content"]) for m in messages) else TEXT_SKILL

    errors: list[BaseException] = []
    parsers = [threading.Thread(target=_harness_parses, args=(25, errors)) for _ in range(16)]
    with MockServer(CounterScript(induction), latency_s=0.0) as server:
        spec = load_spec(str(_small_grid(tmp_path, server.url)))
        for thread in parsers:
            thread.start()
        summary = run_grid(spec)
        for thread in parsers:
            thread.join()
    assert pyast.stdlib_parse_guarded()
    assert [repr(e) for e in errors] == []
    assert [(o.run, o.error) for o in summary.failed] == [], "\n".join(o.traceback or "" for o in summary.failed)
    assert summary.counts["done"] == 6


def test_a_corrupted_parser_costs_one_retry_then_a_syntax_error(monkeypatch):
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        raise SystemError("AST constructor recursion depth mismatch (before=39, after=35)")

    monkeypatch.setattr(pyast, "_STDLIB_PARSE", flaky)
    with pytest.raises(SyntaxError, match="failed twice"):
        pyast.parse("x = 1")
    assert len(calls) == 2
    assert called_names("x = f(1)") == {"f"}  # callers that treat unparseable code as such fall back, never crash


def test_other_system_errors_are_not_swallowed(monkeypatch):
    def broken(*args, **kwargs):
        raise SystemError("something else")

    monkeypatch.setattr(pyast, "_STDLIB_PARSE", broken)
    with pytest.raises(SystemError, match="something else"):
        pyast.parse("x = 1")
