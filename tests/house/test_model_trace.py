"""docs/architecture.md's trace "From ``--model NAME@URL`` to the request", held true by following the calls.

``skilltransfer run --model mock@URL`` runs in-process under a profiler (`sys.setprofile`) with every layer of the
chain on (``--cache``, a task timeout, the progress bar) against the mock server, whose first answer is a 429 (a
retried request). Two routes are recorded, each as the package files in the order they are first entered:

* the setting: every function handed the model setting as an argument (``self`` included) in one of its forms: the
  ``--model`` string or its URL, the `ModelOptions` the flags are collected into, a dict or list holding one of
  these (the spec keys, a parsed string, a dumped config), or a `ModelConfig` (a stream's `ModelSpec`) of that URL;
* the call: every function that runs while a model call is in flight, from the outermost layer's ``complete`` to
  its return.

The two tables of the section must name exactly these files in this order: a file the call no longer passes, or
one it passes and the docs leave out, fails here.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from helpers_cli import TINY
from helpers_tinyenv import CounterScript

import skilltransfer
from skilltransfer.cli import main
from skilltransfer.commands.option_groups import ModelOptions
from skilltransfer.llm.chain import ORDER, Layer
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.testing.mock_server import MockServer

PACKAGE = Path(skilltransfer.__file__).resolve().parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
SECTION = "**From `--model NAME@URL` to the request.**"


class Tracer:
    """Records, per route, the package files in the order their functions are first entered (see the module
    docstring)."""

    def __init__(self, spec: str, url: str) -> None:
        self.spec, self.url = spec, url
        self.setting: list[str] = []
        self.call: list[str] = []
        self.layers: list[str] = []
        """The chain's ``complete`` methods in the order the first model call entered them."""
        self._in_call = threading.local()
        self._root = str(PACKAGE) + "/"

    def holds_setting(self, value: Any, depth: int = 0) -> bool:
        if isinstance(value, str):
            return value in (self.spec, self.url)
        if isinstance(value, ModelOptions):
            return value.spec == self.spec
        if isinstance(value, ModelConfig):
            return getattr(value, "base_url", None) == self.url
        if depth < 3 and isinstance(value, dict):
            return any(self.holds_setting(item, depth + 1) for item in value.values())
        if depth < 3 and isinstance(value, list | tuple):
            return any(self.holds_setting(item, depth + 1) for item in value)
        return False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if not code.co_filename.startswith(self._root):
            return
        where = code.co_filename[len(self._root):]
        top = getattr(self._in_call, "frame", None)
        if event == "return":
            if frame is top:
                self._in_call.frame = None
                self._in_call.first_done = True
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4)
                                 + bool(code.co_flags & 8)]
        arguments = frame.f_locals
        if top is None and code.co_name == "complete" \
                and isinstance(arguments.get("self"), Layer | OpenAIChatModel):
            self._in_call.frame = top = frame
        if top is not None:
            _first(self.call, where)
            if code.co_name == "complete" and not getattr(self._in_call, "first_done", False):
                self.layers.append(type(arguments.get("self")).__name__)
        if any(self.holds_setting(arguments.get(name)) for name in names):
            _first(self.setting, where)


def _first(seen: list[str], where: str) -> None:
    if where not in seen:
        seen.append(where)


def documented() -> tuple[list[str], list[str]]:
    """The files the section's two tables name, in their order (the setting's, the call's)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    tables: list[list[str]] = []
    rows: list[str] | None = None
    for line in section.splitlines()[1:]:
        if line.startswith("| #"):
            rows = []
            tables.append(rows)
        elif line.startswith("|") and rows is not None:
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if cells[0].isdigit():
                rows.append(re.fullmatch(r"`([^`]+)`", cells[1]).group(1))  # type: ignore[union-attr]
        elif rows is not None and len(tables) == 2:
            break
        else:
            rows = None
    assert len(tables) == 2, "the section has two numbered tables: the setting's files, then the call's"
    return tables[0], tables[1]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Tracer:
    out = tmp_path_factory.mktemp("trace")
    monkeypatch = pytest.MonkeyPatch()
    with MockServer(CounterScript(), context_window=8192, fault_plan=["rate_limit"]) as server:
        tracer = Tracer(f"mock@{server.url}", server.url)
        argv = ["run", "--env", TINY, "--condition", "task", "--model", tracer.spec, "--limit", "1",
                "--out", str(out / "run"), "--no-sandbox", "--cache", str(out / "cache.sqlite"),
                "-c", "agent.task_timeout_s=600"]
        monkeypatch.setattr(sys, "argv", ["skilltransfer", *argv])
        code: object = 0
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            main()
        except SystemExit as exit_:
            code = exit_.code
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
            monkeypatch.undo()
        assert not code
        assert server.faults == ["rate_limit"]  # the first request was retried
    return tracer


def test_the_model_setting_passes_the_files_the_docs_name_in_their_order(traced: Tracer) -> None:
    setting, _ = documented()
    assert setting == traced.setting, _differences("the setting", setting, traced.setting)


def test_a_model_call_runs_the_files_the_docs_name_in_their_order(traced: Tracer) -> None:
    _, call = documented()
    assert call == traced.call, _differences("the call", call, traced.call)


def test_the_first_call_passes_the_chains_layers_in_its_order(traced: Tracer) -> None:
    layers = [name for name in traced.layers if name in {layer.__name__ for layer in ORDER}]
    assert layers == ["TimedModel", "ReportingModel", "ReportingModel", "CachedModel"]
    assert traced.layers[len(layers)] == "OpenAIChatModel"


def _differences(route: str, docs: list[str], traced: list[str]) -> str:
    return (f"docs/architecture.md's table of {route} and the traced run differ:\n"
            f"  named but not passed: {[f for f in docs if f not in traced]}\n"
            f"  passed but not named: {[f for f in traced if f not in docs]}\n"
            f"  traced order: {traced}")

