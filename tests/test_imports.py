"""The package's import graph: every module imports, no import cycle between modules, no cycle between the parts
(floors), and none of the forbidden directions (a world knows no agent, the agent calls the inducer, ...); and only
the run log names a run folder's files.

The graph is read from the source (``ast``): every ``import`` and ``from ... import`` anywhere in a module (inside
functions and ``TYPE_CHECKING`` blocks too), so a deferred import cannot hide a cycle. ``from package import name``
is an edge to ``package.name`` when that is a module, else to the package's ``__init__``.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import skilltransfer

PACKAGE = Path(skilltransfer.__file__).resolve().parent
ROOT = "skilltransfer"

PARTS: dict[str, tuple[str, ...]] = {
    "Face": ("__init__", "cli", "commands", "__main__"),
    "View": ("view",),
    "Report": ("report",),
    "Runner": ("runner",),
    "Settings": ("settings",),
    "Judge": ("judge",),
    "Coordination": ("coordination",),
    "Agents": ("agents",),
    "Lens": ("lens",),
    "Induction": ("induction",),
    "Envs": ("envs",),
    "LLM": ("llm",),
    "Memory": ("memory",),
    "Metrics": ("metrics",),
    "Sandbox": ("sandbox",),
    "Log": ("log",),
    "Base": ("protocols", "errors", "skill", "untrusted", "util", "version"),
}
"""Part -> the top-level modules and subpackages of ``skilltransfer`` it holds."""

NEVER: list[tuple[str, str, str]] = [
    ("Sandbox", "Envs", "the sandbox runs code; it knows no world"),
    ("Envs", "Agents", "a world knows no agent"),
    ("Envs", "Runner", "a world knows no runner"),
    ("Envs", "Memory", "a world knows no skill memory"),
    ("Envs", "Induction", "a world knows no induction"),
    ("Induction", "Agents", "the agent calls the inducer, not the reverse"),
    ("Memory", "Agents", "memory knows no agent"),
    ("Memory", "Envs", "memory knows no world"),
    ("Memory", "Runner", "memory knows no runner"),
    ("Metrics", "Runner", "metrics compute from numbers"),
    ("Metrics", "Agents", "metrics compute from numbers"),
    ("Metrics", "Envs", "metrics compute from numbers"),
    ("LLM", "Agents", "models know no agent"),
    ("LLM", "Envs", "models know no world"),
    ("LLM", "Runner", "models know no runner"),
    ("Agents", "Runner", "the runner drives the agent"),
    ("Agents", "Face", "no CLI below the face"),
    ("Runner", "Face", "no CLI below the face"),
    ("Report", "Face", "no CLI below the face"),
    ("View", "Face", "no CLI below the face"),
    ("Runner", "View", "the viewer reads run logs; the runner knows no viewer"),
    ("Runner", "Report", "running and reporting apart: the runner writes run logs, the report reads them"),
    ("Report", "Runner", "running and reporting apart: the report reads run logs, never the runner"),
    ("Report", "View", "the viewer shows reports; the report knows no viewer"),
    ("View", "Runner", "the viewer reads run logs, never the runner"),
    ("Judge", "Runner", "a judge reads run logs, never the runner"),
    ("Settings", "Runner", "the settings lie below the runner and the report"),
    ("Settings", "Report", "the settings lie below the runner and the report"),
    *[("Log", part, "the run log imports only the base: every reader of runs stands on it") for part in PARTS
      if part not in ("Log", "Base")],
    *[("Base", part, "the base is the floor: it imports nothing of the package") for part in PARTS if part != "Base"],
]
"""Forbidden directions (``/work/shared/house.json`` plus: the base imports no other part)."""


def package_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (``sandbox/runtime`` included)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(module: str, level: int, current: str, is_package: bool) -> str:
    if not level:
        return module
    base = current.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (see the module docstring)."""
    modules = package_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, name, is_package)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def part_of(module: str) -> str:
    """The part a module belongs to (see `PARTS`)."""
    top = module.split(".")[1] if "." in module else "__init__"
    for part, tops in PARTS.items():
        if top in tops:
            return part
    raise AssertionError(f"{module} belongs to no part: add its top-level name to PARTS")


def test_every_module_belongs_to_a_part() -> None:
    for module in package_modules():
        part_of(module)


