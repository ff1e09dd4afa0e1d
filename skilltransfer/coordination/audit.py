"""The per-task audit of a coordinated run: what ran when, with which inputs, and whether every precedence held.

The metaskill runtime records each node attempt's start and end as it happens (`AuditLog`, thread-safe; every event
gets a sequence number from one counter, so "before" is exact even when clocks tie). The check is computed from
those events alone, never from what the scheduler believed: for every declared constraint (each ``depends_on``
edge, and each binding's source node) the dependent node's first start must come after the end of the attempt that
completed its predecessor. A dependent that started while its predecessor had not completed is a **violation**; a
constraint whose dependent never started (skipped, or the run ended) is *not exercised*. The audit also names who
called ``complete_task`` (``submitted_by``) and the planned nodes that never ran (``not_run``): a submission ends the
plan, so the nodes after it are not dispatched.

The host interfaces (nl-sop, prompt-graph) have no runtime: their audit is built from the ``STEP DONE <n>`` /
``NODE DONE <id>`` lines the host agent writes (`reported_audit`). It shows which nodes the agent reported finished
and whether the reports came in an order that respects the plan (a node reported before one it depends on is a
violation; a constraint with an unreported side is *unverified*).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skilltransfer.coordination.plan import Plan, referenced_nodes

_MARKER = re.compile(r"\b(STEP|NODE)[ _]DONE\b[ \t:#]*([A-Za-z0-9_-]+)", re.IGNORECASE)


@dataclass
class NodeAttempt:
    """One execution of a node in a fresh context."""

    attempt: int
    """1 for the first try, 2 for the retry."""
    start_seq: int
    start_s: float
    """Seconds since the task started."""
    end_seq: int | None = None
    end_s: float | None = None
    exit_status: str = ""
    """The executor's exit status ("subtask_done", "submitted", "limits_exceeded", "stuck", "context_exceeded") or
    "budget_spent" (no steps were left for it)."""
    steps: int = 0
    message: str = ""
    """The attempt's result or the reason it failed (cut to 300 characters)."""


@dataclass
class NodeRecord:
    """A node's audit record."""

    id: str
    skill: str | None
    status: str = "pending"
    """runtime: "completed", "failed", "skipped" (a predecessor failed), "stopped" (its attempt was cut when another
    node submitted the task) or "not_run" (never dispatched: the task was submitted, or the run stopped); reported
    audits: "reported" or "not_reported"."""
    attempts: list[NodeAttempt] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Binding name -> {"ref", "node", "chars" (as bound), "truncated"}."""
    output_chars: int = 0
    skipped_because: str | None = None
    reported_at: int | None = None
    """Reported audits: the executor step whose reply first reported the node done."""

    def first_start(self) -> int | None:
        return self.attempts[0].start_seq if self.attempts else None

    def completed_end(self) -> int | None:
        """The end of the attempt that completed the node (None unless completed)."""
        return self.attempts[-1].end_seq if self.status == "completed" and self.attempts else None


@dataclass
class Constraint:
    """One declared precedence: ``before`` must finish before ``after`` starts."""

    before: str
    after: str
    kind: str
    """"depends_on" or "binding"."""
    held: bool | None
    """True, False (a violation) or None (not exercised / unverified)."""
    detail: str = ""


@dataclass
class Audit:
    """The audit of one coordinated task (``to_dict()`` for the logs)."""

    interface: str
    plan_fingerprint: str
    source: str
    """"runtime" (recorded by the metaskill runtime) or "reported" (from the host agent's done lines)."""
    nodes: list[NodeRecord]
    constraints: list[Constraint]
    max_parallel: int | None = None
    peak_parallel: int = 0
    """Most node attempts running at once (runtime audits)."""
    finish: dict[str, Any] | None = None
    """The finishing context after the last node (metaskill): exit status, steps, start/end."""
    submitted_by: str | None = None
    """Who called ``complete_task``: a node id or "finish" (metaskill), "host" (nl-sop, prompt-graph); None: nobody."""
    not_run: list[str] = field(default_factory=list)
    """Planned nodes that never ran: metaskill: never dispatched (the task was submitted first, or the run stopped);
    host interfaces: not reported done before the task ended."""
    host_attempts: list[dict[str, Any]] = field(default_factory=list)
    """Host interfaces: each run of the host context (exit status, steps); a retry follows one that did not submit."""

    @property
    def completed_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.status in ("completed", "reported"))

    @property
    def violations(self) -> list[Constraint]:
        return [c for c in self.constraints if c.held is False]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(completed_nodes=self.completed_nodes, n_nodes=len(self.nodes), not_run_nodes=len(self.not_run),
                    violated_constraints=len(self.violations),
                    unverified_constraints=sum(1 for c in self.constraints if c.held is None))
        return data


def declared_constraints(plan: Plan) -> list[tuple[str, str, str]]:
    """(before, after, kind) for each ``depends_on`` edge and each binding source not already a direct dependency."""
    out: list[tuple[str, str, str]] = []
    for node in plan.nodes:
        seen = set()
        for dep in node.depends_on:
            if dep not in seen:
                seen.add(dep)
                out.append((dep, node.id, "depends_on"))
        for _, source in referenced_nodes(node.bindings):
            if source not in seen:
                seen.add(source)
                out.append((source, node.id, "binding"))
    return out


