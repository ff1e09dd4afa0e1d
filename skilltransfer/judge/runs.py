"""What a judge reads from a run folder: each finished task's final artifacts.

For every line of ``results.jsonl`` (fields ``task_id`` and ``trajectory``): the artifacts file
``artifacts/<trajectory file name>`` (or the record's ``artifacts`` path) written by
`skilltransfer.envs.artifacts.episode_artifacts` — the submitted answer and the changed files as text. A run logged
before artifacts were kept has none: its artifact is then taken from the trajectory (source ``trajectory``): the
code of the action that called ``complete_task`` and the output of the action before it, and the changed files are
unknown. The instruction always comes from the trajectory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.log import ActionStep, read_steps
from skilltransfer.util.files import jsonl_lines, read_json, read_text


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


def _json_file(run: Path, relative: str, what: str) -> Any:
    """A JSON file a results line names, read inside the run folder (no absolute path, no ``..``, no link followed,
    a regular file under the cap, bounded depth: `skilltransfer.untrusted`)."""
    return read_json(relative, what=what, root=run)


def _exists(run: Path, relative: str) -> bool:
    """Whether anything is at ``relative`` inside the run folder (an escaping path is refused when read)."""
    try:
        parts = untrusted.parts_inside(relative)
    except untrusted.UntrustedFileError:
        return True  # read it, to be refused with the reason
    return os.path.lexists(run.joinpath(*parts))


def _from_trajectory(task_id: str, trajectory: dict[str, Any], path: Path) -> TaskArtifact:
    """A task's artifact from its trajectory (steps read typed: `skilltransfer.log.trajectory_io`): the last
    action that finished the task and the output printed just before it."""
    logged = trajectory.get("steps", [])
    if not isinstance(logged, list):
        raise InputError("not a trajectory (steps is not a list)", path=path)
    actions = [s for s in read_steps(logged, path=path) if isinstance(s, ActionStep) and s.action]
    final = next((s for s in reversed(actions) if s.done), None)
    before = actions[actions.index(final) - 1] if final is not None and actions.index(final) > 0 else None
    return TaskArtifact(task_id, str(trajectory.get("instruction", "")), final is not None, None, None, "trajectory",
                        final_action=(final.action or "") if final else "",
                        final_output=before.observation if before else "")


def load_run(path: str | Path) -> RunArtifacts:
    """Every finished task's artifact in a run folder.

    Raises:
        InputError: not a run folder, a broken results line, or a missing/broken trajectory or artifacts file (each
            named).
    """
    path = Path(path)
    results = path / "results.jsonl"
    if not results.is_file():
        raise InputError("not a run folder (no results.jsonl)", path=path)
    tasks: dict[str, TaskArtifact] = {}
    for number, line in jsonl_lines(read_text("results.jsonl", what="results file", root=path)):
        try:
            record = json.loads(line)
            task_id, trajectory_path = str(record["task_id"]), str(record["trajectory"])
        except (ValueError, KeyError, TypeError, RecursionError):
            raise InputError("broken results line (needs task_id and trajectory)", path=results, line=number) from None
        trajectory = _json_file(path, trajectory_path, "trajectory file")
        if not isinstance(trajectory, dict):
            raise InputError("not a trajectory (needs an object with instruction and steps)",
                             path=path / trajectory_path)
        artifacts_relative = str(record.get("artifacts") or f"artifacts/{PurePosixPath(trajectory_path).name}")
        artifacts_path = path / artifacts_relative
        if _exists(path, artifacts_relative):
            data = _json_file(path, artifacts_relative, "artifacts file")
            if not isinstance(data, dict) or not isinstance(data.get("files", []), list):
                raise InputError("not an artifacts record (needs submitted, answer, files)", path=artifacts_path)
            tasks[task_id] = TaskArtifact(task_id, str(trajectory.get("instruction", "")),
                                          bool(data.get("submitted")), data.get("answer"), list(data.get("files", [])),
                                          "artifacts")
        else:
            tasks[task_id] = _from_trajectory(task_id, trajectory, path / trajectory_path)
    return RunArtifacts(path, tasks)
