"""Shared fixtures (hash embedder, shared data paths, a fake clock for retry waits) and the Hypothesis profile."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from hypothesis import settings

from skilltransfer.llm import retry
from skilltransfer.memory.embedders import HashEmbedder

settings.register_profile("untimed", deadline=None)
settings.load_profile("untimed")
"""Property tests check behaviour, not speed: a loaded CI machine (or a model run beside the suite) made one example
take 292 ms against Hypothesis's default 200 ms deadline. Speed targets live in benchmarks/."""

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
OFFICEBENCH_TASKS = SHARED / "officebench" / "tasks"


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder(dim=128)


@pytest.fixture
def officebench_tasks() -> Path:
    if not OFFICEBENCH_TASKS.is_dir():
        pytest.skip("../shared/officebench/tasks is absent")
    return OFFICEBENCH_TASKS


class FakeClock:
    """The retry layer's clock in tests: ``sleep`` returns at once and moves the clock on by the wait.

    ``now`` is the real monotonic time plus every wait so far, so a retry budget is measured on waits that never
    happen (a 6-minute outage costs no real time) and still runs out in real time when waits are zero.
    """

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() + self._offset

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)
            self._offset += seconds


@pytest.fixture(autouse=True)
def fast_retry_waits(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Every test: retry waits are virtual (see `FakeClock`); request the fixture to read the clock or the waits."""
    clock = FakeClock()
    monkeypatch.setattr(retry, "_sleep", clock.sleep)
    monkeypatch.setattr(retry, "_now", clock.now)
    return clock


@pytest.fixture
def deep_tmp_path():
    """A temporary folder for trees deeper than PATH_MAX, outside pytest's base folder and removed by the deep-safe
    walker: pytest's own clean-up of old base folders (``shutil.rmtree``) dies with RecursionError on such a tree, so
    one left behind by an interrupted run would break every later run on the machine."""
    import tempfile

    from skilltransfer.util import trees

    path = Path(tempfile.mkdtemp(prefix="skilltransfer-deep-"))
    yield path
    trees.remove_tree(path)
