"""A plan folder: one frozen plan file per task, so every coordination interface replays the same plan.

``<folder>/<name>.plan.json`` where ``name`` is the task id made file-safe plus a short hash of the exact id (two ids
that differ only in unsafe characters never share a file); the file holds the exact task id, checked on load. A plan
is written once: saving a different plan for a task that already has one is refused (plans are frozen). Streams that
share a folder (a grid's interfaces, in threads or processes) write a task's plan one at a time: `PlanFolder.plan_for`
holds an exclusive lock on ``<name>.lock`` while it looks for the plan and writes it, so the first stream writes it and
the others replay it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from skilltransfer.coordination.plan import Plan, plan_from_json
from skilltransfer.errors import InputError
from skilltransfer.util.files import atomic_write_text, read_text

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def plan_file_name(task_id: str) -> str:
    """``<safe id>-<sha1[:8] of the id>.plan.json``."""
    safe = _UNSAFE.sub("_", task_id).strip("._")[:80] or "task"
    return f"{safe}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}.plan.json"


class PlanFolder:
    """The frozen plans of one stream, keyed by task id.

    Args:
        path: the folder (created on the first save).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def path_for(self, task_id: str) -> Path:
        return self.path / plan_file_name(task_id)

    def load(self, task_id: str) -> Plan | None:
        """The saved plan of ``task_id`` (None when there is none).

        Raises:
            InputError: the file is not a plan, or holds another task's plan (both named).
        """
        path = self.path_for(task_id)
        if not path.is_file():
            return None
        try:
            data = json.loads(read_text(path, what="plan file"))
        except json.JSONDecodeError as exc:
            raise InputError(f"plan file is not JSON: {exc.msg}", path=path, line=exc.lineno) from None
        plan = plan_from_json(data, path=path)
        if plan.task_id != task_id:
            raise InputError(f"plan file holds the plan of task {plan.task_id!r}, not {task_id!r}", path=path)
        return plan

    def save(self, plan: Plan) -> Path:
        """Write ``plan`` atomically; the same plan again is a no-op, a different one is refused (frozen)."""
        existing = self.load(plan.task_id)
        path = self.path_for(plan.task_id)
        if existing is not None:
            if existing.fingerprint != plan.fingerprint:
                raise InputError(f"task {plan.task_id!r} already has a different frozen plan; plans are written once "
                                 "(delete the file to re-plan)", path=path)
            return path
        atomic_write_text(path, plan.model_dump_json(indent=1) + "\n")
        return path

    def plan_for(self, task_id: str, write: Callable[[], Plan]) -> tuple[Plan, bool]:
        """The frozen plan of ``task_id``: the saved one, else ``write()``'s, saved first.

        Returns:
            (the plan, whether it was written now).
        """
        with self._locked(task_id):
            existing = self.load(task_id)
            if existing is not None:
                return existing, False
            plan = write()
            if plan.task_id != task_id:
                raise ValueError(f"the plan writer returned a plan for {plan.task_id!r}, not {task_id!r}")
            self.save(plan)
        return plan, True

    @contextlib.contextmanager
    def _locked(self, task_id: str) -> Iterator[None]:
        """An exclusive lock on the task's plan (threads and processes alike: one open file each)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / (plan_file_name(task_id).removesuffix(".plan.json") + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def task_ids(self) -> list[str]:
        """The task ids of every plan in the folder, sorted."""
        if not self.path.is_dir():
            return []
        ids = []
        for path in sorted(self.path.glob("*.plan.json")):
            try:
                ids.append(str(json.loads(path.read_text(encoding="utf-8"))["task_id"]))
            except (OSError, ValueError, KeyError, TypeError):
                raise InputError("not a plan file", path=path) from None
        return sorted(ids)
