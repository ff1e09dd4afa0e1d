"""What ``skilltransfer triggers`` does (docs/selection.md): trigger evals in the format people write them, run as
streams and scored per skill.

An eval set is skill-creator's ``[{"query": "...", "should_trigger": true}, ...]`` for one skill (``--skill``), or
``{"skill name": [...], ...}`` for several; without ``--evals`` each skill package's own ``evals/trigger*.json`` are
read. Every query is asked ``repeats`` times in two settings, each one stream of the real agent
(`skilltransfer.envs.triggers.TriggerEnv`, the library disclosed progressively as agent skills: cards, ``load_skill``):

- **isolated**: the library holds only the skill under test (``library_size: 1`` with the task's ``library_skills``);
- **competitive**: the whole library (the top ``top_k`` cards by the query, all of them by default).

A skill triggered when the task picked it (`skilltransfer.log.selection`: loaded it or read one of its files);
`skilltransfer.metrics.triggers` scores the asks. The streams are run folders under ``<out>/runs``: a rerun resumes
them and rewrites ``triggers.json``, ``triggers.csv`` and ``queries.csv`` from every finished ask.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError, field_validator

from skilltransfer.envs.triggers import query_task_id
from skilltransfer.errors import InputError
from skilltransfer.log import RunFolder, TaskRecord
from skilltransfer.memory.library import read_library
from skilltransfer.metrics.triggers import Ask, TriggerScore, trigger_score
from skilltransfer.skill import Skill
from skilltransfer.util.files import atomic_write_text, read_json
from skilltransfer.util.trees import files

SETTINGS = ("isolated", "competitive")
TRIGGER_ENV = "skilltransfer.envs.triggers:TriggerEnv"
EVALS_FOLDER = "evals"


class TriggerItem(BaseModel):
    """One query of an eval set."""

    model_config = ConfigDict(extra="ignore")

    query: str
    should_trigger: StrictBool

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an empty query")
        return value


def _items(data: Any, where: Path, skill: str | None) -> list[TriggerItem]:
    if not isinstance(data, list) or not data:
        raise InputError(f"{'skill ' + repr(skill) + ': ' if skill else ''}give a non-empty list "
                         '[{"query": "...", "should_trigger": true}, ...]', path=where)
    items = []
    for number, item in enumerate(data, start=1):
        try:
            items.append(TriggerItem.model_validate(item))
        except ValidationError as exc:
            error = exc.errors()[0]
            field_name = ".".join(str(part) for part in error["loc"]) or "item"
            what = "missing" if error["type"] == "missing" else error["msg"].lower()
            raise InputError(f"{'skill ' + repr(skill) + ', ' if skill else ''}item {number}: {field_name}: {what} "
                             '(each item is {"query": "text", "should_trigger": true or false})', path=where) from None
    return items


def read_eval_set(path: Path, skill: str | None, known: Sequence[str]) -> dict[str, list[TriggerItem]]:
    """An eval file: a list for ``skill`` or a ``{skill: list}`` object (module docstring).

    Raises:
        InputError: not JSON, the wrong shape, an item without a text ``query`` or a true/false ``should_trigger``
            (naming its number), a skill the library does not have, a list without ``--skill``.
    """
    data = read_json(path, what="eval set")
    if isinstance(data, dict):
        if skill is not None:
            raise InputError("this eval set names its skills ({\"skill\": [...]}); leave out --skill", path=path)
        sets = {str(name): _items(items, path, str(name)) for name, items in data.items()}
    else:
        if skill is None:
            if len(known) != 1:
                raise InputError("a list of queries is one skill's eval set: name the skill with --skill (or write "
                                 "{\"skill name\": [...]})", path=path)
            skill = known[0]
        sets = {skill: _items(data, path, None)}
    unknown = [name for name in sets if name not in known]
    if unknown:
        shown = ", ".join(repr(n) for n in known[:12]) + (" ..." if len(known) > 12 else "")
        raise InputError(f"no skill named {unknown[0]!r} in the library (it has {shown})", path=path)
    return sets


def package_eval_sets(skills: Sequence[Skill]) -> dict[str, list[TriggerItem]]:
    """Each skill package's own ``evals/trigger*.json`` (in name order, concatenated), for skills read from a folder.

    Raises:
        InputError: a malformed file (see `read_eval_set`).
    """
    out: dict[str, list[TriggerItem]] = {}
    for skill in skills:
        if skill.package is None or not (Path(skill.package.folder) / EVALS_FOLDER).is_dir():
            continue
        folder = Path(skill.package.folder) / EVALS_FOLDER
        found, _ = files(folder, max_entries=1000)
        for name in sorted(n for n in found if "/" not in n and n.startswith("trigger") and n.endswith(".json")):
            out.setdefault(skill.name, []).extend(_items(read_json(name, what="eval set", root=folder),
                                                         folder / name, None))
    return out


@dataclass
class TriggerSpec:
    """The two settings' streams of one invocation (the spec keys `skilltransfer.runner.launch.run_spec` layers)."""

    library: str
    skills: list[Skill]
    sets: dict[str, list[TriggerItem]]
    repeats: int
    out: Path
    settings: tuple[str, ...] = SETTINGS
    flags: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Setting -> its spec keys."""

    def queries(self) -> list[dict[str, Any]]:
        return [{"skill": skill, "index": i, "query": item.query, "should_trigger": item.should_trigger}
                for skill, items in self.sets.items() for i, item in enumerate(items)]

    def folder(self, setting: str) -> Path:
        return self.out / "runs" / setting


def trigger_spec(library: str, evals: Path | None, skill: str | None, *, repeats: int, out: Path, steps: int,
                 top_k: int | None, settings: Sequence[str] = SETTINGS, embedder: str | None = None,
                 sandboxed: bool = True) -> TriggerSpec:
    """Read the library and its eval sets and lay out the streams (module docstring).

    Raises:
        InputError: an unreadable library or eval set, no eval set at all, a bad setting.
    """
    if repeats < 1 or steps < 1:
        raise InputError("--runs and --steps must be at least 1")
    if not settings or any(s not in SETTINGS for s in settings):
        raise InputError(f"settings: choose from {', '.join(SETTINGS)}")
    skills = read_library(library).skills
    names = [s.name for s in skills]
    if evals is not None:
        sets = read_eval_set(evals, skill, names)
    else:
        sets = package_eval_sets(skills)
        if skill is not None:
            sets = {name: items for name, items in sets.items() if name == skill}
        if not sets:
            raise InputError("no eval set: give --evals FILE (skill-creator's [{\"query\": ..., \"should_trigger\": "
                             "true}, ...]) or put evals/trigger*.json in a skill's folder", path=Path(library))
    spec = TriggerSpec(library, skills, sets, repeats, out, tuple(dict.fromkeys(settings)))
    base = {"condition": "task", "library": library, "skill_exec": "agent-skill", "agent.harness": "paper",
            "agent.skill_disclosure": "progressive", "limits.step_limit": steps, "env.env": TRIGGER_ENV,
            "env.label": "triggers", "env.sandboxed": sandboxed, "embedder": embedder}
    queries = spec.queries()
    spec.flags = {
        "isolated": {**base, "env.args": {"queries": queries, "repeats": repeats, "isolated": True},
                     "library_size": 1, "agent.top_k": 1},
        "competitive": {**base, "env.args": {"queries": queries, "repeats": repeats},
                        "agent.top_k": min(top_k, len(skills)) if top_k else len(skills)}}
    return spec


@dataclass
class SkillTriggers:
    """One skill's scores by setting."""

    skill: str
    scores: dict[str, TriggerScore]


