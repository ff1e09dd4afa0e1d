"""Generate the bundled variation index from the simulator (resumable; hours on a loaded 2-core machine).

    python -m skilltransfer.envs.scienceworld.generate [--per-split 5] [--work sw-index.jsonl] [--tasks NAME ...]

Selection (see ``index.selection``): for every task type, the benchmark's own train/dev/test variation lists
(``get_variations_train/dev/test``), each shuffled with ``random.Random("<task type>:<split>")`` and cut to
``per_split``, so a smaller cap is a prefix of a larger one. Each selected variation is loaded with
``generateGoldPath=True``; its gold path is replayed after the episode start (a first "look around") and the final
score and completion are recorded. Progress goes to a JSONL file; several runs over disjoint ``--tasks`` can be merged
(``--merge``) and written without running (``--no-run``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

from skilltransfer.envs.scienceworld.index import DEFAULT_PER_SPLIT, INDEX_FORMAT_VERSION, INDEX_PATH, ranked, selection
from skilltransfer.util.terminal import echo


def _paper_names() -> dict[str, dict[str, str]]:
    """Task name -> the benchmark's own task id, topic and title (``scienceworld/tasks.json``)."""
    from scienceworld.constants import TASKS

    return {t["task_name"]: {"task_id": t["task_id"], "topic": t["topic"], "title": t["task"]} for t in TASKS}


def _probe(sim: Any, name: str, variation: int, split: str) -> dict[str, Any]:
    """Load one variation with its gold path, replay the path after the episode start, and record the result."""
    sim.load(name, variation, gold=True)
    description = sim.task_description()
    gold = sim.gold_actions()
    result = sim.reset()
    for action in gold:
        if result.completed:
            break
        result = sim.step(action)
    return {"task_type": name, "variation": variation, "split": split, "description": description, "gold": gold,
            "gold_score": result.score, "gold_completed": result.completed}


def _read_work(paths: list[Path]) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, int], dict[str, Any]]]:
    types: dict[str, dict[str, Any]] = {}
    done: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") == "type":
                types[record["name"]] = record
            else:
                done[(record["task_type"], record["variation"])] = record
    return types, done


def build(per_split: int, work: Path, out: Path, names: list[str] | None = None, *,
          merge: list[Path] | None = None, run: bool = True) -> None:
    """Generate the index, resuming from the records already in ``work`` (JSONL), and write ``out`` (gzip JSON).

    Args:
        per_split: variations per split and task type.
        work: the progress file (appended to).
        out: the index file.
        names: only these task types (default: all).
        merge: more progress files to read (e.g. of runs over other task types).
        run: generate what is missing; False writes an index of what the progress files hold.
    """
    from skilltransfer.envs.scienceworld.simulator import Simulator, installed_version

    types, done = _read_work([work, *(merge or [])])
    if run:
        paper = _paper_names()
        with Simulator() as sim, work.open("a", encoding="utf-8") as log:
            for name in names or sim.task_names():
                if name not in types:
                    types[name] = {"kind": "type", "name": name, **paper[name],
                                   "max_variations": sim.max_variations(name), "splits": sim.splits(name)}
                    log.write(json.dumps(types[name]) + "\n")
                    log.flush()
            # round-robin over ranks: an interrupted run still covers every type and split evenly
            order = []
            for name in names or list(types):
                info = types[name]
                for split, variations in selection(info["splits"], name, per_split).items():
                    shuffled = ranked(info["splits"][split], name, split)
                    order += [(shuffled.index(v), name, v, split) for v in variations]
            todo = [item for item in sorted(order) if (item[1], item[2]) not in done]
            start = time.time()
            for k, (_, name, variation, split) in enumerate(todo, 1):
                record = _probe(sim, name, variation, split)
                done[(name, variation)] = record
                log.write(json.dumps(record) + "\n")
                log.flush()
                echo(f"[{k}/{len(todo)}] {name} {variation} ({split}): gold {len(record['gold'])} actions, score "
                     f"{record['gold_score']} ({time.time() - start:.0f} s)", err=True)
    keep = sorted((name, v) for name, info in types.items()
                  for vs in selection(info["splits"], name, per_split).values() for v in vs)
    missing = [key for key in keep if key not in done]
    if missing:
        echo(f"warning: {len(missing)} selected variations are not generated yet (e.g. {missing[0]})", err=True)
    selected: list[dict[str, Any]] = [done[key] for key in keep if key in done]
    data = {"format_version": INDEX_FORMAT_VERSION, "scienceworld_version": installed_version(),
            "per_split": per_split,
            "task_types": [{k: v for k, v in info.items() if k != "kind"} for _, info in sorted(types.items())],
            "variations": selected}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as handle:
        handle.write(json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    os.replace(tmp, out)
    echo(f"wrote {out}: {len(selected)} variations of {len(types)} task types", err=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the ScienceWorld variation index from the simulator.")
    parser.add_argument("--per-split", type=int, default=DEFAULT_PER_SPLIT)
    parser.add_argument("--work", type=Path, default=Path("sw-index.jsonl"), help="resumable progress file")
    parser.add_argument("--out", type=Path, default=INDEX_PATH)
    parser.add_argument("--tasks", nargs="*", help="only these task types (default: all 30)")
    parser.add_argument("--merge", nargs="*", type=Path, default=[], help="more progress files to read")
    parser.add_argument("--no-run", action="store_true", help="only write an index of the progress files")
    args = parser.parse_args(argv)
    build(args.per_split, args.work, args.out, args.tasks, merge=args.merge, run=not args.no_run)


if __name__ == "__main__":
    main()
