"""Commands stay thin: no command's body is over `MOST_BODY_LINES` lines, and a shared flag (one that
``commands/options.py`` or an option group declares) is declared there only, never again in a command's module.

A command is every click command of the CLI's tree (sub-commands of ``envs`` and ``library`` included); its body is
every line under its signature, docstring included. A flag's declaration is a ``typer.Option(...)`` call: its names
are the ``-``-strings it is given, else the parameter (or the alias a parameter is annotated with) it stands in.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import skilltransfer.commands as commands_package

MOST_BODY_LINES = 60
COMMANDS_DIR = Path(commands_package.__file__).parent
SHARED_HOMES = ("options.py", "option_groups.py")


def command_callbacks() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every command of the CLI (its path, e.g. ``library show``) with the function Typer calls."""
    from skilltransfer.cli import COMMANDS, load_command

    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Callable[..., Any]]]:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                yield from walk(command.get_command(None, name), [*path, name])
        else:
            yield " ".join(path), command.callback

    for name in COMMANDS:
        yield from walk(load_command(name), [name])


def body_lines(function: Callable[..., Any]) -> int:
    """Lines from the first line under ``function``'s signature to its last (docstring included)."""
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(function)))
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    return (node.end_lineno or 0) - node.body[0].lineno + 1


def _is_option_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Option" \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "typer"


def _given_names(call: ast.Call) -> list[str]:
    """The long names a ``typer.Option`` call spells (``--a/--no-a`` gives ``--a``)."""
    names = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return [part for name in names for part in name.split("/") if part.startswith("--") and
            not part.startswith("--no-")]


def flag_declarations(source: str) -> list[tuple[str, int]]:
    """Each flag a module's source declares with ``typer.Option``, with its line: the names a call spells (wherever
    it stands), else the name Typer derives from the parameter it stands in (directly or through a module-level
    alias)."""
    tree = ast.parse(source)
    calls = [node for node in ast.walk(tree) if _is_option_call(node)]
    found = [(name, call.lineno) for call in calls for name in _given_names(call)]  # type: ignore[arg-type]
    unnamed = {id(call) for call in calls if not _given_names(call)}  # type: ignore[arg-type]
    unnamed_aliases = {node.targets[0].id: node.lineno for node in tree.body  # Alias = Annotated[..., Option(...)]
                       if isinstance(node, ast.Assign) and len(node.targets) == 1
                       and isinstance(node.targets[0], ast.Name)
                       and any(id(n) in unnamed for n in ast.walk(node.value))}
    for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = dict(zip(reversed(positional), reversed(arguments.defaults), strict=False))
        defaults.update({a: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d})
        for argument in [*positional, *arguments.kwonlyargs]:
            derived = "--" + argument.arg.replace("_", "-")
            parts = [p for p in (argument.annotation, defaults.get(argument)) if p is not None]
            found += [(derived, n.lineno) for part in parts for n in ast.walk(part)  # type: ignore[attr-defined]
                      if id(n) in unnamed]
            alias = argument.annotation
            if isinstance(alias, ast.Name) and alias.id in unnamed_aliases:
                found.append((derived, unnamed_aliases[alias.id]))
    return sorted(found, key=lambda item: item[1])


def shared_flags() -> set[str]:
    """The flags ``options.py`` and the option groups declare."""
    return {name for home in SHARED_HOMES for name, _ in flag_declarations((COMMANDS_DIR / home).read_text())}


# ------------------------------------------------------------------------------------------------- the checks
def test_no_command_body_is_over_the_limit() -> None:
    measured = {path: body_lines(callback) for path, callback in command_callbacks()}
    assert len(measured) >= 20
    assert {"grid", "library show", "envs list"} <= set(measured)
    over = {path: lines for path, lines in measured.items() if lines > MOST_BODY_LINES}
    assert not over, f"command bodies over {MOST_BODY_LINES} lines (move the work into helpers): {over}"


def test_shared_flags_are_declared_only_where_they_are_shared() -> None:
    shared = shared_flags()
    assert {"--model", "--config", "--set", "--limit", "--embedder", "--progress", "--max-tokens",
            "--temperature", "--token-limit"} <= shared
    again = [f"{path.name}:{line} {name}" for path in sorted(COMMANDS_DIR.glob("*.py")) if path.name not in SHARED_HOMES
             for name, line in flag_declarations(path.read_text()) if name in shared]
    assert not again, f"shared flags declared again (take them from commands/options.py or a group): {again}"


# --------------------------------------------------------------------------------------- the checks can fail
def test_a_long_body_is_measured_whole() -> None:
    namespace: dict[str, Any] = {}
    lines = "\n".join(f"    x{i} = {i}" for i in range(61))
    source = f'def command(\n    a: int = 1,\n) -> None:\n    """Doc."""\n{lines}\n'
    exec(compile(source, "<test>", "exec"), namespace)  # noqa: S102  # our own text
    function = namespace["command"]
    original = inspect.getsource
    try:
        inspect.getsource = lambda _: source  # type: ignore[assignment]  # exec'd code has no file
        assert body_lines(function) == 62
    finally:
        inspect.getsource = original


@pytest.mark.parametrize(("source", "flags"), [
    ('def c(limit: Annotated[int, typer.Option("--limit", "-n")] = 1): ...', ["--limit"]),
    ("def c(embedder: Annotated[str, typer.Option(help='E.')] = 'm'): ...", ["--embedder"]),
    ("def c(limit: int = typer.Option(20, '--limit')): ...", ["--limit"]),
    ("def c(*, progress: Annotated[bool, typer.Option(help='P.')] = True): ...", ["--progress"]),
    ("E = Annotated[str, typer.Option(help='E.')]\ndef c(embedder: E = 'm'): ...", ["--embedder"]),
    ("C = Annotated[str, typer.Option('--config')]\n", ["--config"]),
    ("def c(p: Annotated[bool, typer.Option('--progress/--no-progress')] = True): ...", ["--progress"]),
    ("def c(limit: Annotated[int, limit_option('Only.')] = 1): ...", []),
])
def test_a_declaration_is_found_however_it_is_written(source: str, flags: list[str]) -> None:
    assert [name for name, _ in flag_declarations(source)] == flags