def asks_of(records: Sequence[TaskRecord], spec: TriggerSpec, skill: Skill) -> list[Ask]:
    """The asks of ``skill``'s queries among ``records`` (a task triggered the skill when it picked it)."""
    items = spec.sets.get(skill.name, [])
    out = []
    for record in records:
        for index, item in enumerate(items):
            if any(record.task_id == query_task_id(skill.name, index, r) for r in range(spec.repeats)):
                picked = any(p.skill_id == skill.id for p in record.picks or [])
                out.append(Ask(index, item.should_trigger, picked))
    return out


def score_triggers(spec: TriggerSpec, seed: int = 0) -> tuple[list[SkillTriggers], list[TaskRecord]]:
    """Every finished ask of the spec's streams, scored per skill and setting; and the records read."""
    by_name = {skill.name: skill for skill in spec.skills}
    records: dict[str, list[TaskRecord]] = {}
    for setting in spec.settings:
        folder = RunFolder(spec.folder(setting))
        records[setting] = folder.read_records() if folder.exists() else []
    out = [SkillTriggers(name, {setting: trigger_score(asks_of(records[setting], spec, by_name[name]), seed=seed)
                                for setting in spec.settings}) for name in spec.sets]
    return out, [record for rows in records.values() for record in rows]


def _cells(prefix: str, value: tuple[float, float, float] | None) -> dict[str, float | None]:
    keys = (prefix, f"{prefix}_low", f"{prefix}_high")
    return dict(zip(keys, value if value is not None else (None, None, None), strict=True))


def write_outputs(spec: TriggerSpec, results: list[SkillTriggers], cost: Mapping[str, Any]) -> list[Path]:
    """``triggers.json``, ``triggers.csv`` (a row per skill and setting) and ``queries.csv`` (a row per query and
    setting) in ``spec.out``."""
    rows, queries = [], []
    for result in results:
        for setting, score in result.scores.items():
            rows.append({"skill": result.skill, "setting": setting, "queries": len(score.queries), "asks": score.asks,
                         **_cells("precision", score.precision), **_cells("recall", score.recall),
                         **_cells("f1", score.f1), **_cells("accuracy", score.accuracy)})
            for rate in score.queries:
                queries.append({"skill": result.skill, "setting": setting, "query_number": rate.query + 1,
                                "query": spec.sets[result.skill][rate.query].query,
                                "should_trigger": rate.should_trigger, "asks": rate.asks, "triggered": rate.triggered,
                                "trigger_rate": rate.rate, "passed": rate.passed})
    written = []
    document = {"library": spec.library, "repeats": spec.repeats, "settings": list(spec.settings),
                "cost": dict(cost), "skills": rows, "queries": queries}
    for name, text in (("triggers.json", json.dumps(document, indent=2) + "\n"), ("triggers.csv", _csv(rows)),
                       ("queries.csv", _csv(queries))):
        atomic_write_text(spec.out / name, text)
        written.append(spec.out / name)
    return written


def _csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def cost_of(records: Sequence[TaskRecord]) -> dict[str, Any]:
    """Calls, tokens and dollars (None without a model price) of the asks finished."""
    priced = [r.cost_usd for r in records if r.cost_usd is not None]
    return {"asks": len(records), "model_calls": sum(r.model_calls for r in records),
            "prompt_tokens": sum(r.prompt_tokens for r in records),
            "completion_tokens": sum(r.completion_tokens for r in records),
            "cost_usd": round(sum(priced), 6) if priced and len(priced) == len(records) else None}
