"""One stream in three rooms (docs/architecture.md's runner row): the build (`runner/stream_build.py`) makes the parts,
the loop (`runner/stream.py`) runs them, the record (`runner/stream_record.py`) writes what each task did. Each holds
its own job, imports point one way (loop -> record -> build), and the paper's loop reads in one screen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import skilltransfer

RUNNER = Path(skilltransfer.__file__).parent / "runner"
ROOMS = {"build": "stream_build", "loop": "stream", "record": "stream_record"}
ONE_SCREEN = 50
"""The most lines of code (docstring aside) in each function of the paper's loop."""


def tree(module: str) -> ast.Module:
    return ast.parse((RUNNER / f"{module}.py").read_text())


def imported(module: str) -> set[str]:
    """The runner's stream modules ``module`` imports (at any depth, deferred ones included)."""
    names = set()
    for node in ast.walk(tree(module)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("skilltransfer.runner."):
            names.add(node.module.rsplit(".", 1)[1])
    return names & set(ROOMS.values())


def constructed(module: str) -> set[str]:
    """The names ``module`` calls as constructors (capitalised callees)."""
    return {node.func.id for node in ast.walk(tree(module))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id[:1].isupper()}


def test_imports_run_one_way_from_the_loop_to_the_record_to_the_build() -> None:
    assert imported(ROOMS["build"]) == set()
    assert imported(ROOMS["record"]) == {ROOMS["build"]}
    assert imported(ROOMS["loop"]) == {ROOMS["build"], ROOMS["record"]}


@pytest.mark.parametrize(("made", "room"), [
    ("StreamParts", "build"), ("RunSettings", "build"), ("SkillMemory", "build"), ("Inducer", "build"),
    ("TaskRecord", "record"), ("TrajectoryLog", "record"), ("RetrievedSkill", "record"), ("ContextAccount", "record"),
])
def test_each_part_is_made_in_its_own_room(made: str, room: str) -> None:
    makers = {name for name, module in ROOMS.items() if made in constructed(module)}
    assert makers == {room}


def code_lines(function: ast.FunctionDef) -> int:
    body = function.body[1:] if isinstance(function.body[0], ast.Expr) \
        and isinstance(function.body[0].value, ast.Constant) else function.body
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


@pytest.mark.parametrize("name", ["run_stream", "_perform_task"])
def test_the_papers_loop_reads_in_one_screen(name: str) -> None:
    function = next(node for node in tree(ROOMS["loop"]).body
                    if isinstance(node, ast.FunctionDef) and node.name == name)
    assert code_lines(function) <= ONE_SCREEN, f"runner/stream.py's {name} grew past one screen"
