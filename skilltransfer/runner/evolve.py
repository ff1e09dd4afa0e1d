"""Registry evolution through the stream runner: `skilltransfer.lens.evolve` with real rounds of tasks.

``evolve_stream(env, model, config, dev_tasks, val_tasks, out, test_tasks=...)`` evolves the pair (skill graph +
routing notes) of a lens stream over a frozen library (``config.library``; ``config.reuse`` not ``flat``):

- the starting pair is ``config.skill_graph``, else the library decomposed by the stream's model;
- each evaluation is a stream (`run_stream`) under ``<out>/evals/<nnn>-dev|val|test-initial|test-final`` reading the
  pair saved under ``<out>/pairs/<nnn>`` (``skill_graph``); its records and trajectories become `TaskOutcome`s:
  success, tokens (every call of the task: agent, verifier, rewriter), the failure (exit status and failed checks)
  and the task's routing logs; the verifier is ``config.verifier_model`` when set (built once);
- gap reports from the failed dev tasks go to the writer (`ModelWriter` over the stream's model); the incumbent and
  each candidate run on the validation split, paired, and a candidate is committed only when it passes the commit
  test (see `skilltransfer.lens.evolve`); the test split runs once at the end for the initial and the final pair;
- ``<out>/graph`` holds the final pair (use it with ``run``/``grid``: ``--library LIB -c skill_graph=<out>/graph``),
  ``<out>/evolution.jsonl`` the baseline, one line per round and the test line (``report`` reads it).

``run_evolution_stream`` is the same as a grid stream (``evolution`` set in its settings, `EvolutionSettings`): the
stream's tasks are split in order (`split_tasks`: test, dev, val), the final pair's test run is the stream's own run
folder (its records, comparable with the other streams of the grid) and the rest lies under ``<run>/evolution``. An
evolution stream that did not finish starts again from the start.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from skilltransfer.errors import InputError
from skilltransfer.lens.decompose import decompose_library
from skilltransfer.lens.evolve import (
    EvolutionResult,
    EvolveConfig,
    ModelWriter,
    RoundLog,
    TaskOutcome,
    WriterConfig,
    check_splits,
    evolve,
    save_evolution,
)
from skilltransfer.lens.graph import SkillGraph
from skilltransfer.lens.power import DEFAULT_MDE, never_commits, power_line
from skilltransfer.llm import make_model
from skilltransfer.log import RetrievalStep, RunFolder, TaskRecord, read_steps
from skilltransfer.protocols import ChatModel, Embedder, Env, TaskSpec
from skilltransfer.runner.build import library_skills
from skilltransfer.runner.stream import StreamSummary, run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import read_run_settings

EVOLUTION_DIR = "evolution"
"""An evolution stream's evolution folder inside its run folder."""
T = TypeVar("T")
FinalTest = Callable[[SkillGraph, Sequence[TaskSpec]], list[TaskOutcome]]


def outcomes_of(folder: RunFolder, records: Sequence[TaskRecord]) -> list[TaskOutcome]:
    """The `TaskOutcome` of each record: tokens, the failure (exit status, failed checks) and the routing logs."""
    out = []
    for record in records:
        log = folder.read_trajectory(record.trajectory)
        failed = [f"{c.get('requirement')} ({c.get('detail')})" for c in log.score.get("checks", [])
                  if not c.get("passed")]
        failure = "" if record.success else "; ".join([f"exit status {record.exit_status}", *failed])[:600]
        routes = tuple(step.route for step in read_steps(log.steps, path=folder.path / record.trajectory)
                       if isinstance(step, RetrievalStep) and step.route)
        out.append(TaskOutcome(record.task_id, log.instruction, record.success,
                               record.prompt_tokens + record.completion_tokens, failure, routes))
    return out


