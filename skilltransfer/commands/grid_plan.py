"""What ``skilltransfer grid`` says before it runs: the ``--dry-run`` listing (streams, tasks, what each reads, the
spending estimate) and, before a run, the notes on evolutions, frozen libraries, retrieval modes and near-miss
corpora."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skilltransfer.errors import InputError
from skilltransfer.util.terminal import Console, echo

if TYPE_CHECKING:  # the runner is imported when the command runs: every CLI start imports all command modules
    from skilltransfer.settings.config import StreamConfig


def tokens_text(n: int) -> str:
    """A token count, short: 1.23M, 4.5k, 678."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def print_dry_run(grid_spec: Any) -> None:
    """Each stream of ``grid_spec`` with its tasks, what it reads and its estimated spending, then the totals (the
    same checks as a run: a spec that cannot run fails here)."""
    from skilltransfer.runner.estimate import estimate
    from skilltransfer.runner.evolve import evolution_note
    from skilltransfer.runner.grid import resolve_streams

    plans, tasks = resolve_streams(grid_spec)
    width = max(len(plan.run) for plan in plans)
    counts = {plan.run: 0 if plan.config.organize else len(tasks[plan.run]) for plan in plans}  # organise: none
    estimates, basis = estimate(plans, counts)
    by_run = {e.run: e for e in estimates}
    for plan in plans:
        library = plan.source or plan.config.library
        snapshot = plan.config.library_snapshot
        which = "its final memory, after it" if snapshot is None else f"snapshot {snapshot}: after its first " \
            f"{snapshot} tasks"
        reads = f"  library: {library}" + (f" ({which})" if plan.source else "") if library else ""
        guess = by_run[plan.run]
        spend = ""
        if basis and guess.tokens is not None:
            spend = f"  {guess.tasks_left} left, ~{tokens_text(round(guess.tokens))} tokens" + (
                f", ~${guess.cost_usd:,.2f}" if guess.cost_usd is not None else "")
        split = f" ({plan.config.env.split} split)" if plan.config.env.split and counts[plan.run] else ""
        what = f" (organises its library: {', '.join(plan.config.organize)})" if plan.config.organize else ""
        evolution = f"\n    {evolution_note(plan.config)}" if plan.config.evolution is not None else ""
        echo(f"{plan.run:<{width}}  {counts[plan.run]:>4} tasks{split}{what}{spend}{reads}{evolution}")
    echo(f"{len(plans)} streams, {sum(counts.values())} tasks -> {grid_spec.out_dir}")
    if basis:
        tokens = sum(e.tokens or 0 for e in estimates)
        costs = [e.cost_usd for e in estimates if e.cost_usd is not None]
        echo(f"estimate from {basis} earlier tasks of this spec: {sum(e.tasks_left for e in estimates)} "
             f"tasks left, ~{tokens_text(round(tokens))} tokens"
             + (f", ~${sum(costs):,.2f}" if costs else " (no price: set models.<label>.price for a cost)"))
    else:
        echo("no earlier tasks of this spec to estimate tokens and cost from (run some, e.g. with "
             "--limit 2 or --token-limit, then --dry-run again)")


def say_before_running(grid_spec: Any, console: Console) -> None:
    """What an evolution can detect, what reading each frozen library left out, what each retrieval mode does and
    each near-miss corpus: each said once, before anything runs."""
    from skilltransfer.runner.evolve import evolution_note
    from skilltransfer.runner.plan import plan_streams
    from skilltransfer.runner.stream_build import near_miss_note

    libraries: set[tuple[str, int | None, int, str]] = set()
    retrievals: set[tuple[str, str, str, str, str]] = set()
    said: set[str] = set()
    corpora: set[tuple[str, ...]] = set()
    plans = plan_streams(grid_spec)
    for plan in plans:
        if plan.config.evolution is not None:
            console.print(f"{plan.run}: {evolution_note(plan.config)}", highlight=False, soft_wrap=True)
        key = (str(plan.config.library), plan.config.library_snapshot, plan.config.library_resource_bytes,
               plan.config.library_front_matter)
        if plan.config.library is not None and plan.source is None and key not in libraries:
            libraries.add(key)  # skills not read, files the agent is not shown: said once per library
            for note in _library_notes(plan.config):
                console.print(f"library {plan.config.library}: {note}", highlight=False, markup=False, soft_wrap=True)
        mode = (plan.config.retrieval, plan.config.retrieval_text, str(plan.config.library),
                str(plan.config.organization), str(plan.source))
        if plan.config.retrieval != "dense" and plan.config.has_memory and mode not in retrievals:
            retrievals.add(mode)  # what each retrieval mode does, said once per mode and library
            retrieval = _retrieval_note(plan.config, plan.source)
            if retrieval is not None and retrieval not in said:
                said.add(retrieval)
                console.print(f"retrieval: {retrieval}", highlight=False, markup=False, soft_wrap=True)
        corpus = tuple(plan.config.near_miss.corpus)
        if plan.config.library_size is not None and corpus not in corpora:  # said once per corpus
            corpora.add(corpus)
            console.print(near_miss_note(plan.config, [p.config.library_size for p in plans
                                                        if p.config.near_miss.corpus == list(corpus)]),
                          highlight=False, markup=False, soft_wrap=True)


def _retrieval_note(config: StreamConfig, source: str | None) -> str | None:
    """What a stream's retrieval mode does (`skilltransfer.runner.stream.retrieval_note`); ``source``: the stream
    whose memory is the library (not written yet), else None."""
    from skilltransfer.runner.stream_build import StreamInputs, prepare_stream, retrieval_note

    if source is not None:
        return retrieval_note(config, StreamInputs(), library_from=source)
    try:
        inputs = prepare_stream(config) if config.library is not None else StreamInputs()
    except InputError:
        return None  # the grid's checks say why
    return retrieval_note(config, inputs)


def _library_notes(config: StreamConfig) -> list[str]:
    """What reading a stream's frozen library left out (none when it cannot be read: the grid's checks say why)."""
    from skilltransfer.runner.build import stream_library_read

    try:
        read = stream_library_read(config)
    except InputError:
        return []
    return read.notes() if read is not None else []
