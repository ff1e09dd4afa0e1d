"""Run one code action like a notebook cell: an action whose last statement is an expression shows its value.

IPython (the shell AppWorld runs agent code in) prints the ``repr`` of a cell's last expression when it is not None;
models trained on notebooks write ``apis.files.list_domains()`` and expect to see the list. Without that, such an
action prints nothing and a small model repeats it. ``echo=False`` is plain ``exec``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any


def run_cell(code: str, filename: str, namespace: dict[str, Any], *, echo: bool,
             show: Callable[[str], Any] = print) -> None:
    """Execute ``code`` in ``namespace``; with ``echo``, then ``show`` (default: print) the repr of its last
    expression statement's value (if it has one and the value is not None). Errors propagate as from ``exec``."""
    if not echo:
        exec(compile(code, filename, "exec"), namespace)
        return
    tree = ast.parse(code, filename)
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Expr):
        exec(compile(tree, filename, "exec"), namespace)
        return
    exec(compile(ast.Module(body=tree.body[:-1], type_ignores=[]), filename, "exec"), namespace)
    value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
    if value is not None:
        show(repr(value))
