"""Induce one skill from a recorded trajectory of a run folder, with any induction prompt variant and model, and print
what the model wrote, how it parsed, the tokens and the seconds.

The trajectory is ``RUN/trajectories/<task>.json`` (a task id, or a stream position); ``--subtask K`` takes the
sub-trajectory of subtask K of a subtask-level run (its goal is the planner's subtask text), else the whole task
(its goal is the instruction). The success verdict passed to the inducer is the task's recorded success.

    python benchmarks/induce_from_run.py RUN --task 0 [--subtask K] [--variant contract] [--format text]
        [--model local] [--threads 1] [--only-successful]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from skilltransfer.agents import ActionStep, CallLog, TrajectoryText
from skilltransfer.induction import PROMPT_VARIANTS, Inducer
from skilltransfer.llm import make_model
from skilltransfer.skill import Provenance


def load_trajectory(run: Path, task: str) -> dict[str, Any]:
    """The trajectory JSON of ``task`` (a task id or a stream position) in the run folder ``run``."""
    files = sorted((run / "trajectories").glob("*.json"))
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if task in (data.get("task_id"), str(data.get("position"))):
            return data
    raise SystemExit(f"error: no trajectory of task {task!r} in {run}/trajectories ({len(files)} files)")


def actions_and_goal(data: dict[str, Any], subtask: int | None) -> tuple[list[ActionStep], str]:
    """The action steps (of one subtask, when given) rebuilt from the log, and their goal."""
    names = {f.name for f in dataclasses.fields(ActionStep)}
    steps = [ActionStep(**{k: v for k, v in step.items() if k in names})
             for step in data["steps"] if step["type"] == "ActionStep"]
    if subtask is None:
        return steps, data["instruction"]
    plans = [s for s in data["steps"] if s["type"] == "PlanStep" and s.get("subtask_index") == subtask]
    if not plans or not plans[0].get("subtask"):
        raise SystemExit(f"error: the trajectory has no subtask {subtask}")
    return [s for s in steps if s.subtask_index == subtask], plans[0]["subtask"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--task", required=True, help="task id or stream position")
    parser.add_argument("--subtask", type=int, default=None)
    parser.add_argument("--variant", default="contract", choices=PROMPT_VARIANTS)
    parser.add_argument("--format", default="text", choices=("text", "code"))
    parser.add_argument("--model", default="local")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only-successful", action="store_true")
    args = parser.parse_args()

    data = load_trajectory(args.run, args.task)
    actions, goal = actions_and_goal(data, args.subtask)
    score = data.get("score") or {}
    succeeded = score.get("success") if isinstance(score, dict) else None
    config: dict[str, Any] = {"name": args.model}
    if args.model == "local":
        config["threads"] = args.threads
    model = make_model(config)
    try:
        inducer = Inducer(model, variant=args.variant, format=args.format, only_successful=args.only_successful)
        calls = CallLog()
        start = time.perf_counter()
        trajectory = TrajectoryText(actions, inducer.config.max_observation_chars, inducer.config.max_trajectory_chars)
        induced = inducer.induce(goal, trajectory, level="task" if args.subtask is None else "subtask", calls=calls,
                                 provenance=Provenance(source_task_id=data["task_id"]), succeeded=succeeded)
        seconds = time.perf_counter() - start
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    print(f"task {data['task_id']} ({len(actions)} actions, success {succeeded}); goal: {goal}")
    print(f"prompt {inducer.prompt_id}; status {induced.status}; {induced.prompt_tokens} prompt + "
          f"{induced.completion_tokens} completion tokens in {seconds:.1f} s")
    print("--- reply ---")
    print(induced.reply)
    print("--- parsed ---")
    if induced.skill is None:
        print(f"no skill: {induced.error}")
    else:
        print(induced.skill.render_card() + induced.skill.body)
        if induced.error:
            print(f"note: {induced.error}")


if __name__ == "__main__":
    main()
