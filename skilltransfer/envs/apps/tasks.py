"""Turn the scenario templates into a deterministic task stream (TaskSpecs plus hidden solutions and answers)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from skilltransfer.envs.apps import templates_act, templates_ask, templates_money  # noqa: F401 - registers
from skilltransfer.envs.apps.subprocs import closure
from skilltransfer.envs.apps.template_base import TEMPLATES, Instance
from skilltransfer.envs.apps.world import World
from skilltransfer.protocols import TaskSpec

PER_TEMPLATE = 10
"""Instances per template (fewer when a template runs out of distinct ones)."""
DEV_PER_TEMPLATE = 3
"""The first instances of every template form the "dev" split; the rest are "test"."""
MAX_DRAWS = 400


@dataclass(frozen=True)
class HiddenTask:
    """What the harness keeps out of the agent's view: the reference program and the expected answer."""

    code: str
    answer: Any
    kind: str


def generate_tasks(world: World, seed: int) -> tuple[list[TaskSpec], dict[str, HiddenTask]]:
    """All tasks for ``world`` (interleaved across templates, deterministic in ``seed``) and their hidden parts."""
    specs: list[TaskSpec] = []
    hidden: dict[str, HiddenTask] = {}
    for tid in sorted(TEMPLATES):
        tpl = TEMPLATES[tid]
        rng = random.Random(f"{seed}:{tid}")
        seen: set[str] = set()
        chosen: list[Instance] = []
        for draws, inst in enumerate(tpl.make(world, rng)):
            if inst.instruction not in seen:
                seen.add(inst.instruction)
                chosen.append(inst)
            if len(chosen) == PER_TEMPLATE or draws >= MAX_DRAWS:
                break
        for i, inst in enumerate(chosen):
            task_id = f"apps-{tid}-{i:02d}"
            apps = tuple(a for a in tpl.apps if a != "supervisor")
            metadata = {"subprocedures": closure(inst.subprocedures), "direct_subprocedures": list(inst.subprocedures),
                        "kind": tpl.kind,
                        "answer_required": tpl.kind == "question", "params": inst.params, "world_seed": seed}
            specs.append(TaskSpec(id=task_id, instruction=inst.instruction, difficulty=tpl.difficulty, template=tid,
                                  apps=apps, split="dev" if i < DEV_PER_TEMPLATE else "test", metadata=metadata))
            hidden[task_id] = HiddenTask(code=inst.code, answer=inst.answer, kind=tpl.kind)
    random.Random(seed).shuffle(specs)
    return specs, hidden
