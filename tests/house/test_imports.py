"""The package's import graph against the drawing: every module imports, no import cycle between modules, and the
rooms' imports are exactly what the table of docs/architecture.md says; only the run log names a run folder's files.

The table is the one source of truth: its first column names each room's modules (``view/``, ``cli.py``, ...; a
subpackage such as ``llm/testing/`` is a room of its own, apart from the room of the package around it; a row whose
cell starts with ``name:`` is called that), its last column the rooms it imports (or ``any room``, or ``nothing``).
A room that imports a room its row does not name fails, and so does a row naming a room it no longer imports: the
drawing states what is true. `NEVER` are the directions no row may allow, so widening the table cannot hide a
back-edge.

The graph is read from the source (``ast``): every ``import`` and ``from ... import`` anywhere in a module (inside
functions and ``TYPE_CHECKING`` blocks too), so a deferred import cannot hide a cycle. ``from package import name``
is an edge to ``package.name`` when that is a module, else to the package's ``__init__``.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import skilltransfer

PACKAGE = Path(skilltransfer.__file__).resolve().parent
ROOT = "skilltransfer"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
ANY, NOTHING = "any room", "nothing"


@dataclass(frozen=True)
class Room:
    """One row of the table: its name, the modules and subpackages of ``skilltransfer`` it holds (as paths inside the
    package, ``view``, ``llm/testing``), and the rooms it may import (None: any room)."""

    name: str
    members: tuple[str, ...]
    imports: frozenset[str] | None


def rooms_of(text: str) -> dict[str, Room]:
    """The rooms of the first table (``| room | what it holds | imports |``) of an architecture page."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\|\s*room\s*\|", line))
    rooms: dict[str, Room] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        first, _, last = (cell.strip() for cell in line.strip().strip("|").split("|"))
        members = tuple(name.rstrip("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", first))
        named = re.match(r"(\w+):", first)
        name = named.group(1) if named else members[0]
        cell = re.sub(r"\([^)]*\)", "", last)  # a parenthesis says why; the names are what is checked
        if cell.strip() == ANY:
            imports = None
        elif cell.strip() == NOTHING:
            imports = frozenset()
        else:
            imports = frozenset(word.strip() for word in cell.split(","))
        rooms[name] = Room(name, members, imports)
    return rooms


ROOMS = rooms_of(ARCHITECTURE.read_text(encoding="utf-8"))
"""The rooms as docs/architecture.md draws them."""

NEVER: list[tuple[str, str, str]] = [
    ("sandbox", "envs", "the sandbox runs code; it knows no world"),
    ("envs", "agents", "a world knows no agent"),
    ("envs", "runner", "a world knows no runner"),
    ("envs", "memory", "a world knows no skill memory"),
    ("envs", "induction", "a world knows no induction"),
    ("induction", "agents", "the agent calls the inducer, not the reverse"),
    ("memory", "agents", "memory knows no agent"),
    ("memory", "envs", "memory knows no world"),
    ("memory", "runner", "memory knows no runner"),
    ("metrics", "runner", "metrics compute from numbers"),
    ("metrics", "agents", "metrics compute from numbers"),
    ("metrics", "envs", "metrics compute from numbers"),
    ("llm", "agents", "models know no agent"),
    ("llm", "envs", "models know no world"),
    ("llm", "runner", "models know no runner"),
    *[(room, "testing", "the test doubles are asked for by name (`make_model`'s registry), never imported: no "
                        "user command gets one unless it names it")
      for room in ROOMS if room not in ("testing", "face")],
    ("agents", "runner", "the runner drives the agent"),
    ("runner", "view", "the viewer reads run logs; the runner knows no viewer"),
    ("runner", "report", "running and reporting apart: the runner writes run logs, the report reads them"),
    ("report", "runner", "running and reporting apart: the report reads run logs, never the runner"),
    ("report", "view", "the viewer shows reports; the report knows no viewer"),
    ("view", "runner", "the viewer reads run logs, never the runner"),
    ("judge", "runner", "a judge reads run logs, never the runner"),
    ("settings", "runner", "the settings lie below the runner and the report"),
    ("settings", "report", "the settings lie below the runner and the report"),
    *[(room, "face", "no CLI below the face") for room in ROOMS if room != "face"],
    *[("log", room, "the run log imports only the base: every reader of runs stands on it") for room in ROOMS
      if room not in ("log", "base")],
    *[("base", room, "the base is the floor: it imports nothing of the package") for room in ROOMS if room != "base"],
]
"""Directions no row of the table may allow (the floors' rules in words): a row that allows one fails before any
import is read."""


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


def room_of(module: str, rooms: dict[str, Room] | None = None) -> str:
    """The room a module belongs to: the row naming the longest path that holds it (``llm/testing`` before ``llm``;
    see `ROOMS`)."""
    parts = module.split(".")[1:] or ["__init__"]
    held = [(len(member.split("/")), room.name) for room in (rooms or ROOMS).values() for member in room.members
            if parts[:len(member.split("/"))] == member.split("/")]
    if not held:
        raise AssertionError(f"{module} belongs to no room: add `{parts[0]}` to a row of docs/architecture.md's table")
    return max(held)[1]


