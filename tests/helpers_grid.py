"""A small grid spec over the counter world behind the mock server, written to a file (a test helper)."""

from __future__ import annotations

import yaml
from helpers_cli import TINY

from skilltransfer.settings.config import CONDITIONS

ALL = list(CONDITIONS)


def spec_data(tmp_path, url, **extra):
    data = {"name": "t", "out": str(tmp_path / "out"), "max_concurrency": 12,
            "envs": {"a": {"env": TINY, "args": {"targets": [3, 5, 2]}},
                     "b": {"env": TINY, "args": {"targets": [4, 1]}}},
            "models": {"mock": {"name": "openai", "base_url": url, "model": "mock", "max_concurrency": 3,
                                "backoff_base_s": 0, "max_retries": 1}},
            "conditions": ALL, "embedder": "hash:64"}
    data.update(extra)
    return data


def write_spec(tmp_path, data, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path
