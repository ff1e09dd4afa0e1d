"""The judgment table (MetaSkill, seed 003, Tables 1-3): blinded pairwise preference in the study's W/T/L /
preference / 95 % task CI form, from the JSON reports ``skilltransfer judge --out X.judge.json`` wrote under the
report's paths; one row per report (one env: run A against run B over every repeat and order) and, for each pair of
conditions judged on several envs, a row pooling their tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder
from skilltransfer.metrics import pairwise_preference
from skilltransfer.report.table import Table
from skilltransfer.settings.recorded import read_run_settings
from skilltransfer.util import trees
from skilltransfer.util.files import read_text

JUDGE_SUFFIX = ".judge.json"
ALL_ENVS = "(all envs)"


def find_judgments(paths: list[Path]) -> list[Path]:
    """``*.judge.json`` files at or under ``paths`` (sorted)."""
    found: set[Path] = set()
    for path in paths:
        if path.is_file() and path.name.endswith(JUDGE_SUFFIX):
            found.add(path)
        elif path.is_dir():
            found.update(trees.find(path, lambda name: name.endswith(JUDGE_SUFFIX)))  # any depth, no recursion
    return sorted(found)


def _labels(run: str) -> tuple[str, str]:
    """(env label, condition label) of a judged run, from its ``config.json``; else (its parent folder's name, its
    folder's name)."""
    try:
        config = read_run_settings(RunFolder(run)).config
    except InputError:
        return Path(run).parent.name or "?", Path(run).name
    return config.env.display_label, config.condition_label()


def _row(env: str, a: str, b: str, outcomes: dict[str, list[str]], repeats: set[int], orders: set[str],
         unparsed: int, seed: int) -> dict[str, Any]:
    pref = pairwise_preference(outcomes, seed=seed)
    return {"env": env, "a": a, "b": b, "repeats": ",".join(str(r) for r in sorted(repeats)),
            "orders": ",".join(sorted(orders)), "tasks": pref.n_tasks, "judgments": pref.n_judgments,
            "wtl": f"{pref.wins}/{pref.ties}/{pref.losses}", "wins": pref.wins, "ties": pref.ties,
            "losses": pref.losses, "preference": pref.preference, "ci_low": pref.ci_low, "ci_high": pref.ci_high,
            "unparsed": unparsed}


def judgment_table(files: list[Path], seed: int = 0) -> Table:
    """See the module docstring.

    Raises:
        InputError: a file that is not a judge report (named).
    """
    table = Table("judgments", "Blinded pairwise judgments: W/T/L and preference for A",
                  ["env", "a", "b", "repeats", "orders", "tasks", "judgments", "wtl", "wins", "ties", "losses",
                   "preference", "ci_low", "ci_high", "unparsed"],
                  note="from `skilltransfer judge --out *.judge.json` reports: W/T/L count judgments (every repeat "
                       "and order) from A's side; preference = the mean task score (win 1, tie 0.5, loss 0; a task's "
                       "judgments averaged first) with a 95 % task-bootstrap CI; '(all envs)' rows pool the tasks of "
                       "every env judged for that pair of conditions.")
    pooled: dict[tuple[str, str], dict[str, Any]] = {}
    for file in files:
        try:
            data = untrusted.parse_json(read_text(file, what="judge report"), file)  # depth-capped
            judgments = data["judgments"]
            env, a = _labels(str(data["run_a"]))
            _, b = _labels(str(data["run_b"]))
            repeats, orders = {int(data.get("repeats", 1))}, {str(data["orders"])}
        except untrusted.UntrustedFileError as exc:
            raise InputError(f"not a judge report ({exc.reason})", path=file) from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a judge report ({type(exc).__name__}: {exc})", path=file) from None
        if not isinstance(judgments, list) or not all(isinstance(j, dict) for j in judgments):
            raise InputError("not a judge report (judgments is not a list of objects)", path=file)
        outcomes: dict[str, list[str]] = {}
        for j in judgments:
            if j.get("outcome") is not None:
                outcomes.setdefault(str(j["task_id"]), []).append(str(j["outcome"]))
        unparsed = sum(1 for j in judgments if j.get("outcome") is None)
        if not outcomes:
            continue
        table.rows.append(_row(env, a, b, outcomes, repeats, orders, unparsed, seed))
        cell = pooled.setdefault((a, b), {"envs": set(), "outcomes": {}, "repeats": set(), "orders": set(),
                                          "unparsed": 0})
        cell["envs"].add(env)
        cell["outcomes"].update({f"{env}\x00{task}": values for task, values in outcomes.items()})
        cell["repeats"] |= repeats
        cell["orders"] |= orders
        cell["unparsed"] += unparsed
    for (a, b), cell in sorted(pooled.items()):
        if len(cell["envs"]) > 1:
            table.rows.append(_row(ALL_ENVS, a, b, cell["outcomes"], cell["repeats"], cell["orders"],
                                   cell["unparsed"], seed))
    return table
