"""``skilltransfer export RUNS...``: every finished task of the runs as one table (csv, parquet or jsonl)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from skilltransfer.errors import check_output_path
from skilltransfer.util.terminal import Console


def export(
    runs: Annotated[list[Path], typer.Argument(help="Run folders, or folders holding run folders (a grid's output).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default tasks.<format>).")] = None,
    fmt: Annotated[Literal["csv", "parquet", "jsonl"], typer.Option(
        "--format", help="csv (list columns as JSON text), parquet or jsonl.")] = "csv",
) -> None:
    """Write one row per finished task across runs: the settings that differ between them, outcome, tokens, cost,
    retrieved, transferred and induced skills (the same table as skilltransfer.load_runs)."""
    from skilltransfer.report.export import load_runs, write_export

    target = out or Path(f"tasks.{fmt}")
    check_output_path(target, flag="--out")
    frame = load_runs(*runs)
    write_export(frame, target, fmt)
    Console(stderr=True).print(f"{len(frame)} tasks of {frame['run'].nunique() if len(frame) else 0} runs, "
                               f"{len(frame.columns)} columns -> {target}", highlight=False, soft_wrap=True)


__all__ = ["export"]
