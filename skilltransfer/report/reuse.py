"""Reuse-mode tables (present when a report holds a lens run): success and tokens by reuse mode, the adaptation cost
of each routed query against its retrieved-tree size, and J per round of registry evolution (``evolution.jsonl``
files under the report's paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.metrics import bootstrap_ci
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import groups, per_task
from skilltransfer.report.table import Table
from skilltransfer.util import trees
from skilltransfer.util.files import read_text

EVOLUTION_LOG = "evolution.jsonl"


def has_lens(runs: list[RunLog]) -> bool:
    """Whether any run reused skills through the skill graph."""
    return any(run.log.config.reuse != "flat" for run in runs)


def reuse_table(runs: list[RunLog], metric: str = "success", seed: int = 0) -> Table:
    """Success (%) with a 95 % task-bootstrap CI, tokens per task and routing per query, per (env, model, condition
    label) group of runs with a skill memory (the label carries the reuse mode: ``subtask+text[lens]``)."""
    table = Table("reuse", "Reuse modes: success, tokens and routing",
                  ["env", "model", "condition", "reuse", "runs", "tasks", "success_pct", "ci_low", "ci_high",
                   "tokens_per_task", "routing_tokens_per_task", "queries", "visited_per_query",
                   "rewritten_per_query", "context_tokens_per_query", "retrieved_tree_per_query", "decisions",
                   "fallbacks", "fallback_pct"],
                  note="success as in Table 2 (each task averaged over the group's runs first, 10,000 task-bootstrap "
                       "resamples); tokens per task: prompt + completion tokens of every call of the task (agent, "
                       "induction, and under lens reuse the verifier/rewriter and decomposer calls); routing tokens: "
                       "the verifier's and rewriter's share; per query: means over the (sub)task retrievals. "
                       "decisions: routing decisions made (all units visited); fallbacks: those the verifier did not "
                       "make (no decision in its reply after the retry, or a prompt that did not fit: the fallback "
                       "decision, ACCEPT, was taken, which is what flat reuse does); fallback_pct = fallbacks / "
                       "decisions.")
    for (env, model, condition), members in groups(runs).items():
        if not members[0].log.config.has_memory:
            continue
        records = [r for run in members for r in run.records]
        values = per_task(members, metric)
        mean, low, high = bootstrap_ci(list(values.values()), seed=seed)
        routes = [route for r in records for route in r.routes]
        n = len(records) or 1

        def per_query(field: str, routes: list = routes) -> float | None:
            return float(np.mean([getattr(q, field) for q in routes])) if routes else None

        table.rows.append({
            "env": env, "model": model, "condition": condition, "reuse": members[0].log.config.reuse,
            "runs": len(members), "tasks": len(values), "success_pct": 100 * mean, "ci_low": 100 * low,
            "ci_high": 100 * high, "tokens_per_task": sum(r.prompt_tokens + r.completion_tokens for r in records) / n,
            "routing_tokens_per_task": sum(q.verifier_tokens for q in routes) / n, "queries": len(routes),
            "visited_per_query": per_query("visited"), "rewritten_per_query": per_query("rewritten"),
            "context_tokens_per_query": per_query("context_tokens"),
            "retrieved_tree_per_query": per_query("retrieved_tree"), "decisions": sum(q.visited for q in routes),
            "fallbacks": sum(q.fallbacks for q in routes),
            "fallback_pct": 100 * sum(q.fallbacks for q in routes) / max(1, sum(q.visited for q in routes))
            if routes else None})
    return table


def lens_cost_table(runs: list[RunLog]) -> Table:
    """One row per routed query: its retrieved-tree size n and adaptation cost (visited + rewritten units)."""
    table = Table("lens_cost_vs_size", "Adaptation cost against retrieved-tree size (one row per routed query)",
                  ["env", "model", "condition", "reuse", "run", "task_id", "subtask_index", "retrieved_tree",
                   "visited", "rewritten", "adaptation_cost", "context_units"],
                  note="retrieved_tree: distinct units under the seeds and walk-expanded units (what flat reuse of "
                       "them would insert); adaptation_cost = units visited + units rewritten (the study's C_adapt).")
    for run in runs:
        for record in run.records:
            for route in record.routes:
                table.rows.append({"env": run.env, "model": run.model, "condition": run.condition,
                                   "reuse": run.log.config.reuse, "run": run.name, "task_id": record.task_id,
                                   "subtask_index": route.subtask_index, "retrieved_tree": route.retrieved_tree,
                                   "visited": route.visited, "rewritten": route.rewritten,
                                   "adaptation_cost": route.adaptation_cost, "context_units": route.context_units})
    return table


def find_evolutions(paths: list[Path]) -> list[Path]:
    """``evolution.jsonl`` files at or under ``paths`` (sorted)."""
    found: set[Path] = set()
    for path in paths:
        if path.is_file() and path.name == EVOLUTION_LOG:
            found.add(path)
        elif path.is_dir():
            found.update(trees.find(path, lambda name: name == EVOLUTION_LOG))  # any depth, no recursion
    return sorted(found)


def _evolution_lines(file: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(read_text(file, what="evolution log").split("\n"), start=1):  # a regular file
        if not line.strip():
            continue
        try:
            row = untrusted.parse_json(line, file)  # depth-capped
        except untrusted.UntrustedFileError as exc:
            raise InputError(f"not an evolution log line ({exc.reason})", path=file, line=number) from None
        if not isinstance(row, dict):
            raise InputError("not an evolution log line (not an object)", path=file, line=number)
        rows.append({**row, "_line": number})
    return rows


def _source(file: Path) -> str:
    """An evolution's name: its folder, or the run folder it belongs to (a grid's evolution stream)."""
    return str(file.parent.parent if file.parent.name == "evolution" else file.parent)


def evolution_tables(files: list[Path]) -> list[Table]:
    """Per evolution: J per round (round 0: the baseline pair on the validation split) with the paired commit test,
    and the test split's initial and final pair."""
    rounds = Table("evolution_rounds", "Registry evolution: paired validation per round",
                   ["source", "round", "dev_success_pct", "gap_reports", "candidates", "incumbent_j", "best_j",
                    "best_gain", "best_gain_lower", "best_p_value", "alpha", "committed", "j", "writer_tokens"],
                   note="Each round runs the incumbent afresh on the validation split (round 1 pairs with the "
                        "baseline) and each candidate on the same tasks; best_*: the candidate with the largest paired "
                        "gain in J (its mean over tasks, the one-sided lower bound, the commit test's p-value, at "
                        "level alpha = the round's level / candidates). A candidate is committed only when it passes; "
                        "j = the kept pair's J as measured in the round (it can fall). J = success - lambda * "
                        "(task + writer tokens per task) / cost unit.")
    test = Table("evolution_test", "Registry evolution: the initial and final pair on the test split",
                 ["source", "tasks", "initial_success_pct", "initial_j", "final_success_pct", "final_j", "gain",
                  "gain_ci_low", "gain_ci_high", "gain_lower", "p_value", "same_pair", "commits", "writer_tokens"],
                 note="The evolution's headline: gain = final J - initial J on the test split, with its 95 % paired "
                      "task-bootstrap CI (gain_ci_low, gain_ci_high). Run once at the end on tasks disjoint from "
                      "the development and validation splits; the final "
                      "pair's J carries every writer token of the evolution; same_pair: nothing was committed, one "
                      "run stands for both (the gain is then the writer's cost alone).")
    for file in files:
        commits = 0
        for row in _evolution_lines(file):
            try:
                if "baseline" in row:
                    base = row["baseline"]
                    rounds.rows.append({"source": _source(file), "round": 0, "dev_success_pct": None,
                                        "gap_reports": None, "candidates": None, "incumbent_j": base["j"],
                                        "best_j": None, "best_gain": None, "best_gain_lower": None,
                                        "best_p_value": None, "alpha": None, "committed": None, "j": base["j"],
                                        "writer_tokens": None})
                elif "test" in row:
                    held = row["test"]
                    paired = held.get("paired") or {}
                    test.rows.append({"source": _source(file), "tasks": held["final"]["n"],
                                      "initial_success_pct": 100 * held["initial"]["success"],
                                      "initial_j": held["initial"]["j"],
                                      "final_success_pct": 100 * held["final"]["success"],
                                      "final_j": held["final"]["j"], "gain": held["gain"],
                                      "gain_ci_low": held.get("ci_low"), "gain_ci_high": held.get("ci_high"),
                                      "gain_lower": paired.get("lower"), "p_value": paired.get("p_value"),
                                      "same_pair": held["same_pair"], "commits": commits,
                                      "writer_tokens": held["refinement_tokens"]})
                else:
                    tested = [c for c in row["candidates"] if c.get("gain")]
                    best = max(tested, key=lambda c: c["gain"]["estimate"]) if tested else None
                    gain = best["gain"] if best is not None else {}
                    incumbent = row.get("incumbent")
                    commits += row["committed"] is not None
                    rounds.rows.append({
                        "source": _source(file), "round": row["round"], "dev_success_pct": 100 * row["dev"]["success"],
                        "gap_reports": row["gap_reports"], "candidates": len(row["candidates"]),
                        "incumbent_j": incumbent["j"] if incumbent else None,
                        "best_j": best["evaluation"]["j"] if best is not None else None,
                        "best_gain": gain.get("estimate"), "best_gain_lower": gain.get("lower"),
                        "best_p_value": gain.get("p_value"), "alpha": gain.get("alpha"),
                        "committed": row["committed"], "j": row["j"], "writer_tokens": row.get("writer_tokens")})
            except (KeyError, TypeError) as exc:
                raise InputError(f"not an evolution log line ({type(exc).__name__}: {exc})", path=file,
                                 line=row["_line"]) from None
    return [rounds, test] if test.rows else [rounds]
