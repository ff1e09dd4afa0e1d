"""The bundled variation index: which (task type, variation) pairs the env offers, with what the simulator says about
each (task description, gold action sequence and the score it reaches).

Listing tasks must not start a JVM, and generating a gold path takes up to ~30 s (``mendelian-genetics-*``), so the
index is generated once from the simulator (``generate.py``) and shipped as ``data/variations.json.gz``.

Selection: for every task type, the benchmark's own train/dev/test variation lists (``get_variations_train/dev/
test``), each shuffled with ``random.Random("<task type>:<split>")`` and cut to ``per_split`` (then sorted), so a
smaller cap is a prefix of a larger one. Each selected variation is loaded with ``generateGoldPath=True``; its gold
path is replayed after the episode start (a first "look around") and the final score and completion are recorded.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

INDEX_PATH = Path(__file__).with_name("data") / "variations.json.gz"
INDEX_FORMAT_VERSION = 1
SPLITS = ("train", "dev", "test")
DEFAULT_PER_SPLIT = 5


@dataclass(frozen=True)
class TaskType:
    """One of the benchmark's 30 task types."""

    name: str
    """Simulator name, e.g. ``boil``."""
    task_id: str
    """The paper's id, e.g. ``1-1``."""
    topic: str
    title: str
    max_variations: int
    splits: dict[str, list[int]]
    """The benchmark's full train/dev/test variation lists."""


@dataclass(frozen=True)
class Variation:
    """One selected (task type, variation) with what the simulator reports for it."""

    task_type: str
    variation: int
    split: str
    description: str
    gold: tuple[str, ...]
    gold_score: int
    gold_completed: bool


@dataclass(frozen=True)
class Index:
    """The bundled index: task types, selected variations, and how they were produced."""

    scienceworld_version: str
    per_split: int
    task_types: dict[str, TaskType]
    variations: tuple[Variation, ...]


def ranked(variations: list[int], task_type: str, split: str) -> list[int]:
    """A split's variations in selection order: shuffled with ``random.Random("<task type>:<split>")``."""
    pool = list(variations)
    random.Random(f"{task_type}:{split}").shuffle(pool)
    return pool


def selection(splits: dict[str, list[int]], task_type: str, per_split: int) -> dict[str, list[int]]:
    """The variations picked per split: the first ``per_split`` in selection order, sorted (prefix-stable)."""
    return {split: sorted(ranked(splits.get(split, []), task_type, split)[:per_split]) for split in SPLITS}


def _parse(data: dict[str, Any]) -> Index:
    if data.get("format_version") != INDEX_FORMAT_VERSION:
        raise ValueError(f"variation index format {data.get('format_version')!r}, expected {INDEX_FORMAT_VERSION}")
    types = {t["name"]: TaskType(t["name"], t["task_id"], t["topic"], t["title"], int(t["max_variations"]),
                                 {k: [int(v) for v in vs] for k, vs in t["splits"].items()})
             for t in data["task_types"]}
    variations = tuple(Variation(v["task_type"], int(v["variation"]), v["split"], v["description"],
                                 tuple(v["gold"]), int(v["gold_score"]), bool(v["gold_completed"]))
                       for v in data["variations"])
    return Index(data["scienceworld_version"], int(data["per_split"]), types, variations)


@lru_cache(maxsize=4)
def load_index(path: Path = INDEX_PATH) -> Index:
    """Read the bundled (or another) index file."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return _parse(json.load(handle))