def check_evolvable(config: StreamConfig, dev: Sequence[TaskSpec], val: Sequence[TaskSpec],
                    test: Sequence[TaskSpec] = ()) -> None:
    """Refuse a stream evolution cannot run (one line each)."""
    if config.library is None:
        raise InputError("evolve needs a frozen library (--library): the pair evolved is its skill graph")
    if config.reuse == "flat":
        raise InputError("evolve routes the skill graph: --reuse must be lens, rewrite-all or no-walk, not flat")
    check_splits(dev, val, test)


def evolve_stream(env: Env, model: ChatModel, config: StreamConfig, dev_tasks: Sequence[TaskSpec],
                  val_tasks: Sequence[TaskSpec], out: str | Path, *, embedder: Embedder,
                  test_tasks: Sequence[TaskSpec] = (), evolve_config: EvolveConfig | None = None,
                  writer_config: WriterConfig | None = None, on_round: Callable[[RoundLog], None] | None = None,
                  on_eval: Callable[[str, int], None] | None = None,
                  final_test: FinalTest | None = None) -> tuple[EvolutionResult, dict[str, Any]]:
    """Evolve the lens pair of ``config`` (see the module docstring).

    Args:
        env: the environment.
        model: the agent's and writer's model (and the verifier's, without ``config.verifier_model``).
        config: the stream settings (its ``run``/``runs_dir`` are replaced per evaluation).
        dev_tasks: the development split (rounds find failures there).
        val_tasks: the validation split (the incumbent and the candidates are scored there, paired).
        out: the output folder (new or empty).
        embedder: the retrieval embedder (the graph's).
        test_tasks: the test split (disjoint from the others), run once at the end for the initial and final pair.
        evolve_config: rounds, lambda, cost unit, the commit test.
        writer_config: the writer's candidates per round and budgets.
        on_round: called with each round's log.
        on_eval: called with (evaluation name, tasks) before each round of tasks.
        final_test: runs the final pair's test evaluation instead of a stream under ``evals`` (a grid stream runs it
            as its own run folder).

    Returns:
        The evolution result and a summary (``graph``, ``log``, evaluations run, writer tokens).

    Raises:
        InputError: no library, flat reuse, empty or overlapping splits, an ``out`` that is not new or empty.
    """
    check_evolvable(config, dev_tasks, val_tasks, test_tasks)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("the evolution folder exists and is not empty; use another --out", path=out)
    assert config.library is not None
    if config.skill_graph is not None:
        graph = SkillGraph.load(config.skill_graph, embedder)
    else:
        skills = library_skills(config.library, lenient=config.library_lenient)
        graph, _ = decompose_library(skills, model, embedder, config.lens.decompose, info={"library": config.library})
    counter = {"n": 0}
    kinds = {tuple(t.id for t in split): name for split, name in ((dev_tasks, "dev"), (val_tasks, "val"),
                                                                    (test_tasks, "test"))}
    base = config.model_copy(update={"evolution": None})
    verifier = make_model(config.verifier_model, cache=False) if config.verifier_model is not None else None

    def run_round(pair: SkillGraph, tasks: Sequence[TaskSpec], kind: str | None = None) -> list[TaskOutcome]:
        counter["n"] += 1
        name = f"{counter['n']:03d}-{kind or kinds.get(tuple(t.id for t in tasks), 'eval')}"
        pair_dir = pair.save(out / "pairs" / f"{counter['n']:03d}")
        stream = base.model_copy(update={"run": name, "runs_dir": str(out / "evals"), "skill_graph": str(pair_dir)})
        if on_eval is not None:
            on_eval(name, len(tasks))
        summary = run_stream(env, model, stream, embedder=embedder, tasks=list(tasks), verifier=verifier)
        return outcomes_of(RunFolder(summary.path), summary.records)

    def run_test(which: str, pair: SkillGraph, tasks: Sequence[TaskSpec]) -> list[TaskOutcome]:
        if which == "final" and final_test is not None:
            return final_test(pair, tasks)
        return run_round(pair, tasks, f"test-{which}")

    writer_config = writer_config or WriterConfig()
    if config.agent.harness == "paper":  # no hidden completion cap (docs/models.md)
        writer_config = writer_config.uncapped()
    writer = ModelWriter(model, writer_config)
    try:
        result = evolve(graph, dev_tasks, val_tasks, run_round, writer, test_tasks=test_tasks, config=evolve_config,
                        on_round=on_round, run_test=run_test)
    finally:
        close = getattr(verifier, "close", None)
        if close is not None:
            close()
    save_evolution(result, out)
    return result, {"graph": out / "graph", "log": out / "evolution.jsonl", "evaluations": counter["n"],
                    "writer_tokens": writer.tokens}


