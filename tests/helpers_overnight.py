"""Counter worlds that misbehave once (a test helper for the overnight acceptance test): the first episode of a task
with target 99 raises, the first episode of target 98 starts slowly (past ``agent.task_timeout_s``). "Once" holds
across processes (a marker file), so a killed and resumed grid sees each fault exactly once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from helpers_tinyenv import TinyEnv

from skilltransfer.protocols import TaskSpec

FAIL_TARGET = 99
SLOW_TARGET = 98


class OnceFaultyEnv(TinyEnv):
    """TinyEnv whose first start of target 99 raises and first start of target 98 sleeps ``slow_s``."""

    def __init__(self, targets: list[int], *, marker_dir: str, slow_s: float = 6.0, **kwargs: Any) -> None:
        super().__init__(targets, **kwargs)
        self.marker_dir = Path(marker_dir)
        self.slow_s = slow_s

    def _first(self, name: str) -> bool:
        self.marker_dir.mkdir(parents=True, exist_ok=True)
        try:
            (self.marker_dir / name).touch(exist_ok=False)
        except FileExistsError:
            return False
        return True

    def start(self, task: TaskSpec) -> Any:
        target = int(task.metadata["target"])
        if target == FAIL_TARGET and self._first("failed"):
            raise RuntimeError("the env broke on this task")
        if target == SLOW_TARGET and self._first("slow"):
            time.sleep(self.slow_s)
        return super().start(task)
