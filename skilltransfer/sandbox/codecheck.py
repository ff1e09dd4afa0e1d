"""What a code skill's module body may hold, so that loading it cannot run code (and so cannot be gated).

A code skill is loaded into every later episode that retrieves it. If its module body could run statements, it
could behave one way in the load check and another in an episode (e.g. ``if __name__ == "__episode__": ...``).
So the body may only hold: a docstring, imports (absolute), function and class definitions, and assignments of
literal constants to names. Definitions may not have decorators; default values must be literals; annotations
only names, attributes, subscripts and constants; class bodies follow the same rules, and bases are names or
attributes without keywords (no metaclass). Function bodies are unrestricted: they run only when called.
"""

from __future__ import annotations

import ast

from skilltransfer.util import pyast

_ANNOTATION_NODES = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List, ast.Load,
                     ast.BinOp, ast.BitOr)


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_literal(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        return all(key is not None and _literal(key) for key in node.keys) and all(map(_literal, node.values))
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd) and \
        isinstance(node.operand, ast.Constant)


def _annotation(node: ast.AST | None) -> bool:
    return node is None or all(isinstance(sub, _ANNOTATION_NODES) for sub in ast.walk(node))


def _signature_problem(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = node.args
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if not all(_literal(default) for default in defaults):
        return f"a default value of {node.name}() is not a literal constant"
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    if not all(_annotation(p.annotation) for p in params) or not _annotation(node.returns):
        return f"an annotation of {node.name}() is not a plain type expression"
    return None


def _statement_problem(node: ast.stmt, index: int) -> str | None:
    """Why a top-level (or class-level) statement is not allowed; None if it is."""
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, str):
        return None  # docstring
    if isinstance(node, ast.Import):
        return None
    if isinstance(node, ast.ImportFrom):
        return None if node.level == 0 else "relative imports are not allowed"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if node.decorator_list:
            return f"{node.name}() has a decorator"
        return _signature_problem(node)
    if isinstance(node, ast.ClassDef):
        if node.decorator_list or node.keywords:
            return f"class {node.name} has a decorator or keywords"
        if not all(isinstance(base, ast.Name | ast.Attribute) and _annotation(base) for base in node.bases):
            return f"a base of class {node.name} is not a name"
        for position, statement in enumerate(node.body):
            problem = _statement_problem(statement, position)
            if problem is not None:
                return f"in class {node.name}: {problem}"
        return None
    if isinstance(node, ast.Assign):
        if all(isinstance(target, ast.Name) for target in node.targets) and _literal(node.value):
            return None
        return "an assignment that is not a literal constant"
    if isinstance(node, ast.AnnAssign):
        if isinstance(node.target, ast.Name) and node.value is not None and _literal(node.value) \
                and _annotation(node.annotation):
            return None
        return "an assignment that is not a literal constant"
    if isinstance(node, ast.Pass):
        return None
    return f"a top-level {type(node).__name__} statement"


def skill_body_problem(source: str) -> str | None:
    """Why ``source`` may not be loaded as a code skill (one line), or None when its module body only defines.

    Args:
        source: the skill's Python source.
    """
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        return f"code does not parse: {exc.msg} (line {exc.lineno})"
    for index, node in enumerate(tree.body):
        problem = _statement_problem(node, index)
        if problem is not None:
            return (f"line {node.lineno}: {problem}; a code skill's module body may only hold a docstring, imports, "
                    "function/class definitions and literal constants")
    return None
