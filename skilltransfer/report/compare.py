"""``report --compare A B``: which tasks flipped between two runs (solved in A only, B only, both, neither), with
McNemar's exact test on the discordant tasks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skilltransfer.errors import InputError
from skilltransfer.report.runs import RunLog, label_differences, load_runs
from skilltransfer.report.table import Table
from skilltransfer.util.files import atomic_write_text

OUTCOMES = ("A only", "B only", "both", "neither")
"""A task's outcome in the flip table: solved in A only, in B only, in both, in neither."""


@dataclass
class Comparison:
    """The flip table of run A vs run B over the tasks both finished.

    Attributes:
        a, b: the runs (their labels say every setting in which they differ).
        counts: outcome -> number of tasks.
        p_value: McNemar's exact test (two-sided binomial test of the discordant tasks at 1/2); 1.0 when none.
        tasks: the per-task table (task id, position in A, success in A and B, outcome).
        only_in_a, only_in_b: task ids finished in one run only (not compared).
    """

    a: RunLog
    b: RunLog
    counts: dict[str, int]
    p_value: float
    tasks: Table
    only_in_a: list[str]
    only_in_b: list[str]

    @property
    def summary(self) -> Table:
        """One row: the four counts, the discordant total and McNemar's p."""
        table = Table("compare_flips", "Per-task flips, A vs B",
                      ["a", "b", "tasks", *OUTCOMES, "discordant", "mcnemar_exact_p"],
                      note="tasks finished in both runs; success = 1 counts as solved; McNemar's exact test: a "
                           "two-sided binomial test of 'A only' among the discordant tasks at p = 1/2 "
                           "(scipy.stats.binomtest).")
        table.rows.append({"a": _label(self.a), "b": _label(self.b), "tasks": len(self.tasks.rows), **self.counts,
                           "discordant": self.counts["A only"] + self.counts["B only"],
                           "mcnemar_exact_p": self.p_value})
        return table


def _label(run: RunLog) -> str:
    return f"{run.name} ({run.env} / {run.model} / {run.condition})"


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact p-value (two-sided): the binomial test of ``a_only`` successes in ``a_only + b_only`` trials
    at 1/2; 1.0 with no discordant task."""
    if a_only + b_only == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(a_only, a_only + b_only, 0.5).pvalue)


def compare(a: RunLog, b: RunLog) -> Comparison:
    """The flip table of ``a`` vs ``b`` (tasks in A's stream order).

    Raises:
        InputError: the runs share no finished task.
    """
    done_a = {r.task_id: r for r in a.records}
    done_b = {r.task_id: r for r in b.records}
    shared = [task for task in done_a if task in done_b]
    if not shared:
        raise InputError(f"runs {a.name} and {b.name} share no finished task: nothing to compare", path=b.path)
    table = Table("compare_tasks", "Per-task outcome, A vs B",
                  ["task_id", "position_a", "success_a", "success_b", "outcome"],
                  note="position_a: the task's number in A's stream (1-based).")
    counts = dict.fromkeys(OUTCOMES, 0)
    for task in shared:
        sa, sb = done_a[task].success, done_b[task].success
        outcome = "both" if sa and sb else "A only" if sa else "B only" if sb else "neither"
        counts[outcome] += 1
        table.rows.append({"task_id": task, "position_a": done_a[task].position + 1, "success_a": int(sa),
                           "success_b": int(sb), "outcome": outcome})
    return Comparison(a, b, counts, mcnemar_exact(counts["A only"], counts["B only"]), table,
                      [t for t in done_a if t not in done_b], [t for t in done_b if t not in done_a])


def load_pair(path_a: Path, path_b: Path) -> tuple[RunLog, RunLog]:
    """Run A and run B, labelled against each other (`label_differences`).

    Raises:
        InputError: a path that is not one run folder.
    """
    runs = []
    for flag, path in (("A", path_a), ("B", path_b)):
        found = load_runs([path])
        if len(found) != 1:
            raise InputError(f"--compare {flag}: give one run folder (this holds {len(found)} runs)", path=path)
        runs.append(found[0])
    a, b = label_differences(runs)
    return a, b


def render(comparison: Comparison) -> str:
    """The comparison as Markdown: the two runs, the counts, McNemar's p and the tasks that flipped."""
    row = comparison.summary.rows[0]
    lines = ["# A vs B: per-task flips", "", f"- A: {row['a']} — {comparison.a.path}",
             f"- B: {row['b']} — {comparison.b.path}", "",
             "| | B solved | B failed |", "|---|---|---|",
             f"| **A solved** | {row['both']} (both) | {row['A only']} (A only) |",
             f"| **A failed** | {row['B only']} (B only) | {row['neither']} (neither) |", "",
             f"{row['tasks']} tasks finished in both; {row['discordant']} flipped. McNemar's exact test (two-sided): "
             f"p = {row['mcnemar_exact_p']:.4g}."]
    if comparison.only_in_a or comparison.only_in_b:
        lines.append(f"Not compared (finished in one run only): {len(comparison.only_in_a)} only in A, "
                     f"{len(comparison.only_in_b)} only in B.")
    for outcome in ("A only", "B only"):
        flipped = [f"{r['task_id']} (task {r['position_a']})" for r in comparison.tasks.rows if r["outcome"] == outcome]
        if flipped:
            lines += ["", f"Solved in {outcome}: " + ", ".join(flipped)]
    return "\n".join(lines) + "\n"


def write_comparison(comparison: Comparison, out: Path) -> list[Path]:
    """Write ``compare.md``, ``compare_flips.csv`` and ``compare_tasks.csv`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "compare.md", out / "compare_flips.csv", out / "compare_tasks.csv"]
    atomic_write_text(written[0], render(comparison))
    atomic_write_text(written[1], comparison.summary.to_csv())
    atomic_write_text(written[2], comparison.tasks.to_csv())
    return written
