"""The benchmark scripts (``benchmarks/*.py``) loaded as modules, for tests that run their planted worlds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str, module_name: str | None = None) -> ModuleType:
    """``benchmarks/<name>.py`` as a module registered as ``module_name`` (default ``<name>_bench``)."""
    spec = importlib.util.spec_from_file_location(module_name or f"{name}_bench", BENCHMARKS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
