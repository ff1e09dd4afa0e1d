"""Expanding a grid spec into streams: one `StreamPlan` per point of the grid, with its run name and dependency."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.experiments.config import LibraryFilter, StreamConfig
from skilltransfer.experiments.spec import EnvEntry, GridSpec, PhaseSpec
from skilltransfer.induction.inducer import PromptVariant
from skilltransfer.llm.config import ModelConfig


@dataclass(frozen=True)
class StreamPlan:
    """One stream of a grid: where it logs, what it runs, and which stream it waits for."""

    run: str
    """Run name (the folder under the grid's output folder)."""
    phase: str
    env_label: str
    env: EnvEntry
    model_label: str
    model: ModelConfig
    condition: str
    order_seed: int
    induction_variant: PromptVariant
    library_filter: LibraryFilter | None
    library: str | None
    """A frozen library path (``library``, or the source stream's ``memory`` folder)."""
    depends_on: str | None
    """The source stream's run name (``library_from``)."""
    embedder: str
    embedder_cache: bool
    task_limit: int | None
    agent: dict[str, Any]
    memory: dict[str, Any]

    @property
    def env_name(self) -> str:
        return self.env.env or self.env_label

    def env_record(self) -> str:
        """What the run's config records as the env (enough to rebuild the stream)."""
        return json.dumps({"label": self.env_label, "env": self.env_name, "args": self.env.args,
                           "split": self.env.split, "order_seed": self.order_seed, "task_limit": self.task_limit},
                          sort_keys=True, default=str)

    def model_record(self) -> str:
        """The model settings that shape answers (not the endpoint URL, key, timeouts or concurrency)."""
        cfg = self.model
        return json.dumps({"label": self.model_label, "name": cfg.name, "model": cfg.resolved_model(),
                           "params": cfg.params, "extra_body": cfg.extra_body}, sort_keys=True, default=str)

    def stream_config(self, out: str | Path) -> StreamConfig:
        """The `StreamConfig` of this stream, logging under ``out``."""
        return StreamConfig(run=self.run, runs_dir=str(out), condition=self.condition, agent=self.agent,
                            induction_variant=self.induction_variant, memory=self.memory, library=self.library,
                            library_filter=self.library_filter, env=self.env_record(), model=self.model_record(),
                            embedder=self.embedder)


def _run_name(grid: GridSpec, phase: PhaseSpec, env: str, model: str, condition: str, seed: int,
              variant: PromptVariant, flt: LibraryFilter | None) -> str:
    leaf = condition
    if seed != 0 or len(phase.order_seeds) > 1:
        leaf += f"-seed{seed}"
    if variant != "full" or len(phase.induction_variants) > 1:
        leaf += f"-{variant}"
    if flt is not None:
        leaf += f"-{flt}"
    parts = [phase.name] if grid.phased else []
    return "/".join([*parts, env, model, leaf])


def plan_streams(grid: GridSpec) -> list[StreamPlan]:
    """Every stream of the grid, phases in order (run names are unique; dependencies point to earlier streams)."""
    plans: list[StreamPlan] = []
    by_phase: dict[str, list[StreamPlan]] = {}
    out = grid.out_dir
    for phase in grid.phases:
        agent = dict(phase.agent)
        for key in ("step_limit", "subtask_limit"):
            if getattr(phase.limits, key) is not None:
                agent[key] = getattr(phase.limits, key)
        mine: list[StreamPlan] = []
        axes = itertools.product(phase.envs.items(), phase.models.items(), phase.conditions, phase.order_seeds,
                                 phase.induction_variants, phase.library_filters)
        for (env_label, env), (model_label, model), condition, seed, variant, flt in axes:
            condition = condition.strip().lower()
            source = _source(phase, by_phase, env_label, model_label, condition, seed, variant)
            mine.append(StreamPlan(
                run=_run_name(grid, phase, env_label, model_label, condition, seed, variant, flt), phase=phase.name,
                env_label=env_label, env=env, model_label=model_label, model=model, condition=condition,
                order_seed=seed, induction_variant=variant, library_filter=flt,
                library=phase.library if source is None else str(out / source.run / "memory"),
                depends_on=source.run if source is not None else None, embedder=phase.embedder,
                embedder_cache=phase.embedder_cache, task_limit=env.task_limit or phase.limits.task_limit,
                agent=agent, memory=phase.memory))
        by_phase[phase.name] = mine
        plans.extend(mine)
    runs = [p.run for p in plans]
    if len(set(runs)) != len(runs):
        dup = next(r for r in runs if runs.count(r) > 1)
        raise InputError(f"two streams would share the run folder {dup!r}; give the envs/models distinct labels")
    return plans


def _source(phase: PhaseSpec, by_phase: dict[str, list[StreamPlan]], env: str, model: str, condition: str,
            seed: int, variant: PromptVariant) -> StreamPlan | None:
    spec = phase.library_from
    if spec is None:
        return None
    wanted = spec.condition[condition] if isinstance(spec.condition, dict) else spec.condition
    wanted = wanted.strip().lower()
    found = [p for p in by_phase[spec.phase] if p.env_label == env and p.model_label == model
             and p.condition == wanted and p.order_seed == seed]
    if len(found) > 1:
        found = [p for p in found if p.induction_variant == variant and p.library_filter is None]
    if len(found) != 1:
        raise InputError(f"library_from: phase {spec.phase!r} has {'no' if not found else 'several'} stream(s) for "
                         f"env {env!r}, model {model!r}, condition {wanted!r}, order seed {seed}")
    return found[0]
