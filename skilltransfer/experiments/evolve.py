"""Registry evolution through the stream runner: `skilltransfer.lens.evolve` with real rounds of tasks.

``evolve_stream(env, model, config, dev_tasks, val_tasks, out)`` evolves the pair (skill graph + routing notes) of a
lens stream over a frozen library (``config.library``; ``config.reuse`` not ``flat``):

- the starting pair is ``config.skill_graph``, else the library decomposed by the stream's model;
- each round of tasks is a stream (`run_stream`) under ``<out>/evals/<nnn>-dev|val`` reading the pair saved under
  ``<out>/pairs/<nnn>`` (``skill_graph``); its records and trajectories become `TaskOutcome`s: success, tokens (every
  call of the task: agent, verifier, rewriter), the failure (exit status and failed checks) and the task's routing
  logs;
- gap reports from the failed dev tasks go to the writer (`ModelWriter` over the stream's model); each candidate is
  evaluated on the validation split and committed only if it raises J (see `skilltransfer.lens.evolve`);
- ``<out>/graph`` holds the final pair (use it with ``run``/``grid``: ``--library LIB -c skill_graph=<out>/graph``),
  ``<out>/evolution.jsonl`` the baseline and one line per round (``report`` reads it: J per round).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.experiments.config import StreamConfig
from skilltransfer.experiments.runlog import RunFolder, TaskRecord
from skilltransfer.experiments.stream import run_stream
from skilltransfer.lens.decompose import decompose_library
from skilltransfer.lens.evolve import (
    EvolutionResult,
    EvolveConfig,
    ModelWriter,
    RoundLog,
    TaskOutcome,
    WriterConfig,
    evolve,
    save_evolution,
)
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.memory.library import load_library
from skilltransfer.protocols import ChatModel, Embedder, Env, TaskSpec


def outcomes_of(folder: RunFolder, records: Sequence[TaskRecord]) -> list[TaskOutcome]:
    """The `TaskOutcome` of each record: tokens, the failure (exit status, failed checks) and the routing logs."""
    out = []
    for record in records:
        log = folder.read_trajectory(record.trajectory)
        failed = [f"{c.get('requirement')} ({c.get('detail')})" for c in log.score.get("checks", [])
                  if not c.get("passed")]
        failure = "" if record.success else "; ".join([f"exit status {record.exit_status}", *failed])[:600]
        routes = tuple(step["route"] for step in log.steps if step.get("type") == "RetrievalStep" and step.get("route"))
        out.append(TaskOutcome(record.task_id, log.instruction, record.success,
                               record.prompt_tokens + record.completion_tokens, failure, routes))
    return out


def check_evolvable(config: StreamConfig, dev: Sequence[TaskSpec], val: Sequence[TaskSpec]) -> None:
    """Refuse a stream evolution cannot run (one line each)."""
    if config.library is None:
        raise InputError("evolve needs a frozen library (--library): the pair evolved is its skill graph")
    if config.reuse == "flat":
        raise InputError("evolve routes the skill graph: --reuse must be lens, rewrite-all or no-walk, not flat")
    if not dev or not val:
        raise InputError(f"evolve needs development and validation tasks (got {len(dev)} and {len(val)})")
    overlap = {t.id for t in dev} & {t.id for t in val}
    if overlap:
        raise InputError(f"development and validation splits share tasks: {', '.join(sorted(overlap)[:3])}")


def evolve_stream(env: Env, model: ChatModel, config: StreamConfig, dev_tasks: Sequence[TaskSpec],
                  val_tasks: Sequence[TaskSpec], out: str | Path, *, embedder: Embedder,
                  evolve_config: EvolveConfig | None = None, writer_config: WriterConfig | None = None,
                  on_round: Callable[[RoundLog], None] | None = None,
                  on_eval: Callable[[str, int], None] | None = None) -> tuple[EvolutionResult, dict[str, Any]]:
    """Evolve the lens pair of ``config`` (see the module docstring).

    Args:
        env: the environment.
        model: the agent's, verifier's and writer's model.
        config: the stream settings (its ``run``/``runs_dir`` are replaced per evaluation).
        dev_tasks: the development split (rounds find failures there).
        val_tasks: the validation split (the baseline and candidates are scored there).
        out: the output folder (new or empty).
        embedder: the retrieval embedder (the graph's).
        evolve_config: rounds, lambda, cost unit.
        writer_config: the writer's candidates per round and budgets.
        on_round: called with each round's log.
        on_eval: called with (evaluation name, tasks) before each round of tasks.

    Returns:
        The evolution result and a summary (``graph``, ``log``, evaluations run, writer tokens).

    Raises:
        InputError: no library, flat reuse, empty or overlapping splits, an ``out`` that is not new or empty.
    """
    check_evolvable(config, dev_tasks, val_tasks)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("the evolution folder exists and is not empty; use another --out", path=out)
    assert config.library is not None
    if config.skill_graph is not None:
        graph = SkillGraph.load(config.skill_graph, embedder)
    else:
        graph, _ = decompose_library(load_library(config.library), model, embedder, config.lens.decompose,
                                     info={"library": config.library})
    counter = {"n": 0}
    dev_ids = [t.id for t in dev_tasks]

    def run_round(pair: SkillGraph, tasks: Sequence[TaskSpec]) -> list[TaskOutcome]:
        counter["n"] += 1
        kind = "dev" if [t.id for t in tasks] == dev_ids else "val"
        name = f"{counter['n']:03d}-{kind}"
        pair_dir = pair.save(out / "pairs" / f"{counter['n']:03d}")
        stream = config.model_copy(update={"run": name, "runs_dir": str(out / "evals"),
                                           "skill_graph": str(pair_dir)})
        if on_eval is not None:
            on_eval(name, len(tasks))
        summary = run_stream(env, model, stream, embedder=embedder, tasks=list(tasks))
        return outcomes_of(RunFolder(summary.path), summary.records)

    writer = ModelWriter(model, writer_config)
    result = evolve(graph, dev_tasks, val_tasks, run_round, writer, config=evolve_config, on_round=on_round)
    save_evolution(result, out)
    return result, {"graph": out / "graph", "log": out / "evolution.jsonl", "evaluations": counter["n"],
                    "writer_tokens": writer.tokens}
