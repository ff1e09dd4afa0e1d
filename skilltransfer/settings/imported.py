"""Trajectories read from ATIF (`skilltransfer.log.atif_files`) written as a run folder, so everything that reads
runs (``view``, ``show``, ``report``) reads them: an *imported run*.

Its ``config.json`` records a stream of condition ``task`` whose env is labelled with the agent that wrote the
trajectories and whose model is the model they name (recorded as ``openai:<model id>``: the toolkit never calls it);
``provenance.imported`` names the files. Each trajectory is a finished task (its reward from the Harbor trial, or 0
and no success when unknown), its replies and reasoning in ``prompts.jsonl``. Trajectories this toolkit exported
come back with their own records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from skilltransfer.agents.config import AgentConfig
from skilltransfer.log import RunFolder
from skilltransfer.log.atif_import import ImportedTrajectory
from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig
from skilltransfer.settings.recorded import RunSettings


def imported_settings(name: str, agent: str, model: str | None, task_ids: list[str],
                      sources: Sequence[str] = ()) -> RunSettings:
    """The recorded settings of an imported run (see the module docstring)."""
    spec = ModelSpec(name="openai", model=model or "unknown", label=agent)
    config = StreamConfig(run=name, env=EnvSpec(label=agent), model=spec, condition="task").recorded()
    return RunSettings(config=config, level="task", skill_format=None, agent=AgentConfig(), induction=None,
                       prompt_ids={}, embedder_id=None, task_ids=task_ids,
                       created=datetime.now(UTC).isoformat(timespec="seconds"),
                       provenance={"imported": list(sources)[:1000], "format": "ATIF"})


def write_imported_run(folder: str | Path, trajectories: Sequence[ImportedTrajectory], *, name: str) -> RunFolder:
    """Write ``trajectories`` (one agent's, in order) as the run folder ``folder`` (new).

    Raises:
        InputError: the folder cannot be written.
    """
    run = RunFolder(folder)
    first = trajectories[0] if trajectories else None
    settings = imported_settings(name, first.agent if first else "atif", first.model if first else None,
                                 [t.trajectory.task_id for t in trajectories], [t.source for t in trajectories])
    run.write_config(settings)
    for position, item in enumerate(trajectories):
        relative = run.trajectory_file(item.trajectory.task_id)
        run.write_trajectory(relative, item.trajectory.model_copy(update={"position": position}))
        if item.prompts:
            run.prompts.add(list(item.prompts.values()))
        run.commit(item.record.model_copy(update={"run": name, "position": position, "trajectory": relative}), None)
    return run


def group_name(agent: str, model: str | None) -> str:
    """A folder-safe run name for one agent and model."""
    text = f"{agent}-{model}" if model else agent
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "atif"


def write_imported_runs(root: str | Path, trajectories: Sequence[ImportedTrajectory]) -> list[Path]:
    """Write ``trajectories`` below ``root`` as one imported run per agent and model (``<agent>-<model>``)."""
    groups: dict[tuple[str, str | None], list[ImportedTrajectory]] = {}
    for item in trajectories:
        groups.setdefault((item.agent, item.model), []).append(item)
    out = []
    for (agent, model), items in groups.items():
        name = group_name(agent, model)
        folder = Path(root) / name
        suffix = 2
        while folder.exists():
            folder = Path(root) / f"{name}-{suffix}"
            suffix += 1
        write_imported_run(folder, items, name=folder.name)
        out.append(folder)
    return out


__all__ = ["group_name", "imported_settings", "write_imported_run", "write_imported_runs"]