def check_precedence(plan: Plan, nodes: Sequence[NodeRecord]) -> list[Constraint]:
    """Every declared constraint checked against recorded attempt events (see the module docstring)."""
    by_id = {n.id: n for n in nodes}
    out = []
    for before, after, kind in declared_constraints(plan):
        first, prior = by_id[after], by_id.get(before)
        started = first.first_start()
        if started is None:
            out.append(Constraint(before, after, kind, None, f"{after} never started"))
            continue
        done = prior.completed_end() if prior is not None else None
        if done is None:
            out.append(Constraint(before, after, kind, False,
                                  f"{after} started (event {started}) although {before} never completed"))
        elif started < done:
            out.append(Constraint(before, after, kind, False,
                                  f"{after} started (event {started}) before {before} finished (event {done})"))
        else:
            out.append(Constraint(before, after, kind, True))
    return out


def peak_parallel(nodes: Sequence[NodeRecord]) -> int:
    """The most attempts running at once, from their start and end events."""
    events = []
    for node in nodes:
        for attempt in node.attempts:
            events.append((attempt.start_seq, 1))
            if attempt.end_seq is not None:
                events.append((attempt.end_seq, -1))
    running = peak = 0
    for _, change in sorted(events):
        running += change
        peak = max(peak, running)
    return peak


class AuditLog:
    """Records a runtime's node events from any thread; `audit()` builds the `Audit`.

    Args:
        plan: the plan being run.
        interface: the interface name.
        max_parallel: K.
    """

    def __init__(self, plan: Plan, interface: str, max_parallel: int | None = None) -> None:
        self.plan = plan
        self.interface = interface
        self.max_parallel = max_parallel
        self.nodes = {node.id: NodeRecord(node.id, node.skill) for node in plan.nodes}
        self.finish: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._t0 = time.perf_counter()

    def _now(self) -> float:
        return round(time.perf_counter() - self._t0, 6)

    def start(self, node_id: str) -> NodeAttempt:
        """Record that a new attempt of ``node_id`` starts now."""
        with self._lock:
            record = self.nodes[node_id]
            attempt = NodeAttempt(len(record.attempts) + 1, next(self._seq), self._now())
            record.attempts.append(attempt)
            return attempt

    def end(self, attempt: NodeAttempt, exit_status: str, *, steps: int = 0, message: str = "") -> None:
        """Record that ``attempt`` ended now."""
        with self._lock:
            attempt.end_seq, attempt.end_s = next(self._seq), self._now()
            attempt.exit_status, attempt.steps, attempt.message = exit_status, steps, message[:300]

    def bind(self, node_id: str, inputs: dict[str, dict[str, Any]]) -> None:
        with self._lock:
            self.nodes[node_id].inputs = inputs

    def settle(self, node_id: str, status: str, *, output_chars: int = 0, skipped_because: str | None = None) -> None:
        """Record a node's final status."""
        with self._lock:
            record = self.nodes[node_id]
            record.status, record.output_chars, record.skipped_because = status, output_chars, skipped_because

    def mark_finish(self, **data: Any) -> dict[str, Any]:
        """Record the finishing context (returns the dict, to be completed by the caller)."""
        with self._lock:
            self.finish = {"start_seq": next(self._seq), "start_s": self._now(), **data}
            return self.finish

    def end_finish(self, **data: Any) -> None:
        with self._lock:
            assert self.finish is not None
            self.finish.update(end_seq=next(self._seq), end_s=self._now(), **data)

    def audit(self, *, submitted_by: str | None = None) -> Audit:
        with self._lock:
            nodes = [self.nodes[node_id] for node_id in self.plan.ids]
            return Audit(self.interface, self.plan.fingerprint, "runtime", nodes, check_precedence(self.plan, nodes),
                         max_parallel=self.max_parallel, peak_parallel=peak_parallel(nodes), finish=self.finish,
                         submitted_by=submitted_by, not_run=[n.id for n in nodes if not n.attempts])


def reported_audit(plan: Plan, interface: str, replies: Sequence[str], *, by_number: bool) -> Audit:
    """The audit of a host interface from the done lines in the agent's replies (see the module docstring).

    Args:
        plan: the plan.
        interface: "nl-sop" or "prompt-graph".
        replies: the executor's replies in step order.
        by_number: done lines name steps by number (nl-sop: ``STEP DONE 2`` is the second node of the procedure's
            topological order) rather than by node id.
    """
    order = plan.topological_order()
    nodes = {node.id: NodeRecord(node.id, node.skill, status="not_reported") for node in plan.nodes}
    seq = 0
    for step, reply in enumerate(replies):
        for match in _MARKER.finditer(reply):
            name = match.group(2)
            if by_number and name.isdigit():
                node_id = order[int(name) - 1] if 1 <= int(name) <= len(order) else None
            else:
                node_id = next((i for i in nodes if i.lower() == name.lower()), None)
            if node_id is None or nodes[node_id].reported_at is not None:
                continue
            record = nodes[node_id]
            record.status, record.reported_at = "reported", step
            record.attempts.append(NodeAttempt(1, seq, 0.0, end_seq=seq, exit_status="reported"))
            seq += 1
    constraints = []
    for before, after, kind in declared_constraints(plan):
        first, prior = nodes[after], nodes[before]
        if first.reported_at is None or prior.reported_at is None:
            missing = " and ".join(n for n in (before, after) if nodes[n].reported_at is None)
            constraints.append(Constraint(before, after, kind, None, f"not reported done: {missing}"))
        elif first.attempts[0].end_seq < prior.attempts[0].end_seq:  # type: ignore[operator]
            constraints.append(Constraint(before, after, kind, False, f"{after} was reported done before {before}"))
        else:
            constraints.append(Constraint(before, after, kind, True))
    records = [nodes[node_id] for node_id in plan.ids]
    return Audit(interface, plan.fingerprint, "reported", records, constraints,
                 not_run=[n.id for n in records if n.reported_at is None])
