"""What a judge reads from a run folder: each finished task's final artifacts.

For every task record of ``results.jsonl`` (`skilltransfer.log.TaskRecord`): the artifacts file
``artifacts/<trajectory file name>`` (`skilltransfer.log.RunFolder.read_artifacts`) written by
`skilltransfer.envs.artifacts.episode_artifacts` — the submitted answer and the changed files as text. A run logged
before artifacts were kept has none: its artifact is then taken from the trajectory (source ``trajectory``): the
code of the action that called ``complete_task`` and the output of the action before it, and the changed files are
unknown. The instruction always comes from the trajectory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import RESULTS, ActionStep, RunFolder, TrajectoryLog, read_steps


@dataclass(frozen=True)
class TaskArtifact:
    """One task's final result as a judge sees it."""

    task_id: str
    instruction: str
    submitted: bool
    answer: Any
    files: list[dict[str, Any]] | None
    """[{"path", "status", "text"}]; None when the run did not record files."""
    source: str
    """"artifacts" (the artifacts file) or "trajectory" (the fallback)."""
    final_action: str = ""
    final_output: str = ""

    def render(self, max_chars: int) -> str:
        """The artifact as text for the judge's prompt, cut to ``max_chars`` (head kept, the cut said)."""
        if not self.submitted:
            answer = "(the agent did not mark the task complete)"
        elif self.answer is None:
            answer = "(no answer given)"
        else:
            answer = self.answer if isinstance(self.answer, str) else json.dumps(self.answer, ensure_ascii=False)
        parts = [f"Submitted answer: {answer}"]
        if self.files is None:
            parts.append("Files: not recorded by this run.")
            if self.final_action:
                parts.append(f"The agent's final action:\n```python\n{self.final_action.strip()}\n```")
            if self.final_output:
                parts.append(f"The output of the action before it:\n{self.final_output.strip()}")
        elif not self.files:
            parts.append("Files created or changed: none.")
        else:
            parts.append("Files created or changed:")
            for item in self.files:
                text = "(deleted)" if item.get("status") == "deleted" else str(item.get("text", ""))
                parts.append(f"--- {item.get('path')} ({item.get('status')})\n{text}")
        text = "\n".join(parts)
        if len(text) > max_chars:
            text = f"{text[:max_chars]}\n[... {len(text) - max_chars:,} more characters cut]"
        return text


@dataclass(frozen=True)
class RunArtifacts:
    """A run folder's artifacts, by task id (stream order)."""

    path: Path
    tasks: dict[str, TaskArtifact]

    @property
    def label(self) -> str:
        return self.path.name


def _from_trajectory(task_id: str, trajectory: TrajectoryLog, path: Path) -> TaskArtifact:
    """A task's artifact from its trajectory (steps read typed: `skilltransfer.log.read_steps`): the last action that
    finished the task and the output printed just before it."""
    actions = [s for s in read_steps(trajectory.steps, path=path) if isinstance(s, ActionStep) and s.action]
    final = next((s for s in reversed(actions) if s.done), None)
    before = actions[actions.index(final) - 1] if final is not None and actions.index(final) > 0 else None
    return TaskArtifact(task_id, trajectory.instruction, final is not None, None, None, "trajectory",
                        final_action=(final.action or "") if final else "",
                        final_output=before.observation if before else "")


def load_run(path: str | Path) -> RunArtifacts:
    """Every finished task's artifact in a run folder, read through the run log (`skilltransfer.log.RunFolder`: typed
    records and trajectories, every file inside the folder, no link followed).

    Raises:
        InputError: not a run folder, a broken results line, or a missing/broken trajectory or artifacts file (each
            named).
    """
    path = Path(path)
    folder = RunFolder(path)
    if not folder.results_file.is_file():
        raise InputError(f"not a run folder (no {RESULTS})", path=path)
    tasks: dict[str, TaskArtifact] = {}
    for record in folder.read_records():
        trajectory = folder.read_trajectory(record.trajectory)
        data = folder.read_artifacts(record.trajectory)
        if data is None:
            tasks[record.task_id] = _from_trajectory(record.task_id, trajectory, path / record.trajectory)
            continue
        if not isinstance(data, dict) or not isinstance(data.get("files", []), list):
            raise InputError("not an artifacts record (needs submitted, answer, files)",
                             path=path / folder.artifacts_file(record.trajectory))
        tasks[record.task_id] = TaskArtifact(record.task_id, trajectory.instruction, bool(data.get("submitted")),
                                             data.get("answer"), list(data.get("files", [])), "artifacts")
    return RunArtifacts(path, tasks)