def test_no_import_cycle_between_modules() -> None:
    try:
        tuple(TopologicalSorter(import_graph()).static_order())
    except CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_parts_form_floors_without_back_edges() -> None:
    """The parts' graph has no cycle (so every arrow points down a floor) and no forbidden direction."""
    edges: dict[str, set[str]] = {part: set() for part in PARTS}
    witness: dict[tuple[str, str], str] = {}
    for module, targets in import_graph().items():
        for target in targets:
            a, b = part_of(module), part_of(target)
            if a != b:
                edges[a].add(b)
                witness.setdefault((a, b), f"{module} -> {target}")
    forbidden = [f"{a} -> {b} ({why}): {witness[(a, b)]}" for a, b, why in NEVER if (a, b) in witness]
    assert not forbidden, "\n".join(forbidden)
    try:
        tuple(TopologicalSorter(edges).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        pytest.fail("parts in a circle: " + "; ".join(witness[(a, b)] for a, b in zip(cycle, cycle[1:], strict=False)))


def test_every_module_imports() -> None:
    for module in package_modules():
        importlib.import_module(module)


_ALONE = r"""
import importlib, json, os, sys, tempfile, traceback
modules, preload = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for name in preload:  # third-party modules only: no module of the package is loaded before a fork
    try:
        importlib.import_module(name)
    except BaseException:
        pass
roots = {name.split(".")[0] for name in modules}
assert not [m for m in sys.modules if m.split(".")[0] in roots]
children = {}
for name in modules:
    children.setdefault(name.rpartition(".")[0], []).append(name)
failures = tempfile.TemporaryFile()  # one line per failure; one process runs at a time, the others wait


def import_then_branch(module):
    # A child imports `module` on top of its package's state, then forks one child per module inside it.
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(module)
        except BaseException:
            inside = sum(name.startswith(module + ".") for name in modules)
            line = traceback.format_exc().strip().splitlines()[-1][-2000:]
            os.write(failures.fileno(), f"{module}: {line}{f' (and its {inside} modules)' if inside else ''}\n"
                     .encode(errors="replace"))
            os._exit(1)
        for child in children.get(module, ()):
            import_then_branch(child)
        os._exit(0)
    os.waitpid(pid, 0)


for root in children[""]:
    import_then_branch(root)
failures.seek(0)
print(json.dumps(failures.read().decode(errors="replace").splitlines()))
"""
"""Imports each module as the first of its package in a forked child, in a tree of forks along the package
hierarchy: Python imports ``a.b.c`` by importing ``a``, then ``a.b``, each in full, then ``a.b.c``, so the state in
which ``a.b.c`` starts is the state after importing ``a.b`` first; a child that imported ``a.b`` forks the children
that import each module inside ``a.b``. Each module is still imported first on a state no other module touched, and
every package's own import runs once instead of once per module below it (the forks took 60 s, now 16 s, on a
quiet 2-core machine)."""


def _imports_alone(modules: list[str], preload: list[str], pythonpath: str) -> list[str]:
    """The modules (of one package) that fail when imported first, with their errors (`_ALONE`)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([pythonpath, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _ALONE, json.dumps(modules), json.dumps(preload)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_module_imports_alone() -> None:
    """Each module first in a fresh interpreter: an import cycle cannot hide behind an import order.

    A fresh interpreter per module spent ~2 s on re-importing torch, pandas and the like, 200 times (6 min under
    load); here one interpreter loads only the third-party modules the package uses, then forks the tree of
    `_ALONE`, in which each module is the first of the package to be imported.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")])}
    listing = subprocess.run(
        [sys.executable, "-c", "import importlib, json, sys\n"
         f"for m in {sorted(package_modules())!r}: importlib.import_module(m)\n"
         "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] not in ('skilltransfer', '__main__'))))"],
        capture_output=True, text=True, env=env, timeout=600, check=True)
    third_party = json.loads(listing.stdout.strip().splitlines()[-1])
    failed = _imports_alone(sorted(package_modules()), third_party, str(PACKAGE.parent))
    assert not failed, "\n".join(failed)


def test_importing_alone_finds_a_module_that_fails_only_when_imported_first(tmp_path: Path) -> None:
    """The check above can fail: ``pkg.a`` fails when imported first (its cycle with ``pkg.b`` meets it half
    made), ``pkg.b`` imports fine first; a package that fails is named with the modules below it."""
    files = {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\nX = 1\n", "pkg/b.py": "from pkg.a import X\n",
             "pkg/sub/__init__.py": "from pkg.sub import c\n", "pkg/sub/c.py": "import pkg.b\n",
             "pkg/bad/__init__.py": "raise RuntimeError('broken package')\n", "pkg/bad/leaf.py": ""}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = ["pkg", "pkg.a", "pkg.b", "pkg.bad", "pkg.bad.leaf", "pkg.sub", "pkg.sub.c"]
    failed = _imports_alone(modules, [], str(tmp_path))
    assert [line.split(":")[0] for line in failed] == ["pkg.a", "pkg.bad"], failed
    assert "cannot import name 'X' from partially initialized module 'pkg.a'" in failed[0]
    assert failed[1].endswith("RuntimeError: broken package (and its 1 modules)")


LOOP_TYPES = ("steps", "result", "views", "decisions", "replies", "context", "exceptions", "config", "prompts")
"""``skilltransfer.agents`` modules that hold the loop's types and reply parsing: the floor below the harness."""
LOOP = ("agent", "loop", "skill_io", "executor", "roles")
"""``skilltransfer.agents`` modules that run the loop."""


def test_agents_floors_the_loop_types_below_the_harness_and_no_guard_imports_the_loop() -> None:
    """Inside ``agents/``: the loop's types import nothing from ``agents/harness/``; no guard (nor a guard-only
    helper under ``harness/``) imports a module that runs the loop."""
    graph = import_graph()
    harness = "skilltransfer.agents.harness"
    up = [f"{a} -> {b}" for name in LOOP_TYPES for a in [f"skilltransfer.agents.{name}"] for b in graph[a]
          if b == harness or b.startswith(harness + ".")]
    assert not up, "a loop type imports the harness: " + "; ".join(up)
    loop = {f"skilltransfer.agents.{name}" for name in LOOP}
    down = [f"{a} -> {b}" for a, targets in graph.items() if a.startswith(harness + ".")
            and a.rsplit(".", 1)[1] not in ("presets", "__init__") for b in targets if b in loop]
    assert not down, "a guard imports a loop module: " + "; ".join(down)


def test_errors_stay_on_the_ground_floor() -> None:
    """``errors`` is what every part imports: it imports nothing of the package (issue 40; its file reader is
    ``util.files.read_text``)."""
    assert not import_graph()["skilltransfer.errors"]


RUN_FILES = ("config.json", "results.jsonl", "prompts.jsonl", "trajectories", "artifacts", "memory.next",
             "memory.next.task", "memory.old")
"""The names of a run folder's files and folders (`skilltransfer.log.folder`); ``memory/`` and ``plans/`` are words
of other meanings too (settings, the memory's own folder) and are left out."""
NAMED_ELSEWHERE = {
    ("skilltransfer.memory.embedders", "config.json"): "a sentence-transformers model folder's file, not a run's",
    ("skilltransfer.judge.judge", "artifacts"): "the judge's name for where an artifact came from (its source)",
    ("skilltransfer.judge.runs", "artifacts"): "the judge's name for where an artifact came from (its source)",
}
"""(module, name) -> why a module outside the log may spell that name."""


def run_file_names(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string in code (not a docstring) that names a run folder's file: the name itself, or a
    path under one of its folders (``"trajectories/"``, an f-string's ``f"artifacts/{name}"``)."""
    tree = ast.parse(source)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value.strip("/")
            if text in RUN_FILES or any(node.value.startswith(name + "/") for name in RUN_FILES):
                found.append((node.lineno, node.value))
    return found


def test_the_run_file_scan_finds_names_in_code_and_not_in_prose() -> None:
    source = ('"""Reads results.jsonl."""\nA = "results.jsonl"\nB = f"trajectories/{x}.json"\n'
              'C = folder / "config.json"\nD = "the results.jsonl file"\nE = 1\n"""config.json: a docstring."""\n')
    assert run_file_names(source) == [(2, "results.jsonl"), (3, "trajectories/"), (4, "config.json")]


def test_only_the_run_log_names_the_run_folders_files() -> None:
    """Every reader and writer of run folders goes through `skilltransfer.log` (issue 48): no module outside it
    spells a run folder's file names (it takes `RunFolder` paths, or the log's ``CONFIG``, ``RESULTS``, ...)."""
    found = []
    for module, path in package_modules().items():
        if module == "skilltransfer.log" or module.startswith("skilltransfer.log."):
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
                  for line, text in run_file_names(path.read_text(encoding="utf-8"))
                  if (module, text.strip("/")) not in NAMED_ELSEWHERE]
    assert not found, "name the run folder's files through skilltransfer.log:\n" + "\n".join(found)
    log_source = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "log").glob("*.py"))
    assert {text.strip("/") for _, text in run_file_names(log_source)} == set(RUN_FILES)  # the log names them all