def split_tasks(config: StreamConfig, tasks: Sequence[T]) -> tuple[list[T], list[T], list[T]]:
    """An evolution stream's (dev, val, test) splits, cut from its tasks in order by `EvolutionSettings.sizes`: the
    test split first (so it holds the first tasks, the ones every stream of a grid with a smaller task limit also
    runs), then the development split, then the validation split.

    Raises:
        InputError: fewer tasks than the splits need.
    """
    assert config.evolution is not None
    dev, val, test = config.evolution.sizes(config.task_limit)
    if len(tasks) < dev + val + test:
        raise InputError(f"evolution needs {dev} + {val} + {test} tasks (dev + val + test); the stream has "
                         f"{len(tasks)}")
    tasks = list(tasks)
    return tasks[test:test + dev], tasks[test + dev:test + dev + val], tasks[:test]


def evolution_note(config: StreamConfig, mde: float = DEFAULT_MDE) -> str:
    """What an evolution stream will run, for ``grid --dry-run``: its split sizes, the commit test's power to commit
    a ``mde`` success gain, and, when a task limit caps the validation split below what can ever commit, that."""
    assert config.evolution is not None
    settings = config.evolution
    dev, val, test = settings.sizes(config.task_limit)
    cfg = settings.evolve_config()
    candidates = settings.writer.candidates
    never = never_commits(val, candidates, cfg, where="capped by the task limit, it")
    tail = f"; {never.split(';')[0]}" if never else f"; {power_line(val, candidates, cfg, mde)}"
    return f"evolution: dev {dev}, val {val} x {cfg.val_repeats}, test {test}{tail}"


def run_evolution_stream(env: Env, model: ChatModel, config: StreamConfig, *, embedder: Embedder | None,
                         tasks: Sequence[TaskSpec],
                         on_task: Callable[[TaskRecord], None] | None = None) -> StreamSummary:
    """Run an evolution stream (see the module docstring); returns the final pair's test run.

    Raises:
        InputError: no embedder or library, flat reuse, too few tasks, a run folder that is not an evolution's.
    """
    assert config.evolution is not None
    if embedder is None:
        raise InputError("an evolution stream needs an embedder")
    dev, val, test = split_tasks(config, tasks)
    check_evolvable(config, dev, val, test)
    folder = config.path
    if folder.exists() and any(folder.iterdir()):
        if not (folder / EVOLUTION_DIR).is_dir() and not RunFolder(folder).exists():
            raise InputError("not an evolution stream's run folder; use another run name", path=folder)
        if RunFolder(folder).exists() and read_run_settings(RunFolder(folder)).config.evolution is None:
            raise InputError("this run folder holds a plain stream, not an evolution; use another run name",
                             path=folder)
        shutil.rmtree(folder)  # an unfinished evolution starts again
    summary: dict[str, StreamSummary] = {}

    def final_test(pair: SkillGraph, batch: Sequence[TaskSpec]) -> list[TaskOutcome]:
        pair.save(folder / EVOLUTION_DIR / "graph")  # `StreamConfig.graph_source` of this stream
        summary["final"] = run_stream(env, model, config, embedder=embedder, tasks=list(batch), on_task=on_task)
        return outcomes_of(RunFolder(folder), summary["final"].records)

    settings = config.evolution
    evolve_stream(env, model, config, dev, val, folder / EVOLUTION_DIR, embedder=embedder, test_tasks=test,
                  evolve_config=settings.evolve_config(), writer_config=settings.writer, final_test=final_test)
    return summary["final"]
