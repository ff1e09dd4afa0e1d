"""``validate``'s figure (matplotlib, no global pyplot state): each diagnostic's Spearman rho with its 95 % interval on
every part (all units, and the tune and held-out parts of a split), coloured by kind; beside it the chosen diagnostic
against the outcome, one point per unit."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from matplotlib.figure import Figure

from skilltransfer.metrics.validation import ValidationReport
from skilltransfer.util.files import new_file_mode

KIND_COLORS = {"model-free": "#1b7837", "reference": "#8c510a", "llm": "#2166ac", "external": "#762a83"}
PART_MARKERS = {"all": "o", "tune": "s", "held_out": "D"}


def draw_validation(report: ValidationReport, outcome: str) -> Figure:
    """The figure (module docstring)."""
    names = list(report.diagnostics)
    figure = Figure(figsize=(12, max(3.5, 0.32 * len(names) + 1.5)))
    forest, scatter = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    parts = list(report.correlations)
    offsets = {part: (i - (len(parts) - 1) / 2) * 0.22 for i, part in enumerate(parts)}
    for y, name in enumerate(names):
        color = KIND_COLORS.get(report.kinds.get(name, ""), "#555555")
        for part in parts:
            row = report.correlation(part, name)
            if row is None or row.spearman is None:
                continue
            at = len(names) - 1 - y + offsets[part]
            if row.spearman_low is not None and row.spearman_high is not None:
                forest.plot([row.spearman_low, row.spearman_high], [at, at], color=color, linewidth=1.2)
            forest.plot([row.spearman], [at], marker=PART_MARKERS.get(part, "o"), color=color, markersize=5,
                        linestyle="none", label=part if y == 0 else None)
    forest.axvline(0, color="#999999", linewidth=0.8)
    forest.set_yticks(range(len(names)), list(reversed(names)), fontsize=8)
    forest.set_xlim(-1.05, 1.05)
    forest.set_xlabel(f"Spearman rho with {outcome} (95 % bootstrap interval)")
    sizes = ", ".join(f"{part} n={len(report.parts[part])}" for part in parts)
    forest.set_title(f"Each diagnostic against {outcome} ({sizes})", fontsize=9)
    handles = [forest.plot([], [], marker=PART_MARKERS.get(p, "o"), color="#333333", linestyle="none")[0]
               for p in parts]
    forest.legend(handles, parts, fontsize=7, loc="lower right")
    best = report.best or (names[0] if names else None)
    if best is not None:
        xs, ys = report.diagnostics[best], report.outcome
        held = set(report.parts.get("held_out", []))
        for unit, x, value in zip(report.units, xs, ys, strict=True):
            if x is None:
                continue
            scatter.plot([x], [value], marker="D" if unit in held else "o", linestyle="none",
                         color=KIND_COLORS.get(report.kinds.get(best, ""), "#555555"), alpha=0.8)
        scatter.set_xlabel(best)
        scatter.set_ylabel(outcome)
        row = report.correlation(report.chosen_on, best)
        rho = f"rho {row.spearman:+.2f} on {report.chosen_on}" if row and row.spearman is not None else ""
        scatter.set_title(f"Chosen: {best} ({rho}); diamonds: held out", fontsize=9)
    figure.tight_layout()
    return figure


def save_validation_figure(report: ValidationReport, outcome: str, path: Path) -> None:
    """Draw and write the figure atomically (the format from the suffix: png, svg, pdf)."""
    figure = draw_validation(report, outcome)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, new_file_mode())
    os.close(fd)
    try:
        figure.savefig(tmp, format=path.suffix.lstrip("."), dpi=120)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
