"""Python ASTs in a process that runs many streams at once.

CPython 3.11 keeps one recursion-depth counter for converting syntax trees between C and Python (``ast.parse``,
``ast.literal_eval`` of text, ``compile`` of an AST object). When a thread switch happens inside a conversion (a
garbage collection that runs a finaliser is enough), another thread's conversion corrupts the counter and the parse
raises ``SystemError: AST constructor recursion depth mismatch`` (cpython gh-106905) - in a grid, that killed a stream.

Every AST conversion of the harness goes through this module: under one process-wide lock, retried once on that
error; a second failure raises `ParserStateError`, a `SyntaxError`, so a caller that treats unparseable code as a
failed action costs the agent that action, never the stream. ``guard_stdlib_parse()`` routes the standard library's
own ``ast.parse`` calls (3.11's traceback formatting parses source lines; ``inspect`` does too) through the same lock;
the grid runner calls it once, before its streams start. Code that runs in the sandbox worker does not need it: the
worker is a process of its own.
"""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

_LOCK = threading.RLock()
_STDLIB_PARSE: Callable[..., Any] = getattr(ast.parse, "stdlib_parse", ast.parse)
"""The standard library's own ``ast.parse`` (also when this module runs again after `guard_stdlib_parse`)."""
_MISMATCH = "recursion depth mismatch"
T = TypeVar("T")
Mode = Literal["exec", "eval", "single"]


class ParserStateError(SyntaxError):
    """The parser's shared state was corrupted twice in a row by an unguarded parse in another thread."""


@contextlib.contextmanager
def ast_lock() -> Iterator[None]:
    """Hold the process-wide AST lock (re-entrant) for a block of AST work."""
    with _LOCK:
        yield


def _guarded(convert: Callable[[], T]) -> T:
    with _LOCK:
        try:
            return convert()
        except SystemError as exc:
            if _MISMATCH not in str(exc):
                raise
        try:
            return convert()
        except SystemError as exc:
            if _MISMATCH not in str(exc):
                raise
            raise ParserStateError(f"the Python parser failed twice ({exc}); the code was not run") from exc


def parse(source: str, filename: str = "<unknown>", mode: Mode = "exec") -> ast.Module:
    """``ast.parse`` under the process-wide lock (``mode="exec"``; use `parse_expression` for ``"eval"``)."""
    tree = _guarded(lambda: _STDLIB_PARSE(source, filename, mode))
    assert isinstance(tree, ast.Module)
    return tree


def parse_expression(source: str, filename: str = "<unknown>") -> ast.Expression:
    """``ast.parse(source, mode="eval")`` under the process-wide lock."""
    tree = _guarded(lambda: _STDLIB_PARSE(source, filename, "eval"))
    assert isinstance(tree, ast.Expression)
    return tree


def literal_eval(source: str | ast.AST) -> Any:
    """``ast.literal_eval`` under the process-wide lock (text is parsed; a node is only walked)."""
    if isinstance(source, ast.AST):
        return ast.literal_eval(source)
    return ast.literal_eval(parse_expression(source.lstrip(" \t")))


def _locked_stdlib_parse(*args: Any, **kwargs: Any) -> Any:
    return _guarded(lambda: _STDLIB_PARSE(*args, **kwargs))


_locked_stdlib_parse.stdlib_parse = _STDLIB_PARSE  # type: ignore[attr-defined]


def guard_stdlib_parse() -> None:
    """Make ``ast.parse`` itself take the lock, for the standard library's own callers (idempotent).

    The one process-wide change the toolkit makes, by the command that starts concurrent streams, before they start.
    """
    if getattr(ast.parse, "stdlib_parse", None) is None:
        ast.parse = _locked_stdlib_parse


def stdlib_parse_guarded() -> bool:
    """Whether `guard_stdlib_parse` has run in this process."""
    return getattr(ast.parse, "stdlib_parse", None) is not None
