"""``grid --dry-run``'s estimate of what a grid will spend, from the tasks its run folders already hold (an earlier,
partial or limited run of the same spec): each stream's mean prompt and completion tokens per task (else the mean of
the streams of its condition, else of all), times the tasks it has left, priced at its model's price."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder, TaskRecord
from skilltransfer.runner.plan import StreamPlan


@dataclass(frozen=True)
class StreamEstimate:
    """One stream's estimate: the tasks it has left and their tokens and cost (None: nothing to estimate from)."""

    run: str
    tasks_left: int
    tokens: float | None
    cost_usd: float | None
    basis: str
    """Where the per-task figures come from: "this stream", "condition <c>", "all streams" or "none"."""


def _mean(records: Sequence[TaskRecord]) -> tuple[float, float] | None:
    if not records:
        return None
    return (statistics.fmean(r.prompt_tokens for r in records), statistics.fmean(r.completion_tokens for r in records))


def estimate(plans: Sequence[StreamPlan], totals: dict[str, int]) -> tuple[list[StreamEstimate], int]:
    """Each stream's estimate, and how many earlier tasks they rest on."""
    done: dict[str, list[TaskRecord]] = {}
    for plan in plans:
        try:
            done[plan.run] = RunFolder(plan.config.path).read_records()
        except InputError:
            done[plan.run] = []
    by_condition: dict[str, list[TaskRecord]] = {}
    for plan in plans:
        by_condition.setdefault(plan.config.condition, []).extend(done[plan.run])
    everything = [r for records in done.values() for r in records]
    out = []
    for plan in plans:
        left = max(0, totals[plan.run] - len(done[plan.run]))
        candidates = [("this stream", done[plan.run]),
                      (f"condition {plan.config.condition}", by_condition[plan.config.condition]),
                      ("all streams", everything)]
        found = next(((basis, _mean(records)) for basis, records in candidates if records), None)
        if found is None or found[1] is None:
            out.append(StreamEstimate(plan.run, left, None, None, "none"))
            continue
        basis, mean = found
        assert mean is not None
        price = plan.config.model.price
        cost = price.cost(round(mean[0] * left), round(mean[1] * left)) if price is not None else None
        out.append(StreamEstimate(plan.run, left, (mean[0] + mean[1]) * left, cost, basis))
    return out, len(everything)
