"""A restricted evaluator for the comparator lambdas of OfficeBench's ``evaluate_excel_cell_comparator``.

The comparator text is untrusted task data, so it is never passed to ``eval``. It is parsed with :mod:`ast` and
only a small expression language is interpreted: literals, the lambda's own arguments, comparisons, boolean and
arithmetic operators, conditional expressions, subscripts, a few whitelisted functions (``float``, ``int``,
``str``, ``len``, ``abs``, ``round``, ``min``, ``max``, ``bool``) and a few string methods. Anything else is
rejected with :class:`UnsafeExpressionError` before evaluation starts.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from skilltransfer.util import pyast

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "float": float, "int": int, "str": str, "len": len, "abs": abs, "round": round, "min": min, "max": max,
    "bool": bool,
}
STR_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "isdigit", "isnumeric", "isdecimal",
    "isalpha", "isalnum", "isspace", "replace", "split", "count", "find", "title", "capitalize",
})
BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
MAX_POWER = 64
MAX_SEQUENCE = 10_000


class UnsafeExpressionError(ValueError):
    """The comparator uses something outside the allowed expression language."""


def compile_lambda(text: str) -> Callable[..., Any]:
    """Parse ``"lambda x: ..."`` and return a callable that interprets it safely.

    Raises:
        UnsafeExpressionError: if the text is not a lambda or uses disallowed syntax.
    """
    try:
        tree = pyast.parse_expression(str(text).strip())
    except SyntaxError as exc:
        raise UnsafeExpressionError(f"comparator is not valid Python: {exc.msg}") from exc
    node = tree.body
    if not isinstance(node, ast.Lambda):
        raise UnsafeExpressionError("comparator must be a single lambda expression")
    spec = node.args
    if spec.vararg or spec.kwarg or spec.kwonlyargs or spec.defaults or spec.posonlyargs:
        raise UnsafeExpressionError("comparator lambda may only take plain positional arguments")
    names = [arg.arg for arg in spec.args]
    _validate(node.body, set(names))

    def comparator(*values: Any) -> Any:
        if len(values) != len(names):
            raise TypeError(f"comparator takes {len(names)} argument(s), got {len(values)}")
        return _eval(node.body, dict(zip(names, values, strict=True)))

    return comparator


def _validate(node: ast.AST, names: set[str]) -> None:
    """Reject any node outside the language (checked once, before anything runs)."""
    allowed = (ast.Constant, ast.Name, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Compare, ast.BoolOp, ast.UnaryOp,
               ast.BinOp, ast.IfExp, ast.Subscript, ast.Slice, ast.Call, ast.Attribute, ast.Load, ast.And, ast.Or,
               *BINARY, *COMPARE, *UNARY)
    callees = {id(child.func) for child in ast.walk(node) if isinstance(child, ast.Call)}
    for child in ast.walk(node):
        if not isinstance(child, allowed):
            raise UnsafeExpressionError(f"comparator uses disallowed syntax: {type(child).__name__}")
        if isinstance(child, ast.Name) and child.id not in names:
            if child.id not in FUNCTIONS:
                raise UnsafeExpressionError(f"comparator uses unknown name {child.id!r}")
            if id(child) not in callees:
                raise UnsafeExpressionError(f"function {child.id!r} may only be called, not used as a value")
        if isinstance(child, ast.Attribute) and (child.attr not in STR_METHODS or id(child) not in callees):
            raise UnsafeExpressionError(f"comparator uses disallowed attribute {child.attr!r}")
        if isinstance(child, ast.Call):
            if child.keywords:
                raise UnsafeExpressionError("comparator calls may not use keyword arguments")
            func = child.func
            if not (isinstance(func, ast.Name) and func.id in FUNCTIONS) and not isinstance(func, ast.Attribute):
                raise UnsafeExpressionError("comparator may only call whitelisted functions and string methods")


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:  # noqa: C901 - one branch per node type
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise UnsafeExpressionError(f"function {node.id!r} may only be called, not used as a value")
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_eval(elt, env) for elt in node.elts]
        if isinstance(node, ast.List):
            return items
        return tuple(items) if isinstance(node, ast.Tuple) else set(items)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise UnsafeExpressionError("comparator may not use ** in dict literals")
        return {_eval(k, env): _eval(v, env) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.BoolOp):
        result: Any = isinstance(node.op, ast.And)
        for value in node.values:
            result = _eval(value, env)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        return UNARY[type(node.op)](_eval(node.operand, env))
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and isinstance(right, int | float) and abs(right) > MAX_POWER:
            raise UnsafeExpressionError(f"exponent {right} is too large")
        if isinstance(node.op, ast.Mult) and any(isinstance(v, str | list | tuple) for v in (left, right)):
            count = right if isinstance(right, int) else left
            if isinstance(count, int) and count > MAX_SEQUENCE:
                raise UnsafeExpressionError("sequence repetition is too large")
        return BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env)
            if not COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, env)[_eval(node.slice, env)]
    if isinstance(node, ast.Slice):
        parts = [None if part is None else _eval(part, env) for part in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.Call):
        args = [_eval(arg, env) for arg in node.args]
        func = node.func
        if isinstance(func, ast.Name):
            return FUNCTIONS[func.id](*args)
        assert isinstance(func, ast.Attribute)
        target = _eval(func.value, env)
        if not isinstance(target, str):
            raise UnsafeExpressionError(f"method {func.attr!r} may only be called on strings")
        return getattr(target, func.attr)(*args)
    raise UnsafeExpressionError(f"comparator uses disallowed syntax: {type(node).__name__}")
