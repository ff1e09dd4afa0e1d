"""The coordination table: per env x model x condition label (``task[metaskill]``, ...), success and the plans and
audits of coordinated runs (only runs with coordinated tasks appear)."""

from __future__ import annotations

from skilltransfer.experiments.report.runs import RunLog
from skilltransfer.experiments.report.success import groups, per_task
from skilltransfer.experiments.report.table import Table
from skilltransfer.experiments.summary import coordination_totals
from skilltransfer.metrics import bootstrap_ci


def coordination_table(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """Success (%) with a 95 % task-bootstrap CI, plans written/replayed/fallback, nodes completed and constraints
    violated/unverified, per (env, model, condition label) group of coordinated runs."""
    table = Table("coordination", "Coordination interfaces: success, plans and audits",
                  ["env", "model", "condition", "interface", "runs", "tasks", "success_pct", "ci_low", "ci_high",
                   "plans_written", "plans_replayed", "plan_fallbacks", "nodes", "completed_nodes",
                   "violated_constraints", "unverified_constraints"],
                  note="from results.jsonl's 'coordination' field; success as in Table 2 (each task averaged over "
                       "the group's runs first); completed nodes: completed (metaskill) or reported done by the "
                       "host (nl-sop, prompt-graph); a violated constraint is a node started (or reported) before "
                       "one it depends on completed; unverified: the host did not report it.")
    for (env, model, condition), members in groups(runs).items():
        records = [r for run in members for r in run.records]
        totals = coordination_totals(records)
        if not totals:
            continue
        values = per_task(members, metric)
        mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
        interfaces = sorted({r.coordination.interface for r in records if r.coordination is not None})
        table.rows.append({
            "env": env, "model": model, "condition": condition, "interface": ",".join(interfaces),
            "runs": len(members), "tasks": len(values), "success_pct": 100 * mean, "ci_low": 100 * low,
            "ci_high": 100 * high, **{k: v for k, v in totals.items() if k != "tasks"}})
    return table
