"""``skilltransfer evolve``: evolve a library's skill graph and routing notes on a development split, committing a
candidate only when its paired gain in J over the incumbent on a validation split passes the commit test, then score
the initial and final pair once on a test split (`skilltransfer.runner.evolve`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from skilltransfer.commands.option_groups import SPEC, ModelOptions, OptionGroup, SpecLayers, model_group, with_groups
from skilltransfer.commands.options import embedder_option
from skilltransfer.commands.run import FLAG_KEYS, allowed_imports
from skilltransfer.errors import InputError
from skilltransfer.settings.config import Condition
from skilltransfer.util.terminal import Console, echo

if TYPE_CHECKING:  # the lens is imported when the command runs
    from skilltransfer.lens.evolve import EvolveConfig

_EVOLVE = "Evolution"


@dataclass(frozen=True)
class Splits:
    """The stream's first ``dev`` tasks, the ``val`` after them and the ``test`` after those."""

    dev: int
    val: int
    test: int


def _splits(
    dev: Annotated[int, typer.Option(min=1, help="Development tasks: the first N of the stream.")] = 10,
    val: Annotated[int, typer.Option(min=1, help="Validation tasks: the N after the development tasks.")] = 10,
    test: Annotated[int, typer.Option(min=0, help="Test tasks: the N after the validation tasks, run once at the end "
                                                  "for the initial and the final pair; their paired gain is the "
                                                  "headline (0: none).")] = 10,
) -> Splits:
    return Splits(dev, val, test)


@dataclass(frozen=True)
class Evolution:
    """The evolution's settings (`EvolveConfig`), the writer's candidates per round and the effect whose commit
    power is printed first."""

    config: EvolveConfig
    candidates: int
    mde: float


def _evolution(
    rounds: Annotated[int, typer.Option(min=1, help="Evolution rounds.", rich_help_panel=_EVOLVE)] = 3,
    lam: Annotated[float, typer.Option(min=0, help="lambda in J = success - lambda * cost.",
                                       rich_help_panel=_EVOLVE)] = 0.05,
    cost_unit: Annotated[float, typer.Option(min=1, help="cost = mean tokens per task / this.",
                                             rich_help_panel=_EVOLVE)] = 10_000,
    candidates: Annotated[int, typer.Option(min=1, help="Candidate edit sets per round (writer calls).",
                                            rich_help_panel=_EVOLVE)] = 1,
    alpha: Annotated[float, typer.Option(min=0.0001, max=0.5, help="One-sided level of the commit test per round "
                                         "(split over the round's candidates).", rich_help_panel=_EVOLVE)] = 0.05,
    commit_test: Annotated[Literal["sign-flip", "bootstrap"], typer.Option(
        help="The paired commit test.", rich_help_panel=_EVOLVE)] = "sign-flip",
    val_repeats: Annotated[int, typer.Option(min=1, help="Passes of the validation split per evaluation (more: "
                                             "more power).", rich_help_panel=_EVOLVE)] = 1,
    mde: Annotated[float, typer.Option(min=0.01, max=0.5, help="The minimum success gain whose commit power is "
                                       "printed before running.", rich_help_panel=_EVOLVE)] = 0.1,
) -> Evolution:
    from skilltransfer.lens.evolve import EvolveConfig

    config = EvolveConfig(rounds=rounds, lam=lam, cost_unit_tokens=cost_unit, alpha=alpha, commit_test=commit_test,
                          val_repeats=val_repeats)
    return Evolution(config, candidates, mde)


