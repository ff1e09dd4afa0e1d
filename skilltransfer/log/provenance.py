"""What a run ran on, kept in ``config.json`` (``provenance``) so that a figure can be traced and runs compared.

`software` is read once per process: the toolkit's version, its git commit and whether the checkout had uncommitted
changes (when it runs from a checkout), Python and the versions of the packages that shape results (pandas is what the
datasci agents' code runs on). `ServedModels` hears each of a stream's completions (a listener of the chain's
``ReportingModel``) and keeps what the endpoint said it served: the model id of each answer and its
``system_fingerprint``. `provenance_differences` says which of these differ between
runs (``report`` names them).
"""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skilltransfer.protocols import Completion
from skilltransfer.version import __version__

PACKAGES = ("numpy", "pandas", "scipy", "pydantic", "openai", "faiss-cpu", "sentence-transformers", "torch",
            "transformers", "llama-cpp-python", "scienceworld")
"""Packages whose versions a run records (those not installed are left out)."""
COMPARED = ("toolkit_version", "git_commit", "git_dirty", "python", "packages", "served_models",
            "system_fingerprints", "seed")
"""The provenance keys `provenance_differences` compares."""


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


_SOFTWARE_LOCK = threading.Lock()


def software() -> dict[str, Any]:
    """The toolkit version, git commit and dirty flag (from a checkout; else None), Python, package versions (read
    once per process: streams starting side by side wait for the first read instead of each running git)."""
    with _SOFTWARE_LOCK:
        return _software()


@functools.cache
def _software() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]  # the checkout holding the package (log/provenance.py)
    commit = _git(root, "rev-parse", "HEAD") if (root / ".git").exists() else None
    dirty = None
    if commit is not None:
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        dirty = bool(status) if status is not None else None
    packages: dict[str, str] = {}
    for name in PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"toolkit_version": __version__, "git_commit": commit, "git_dirty": dirty,
            "python": platform.python_version(), "packages": packages}


def run_provenance(params: Mapping[str, Any]) -> dict[str, Any]:
    """A new run's provenance: `software` and the seed its calls send (``params``: the model's sampling params)."""
    return {**software(), "seed": params.get("seed"), "served_models": [], "system_fingerprints": []}


class ServedModels:
    """Keeps the model ids and ``system_fingerprint`` values a stream's answers carry (called with each completion)."""

    def __init__(self) -> None:
        self.served: list[str] = []
        self.fingerprints: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, completion: Completion) -> None:
        fingerprint = completion.raw_response.get("system_fingerprint") if completion.raw_response else None
        with self._lock:
            if completion.model and completion.model not in self.served and not completion.cached:
                self.served.append(str(completion.model))
            if isinstance(fingerprint, str) and fingerprint and fingerprint not in self.fingerprints:
                self.fingerprints.append(fingerprint)

    def seen(self) -> dict[str, list[str]]:
        with self._lock:
            return {"served_models": list(self.served), "system_fingerprints": list(self.fingerprints)}


def merged(before: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, Any]:
    """``before`` with the served models and fingerprints of ``now`` added; a resume whose software differs adds
    what differed to ``resumed_with``."""
    out = dict(before)
    for key in ("served_models", "system_fingerprints"):
        out[key] = list(dict.fromkeys([*before.get(key, []), *now.get(key, [])]))
    changed = {k: now[k] for k in ("toolkit_version", "git_commit", "git_dirty", "python", "packages")
               if k in now and k in before and now[k] != before[k]}
    if changed and changed not in out.get("resumed_with", []):
        out["resumed_with"] = [*out.get("resumed_with", []), changed]
    return out


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def provenance_differences(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per provenance key whose value differs between runs (run name -> provenance), naming the runs of
    each value (packages: per package). Runs that recorded no provenance are left out."""
    runs = {name: p for name, p in runs.items() if p}
    lines: list[str] = []
    for key in COMPARED:
        if key == "packages":
            names = sorted({pkg for p in runs.values() for pkg in p.get("packages", {})})
            values = {f"packages.{pkg}": {run: p.get("packages", {}).get(pkg) for run, p in runs.items()}
                      for pkg in names}
        else:
            values = {key: {run: p.get(key) for run, p in runs.items()}}
        for label, by_run in values.items():
            groups: dict[str, list[str]] = {}
            for run, value in by_run.items():
                groups.setdefault(_shown(value), []).append(run)
            if len(groups) > 1:
                lines.append(f"provenance differs: {label}: " + "; ".join(
                    f"{value} ({_runs(group)})" for value, group in groups.items()))
    return lines


def _runs(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
