"""Build small but real run folders for report tests: ``run_stream`` over the counter env with scripted models.

Two envs (``tiny-a`` with two models, ``tiny-b`` with one) x the six conditions; each model fails a fixed set of
targets (it adds one too many), and induction replies cycle through a few different skills so utilities differ.
Code skills are not load-checked in a subprocess (``validate_code`` off; the memory's tests cover it) to keep this fast.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from helpers_tinyenv import CounterScript, TinyEnv

from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log import TaskRecord, TrajectoryLog
from skilltransfer.protocols import TaskSpec
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import CONDITIONS, ModelSpec, StreamConfig

PNG = b"\x89PNG\r\n\x1a\n"
"""The first bytes of every PNG file (a figure a report wrote)."""

ENV_TARGETS = {"tiny-a": [3, 5, 2, 7, 4, 9, 6, 8, 1, 10], "tiny-b": [13, 20, 17, 14, 19, 15, 18, 16]}
MODELS = {"tiny-a": ["model-x", "model-y"], "tiny-b": ["model-x"]}
DESCRIPTIONS = ["Set the counter to a target value.", "Read the counter and print its value.",
                "Reset the counter to zero before adding.", "Add a number to the counter and finish the task.",
                "Check the counter value against the target then complete the task."]


CONTEXTS = ["The counter tracks museum visitors today.", "Reset the counter first and check its value.",
            "The warehouse counter holds the number of boxes.", "Read the counter, then add what is needed.",
            "A score board counter for the chess club.", "Complete the task once the counter is right."]


class GradedTinyEnv(TinyEnv):
    """The counter env with varied instructions and difficulty labels 1, 2, 3 repeating along the stream."""

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        return [TaskSpec(id=t.id, instruction=f"{CONTEXTS[(i * 5) % len(CONTEXTS)]} {t.instruction}",
                         difficulty=1 + i % 3, template=t.template, apps=t.apps, metadata=t.metadata)
                for i, t in enumerate(super().tasks(split))]


def skill_reply(fmt: str | None) -> Any:
    """An induction reply function cycling through ``DESCRIPTIONS`` (valid code skills for the code format)."""

    def reply(n: int, messages: list[dict[str, Any]]) -> str:
        description = DESCRIPTIONS[n % len(DESCRIPTIONS)]
        name = f"counter_skill_{n % len(DESCRIPTIONS)}"
        if fmt == "code":
            body = f"```python\ndef {name}(target):\n    \"\"\"{description}\"\"\"\n    apis.counter.reset()\n" \
                   f"    return apis.counter.add(int(target))\n```"
        else:
            body = f"1. {description}\n2. Use apis.counter.reset() and apis.counter.add(n), then complete_task()."
        return f"NAME: {name}\nDESCRIPTION: {description}\nBODY:\n{body}"

    return reply


class FlakyScript(CounterScript):
    """``CounterScript`` whose executor adds one too many for the targets in ``fails``."""

    def __init__(self, induction: Any, fails: set[int]) -> None:
        super().__init__(induction)
        self.fails = fails

    def execute(self, messages: list[dict[str, Any]]) -> str:  # type: ignore[override]
        reply = CounterScript.execute(messages)
        return re.sub(r"add\((\d+)\)", lambda m: f"add({int(m[1]) + (int(m[1]) in self.fails)})", reply)


def fails_for(env: str, model: str, condition: str) -> set[int]:
    """A fixed, condition-dependent set of failed targets (so conditions and models differ)."""
    rng = random.Random(f"{env}/{model}/{condition}")
    return {t for t in ENV_TARGETS[env] if rng.random() < 0.4}


def build_runs(root: Path, embedder: Any, *, envs: tuple[str, ...] = tuple(ENV_TARGETS),
               conditions: tuple[str, ...] = tuple(CONDITIONS)) -> Path:
    """Run every env x model x condition stream into ``root/runs/<env>/<model>/<condition>``; returns ``root/runs``."""
    for env_name in envs:
        for model in MODELS[env_name]:
            for condition in conditions:
                fmt = CONDITIONS[condition][1]
                run = condition.replace("+", "_")
                config = StreamConfig(run=run, runs_dir=str(root / "runs" / env_name / model), condition=condition,
                                      env=env_name, model=ModelSpec(label=model), embedder="hash:128",
                                      memory={"validate_code": False})
                env = GradedTinyEnv(ENV_TARGETS[env_name], workdir=root / "ws" / env_name / model / run)
                script = FlakyScript(skill_reply(fmt), fails_for(env_name, model, condition))
                run_stream(env, ScriptedModel(script), config, embedder=embedder)
    return root / "runs"


def task_record(task_id: str, trajectory: str, *, position: int = 0, success: bool = True) -> TaskRecord:
    """A finished task's line of ``results.jsonl`` as the runner writes it: the task, its outcome and its trajectory
    file; counts zero, nothing retrieved or induced (for readers' tests that write a run folder by hand)."""
    return TaskRecord(run="r", condition="task", position=position, task_id=task_id, difficulty=1, template="t",
                      reward=float(success), success=success, exit_status="submitted" if success else "step_limit",
                      steps=1, subtasks=0, latency_s=0.0, model_calls=0, prompt_tokens=0, completion_tokens=0,
                      dependency=0, peak_context=0, tokens_by_role={}, retrieved=[], induced=[], memory_size=0,
                      trajectory=trajectory)


def trajectory_log(task_id: str, instruction: str, steps: list[dict[str, Any]], *, position: int = 0) -> TrajectoryLog:
    """A finished task's trajectory file as the runner writes it, with these logged steps and no model call."""
    return TrajectoryLog(task_id=task_id, position=position, instruction=instruction, steps=steps, calls=[],
                         contexts=[])

