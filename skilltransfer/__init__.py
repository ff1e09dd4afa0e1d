"""skilltransfer: cross-task skill transfer in LLM agents (induction, memory, retrieval, metrics).

``skilltransfer.load_runs(paths)`` gives every finished task of runs as a pandas DataFrame
(`skilltransfer.report.export.load_runs`; imported on first use, it brings in pandas). The run folders themselves are
read through `skilltransfer.log`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "load_runs":  # loaded on use: the package's face stays on the ground floor, pandas unimported
        return importlib.import_module("skilltransfer.report.export").load_runs
    raise AttributeError(f"module 'skilltransfer' has no attribute {name!r}")
