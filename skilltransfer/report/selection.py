"""The selection tables (issue 55, docs/selection.md): which skills tasks were shown and picked, and whether they were
the right ones; and, for runs at several library sizes, the size study.

- ``selection``: per env x model x condition label, over the runs' tasks with recorded picks: trigger rate and picks
  per task over every task; over the tasks whose right skills are known (the records' ``relevant_skills``, or
  ``report --labels``): Hit@1, Hit@5, MRR, NDCG@10 and pick accuracy, each with a task-bootstrap 95 % CI
  (`skilltransfer.metrics.selection`).
- ``selection_skills``: per skill picked or right in a group: trigger precision and recall with CIs, and F1.
- ``selection_scale`` / ``selection_slope`` / ``selection_confusability``: groups (the condition label without
  ``[size=N]``) with labelled tasks at two library sizes or more (``library_size``): per size, pass rate, pick
  accuracy, Hit@k and the drop from the smallest size split into shadowing and context overhead with CIs and upper
  bounds; the slope per doubling with R² and the break; crowding against mis-picks
  (`skilltransfer.metrics.selection_scale`).

A labels file is JSON: ``{"task id": ["skill name or id", ...]}``; it replaces the recorded right skills of the tasks
it names, in every run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.log import TaskRecord, ranked
from skilltransfer.metrics.selection import TaskSelection, selection_summary, skill_triggers
from skilltransfer.metrics.selection_scale import Estimate, scale_analysis
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import condition_order, metric_of, value_of
from skilltransfer.report.table import Table
from skilltransfer.skill import Skill
from skilltransfer.util.files import read_json

SIZE_TAG = re.compile(r"\[size=[^\]]*\]")
Labels = Mapping[str, list[str]]


def read_labels(path: Path) -> dict[str, list[str]]:
    """A labels file (module docstring).

    Raises:
        InputError: unreadable, not JSON, or not an object of lists of strings (naming the first bad entry).
    """
    data = read_json(path, what="labels file")
    if not isinstance(data, dict):
        raise InputError("a labels file is a JSON object {\"task id\": [\"skill name or id\", ...]}", path=path)
    for task_id, skills in data.items():
        if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
            raise InputError(f"task {task_id!r}: give a list of skill names or ids", path=path)
    return {str(k): list(v) for k, v in data.items()}


def has_picks(runs: list[RunLog]) -> bool:
    """Whether some run recorded picks (runs logged before picks were kept have none)."""
    return any(record.picks is not None for run in runs for record in run.records)


def _names(record: TaskRecord) -> dict[str, str]:
    names = {hit.skill_id: hit.name for hit in record.retrieved}
    names.update({pick.skill_id: pick.name for pick in record.picks or []})
    return names


def _relevant(record: TaskRecord, labels: Labels | None, skills: Mapping[str, Skill]) -> frozenset[str]:
    if labels is not None and record.task_id in labels:
        by_name = {skill.name: skill.id for skill in skills.values()}
        by_name.update({name: skill_id for skill_id, name in _names(record).items()})
        return frozenset(by_name.get(item, item) for item in labels[record.task_id])
    return frozenset(record.relevant_skills or ())


def task_selection(record: TaskRecord, metric: str, labels: Labels | None = None,
                   skills: Mapping[str, Skill] | None = None) -> TaskSelection:
    """A record as `TaskSelection` (``relevant`` empty when unknown; ``metric`` resolved, `metric_of`); ``labels``
    names resolved against the record's skills and ``skills`` (a run's, by id)."""
    best: dict[str, int] = {}
    for hit, rank in ranked(record.retrieved):
        best[hit.skill_id] = min(rank, best.get(hit.skill_id, rank))
    order = sorted(best, key=lambda skill_id: best[skill_id])  # stable: ties keep retrieval order
    draw = record.library_draw
    return TaskSelection(record.task_id, tuple(order), tuple(p.skill_id for p in record.picks or []),
                         _relevant(record, labels, skills or {}), value_of(record, metric),
                         size=float(draw.requested) if draw is not None else None,
                         nn_cosine=draw.nn_cosine if draw is not None else None, names=_names(record))


def _groups(runs: list[RunLog], *, strip_size: bool = False) -> dict[tuple[str, str, str], list[RunLog]]:
    out: dict[tuple[str, str, str], list[RunLog]] = {}
    for run in runs:
        if any(record.picks is not None for record in run.records):
            condition = SIZE_TAG.sub("", run.condition) if strip_size else run.condition
            out.setdefault((run.env, run.model, condition), []).append(run)
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], condition_order(kv[0][2]))))


def _pct(prefix: str, value: tuple[float, float, float] | Estimate | None, scale: float = 100.0) -> dict[str, Any]:
    """``prefix``, ``prefix_low``, ``prefix_high`` of a (value, low, high) or an `Estimate`, times ``scale``."""
    names = (f"{prefix}", f"{prefix}_low", f"{prefix}_high")
    triple: tuple[float | None, ...] = (value.value, value.low, value.high) if isinstance(value, Estimate) \
        else (None, None, None) if value is None else tuple(value)
    return {name: None if v is None else scale * v for name, v in zip(names, triple, strict=True)}


NOTE = ("tasks with recorded picks; a pick is a load_skill / read_skill_file / run_skill of a skill, a code skill's "
        "function that ran, or an inline text skill followed (docs/selection.md); trigger rate and picks per task over "
        "every task, the rest over the labelled tasks (right skills known: the task's metadata, the frozen library's "
        "provenance, or report --labels); Hit@k, MRR and NDCG@10 rank a skill at its best over the task's "
        "retrievals; pick accuracy: the first pick is a right skill; 95 % task-bootstrap CIs.")
SKILLS_NOTE = ("per skill picked or right in the group's labelled tasks: precision = tasks that picked it and for "
               "which it is right / tasks that picked it; recall = the same / tasks for which it is right; 95 % "
               "task-bootstrap CIs.")


def selection_tables(runs: list[RunLog], metric: str, seed: int, labels: Labels | None = None) -> list[Table]:
    """The ``selection`` and ``selection_skills`` tables, then the size study's where a group has several sizes."""
    summary = Table("selection", "Which skill the agent picks: retrieval and pick accuracy",
                    ["env", "model", "condition", "tasks", "labelled",
                     *[f"{name}{suffix}" for name in ("trigger_rate_pct", "picks_per_task") for suffix in
                       ("", "_low", "_high")],
                     *[f"{name}{suffix}" for name in ("hit1_pct", "hit5_pct", "mrr", "ndcg10", "pick_accuracy_pct")
                       for suffix in ("", "_low", "_high")]], note=NOTE)
    skills = Table("selection_skills", "Per skill: trigger precision and recall",
                   ["env", "model", "condition", "skill", "skill_id", "right_for", "picked", "picked_right",
                    "precision_pct", "precision_pct_low", "precision_pct_high", "recall_pct", "recall_pct_low",
                    "recall_pct_high", "f1"], note=SKILLS_NOTE)
    for (env, model, condition), members in _groups(runs).items():
        tasks = [task_selection(record, metric_of(run, metric), labels, run.skills)
                 for run in members for record in run.records if record.picks is not None]
        labelled = [t for t in tasks if t.relevant]
        everyone = selection_summary(tasks, seed=seed)
        row: dict[str, Any] = {"env": env, "model": model, "condition": condition, "tasks": len(tasks),
                               "labelled": len(labelled), **_pct("trigger_rate_pct", everyone["trigger_rate"]),
                               **_pct("picks_per_task", everyone["picks"], 1.0)}
        if labelled:
            scored = selection_summary(labelled, seed=seed)
            for name, key, scale in (("hit1_pct", "hit1", 100.0), ("hit5_pct", "hit5", 100.0), ("mrr", "mrr", 1.0),
                                     ("ndcg10", "ndcg10", 1.0), ("pick_accuracy_pct", "pick_accuracy", 100.0)):
                row.update(_pct(name, scored[key], scale))
        summary.rows.append(row)
        for trig in skill_triggers(labelled, seed=seed):
            skills.rows.append({"env": env, "model": model, "condition": condition, "skill": trig.name,
                                "skill_id": trig.skill_id, "right_for": trig.right_for, "picked": trig.picked,
                                "picked_right": trig.picked_right, **_pct("precision_pct", trig.precision),
                                **_pct("recall_pct", trig.recall), "f1": trig.f1})
    return [summary, skills, *scale_tables(runs, metric, seed, labels)]