def room_edges() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Room -> the other rooms its modules import, and one ``module -> module`` import for each such pair."""
    edges: dict[str, set[str]] = {room: set() for room in ROOMS}
    witness: dict[tuple[str, str], str] = {}
    for module, targets in import_graph().items():
        for target in targets:
            a, b = room_of(module), room_of(target)
            if a != b:
                edges[a].add(b)
                witness.setdefault((a, b), f"{module} -> {target}")
    return edges, witness


def test_the_table_names_every_module_once_and_only_rooms_that_exist() -> None:
    members = [member for room in ROOMS.values() for member in room.members]
    assert len(members) == len(set(members)), f"a module in two rows: {sorted(members)}"
    paths = {"/".join(module.split(".")[1:]) or "__init__" for module in package_modules()}
    assert not set(members) - paths, f"the table names modules the package lacks: {sorted(set(members) - paths)}"
    for module in package_modules():
        room_of(module)
    unknown = {f"{room.name}: {name}" for room in ROOMS.values() for name in room.imports or () if name not in ROOMS}
    assert not unknown, f"an imports cell names no room of the table: {sorted(unknown)}"


def test_no_row_allows_a_forbidden_direction() -> None:
    allowed = [f"{a} -> {b} ({why})" for a, b, why in NEVER if ROOMS[a].imports is None or b in ROOMS[a].imports]
    assert not allowed, "docs/architecture.md's table allows:\n" + "\n".join(allowed)


def table_problems(rooms: dict[str, Room], edges: dict[str, set[str]],
                   witness: dict[tuple[str, str], str]) -> list[str]:
    """Where the table and the rooms' imports differ: an import a row does not allow, a row naming a room its
    modules no longer import."""
    problems = []
    for room in rooms.values():
        if room.imports is None:
            continue
        problems += [f"{room.name} imports {b}, which its row does not allow: {witness[(room.name, b)]} (import "
                     f"through a room it may import, or add {b} to the row if the direction is right)"
                     for b in sorted(edges[room.name] - room.imports)]
        problems += [f"{room.name}'s row names {b}, which none of its modules imports: remove it from the row"
                     for b in sorted(room.imports - edges[room.name])]
    return problems


def test_every_room_imports_exactly_what_its_row_says() -> None:
    problems = table_problems(ROOMS, *room_edges())
    assert not problems, "docs/architecture.md's table and the imports differ:\n" + "\n".join(problems)


def test_a_subpackage_row_is_a_room_apart_from_its_package() -> None:
    """``llm/testing/`` is the test doubles' room, the rest of ``llm/`` the client's: the client importing a double
    is an edge between rooms (which `NEVER` forbids), and the table check names it."""
    assert room_of("skilltransfer.llm.testing.mock_server") == "testing"
    assert room_of("skilltransfer.llm.testing") == "testing"
    assert room_of("skilltransfer.llm.openai_client") == "llm"
    assert room_of("skilltransfer.llm") == "llm"
    assert ("llm", "testing") in [(a, b) for a, b, _ in NEVER]
    edges, witness = room_edges()  # the face may import any room, so its row cannot say it; its imports do
    assert "testing" not in {b for a, targets in edges.items() if a != "testing" for b in targets}, \
        "a room imports the test doubles: " + "; ".join(w for (a, b), w in witness.items() if b == "testing")
    edges = {room: set(targets) for room, targets in edges.items()}
    edges["llm"].add("testing")
    witness[("llm", "testing")] = "skilltransfer.llm.config -> skilltransfer.llm.testing.scripted"
    assert table_problems(ROOMS, edges, witness) == [
        "llm imports testing, which its row does not allow: skilltransfer.llm.config -> "
        "skilltransfer.llm.testing.scripted (import through a room it may import, or add testing to the row if the "
        "direction is right)"]


def test_the_table_check_fails_on_an_import_the_row_does_not_allow_and_on_a_stale_row() -> None:
    edges, witness = room_edges()
    edges = {room: set(targets) for room, targets in edges.items()}
    edges["judge"].add("memory")
    witness[("judge", "memory")] = "skilltransfer.judge.judge -> skilltransfer.memory.store"
    edges["envs"].discard("sandbox")
    problems = table_problems(ROOMS, edges, witness)
    assert problems == ["judge imports memory, which its row does not allow: skilltransfer.judge.judge -> "
                        "skilltransfer.memory.store (import through a room it may import, or add memory to the row "
                        "if the direction is right)",
                        "envs's row names sandbox, which none of its modules imports: remove it from the row"]


def test_no_import_cycle_between_modules() -> None:
    try:
        tuple(TopologicalSorter(import_graph()).static_order())
    except CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_rooms_form_floors_without_back_edges() -> None:
    """The rooms' graph has no cycle, so every arrow points down a floor."""
    edges, witness = room_edges()
    try:
        tuple(TopologicalSorter(edges).static_order())
    except CycleError as exc:
        cycle = exc.args[1]
        pytest.fail("rooms in a circle: " + "; ".join(witness[(a, b)] for a, b in zip(cycle, cycle[1:], strict=False)))


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
"""The names of a run folder's files and folders (`skilltransfer.log.folder`), found in any string of code."""
RUN_WORDS = ("memory", "plans")
"""A run folder's two folders whose names are words of other meanings too (a skill's source, a cgroup controller, a
display key): found where they make a path (beside ``/``, in ``joinpath(...)``, compared with a ``.name``, or
before ``/`` in a string)."""
MEMORY_FILES = ("skills.jsonl", "manifest.json", "index.faiss", "snapshots.jsonl", "snapshot_skills.jsonl",
                "organization.json", "prune_log.jsonl", "evictions.jsonl")
