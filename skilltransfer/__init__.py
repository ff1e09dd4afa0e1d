"""skilltransfer: cross-task skill transfer in LLM agents (induction, memory, retrieval, metrics).

``skilltransfer.load_runs(paths)`` gives every finished task of runs as a pandas DataFrame
(`skilltransfer.report.export.load_runs`; imported on first use, it brings in pandas). The run folders themselves are
read through `skilltransfer.log`.
"""

from __future__ import annotations

from typing import Any

from skilltransfer.version import __version__


def __getattr__(name: str) -> Any:
    if name == "load_runs":  # imported on first use (pandas)
        from skilltransfer.report.export import load_runs

        return load_runs
    raise AttributeError(f"module 'skilltransfer' has no attribute {name!r}")


__all__ = ["__version__", "load_runs"]
