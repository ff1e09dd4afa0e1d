"""The report's tokens-and-cost table: per run, what its finished tasks spent (tokens by kind and, at the model's
price, dollars; see ``models.<label>.price``) and how many ended in an error or a timeout."""

from __future__ import annotations

from skilltransfer.log import TASK_ERROR, TASK_TIMEOUT
from skilltransfer.report.events import run_cost
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import condition_order
from skilltransfer.report.table import Table


def cost_table(runs: list[RunLog]) -> Table:
    """One row per run, beside Table 2: tasks, prompt / completion / reasoning tokens, tokens per task, cost and cost
    per task (empty without a price), tasks ended by an error or a timeout; and a total row."""
    table = Table("cost", "Tokens and cost per run",
                  ["run", "env", "model", "condition", "tasks", "prompt_tokens", "completion_tokens",
                   "reasoning_tokens", "tokens_per_task", "cost_usd", "cost_per_task_usd", "task_errors"],
                  note="sums over results.jsonl; cost_usd at the model's price (models.<label>.price, dollars per "
                       "million input/output tokens, reasoning billed as output), empty without one; task_errors: "
                       "exit status error or task_timeout.")
    total_tokens = total_tasks = 0
    costs: list[float] = []
    for run in sorted(runs, key=lambda r: (r.env, r.model, condition_order(r.condition), r.name)):
        records = run.records
        n = len(records)
        prompt = sum(r.prompt_tokens for r in records)
        completion = sum(r.completion_tokens for r in records)
        cost = run_cost(records)
        total_tokens += prompt + completion
        total_tasks += n
        if cost is not None:
            costs.append(cost)
        table.rows.append({
            "run": run.name, "env": run.env, "model": run.model, "condition": run.condition, "tasks": n,
            "prompt_tokens": prompt, "completion_tokens": completion,
            "reasoning_tokens": sum(r.reasoning_tokens for r in records),
            "tokens_per_task": (prompt + completion) / n if n else None, "cost_usd": cost,
            "cost_per_task_usd": cost / n if cost is not None and n else None,
            "task_errors": sum(r.exit_status in (TASK_ERROR, TASK_TIMEOUT) for r in records)})
    if len(table.rows) > 1:
        table.rows.append({"run": "(all runs)", "env": "", "model": "", "condition": "", "tasks": total_tasks,
                           "prompt_tokens": sum(r["prompt_tokens"] for r in table.rows),
                           "completion_tokens": sum(r["completion_tokens"] for r in table.rows),
                           "reasoning_tokens": sum(r["reasoning_tokens"] for r in table.rows),
                           "tokens_per_task": total_tokens / total_tasks if total_tasks else None,
                           "cost_usd": round(sum(costs), 6) if costs else None,
                           "cost_per_task_usd": sum(costs) / total_tasks if costs and total_tasks else None,
                           "task_errors": sum(r["task_errors"] for r in table.rows)})
    return table
