"""Python code as highlighting tokens (Pygments' lexer): ``[[kind, text], ...]`` with a few fixed kinds, which the
page renders as text in styled spans (no markup is ever built from the code)."""

from __future__ import annotations

from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, String, _TokenType

MAX_CODE_CHARS = 200_000
"""Longer code is shown plain (one token)."""

_KINDS: list[tuple[_TokenType, str]] = [
    (Comment, "c"), (String, "s"), (Number, "n"), (Keyword, "k"), (Name.Builtin, "b"), (Name.Function, "f"),
    (Name.Class, "f"), (Name.Decorator, "d"), (Operator.Word, "k"), (Operator, "o"),
]
_LEXER = PythonLexer(stripnl=False, ensurenl=False)


def _kind(token: _TokenType) -> str:
    for parent, kind in _KINDS:
        if token in parent:
            return kind
    return ""


def python_tokens(code: str) -> list[list[str]]:
    """``code`` as ``[kind, text]`` pairs whose texts join to ``code``; kind is one of c s n k b f d o or ""."""
    if len(code) > MAX_CODE_CHARS:
        return [["", code]]
    out: list[list[str]] = []
    for token, text in _LEXER.get_tokens(code):
        kind = _kind(token)
        if out and out[-1][0] == kind:
            out[-1][1] += text
        else:
            out.append([kind, text])
    return out
