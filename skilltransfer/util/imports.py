"""``module:attr`` targets, resolved in one place (model and env registries, plug-in envs, setup functions)."""

from __future__ import annotations

import importlib
from typing import Any

from skilltransfer.errors import InputError


def resolve(dotted: str, packages: dict[str, str] | None = None) -> Any:
    """Import ``"package.module:attr"``; a leading package alias in ``packages`` is mapped first.

    Raises:
        ImportError, AttributeError, ValueError: the module or attribute does not exist (an empty module name).
    """
    module_name, _, attr = dotted.partition(":")
    top, dot, rest = module_name.partition(".")
    if packages and top in packages:
        module_name = packages[top] + dot + rest
    return getattr(importlib.import_module(module_name), attr)


def load_target(dotted: str, *, what: str) -> Any:
    """`resolve`, with a failure as one line: ``<what> 'mod:attr' cannot be imported (ModuleNotFoundError: ...)``.

    Raises:
        InputError: the target cannot be imported.
    """
    try:
        return resolve(dotted)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"{what} {dotted!r} cannot be imported ({type(exc).__name__}: {exc})") from None
