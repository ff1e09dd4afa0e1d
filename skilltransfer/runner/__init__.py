"""experiments subpackage: running streams and grids, and reading their run logs.

``from skilltransfer.experiments import load_runs`` gives every finished task of runs as a pandas DataFrame
(`skilltransfer.experiments.export.load_runs`; imported on first use, it brings in pandas).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "load_runs":
        from skilltransfer.experiments.export import load_runs

        return load_runs
    raise AttributeError(f"module 'skilltransfer.experiments' has no attribute {name!r}")
