"""A frozen library seen per task: each task sees only the skills induced from it (``library_scope: own-task``).

The subagents-vs-skills study builds 3-5 skill packages per task from that task's own successful runs and executes
them on the same task; a stream with ``library_scope: own-task`` reproduces that relation over a frozen library:
before each task the agent's memory is a read-only `SkillMemory` holding the library's skills whose
``provenance.source_task_id`` is the task's id (none for a task that induced nothing), built once per task id.
"""

from __future__ import annotations

from skilltransfer.memory.store import SkillMemory
from skilltransfer.protocols import Embedder


class OwnTaskLibrary:
    """Per-task read-only views of a frozen library, by the task each skill was induced from."""

    def __init__(self, library: SkillMemory, embedder: Embedder) -> None:
        self.library = library
        self.embedder = embedder
        self._views: dict[str, SkillMemory] = {}

    def memory_for(self, task_id: str) -> SkillMemory:
        """The read-only memory of the skills induced from ``task_id`` (cached per task)."""
        if task_id not in self._views:
            view = SkillMemory(self.embedder, config=self.library.config)
            view.add_many([s for s in self.library if s.provenance is not None
                           and s.provenance.source_task_id == task_id])
            view.read_only = True
            view.ranker = self.library.ranker  # the stream's retrieval mode, over the task's skills
            self._views[task_id] = view
        return self._views[task_id]
