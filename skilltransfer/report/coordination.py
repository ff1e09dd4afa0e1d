"""The coordination table: per env x model x condition label (``task[metaskill]``, ...), success, the interface's own
cost and the plans and audits of coordinated runs (only runs with coordinated tasks appear), plus one "plan writing"
line per env x model: the plan writer's cost, kept out of every interface's (the first interface to reach a task
writes its plan, the others replay it)."""

from __future__ import annotations

from skilltransfer.metrics import bootstrap_ci
from skilltransfer.report.events import coordination_totals
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import groups, per_task
from skilltransfer.report.table import Table


def coordination_table(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """Success (%) with a 95 % task-bootstrap CI, plans written/replayed/fallback, nodes completed and constraints
    violated/unverified, per (env, model, condition label) group of coordinated runs."""
    table = Table("coordination", "Coordination interfaces: success, plans and audits",
                  ["env", "model", "condition", "interface", "runs", "tasks", "success_pct", "ci_low", "ci_high",
                   "tokens_per_task", "plans_written", "plans_replayed", "plan_fallbacks", "nodes", "completed_nodes",
                   "violated_constraints", "unverified_constraints", "submitted_by_node", "not_run_nodes"],
                  note="from results.jsonl's 'coordination' field; success as in Table 2 (each task averaged over "
                       "the group's runs first); tokens per task: every call of the task but the plan writer's (the "
                       "'plan writing' line has those: tokens per plan written); completed nodes: completed "
                       "(metaskill) or reported done by the host (nl-sop, prompt-graph); a violated constraint is a "
                       "node started (or reported) before one it depends on completed; unverified: the host did not "
                       "report it; submitted_by_node: tasks a plan node submitted (metaskill: the plan ended there); "
                       "not_run_nodes: planned nodes that never ran.")
    plans: dict[tuple[str, str], list[int]] = {}
    for (env, model, condition), members in groups(runs).items():
        records = [r for run in members for r in run.records]
        totals = coordination_totals(records)
        if not totals:
            continue
        values = per_task(members, metric)
        mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
        interfaces = sorted({r.coordination.interface for r in records if r.coordination is not None})
        own = [r.prompt_tokens + r.completion_tokens - (r.coordination.plan_tokens if r.coordination else 0)
               for r in records]
        plans.setdefault((env, model), []).extend(r.coordination.plan_tokens for r in records
                                                  if r.coordination is not None and r.coordination.plan_written)
        table.rows.append({
            "env": env, "model": model, "condition": condition, "interface": ",".join(interfaces),
            "runs": len(members), "tasks": len(values), "success_pct": 100 * mean, "ci_low": 100 * low,
            "ci_high": 100 * high, "tokens_per_task": sum(own) / len(own) if own else None,
            **{k: v for k, v in totals.items() if k != "tasks"}})
    for (env, model), written in sorted(plans.items()):
        table.rows.append({"env": env, "model": model, "condition": "plan writing", "interface": "plan writer",
                           "tasks": len(written), "plans_written": len(written),
                           "tokens_per_task": sum(written) / len(written) if written else None})
    return table