"""The files of a skill memory folder (a run's ``memory/``, a library): its format, named by `skilltransfer.memory`
alone."""
NAMED_ELSEWHERE = {
    ("skilltransfer.memory.embedders", "config.json"): "a sentence-transformers model folder's file, not a run's",
    ("skilltransfer.judge.judge", "artifacts"): "the judge's name for where an artifact came from (its source)",
    ("skilltransfer.judge.runs", "artifacts"): "the judge's name for where an artifact came from (its source)",
    ("skilltransfer.lens.graph", "skills.jsonl"): "a lens graph folder's own skill list (`lens/graph.py`), not a "
                                                  "memory folder's",
}
"""(module, name) -> why a module outside the owner may spell that name."""


def folder_names(source: str) -> list[tuple[int, str, str]]:
    """(line, text, owner) of each string in code (not a docstring) that names a run folder's entry (owner "log") or
    a memory folder's file (owner "memory"): the name itself, a path under one of the run's folders
    (``"trajectories/"``, an f-string's ``f"artifacts/{name}"``), or one of `RUN_WORDS` making a path."""
    tree = ast.parse(source)
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    in_path: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            in_path.update({id(node.left), id(node.right)})
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath":
            in_path.update(id(arg) for arg in node.args)
        elif isinstance(node, ast.Compare) and any(isinstance(side, ast.Attribute) and side.attr == "name"
                                                   for side in [node.left, *node.comparators]):
            in_path.update(id(side) for side in [node.left, *node.comparators])
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value.strip("/")
        if text in RUN_FILES or any(node.value.startswith(name + "/") for name in (*RUN_FILES, *RUN_WORDS)) \
                or (text in RUN_WORDS and id(node) in in_path):
            found.append((node.lineno, node.value, "log"))
        elif text in MEMORY_FILES:
            found.append((node.lineno, node.value, "memory"))
    return sorted(found)


def test_the_folder_name_scan_finds_names_in_code_and_not_in_prose() -> None:
    source = ('"""Reads results.jsonl."""\nA = "results.jsonl"\nB = f"trajectories/{x}.json"\n'
              'C = folder / "config.json"\nD = "the results.jsonl file"\nE = 1\n"""config.json: a docstring."""\n'
              'F = run / "memory"\nG = {"source": "memory"}\nH = path.name == "plans"\nI = "skills.jsonl"\n'
              'J = root.joinpath("plans", "x")\nK = "memory/skills.jsonl"\n')
    assert folder_names(source) == [(2, "results.jsonl", "log"), (3, "trajectories/", "log"),
                                    (4, "config.json", "log"), (8, "memory", "log"), (10, "plans", "log"),
                                    (11, "skills.jsonl", "memory"), (12, "plans", "log"),
                                    (13, "memory/skills.jsonl", "log")]


def test_only_the_log_names_a_run_folders_entries_and_only_the_memory_its_files() -> None:
    """Every reader and writer of run folders goes through `skilltransfer.log` (issue 48): no module outside it
    spells a run folder's entries (it takes `RunFolder` paths, or the log's ``CONFIG``, ``MEMORY``, ...); a memory
    folder inside one is the skill memory's format, whose file names only `skilltransfer.memory` spells (the
    others import its ``SKILLS_JSONL``, ``SNAPSHOTS``, ...). Every package is read."""
    found = []
    for module, path in package_modules().items():
        for line, text, owner in folder_names(path.read_text(encoding="utf-8")):
            if module == f"{ROOT}.{owner}" or module.startswith(f"{ROOT}.{owner}.") \
                    or (module, text.strip("/")) in NAMED_ELSEWHERE:
                continue
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r} (through skilltransfer.{owner})")
    assert not found, "name these through the package that owns the folder:\n" + "\n".join(found)
    by_owner: dict[str, set[str]] = {"log": set(), "memory": set()}
    for owner in by_owner:
        for path in (PACKAGE / owner).glob("*.py"):
            by_owner[owner].update(text.strip("/") for _, text, who in folder_names(path.read_text(encoding="utf-8"))
                                   if who == owner)
    assert set(RUN_FILES) <= by_owner["log"]  # the log names them all
    from skilltransfer import log

    assert {log.MEMORY, log.PLANS} == set(RUN_WORDS)
    assert by_owner["memory"] == set(MEMORY_FILES)  # the memory names its own files, and the list is whole
