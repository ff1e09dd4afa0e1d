"""Run one code action like a notebook cell: an action whose last statement is an expression shows its value.

IPython (the shell AppWorld runs agent code in) prints the ``repr`` of a cell's last expression when it is not None;
models trained on notebooks write ``apis.files.list_domains()`` and expect to see the list. Without that, such an
action prints nothing and a small model repeats it. ``echo=False`` is plain ``exec``.

Compiling and running are separate steps so that a harness process running many streams can compile under its AST
lock (``skilltransfer.util.pyast``) and run outside it; the worker, a process of its own, needs no lock.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from types import CodeType
from typing import Any, NamedTuple


class CompiledCell(NamedTuple):
    """A cell's code: its statements, and with echo its last expression statement (shown when not None)."""

    body: CodeType
    last_expression: CodeType | None


def compile_cell(code: str, filename: str, *, echo: bool) -> CompiledCell:
    """Compile ``code``; with ``echo``, its last statement, if an expression, is compiled on its own.

    Raises:
        SyntaxError: the code does not parse.
    """
    if not echo:
        return CompiledCell(compile(code, filename, "exec"), None)
    tree = ast.parse(code, filename)
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr):
        return CompiledCell(compile(tree, filename, "exec"), None)
    return CompiledCell(compile(ast.Module(body=tree.body[:-1], type_ignores=[]), filename, "exec"),
                        compile(ast.Expression(last.value), filename, "eval"))


def run_compiled(cell: CompiledCell, namespace: dict[str, Any], show: Callable[[str], Any] = print) -> None:
    """Execute a compiled cell in ``namespace``, then ``show`` (default: print) the repr of its last expression's
    value when not None. Errors propagate as they would from ``exec``."""
    exec(cell.body, namespace)
    if cell.last_expression is None:
        return
    value = eval(cell.last_expression, namespace)
    if value is not None:
        show(repr(value))


def run_cell(code: str, filename: str, namespace: dict[str, Any], *, echo: bool,
             show: Callable[[str], Any] = print) -> None:
    """Execute ``code`` in ``namespace``; with ``echo``, then ``show`` (default: print) the repr of its last
    expression statement's value (if it has one and the value is not None). Errors propagate as from ``exec``."""
    run_compiled(compile_cell(code, filename, echo=echo), namespace, show)