@with_groups
def evolve(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (new or empty): graph/, evolution.jsonl, "
                                      "pairs/, evals/.")],
    env: Annotated[str | None, typer.Option(help="Env: the one whose tasks are split (as for run).")] = None,
    library: Annotated[Path | None, typer.Option(help="Frozen skill library whose skill graph is evolved.")] = None,
    condition: Annotated[Condition, typer.Option(help="Condition: the agent's (its level; induction is off with a "
                                                "library).")] = "task",
    reuse: Annotated[Literal["lens", "rewrite-all", "no-walk"], typer.Option(help="Skill reuse over the graph: "
                                                                             "lens, rewrite-all or no-walk.")]
    = "lens",
    *,
    splits: Annotated[Splits, OptionGroup(_splits)],
    evolution: Annotated[Evolution, OptionGroup(_evolution)],
    spec: Annotated[SpecLayers, SPEC],
    model: Annotated[ModelOptions, model_group(max_tokens="Most completion tokens per call, every role.")],
    embedder: Annotated[str | None, embedder_option("Embedder for retrieval: minilm, hash:DIM (test double).")] = None,
    sandbox: Annotated[bool | None, typer.Option("--sandbox/--no-sandbox", help="Run agent code in the sandbox "
                                                 "(default).", show_default=False)] = None,
    workdir: Annotated[Path | None, typer.Option(help="Where episode workspaces are created (default: a temp "
                                                      "folder).")] = None,
) -> dict[str, Any]:
    """Evolve a library's skill graph and verifier routing notes: rounds of dev tasks -> gap reports from failures ->
    writer edits -> paired validation against the incumbent; a candidate is committed only when its gain in J =
    success - lambda * cost passes the commit test; --test scores the initial and final pair once at the end."""
    from skilltransfer.errors import check_output_path
    from skilltransfer.lens.evolve import WriterConfig
    from skilltransfer.lens.power import check_can_commit, power_line
    from skilltransfer.llm import make_model
    from skilltransfer.runner.build import build_embedder, open_stream
    from skilltransfer.runner.evolve import evolve_stream
    from skilltransfer.runner.launch import checked_endpoint, run_spec

    check_output_path(out, flag="--out")
    dev, val, test, candidates = splits.dev, splits.val, splits.test, evolution.candidates
    check_can_commit(val, candidates, evolution.config, where=f"--val {val} with --candidates {candidates}")
    console = Console(stderr=True)
    console.print(power_line(val, candidates, evolution.config, evolution.mde), highlight=False, soft_wrap=True)
    given = {"env": env, "condition": condition, "reuse": reuse, "library": str(library) if library else None,
             "embedder": embedder, "sandbox": sandbox, "limit": dev + val + test}
    flags = {FLAG_KEYS[name]: value for name, value in given.items()} | model.spec_keys()
    stream = run_spec(spec.config, spec.overrides, flags, out / "evals" / "run",
                      allowed_imports=allowed_imports(spec.allow_import, env))
    spec.check_key_destinations([("model.base_url", stream.model)], model)  # before any request
    built, tasks = open_stream(stream, workdir)
    if len(tasks) < dev + val + test:
        raise InputError(f"the stream has {len(tasks)} tasks; --dev {dev} + --val {val} + --test {test} need "
                         f"{dev + val + test}")
    stream, probe = checked_endpoint(stream)  # one GET /models: the check, the model id, the window
    chat = make_model(stream.model, probe=probe)
    vectors = build_embedder(stream)
    try:
        result, info = evolve_stream(
            built, chat, stream, tasks[:dev], tasks[dev:dev + val], out, embedder=vectors,
            test_tasks=tasks[dev + val:dev + val + test],
            evolve_config=evolution.config,
            writer_config=WriterConfig(candidates=candidates),
            on_eval=lambda name, n: console.print(f"evaluating {name} ({n} tasks)", highlight=False),
            on_round=lambda log: console.print(
                f"round {log.round}: dev success {100 * log.dev.success:.0f}%, {log.gap_reports} gap reports, "
                f"{len(log.candidates)} candidates, committed {log.committed}, incumbent J {log.j_before:.4f}, "
                f"kept J {log.j:.4f}", highlight=False))
    finally:
        for part in (chat, vectors):
            close = getattr(part, "close", None)
            if close is not None:
                close()
    return _say_outcome(result, info, stream.library)


def _say_outcome(result: Any, info: dict[str, Any], library: Any) -> dict[str, Any]:
    """Print the test split's gain (or that there was none) and the validation J, with where the pair and the log
    are; returns the outcome as `evolve` does."""
    held_out = result.test
    if held_out is not None:
        ci = (f" [95% CI {held_out.ci_low:+.4f}, {held_out.ci_high:+.4f}]" if held_out.ci_low is not None
              and held_out.ci_high is not None else "")
        echo(f"test split ({held_out.final.n} tasks): gain in J {held_out.gain:+.4f}{ci} (paired, initial J "
             f"{held_out.initial.j:.4f} -> final J {held_out.final.j:.4f}"
             f"{', same pair: nothing committed' if held_out.same_pair else ''})")
    else:
        echo("no test split (--test 0): the validation J below is the one the selection was made on")
    echo(f"validation: baseline J {result.baseline.j:.4f} -> final J {result.j:.4f} after "
         f"{len(result.rounds)} rounds, {result.commits} committed ({info['evaluations']} evaluations, "
         f"{info['writer_tokens']} writer tokens); pair: {info['graph']} (run --library {library} "
         f"-c skill_graph={info['graph']}); log: {info['log']}")
    return {"baseline": result.baseline.j, "j": result.j, "commits": result.commits,
            "test_gain": held_out.gain if held_out is not None else None,
            "test_ci": (held_out.ci_low, held_out.ci_high) if held_out is not None else None,
            **{k: str(v) for k, v in info.items()}}
