"""The embedded model's first executor step on chosen tasks, sampled under several seeds (and sampling settings):
the share of first actions that run without an error, per task.

A cheap proxy for "can the model start this task": on the apps contacts tasks a task whose first action ran
(credentials -> login -> search) was solved in 1-2 more steps, and one whose first action failed mostly ended
`stuck`. The prompt is the real one (the `task` agent's first executor call, no skills retrieved), built by the
agent itself with a scripted double that records it; each sample is then sent to the embedded model with
``seed`` = 0, 1, ... and its code run in a fresh episode of the task. Appends one JSON line per sample to
``--out`` and skips samples already there (resumable); prints a per-task table at the end.

    python benchmarks/first_step.py --env apps --tasks apps-contact_phone-00,apps-contact_email-00
        [--templates contact_phone,contact_email --per-template 10] [--seeds 3]
        [--settings '{"t0.3": {"temperature": 0.3}}'] [--out runs/bench-first-step.jsonl]

Settings other than temperature/top_p/max_tokens/seed (e.g. ``repeat_penalty``, ``top_k``) go in the request's
extra body, which llama.cpp's server reads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from skilltransfer.agents import Agent
from skilltransfer.agents.harness.reply_forms import trim_reply
from skilltransfer.agents.replies import parse_action
from skilltransfer.envs.registry import get_env
from skilltransfer.llm import make_model
from skilltransfer.llm.local import with_local_defaults
from skilltransfer.llm.testing import ScriptedModel

STANDARD_PARAMS = {"temperature", "top_p", "max_tokens", "seed", "stop"}


def first_prompt(env: Any, task: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages and params of the task agent's first executor call on ``task`` (no skills)."""
    double = ScriptedModel(["```python\ncomplete_task(answer='x')\n```"])
    episode = env.start(task)
    try:
        Agent(double, level="task", harness="small-model").run(episode)
    finally:
        episode.close()
    return double.calls[0], double.params[0]


def chosen_tasks(env: Any, args: argparse.Namespace) -> list[Any]:
    """The tasks named by ``--tasks`` and ``--templates``; exits 2 with one ``error:`` line on an unknown name."""
    by_id = {t.id: t for t in env.tasks()}
    ids = [i for i in args.tasks.split(",") if i]
    templates = [t for t in args.templates.split(",") if t]
    known_templates = {t.template for t in by_id.values()}
    unknown = [i for i in ids if i not in by_id] + [t for t in templates if t not in known_templates]
    if unknown or not (ids or templates):
        print(f"error: --tasks/--templates: unknown in {env.name}: {', '.join(unknown)}" if unknown
              else "error: name tasks with --tasks or --templates", file=sys.stderr)
        sys.exit(2)
    picked = [by_id[i] for i in ids]
    for template in templates:
        picked += [t for t in by_id.values() if t.template == template][: args.per_template]
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="apps")
    parser.add_argument("--tasks", default="", help="comma-separated task ids")
    parser.add_argument("--templates", default="", help="comma-separated templates (their first --per-template)")
    parser.add_argument("--per-template", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--settings", default='{"default": {}}', help="JSON {name: sampling params}")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-first-step.jsonl"))
    args = parser.parse_args()
    env = get_env(args.env)
    tasks = chosen_tasks(env, args)
    settings: dict[str, dict[str, Any]] = json.loads(args.settings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if args.out.is_file():
        done = {(r["setting"], r["task"], r["seed"]) for r in map(json.loads, args.out.read_text().splitlines())}
    model = make_model("local")
    try:
        for task in tasks:
            messages, params = first_prompt(env, task)
            for name, setting in settings.items():
                for seed in range(args.seeds):
                    if (name, task.id, seed) in done:
                        continue
                    merged = with_local_defaults({**params, **setting, "seed": seed})
                    standard = {k: v for k, v in merged.items() if k in STANDARD_PARAMS}
                    extra = {k: v for k, v in merged.items() if k not in STANDARD_PARAMS}
                    started = time.monotonic()
                    reply = model.complete(messages, **standard, **({"extra_body": extra} if extra else {}))
                    _, code, _ = parse_action(trim_reply(reply.text))
                    output, ran = "(no code)", False
                    if code is not None:
                        episode = env.start(task)
                        try:
                            observation = episode.step(code)
                        finally:
                            episode.close()
                        output, ran = observation.output, not observation.error
                    row = {"setting": name, "task": task.id, "seed": seed, "ran": ran,
                           "s": round(time.monotonic() - started, 1), "code": code, "output": output[-400:]}
                    with args.out.open("a") as handle:
                        handle.write(json.dumps(row) + "\n")
                    last = output.strip().splitlines()[-1][:100] if output.strip() else ""
                    print(f"{name} {task.id} seed {seed}: {'ran' if ran else 'error'} ({row['s']} s) {last}",
                          flush=True)
    finally:
        model.close()
    table: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in map(json.loads, args.out.read_text().splitlines()):
        table[(r["setting"], r["task"])].append(bool(r["ran"]))
    print(f"\n{'setting':<12} {'task':<32} first step ran")
    for (name, task_id), ran in sorted(table.items()):
        print(f"{name:<12} {task_id:<32} {sum(ran)}/{len(ran)}")
    for name in settings:
        runs = [x for (n, _), v in table.items() if n == name for x in v]
        print(f"{name}: {sum(runs)}/{len(runs)} first steps ran")


if __name__ == "__main__":
    main()
