"""Shared fixtures: hash embedder (never loads a model), paths to shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilltransfer.memory.embedders import HashEmbedder

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
