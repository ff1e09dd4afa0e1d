"""Shared fixtures (hash embedder, shared data paths, a fake clock for retry waits), the Hypothesis profile, and how
the suite is shared between pytest-xdist workers (pyproject's addopts run it with ``-n 2 --dist loadgroup``)."""

from __future__ import annotations

import os
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
if OFFICEBENCH_TASKS.is_dir():  # this project's machines: the tests read the real tasks there (users set the variable)
    os.environ.setdefault("OFFICEBENCH_ROOT", str(OFFICEBENCH_TASKS))


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


EMBEDDED_MODEL = "embedded-model"
"""The ``xdist_group`` of the tests that start the bundled model's server: one worker runs them one after another
(two servers at once would each spin threads on every core), and they are sent first (the longest)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker: keep each module's shared (module-scoped) fixtures built once, and send the long
    work first.

    A test that uses a module-scoped fixture joins its module's ``xdist_group``, so one worker runs those tests and
    builds the fixture once, as a serial run does (``--dist loadgroup``). The order in which work is handed out
    (``--no-loadscope-reorder``: the collection order) becomes: the embedded-model group, then every unit (group or
    single test) holding a ``slow`` test, then the rest, each in collection order, so that the long tests start
    while the other worker still has short ones left. Serial runs (``-n 0``) keep the collection order.
    """
    if not hasattr(config, "workerinput"):
        return
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if item.get_closest_marker("xdist_group") is None and fixtures is not None and any(
                definition.scope == "module" for definitions in fixtures.name2fixturedefs.values()
                for definition in definitions):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")
        units.setdefault(f"@{group.args[0]}" if group is not None else item.nodeid, []).append(item)

    def rank(unit: tuple[str, list[pytest.Item]]) -> int:
        if unit[0] == f"@{EMBEDDED_MODEL}":
            return 0
        return 1 if any(item.get_closest_marker("slow") for item in unit[1]) else 2

    items[:] = [item for _, unit in sorted(units.items(), key=rank) for item in unit]


@pytest.fixture
def embedded_model_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled model's server threads: under pytest-xdist its share of the cores (the other workers keep theirs
    busy, and llama.cpp threads on a taken core spin against it), all cores otherwise; a value the caller set in
    ``SKILLTRANSFER_LLAMA_THREADS`` is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and not os.environ.get("SKILLTRANSFER_LLAMA_THREADS"):
        monkeypatch.setenv("SKILLTRANSFER_LLAMA_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
