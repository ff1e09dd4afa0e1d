"""Record runs through the mock endpoint with a response cache, then replay the caches and compare the records.

The check a behaviour-preserving change (a refactor, a new seam) must pass: record the caches once at the commit
before the change, replay them (``--cache-mode ro``: a miss is an error, the model is never asked) with the code
after it into fresh run folders, and compare every task record and trajectory::

    python benchmarks/replay_records.py record --dir /tmp/replay-base      # at the commit before the change
    python benchmarks/replay_records.py replay --dir /tmp/replay-base      # at the commit after it

``record`` writes ``<dir>/<case>/cache.sqlite`` and the recorded run folder ``<dir>/<case>/run``; ``replay`` runs
each case again from its cache into ``<dir>/<case>/replay-<n>`` and prints, per case, the calls read, the misses and
the fields that differ per task (fields added since the recording are listed apart and do not count as a
difference). The last line: ``replay: C cases, T tasks, D differing, M misses``.

``--cases local-main`` adds the main job on the embedded model (recorded at f7065d7 in
``/work/replay/base-f7065d7/local-main`` on the development machine).

The cases: the main job's shape (apps starter ``task+text`` ``--limit 4``), office ``task+text`` and
``subtask+text``, apps ``task+code`` and ``subtask+code``, and a grid (the cross-level spec narrowed to apps, two
tasks per stream), all against the mock server answering every role (``--roles fail_rate=0.3``, seeded), so replies
fail as well as succeed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

VOLATILE = {
    "started_at", "finished_at", "wall_s", "latency_s", "elapsed_s", "duration_s", "time_s", "timestamp",
    "model_time_s", "env_time_s", "harness_time_s", "seconds", "created", "software", "host", "pid", "run",
}
"""Record fields that measure time or the machine, not behaviour."""

CASES: dict[str, list[str]] = {
    "apps-task+text": ["run", "--env", "apps", "--stream", "starter", "--condition", "task+text", "--limit", "4"],
    "office-task+text": ["run", "--env", "office", "--condition", "task+text", "--limit", "2"],
    "office-subtask+text": ["run", "--env", "office", "--condition", "subtask+text", "--limit", "2"],
    "apps-task+code": ["run", "--env", "apps", "--condition", "task+code", "--limit", "3"],
    "apps-subtask+code": ["run", "--env", "apps", "--condition", "subtask+code", "--limit", "2"],
    "grid-cross-level": ["grid", "experiments/cross-level.yaml", "-c", "envs=[apps]", "--limit", "2", "-j", "1"],
}
LOCAL_CASES: dict[str, list[str]] = {
    "local-main": ["run", "--env", "apps", "--stream", "starter", "--condition", "task+text", "--limit", "4"],
}
"""The main job on the embedded model (minutes to record; the MiniLM embedder): only when named in ``--cases``."""


def _command(case: str, argv: list[str], url: str, cache: Path, mode: str, out: Path) -> list[str]:
    if case in LOCAL_CASES:
        return [sys.executable, "-m", "skilltransfer", *argv, "--out", str(out), "--no-progress", "--model", "local",
                "--cache", str(cache), "--cache-mode", mode]
    cmd = [sys.executable, "-m", "skilltransfer", *argv, "--out", str(out), "--embedder", "hash:64", "--no-progress"]
    if argv[0] == "run":
        return [*cmd, "--model", f"mock@{url}", "--cache", str(cache), "--cache-mode", mode]
    return [*cmd, "-c", "models.default.model=mock", "-c", f"models.default.base_url={url}",
            "-c", f"models.default.cache_path={cache}", "-c", f"models.default.cache_mode={mode}"]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _records(run: Path) -> dict[str, dict[str, Any]]:
    """Every results.jsonl record below ``run``, keyed by the file's relative folder and the task id."""
    out: dict[str, dict[str, Any]] = {}
    for results in sorted(run.rglob("results.jsonl")):
        rel = str(results.parent.relative_to(run))
        for line in results.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                out[f"{rel}:{record.get('task_id')}"] = _strip(record)
    for trajectory in sorted(run.rglob("trajectories/*.json")):
        rel = str(trajectory.relative_to(run))
        out[rel] = _strip(json.loads(trajectory.read_text(encoding="utf-8")))
    return out


def _diff(old: Any, new: Any, path: str, changed: list[str], added: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                added.append(sub)
            elif key not in new:
                changed.append(f"{sub} (gone)")
            else:
                _diff(old[key], new[key], sub, changed, added)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            _diff(a, b, f"{path}[{i}]", changed, added)
    elif old != new:
        changed.append(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["record", "replay"])
    parser.add_argument("--dir", required=True, type=Path, help="folder of the recorded caches and runs")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases (default: all)")
    args = parser.parse_args(argv)
    from skilltransfer.llm.testing.mock_server import MockServer
    from skilltransfer.llm.testing.roleplay import make_role_play

    cases = [c for c in args.cases.split(",") if c]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    totals = {"tasks": 0, "differing": 0, "misses": 0}
    with MockServer(make_role_play("fail_rate=0.3"), seed=7) as server:
        for case in cases:
            folder = args.dir / case
            cache = folder / "cache.sqlite"
            if args.mode == "record":
                folder.mkdir(parents=True, exist_ok=True)
                out = folder / "run"
                mode = "rw"
            else:
                n = 1 + sum(1 for p in folder.glob("replay-*"))
                out = folder / f"replay-{n}"
                mode = "ro"
            argv_case = CASES.get(case) or LOCAL_CASES[case]
            proc = subprocess.run(_command(case, argv_case, server.url, cache, mode, out), env=env,
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{case}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
                totals["misses"] += 1
                continue
            if args.mode == "record":
                print(f"{case}: recorded {len(_records(out))} records -> {out}")
                continue
            old, new = _records(folder / "run"), _records(out)
            changed: list[str] = []
            added: list[str] = []
            for key in sorted(old.keys() | new.keys()):
                if key not in old or key not in new:
                    changed.append(f"{key} (only in {'replay' if key in new else 'recording'})")
                    continue
                diffs: list[str] = []
                _diff(old[key], new[key], "", diffs, added)
                changed += [f"{key}: {d}" for d in diffs]
            tasks = sum(1 for k in old if ":" in k and not k.endswith(".json"))
            totals["tasks"] += tasks
            totals["differing"] += len(changed)
            print(f"{case}: {tasks} tasks, {len(changed)} differing fields"
                  + (f", fields added since: {sorted(set(a.split('[')[0] for a in added))[:12]}" if added else ""))
            for line in changed[:20]:
                print(f"  {line}")
    if args.mode == "replay":
        print(f"replay: {len(cases)} cases, {totals['tasks']} tasks, {totals['differing']} differing, "
              f"{totals['misses']} failed")
    return 1 if totals["misses"] or totals["differing"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
