"""Agent-side setup functions for sandbox tests (standard library only: the worker cannot import skilltransfer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def toy_setup(workspace: Path, greeting: str = "hello") -> dict[str, Any]:
    """A tiny env namespace: a greeting function over a workspace file."""
    (workspace / "greeting.txt").write_text(greeting)

    def greet(name: str) -> str:
        return f"{(workspace / 'greeting.txt').read_text()}, {name}"

    return {"greet": greet}


def object_setup(workspace: Path) -> dict[str, Any]:
    """A namespace whose entry is an object (like an env's ``apis``), not a function."""
    import types

    return {"tools": types.SimpleNamespace(double=lambda x: 2 * x), "json": types.SimpleNamespace()}