SCALE_NOTE = ("labelled tasks of the runs at each library size (library_size: each task's right skills and near "
              "misses); pass rate, pick accuracy, Hit@k with 95 % task-bootstrap CIs; drop = the smallest size's pass "
              "rate minus this size's, split into shadowing (fewer right picks, valued at what a right pick is worth) "
              "and context overhead (the rest: a bigger library with the same pick), each with a 95 % CI and a "
              "one-sided 95 % upper bound from a bootstrap over task ids shared by every size (docs/selection.md).")
SLOPE_NOTE = ("least-squares slope of each size's figure on log2(library size), in points per doubling, with a 95 % "
              "CI from the task-id bootstrap, and R²; the break row: the size after which a flat-then-linear fit of "
              "pick accuracy leaves the least squared error (the smallest size: no break, the linear fit).")
CONFUSION_NOTE = ("over every labelled (task, size) with a neighbour: the right skill's nearest-neighbour description "
                  "cosine in its library against a mis-pick (first pick not right): Spearman's rho and AUROC with "
                  "95 % task-bootstrap CIs (positive rho / AUROC above 0.5: crowding goes with mis-picks); pick "
                  "accuracy per cosine quartile.")


def scale_tables(runs: list[RunLog], metric: str, seed: int, labels: Labels | None = None) -> list[Table]:
    """The size study's tables (module docstring); none when no group has labelled tasks at two sizes."""
    scale = Table("selection_scale", "Library size: pass rate, pick accuracy and the drop split into shadowing and "
                  "context overhead", ["env", "model", "condition", "library_size", "mean_size", "tasks",
                                       *[f"{n}{s}" for n in ("pass_pct", "pick_accuracy_pct", "hit1_pct", "hit5_pct")
                                         for s in ("", "_low", "_high")], "nn_cosine",
                                       *[f"{n}{s}" for n in ("drop_pts", "shadowing_pts", "context_pts")
                                         for s in ("", "_low", "_high", "_upper")]], note=SCALE_NOTE)
    slope = Table("selection_slope", "Per doubling of the library: slope, R² and the break",
                  ["env", "model", "condition", "metric", "per_doubling_pts", "per_doubling_low", "per_doubling_high",
                   "r2", "intercept_pct", "break_size"], note=SLOPE_NOTE)
    confusion = Table("selection_confusability", "Does crowding predict a mis-pick?",
                      ["env", "model", "condition", "observations", "rho", "rho_low", "rho_high", "auroc",
                       "auroc_low", "auroc_high", "quartile_cosines", "quartile_pick_accuracy_pct", "why"],
                      note=CONFUSION_NOTE)
    for (env, model, condition), members in _groups(runs, strip_size=True).items():
        by_size: dict[float, list[TaskSelection]] = {}
        for run in members:
            for record in run.records:
                if record.picks is None or record.library_draw is None:
                    continue
                task = task_selection(record, metric_of(run, metric), labels, run.skills)
                if task.relevant and task.size is not None:
                    by_size.setdefault(task.size, []).append(task)
        if len(by_size) < 2:
            continue
        analysis = scale_analysis(by_size, seed=seed)
        key = {"env": env, "model": model, "condition": condition}
        for row in analysis.sizes:
            scale.rows.append({**key, "library_size": int(row.size), "mean_size": row.mean_size, "tasks": row.tasks,
                               **_pct("pass_pct", row.pass_rate), **_pct("pick_accuracy_pct", row.pick_accuracy),
                               **_pct("hit1_pct", row.hit1), **_pct("hit5_pct", row.hit5),
                               "nn_cosine": row.nn_cosine,
                               **_bounded("drop_pts", row.drop), **_bounded("shadowing_pts", row.shadowing),
                               **_bounded("context_pts", row.context_overhead)})
        for fit in analysis.slopes:
            per = _pct("per_doubling", fit.slope)
            slope.rows.append({**key, "metric": fit.metric, "per_doubling_pts": per["per_doubling"],
                               "per_doubling_low": per["per_doubling_low"],
                               "per_doubling_high": per["per_doubling_high"], "r2": fit.r2,
                               "intercept_pct": None if fit.intercept is None else 100 * fit.intercept,
                               "break_size": None})
        hinge = analysis.hinge
        slope.rows.append({**key, "metric": "pick_accuracy (break)",
                           "per_doubling_pts": None if hinge.slope is None else 100 * hinge.slope,
                           "per_doubling_low": None, "per_doubling_high": None, "r2": None, "intercept_pct": None,
                           "break_size": None if hinge.size is None else int(hinge.size)})
        conf = analysis.confusability
        confusion.rows.append({**key, "observations": conf.observations, "rho": conf.rho.value,
                               "rho_low": conf.rho.low, "rho_high": conf.rho.high, "auroc": conf.auroc.value,
                               "auroc_low": conf.auroc.low, "auroc_high": conf.auroc.high,
                               "quartile_cosines": " | ".join(f"{q['low']:.2f}-{q['high']:.2f}"
                                                              for q in conf.quartiles),
                               "quartile_pick_accuracy_pct": " | ".join(f"{100 * q['pick_accuracy']:.0f}"
                                                                        for q in conf.quartiles),
                               "why": conf.why})
    return [table for table in (scale, slope, confusion) if table.rows]


def _bounded(prefix: str, value: Estimate) -> dict[str, Any]:
    return {**_pct(prefix, value), f"{prefix}_upper": None if value.upper is None else 100 * value.upper}

