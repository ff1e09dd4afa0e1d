"""What a code skill's module body may hold, so that loading it cannot run code (and so cannot be gated).

A code skill is loaded into every later episode that retrieves it. If its module body could run statements, it
could behave one way in the load check and another in an episode (e.g. ``if __name__ == "__episode__": ...``).
So the body may only hold: a docstring, imports (absolute), function and class definitions, and assignments of
literal constants to names. Definitions may not have decorators; default values must be literals; annotations
only names, attributes, subscripts and constants; class bodies follow the same rules, and bases are names or
attributes without keywords (no metaclass). Function bodies are unrestricted: they run only when called.

Nothing of the skill may run when a class is created either: a class body may not define the hooks Python calls
at definition time (``__init_subclass__``, ``__class_getitem__``, ``__set_name__``, ``__mro_entries__``,
``__prepare__``), and a base must be a builtin class or a class the skill defined before (an imported base such as
``enum.Enum`` calls the class's own ``__init__``/``__new__`` for each member). No top-level name may shadow a
builtin or a name of the episode's namespace (``complete_task``, ``apis``, ...).

`loading_action` is how an episode loads a checked skill: in its own namespace (a copy of the episode's), compiled
so that annotations are never evaluated, and only the names it defines are copied back into the episode's. Given the
skill's id, each top-level (non-async) function it defines is bound there through the episode's call counter
(`skilltransfer.sandbox.runtime.skilluse`): the runner then reports which retrieved skills' functions ran.
"""

from __future__ import annotations
import __future__

import ast
import builtins
from collections.abc import Iterable

from skilltransfer.sandbox.runtime.skilluse import HOOK
from skilltransfer.util import pyast

CLASS_HOOKS = frozenset({"__init_subclass__", "__class_getitem__", "__set_name__", "__mro_entries__", "__prepare__"})
"""Methods Python calls while a class (or an annotation naming it) is being defined."""

RESERVED = frozenset({"complete_task", "apis", "services", "load_skill", "run_skill", "open_node",
                      *(name for name in dir(builtins) if not name.startswith("_")), "__builtins__", "__name__", HOOK})
"""Names no code skill may bind at top level (the episode's own and the builtins)."""

_BUILTIN_BASES = frozenset(name for name in dir(builtins)
                           if isinstance(getattr(builtins, name), type) and name not in ("type", "bool"))

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


def _class_problem(node: ast.ClassDef, classes: set[str]) -> str | None:
    """Why a class definition would run code when defined; None if it cannot."""
    if node.decorator_list or node.keywords:
        return f"class {node.name} has a decorator or keywords"
    for base in node.bases:
        if not isinstance(base, ast.Name) or (base.id not in _BUILTIN_BASES and base.id not in classes):
            return (f"a base of class {node.name} is not a builtin class or a class defined above in the skill "
                    "(another module's base class may run code when the class is defined)")
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and statement.name in CLASS_HOOKS:
            return f"class {node.name} defines {statement.name}, which runs when a class is defined"
        bound = {t.id for t in getattr(statement, "targets", []) if isinstance(t, ast.Name)}
        if bound & CLASS_HOOKS:
            return f"class {node.name} sets {sorted(bound & CLASS_HOOKS)[0]}"
    for position, statement in enumerate(node.body):
        problem = _statement_problem(statement, position, set())
        if problem is not None:
            return f"in class {node.name}: {problem}"
    return None


def bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level statement binds (definitions, assignment targets, import aliases)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _statement_problem(node: ast.stmt, index: int, classes: set[str]) -> str | None:
    """Why a top-level (or class-level) statement is not allowed; None if it is (``classes``: the classes the
    skill defined above, which may be bases)."""
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
        return _class_problem(node, classes)
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


def skill_body_problem(source: str, reserved: Iterable[str] = ()) -> str | None:
    """Why ``source`` may not be loaded as a code skill (one line), or None when its module body only defines.

    Args:
        source: the skill's Python source.
        reserved: names of the episode's namespace it may not bind, besides `RESERVED`.
    """
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        return f"code does not parse: {exc.msg} (line {exc.lineno})"
    taken = RESERVED | set(reserved)
    classes: set[str] = set()
    for index, node in enumerate(tree.body):
        problem = _statement_problem(node, index, classes)
        shadowed = [name for name in bound_names(node) if name in taken]
        if problem is None and shadowed:
            problem = f"it binds {shadowed[0]!r}, a name of the episode or a builtin (a skill may not shadow it)"
        if problem is not None:
            return (f"line {node.lineno}: {problem}; a code skill's module body may only hold a docstring, imports, "
                    "function/class definitions and literal constants")
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
    return None


def defined_names(source: str) -> list[str]:
    """The names a (checked) code skill binds at top level, in order."""
    return [name for node in pyast.parse(source).body for name in bound_names(node)]


LOADER = "__skilltransfer_load_skill__"


def defined_functions(source: str) -> list[str]:
    """The (non-async) functions a (checked) code skill defines at top level, in order."""
    return [node.name for node in pyast.parse(source).body if isinstance(node, ast.FunctionDef)]


def loading_action(source: str, skill_id: str | None = None) -> str:
    """The action that loads a checked code skill: compiled with ``from __future__ import annotations`` (no
    annotation is evaluated), run in a namespace of its own (a copy of the episode's, so its functions still see
    ``apis`` and ``complete_task``), then only the names it defines are copied into the episode's namespace. With
    ``skill_id``, its top-level functions are copied wrapped by the namespace's call counter (`HOOK`, when there is
    one): same arguments, return values and exceptions, each call counted under the id."""
    flags = __future__.annotations.compiler_flag
    names = defined_names(source)
    functions = defined_functions(source) if skill_id is not None else []
    return (f"def {LOADER}(source, names, functions, skill_id):\n"
            "    namespace = dict(globals())\n"
            f"    exec(compile(source, '<code skill>', 'exec', {flags}, True), namespace)\n"
            "    loaded = {name: namespace[name] for name in names if name in namespace}\n"
            f"    counted = globals().get({HOOK!r})\n"
            "    if functions and callable(counted):\n"
            "        loaded.update({name: counted(skill_id, loaded[name]) for name in functions if name in loaded})\n"
            "    globals().update(loaded)\n"
            f"try:\n    {LOADER}({source!r}, {names!r}, {functions!r}, {skill_id!r})\nfinally:\n    del {LOADER}\n")
