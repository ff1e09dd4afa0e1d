"""``skilltransfer report``: tables with task-bootstrap CIs and the paper's figures, from stream-run logs.

Layout: ``runs`` finds and loads run folders, ``success`` / ``utility`` / ``transfer`` compute the tables,
``build`` assembles them, ``figures`` draws them, ``writer`` writes CSV, PNG, Markdown and HTML.
"""

from __future__ import annotations

from pathlib import Path

from skilltransfer.report.build import Report, build_report
from skilltransfer.report.embedding import EmbedderResolver
from skilltransfer.report.judgments import find_judgments
from skilltransfer.report.reuse import find_evolutions
from skilltransfer.report.runs import RunLog, find_runs, load_run, load_runs
from skilltransfer.report.selection import read_labels
from skilltransfer.report.table import Table
from skilltransfer.report.writer import Written, write_report


def make_report(paths: list[str | Path], out: str | Path = "report", *, metric: str = "official",
                embedder: str | None = None, utility: bool = True, density_bins: int = 50,
                utility_bins: int = 10, seed: int = 0, cache: bool = False,
                utility_binning: str = "first", labels: str | Path | None = None) -> tuple[Report, Written]:
    """Load the runs under ``paths``, compute the report and write it to ``out``.

    Args:
        paths: run folders, or folders holding run folders (searched recursively).
        out: the report folder.
        metric: "official" (each env's benchmark score), "success" or "reward" (for every env).
        embedder: score skills with this embedder spec instead of each run's own.
        utility: run the skill-utility analyses (they embed every run's skills and tasks).
        density_bins: transfer-density bins (capped at the stream length).
        utility_bins: equal-size bins of the utility analyses.
        seed: bootstrap seed.
        cache: keep embeddings in the on-disk embedding cache.
        utility_binning: which utility bins take the extra tasks: "first" (``np.array_split``) or "spread".
        labels: a JSON file of each task's right skills (`skilltransfer.report.selection.read_labels`).

    Raises:
        InputError: no runs under a path, broken logs, an embedder that cannot be rebuilt, bad settings.
    """
    right = read_labels(Path(labels)) if labels is not None else None
    runs = load_runs([Path(p) for p in paths])
    resolver = EmbedderResolver(embedder, cache=cache) if utility else None
    report = build_report(runs, embedder_of=resolver, metric=metric, density_bins=density_bins,
                          utility_n_bins=utility_bins, seed=seed, utility_binning=utility_binning,
                          evolutions=find_evolutions([Path(p) for p in paths]),
                          judgments=find_judgments([Path(p) for p in paths]), labels=right)
    return report, write_report(report, out)


__all__ = ["EmbedderResolver", "Report", "RunLog", "Table", "Written", "build_report", "find_runs", "load_run",
           "load_runs", "make_report", "write_report"]
