"""Expanding a spec into streams: one `StreamPlan` per combination of the phase's axis values (`StreamConfig` fields
marked with `Axis`), with its run name and the stream it depends on."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import MEMORY
from skilltransfer.protocols import TaskSpec
from skilltransfer.runner.spec import LOCATION, GridSpec, env_entry, model_entry
from skilltransfer.settings.config import ORGANIZATIONS, StreamConfig, axes


@dataclass(frozen=True)
class StreamPlan:
    """One stream of a spec: its settings (where it logs included), its phase, and which stream it waits for."""

    config: StreamConfig
    phase: str
    depends_on: str | None = None
    """The run name of the stream it waits for: its library's source stream (``library_from``), or the organise
    stream of its organisation (``organization_from``), which waited for that source."""
    source: str | None = None
    """The run name of the stream whose final memory is its library (``library_from``)."""
    same_tasks: bool = False
    """``library_from.same_tasks``: the spec means this stream to run tasks its library was induced from."""

    @property
    def run(self) -> str:
        """Run name (the folder under the grid's output folder)."""
        return self.config.run


def _points(phase: Any) -> list[tuple[dict[str, Any], dict[str, int]]]:
    """Every combination of the phase's axis values (field -> value), and how many values each axis lists."""
    names, choices = [], []
    for name, axis in axes().items():
        values = getattr(phase, axis.plural)
        if axis.labelled:
            entry = env_entry if name == "env" else model_entry
            values = [entry(phase, label) for label in values]
        names.append(name)
        choices.append(list(values))
    listed = {name: len(values) for name, values in zip(names, choices, strict=True)}
    return [(dict(zip(names, combo, strict=True)), listed) for combo in itertools.product(*choices)]


def plan_streams(grid: GridSpec) -> list[StreamPlan]:
    """Every stream of the spec, phases in order (run names are unique; dependencies point to earlier streams).

    A run is named ``[<phase>/]<env label>/<model label>/<condition>[-<suffix per axis>]`` under the grid's
    output folder (`StreamConfig.run_leaf`).
    """
    plans: list[StreamPlan] = []
    by_phase: dict[str, list[StreamPlan]] = {}
    out = grid.out_dir
    settings = [name for name in StreamConfig.model_fields if name not in axes() and name not in LOCATION]
    for phase in grid.phases:
        shared = {name: getattr(phase, name) for name in settings}
        mine: list[StreamPlan] = []
        for point, listed in _points(phase):
            data = {**shared, **point, "runs_dir": str(out)}
            unread = {**data, "library_filter": None, "library_snapshot": None}  # the library is not resolved yet
            source = None if phase.library_from is None else _source(phase, by_phase,
                                                                     StreamConfig.model_validate(unread))
            if source is not None:
                data["library"] = str(out / source.run / MEMORY)
            depends = source.run if source is not None else None
            if phase.organization_from is not None and data.get("library_organization") in ("tree", "graph"):
                organizer = _organizer(phase, by_phase, StreamConfig.model_validate({**data, "library_filter": None}))
                data["organization"] = str(out / organizer.run / ORGANIZATIONS / data["library_organization"])
                depends = organizer.run  # which waited for the library's source
            config = StreamConfig.model_validate(data)
            parts = [phase.name] if grid.phased else []
            _check_label(phase.name if grid.phased else "main", "phase name", explicit=True)
            _check_label(config.env.display_label, "env label", explicit=config.env.label is not None)
            _check_label(config.model.display_label, "model label", explicit=config.model.label is not None)
            run = "/".join([*parts, config.env.display_label, config.model.display_label, config.run_leaf(listed)])
            _check_below(out, run)
            mine.append(StreamPlan(config.model_copy(update={"run": run}), phase.name, depends,
                                   source.run if source is not None else None,
                                   bool(phase.library_from is not None and phase.library_from.same_tasks)))
        by_phase[phase.name] = mine
        plans.extend(mine)
    runs = [p.run for p in plans]
    if len(set(runs)) != len(runs):
        dup = next(r for r in runs if runs.count(r) > 1)
        raise InputError(f"two streams would share the run folder {dup!r}; give the envs/models distinct labels")
    return plans


def _check_label(label: str, what: str, *, explicit: bool) -> None:
    """A label is a name, never a path: no ``/`` in one given as a label (a model id such as ``org/model`` may
    make a folder level), and never an empty, ``.`` or ``..`` level, an absolute path, a backslash or a NUL.

    Raises:
        InputError: naming the label and what to give instead.
    """
    parts = label.split("/")
    if (explicit and len(parts) > 1) or any(part in ("", ".", "..") for part in parts) or "\\" in label \
            or "\x00" in label or any(ord(c) < 32 for c in label):
        raise InputError(f"{what} {label!r} is not a name (a run folder is named by it; no '/', '..', absolute "
                         "paths or control characters): give a plain label, e.g. label: my-env")


def _check_below(out: Path, run: str) -> None:
    """Assert the run folder ``out/run`` lies below ``out`` (lexically: no level climbs out)."""
    folder = os.path.normpath(out / run)
    if os.path.commonpath([folder, os.path.normpath(out)]) != os.path.normpath(out) or folder == os.path.normpath(out):
        raise InputError(f"the run folder {run!r} would lie outside the grid's folder {out}; give plain labels")


def one_stream(grid: GridSpec, folder: Path) -> StreamConfig:
    """The only stream of a ``run`` spec, logging to ``folder``.

    Raises:
        InputError: the spec holds several streams (phases or axes with several values): that is a grid.
    """
    plans = plan_streams(grid)
    if len(plans) != 1:
        listed = ", ".join(f"{a.plural} ({n})" for n, a in axes().items()
                           if len(getattr(grid.phases[0], a.plural)) > 1)
        raise InputError(f"run runs one stream, this config gives {len(plans)} ({listed or 'phases'}); "
                         "run it with skilltransfer grid, or pick one value of each")
    return plans[0].config.model_copy(update={"run": folder.name, "runs_dir": str(folder.parent)})


def check_source_overlap(plans: list[StreamPlan], tasks: dict[str, list[TaskSpec]]) -> None:
    """Refuse a stream that evaluates tasks its library was induced from (its ``library_from`` source stream's tasks),
    unless its phase says so (``library_from.same_tasks: true``): reuse measured on the source tasks is not transfer.
    An organise stream runs no task and is not checked.

    Raises:
        InputError: the first such stream, naming it, its source and how many tasks they share.
    """
    for plan in plans:
        if plan.source is None or plan.same_tasks or plan.config.organize or plan.run not in tasks \
                or plan.source not in tasks:
            continue
        shared = {t.id for t in tasks[plan.run]} & {t.id for t in tasks[plan.source]}
        if shared:
            raise InputError(f"phase {plan.phase!r}: stream {plan.run!r} runs {len(shared)} of the tasks its library "
                             f"was induced from (stream {plan.source!r}, e.g. {min(shared)}); give the phases "
                             "disjoint splits or task ranges, or set library_from.same_tasks: true to mean it")


def _source(phase: Any, by_phase: dict[str, list[StreamPlan]], config: StreamConfig) -> StreamPlan | None:
    spec = phase.library_from
    if spec is None:
        return None
    wanted = spec.condition[config.condition] if isinstance(spec.condition, dict) else spec.condition
    wanted = wanted.strip().lower()
    env, model = config.env.display_label, spec.model or config.model.display_label
    found = [p for p in by_phase[spec.phase] if p.config.env.display_label == env
             and p.config.model.display_label == model and p.config.condition == wanted
             and p.config.order_seed == config.order_seed]
    if len(found) > 1:
        found = [p for p in found if p.config.induction_variant == config.induction_variant
                 and p.config.library_filter is None]
    where = f"phase {phase.name!r}, env {env!r}: library_from"
    if len(found) != 1:
        raise InputError(f"{where}: phase {spec.phase!r} has {'no' if not found else 'several'} stream(s) for "
                         f"env {env!r}, model {model!r}, condition {wanted!r}, order seed {config.order_seed}")
    if not found[0].config.has_memory:
        raise InputError(f"{where}: the source stream {found[0].run!r} keeps no skill memory (condition {wanted!r}); "
                         "name a condition with skills (e.g. task+text)")
    return found[0]


def _organizer(phase: Any, by_phase: dict[str, list[StreamPlan]], config: StreamConfig) -> StreamPlan:
    """The organise stream of ``phase.organization_from`` that organised ``config``'s library in its kind."""
    env, model = config.env.display_label, config.model.display_label
    found = [p for p in by_phase[phase.organization_from] if p.config.env.display_label == env
             and p.config.model.display_label == model and p.config.order_seed == config.order_seed
             and p.config.library == config.library and config.library_organization in p.config.organize]
    if len(found) != 1:
        raise InputError(f"phase {phase.name!r}, env {env!r}: organization_from: phase {phase.organization_from!r} "
                         f"has {'no' if not found else 'several'} organise stream(s) of library {config.library} "
                         f"with {config.library_organization!r} (give it organize: [tree, graph] and the same "
                         "library_from)")
    return found[0]
