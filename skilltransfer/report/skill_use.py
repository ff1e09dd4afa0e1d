"""The ``skill_use`` table (issue 39 §2): retrieved -> used -> helped, per env x model x condition label (the reuse
mode is part of the label) and library size.

Each row counts the retrievals whose use is measured (``RetrievedSkill.used``): code skills (``ran``: the calls of
the skill's functions after the retrieval, as the sandbox recorded them; used when at least one) and text skills
whose following share is defined (`skilltransfer.metrics.following`: the skill names at least one API call; used
when the share is at least 0.5). ``used_pct`` is the share used, ``helped_pct`` the share used in a task that
succeeded; ``success_used_pct`` and ``success_unused_pct`` are the success rates of the tasks behind used and unused
retrievals (correlational: the causal effect of showing a skill is the ``skill_effects`` table's). Library size: the
memory size after the task, in bins 1-5, 6-20, 21-100, >100. The table appears when some retrieval's use is measured.
"""

from __future__ import annotations

from typing import Any

from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import groups
from skilltransfer.report.table import Table

SIZE_BINS = ((1, 5), (6, 20), (21, 100), (101, None))
NOTE = ("over retrievals of code skills (used = the skill's function ran after the retrieval, as the sandbox recorded "
        "it) and of text skills that name an API call (used = following share >= 0.5: the share of the skill's API "
        "calls, in order, made after the retrieval); helped = used in a task that succeeded; success "
        "rates of the tasks behind used and unused retrievals are correlational (see skill_effects for causal "
        "effects). library size = skills in memory after the task (docs/skill-use.md).")


def _size_bin(size: int) -> str:
    for low, high in SIZE_BINS:
        if size >= low and (high is None or size <= high):
            return f"{low}-{high}" if high is not None else f">{low - 1}"
    return "0"


def has_following(runs: list[RunLog]) -> bool:
    return any(r.used is not None for run in runs for record in run.records for r in record.retrieved)


def skill_use_table(runs: list[RunLog]) -> Table:
    table = Table("skill_use", "Retrieved -> used -> helped (code and text skills)",
                  ["env", "model", "condition", "library_size", "retrieved", "used_pct", "helped_pct",
                   "success_used_pct", "success_unused_pct"], note=NOTE)
    for (env, model, condition), members in groups(runs).items():
        cells: dict[str, list[tuple[bool, bool]]] = {}
        for run in members:
            for record in run.records:
                for hit in record.retrieved:
                    if hit.used is not None:
                        cells.setdefault(_size_bin(record.memory_size), []).append((hit.used, record.success))
        for size in sorted(cells, key=lambda s: int(s.lstrip(">").split("-")[0])):
            pairs = cells[size]
            used = [ok for is_used, ok in pairs if is_used]
            unused = [ok for is_used, ok in pairs if not is_used]
            row: dict[str, Any] = {"env": env, "model": model, "condition": condition, "library_size": size,
                                   "retrieved": len(pairs), "used_pct": 100 * len(used) / len(pairs),
                                   "helped_pct": 100 * sum(used) / len(pairs),
                                   "success_used_pct": 100 * sum(used) / len(used) if used else None,
                                   "success_unused_pct": 100 * sum(unused) / len(unused) if unused else None}
            table.rows.append(row)
    return table
