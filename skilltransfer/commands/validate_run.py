"""What ``skilltransfer validate`` computes, apart from how it prints: libraries and an outcomes file matched, every
diagnostic measured (`skilltransfer.metrics.diagnostics`, the sandboxed script start, the LLM rubric), and the
statistics (`skilltransfer.metrics.validation.validate`). ``benchmarks/external_validity.py`` calls the same."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.memory.chunked import ChunkedEmbedder
from skilltransfer.memory.library import LENIENT_KEY, read_library
from skilltransfer.metrics.diagnostics import (
    BY_NAME,
    MODEL_FREE,
    PER_TASK,
    SKILL_DIAGNOSTICS,
    DiagnosticContext,
    LibraryDiagnostics,
    LibrarySkills,
    TaskItem,
    skill_diagnostics,
    task_items,
)
from skilltransfer.metrics.outcomes import Outcomes
from skilltransfer.metrics.task_texts import TaskText
from skilltransfer.metrics.validation import DEFAULT_RESAMPLES, Units, ValidationReport, validate
from skilltransfer.protocols import Embedder

Progress = Callable[[str], None]


def library_name(path: Path) -> str:
    """The name an outcomes file gives a library: its folder's name (a ``.jsonl``: the file's stem)."""
    path = Path(path)
    return path.stem if path.is_file() and path.suffix == ".jsonl" else path.resolve().name


def read_libraries(paths: Sequence[Path], progress: Progress, *, lenient: bool = False) -> list[LibrarySkills]:
    """Every library, read as far as it can be: the skills that could not be read are named, never the reason to
    refuse a library (a library with no readable skill at all is still refused, naming the first problem); with
    ``lenient``, model-written SKILL.md files the format refuses are read as meant (`read_library`).

    Raises:
        InputError: two libraries with one name, a library that is not there or has no readable skill.
    """
    out: list[LibrarySkills] = []
    seen: dict[str, Path] = {}
    for path in paths:
        name = library_name(path)
        if name in seen:
            raise InputError(f"two libraries are named {name!r}: {seen[name]} and {path} (an outcomes file names "
                             "a library by its folder name)")
        seen[name] = path
        read = read_library(path, lenient=lenient)
        out.append(LibrarySkills(name, Path(path) if Path(path).is_dir() else None, read.skills, read.unreadable))
        loose = sum(LENIENT_KEY in skill.extra for skill in read.skills)
        progress(f"read {name}: {len(read.skills)} skills" + (f" ({loose} read leniently)" if loose else "")
                 + (f", {len(read.unreadable)} files not read" if read.unreadable else ""))
    return out


@dataclass
class Matched:
    """Libraries (or skills) matched to their outcomes."""

    units: Units
    libraries: list[LibrarySkills]
    """The libraries in the units' order (skill outcomes: the one library)."""
    left_out: list[str]
    """Libraries given without an outcome."""
    task_columns: list[list[int]] = field(default_factory=list)
    """Per-task outcomes: for each outcome task, the rows of ``--tasks`` it stands for (its id, or its group's)."""
    skill_rows: list[int] = field(default_factory=list)
    """Skill outcomes: each unit's index among the library's skills."""


def _unmatched(kind: str, names: Sequence[str], known: Sequence[str], path: Path, hint: str) -> InputError:
    shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    known_shown = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
    noun = kind if len(names) != 1 else {"libraries": "library", "tasks": "task", "skills": "skill"}[kind]
    return InputError(f"--outcomes names {len(names)} {noun} it cannot match: {shown} ({hint}: {known_shown}); "
                      "fix those names in the file or give what they name", path=path)


def match(libraries: list[LibrarySkills], outcomes: Outcomes, tasks: Sequence[TaskItem]) -> Matched:
    """Join libraries (or one library's skills) and outcomes.

    Raises:
        InputError: one line for an outcomes file naming libraries, tasks or skills that nothing given matches.
    """
    if outcomes.kind == "skill":
        if len(libraries) != 1:
            raise InputError(f"--outcomes {outcomes.path} gives outcomes per skill: give exactly one library (got "
                             f"{len(libraries)})")
        library = libraries[0]
        index = {s.name: i for i, s in enumerate(library.skills)} | {s.id: i for i, s in enumerate(library.skills)}
        unknown = [name for name in outcomes.values if name not in index]
        if unknown:
            raise _unmatched("skills", unknown, [s.name for s in library.skills], outcomes.path,
                             f"skills of {library.name}")
        rows = [index[name] for name in outcomes.values]
        names = [library.skills[i].name for i in rows]
        return Matched(Units(names, np.array(list(outcomes.values.values()))), [library], [], skill_rows=rows)
    by_name = {lib.name: lib for lib in libraries}
    unknown = [name for name in outcomes.values if name not in by_name]
    if unknown:
        raise _unmatched("libraries", unknown, list(by_name), outcomes.path,
                         "a library is named by its folder name; libraries given")
    chosen = [lib for lib in libraries if lib.name in outcomes.values]
    left = [lib.name for lib in libraries if lib.name not in outcomes.values]
    outcome = np.array([outcomes.values[lib.name] for lib in chosen])
    if outcomes.kind == "library":
        return Matched(Units([lib.name for lib in chosen], outcome), chosen, left)
    names = outcomes.tasks()
    ids = {t.id: i for i, t in enumerate(tasks)}
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        groups.setdefault(t.group, []).append(i)
    if all(name in ids for name in names):
        columns = [[ids[name]] for name in names]
    elif all(name in groups for name in names):
        columns = [groups[name] for name in names]
    else:
        missing = [name for name in names if name not in ids and name not in groups]
        raise _unmatched("tasks", missing, list(ids)[:8] + list(groups)[:8], outcomes.path,
                         "a task is named by its --tasks id or its group; some ids and groups")
    matrix = np.full((len(chosen), len(names)), np.nan)
    position = {name: j for j, name in enumerate(names)}
    for row, lib in enumerate(chosen):
        for (owner, task), values in outcomes.runs.items():
            if owner == lib.name:
                matrix[row, position[task]] = float(np.mean(values))
    units = Units([lib.name for lib in chosen], outcome, task_outcomes=matrix, task_ids=names)
    return Matched(units, chosen, left, columns)


@dataclass
class ValidationRun:
    """Everything ``validate`` prints and writes."""

    report: ValidationReport
    outcomes: Outcomes
    libraries: dict[str, dict[str, Any]]
    """Library -> what was seen reading and measuring it (skills, unreadable files, executability failures, ...)."""
    left_out: list[str]
    rubric: dict[str, Any] | None = None
    """The judge's usage and cost, when the rubric ran."""
    tasks: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        definitions = {name: {"kind": BY_NAME[name].kind, "scope": BY_NAME[name].scope,
                              "definition": BY_NAME[name].definition}
                       for name in self.report.diagnostics if name in BY_NAME}
        return {"format_version": 1, "outcomes": {"file": str(self.outcomes.path), "kind": self.outcomes.kind,
                                                  "column": self.outcomes.column},
                "settings": self.settings, "tasks": self.tasks, "definitions": definitions,
                "libraries": self.libraries, "left_out": self.left_out, "rubric": self.rubric,
                **self.report.to_dict()}


def _point(per_task: np.ndarray, columns: list[list[int]]) -> tuple[np.ndarray, float]:
    """A per-task diagnostic over the outcome's tasks: one value per outcome task (its rows' mean), and their mean."""
    with np.errstate(invalid="ignore"):
        cells = np.array([np.nanmean(per_task[idx]) if not np.all(np.isnan(per_task[idx])) else np.nan
                          for idx in columns])
    kept = cells[~np.isnan(cells)]
    return cells, float(kept.mean()) if len(kept) else float("nan")


def measure_libraries(context: DiagnosticContext, libraries: Sequence[LibrarySkills],
                      progress: Progress) -> list[LibraryDiagnostics]:
    """`DiagnosticContext.measure` of each library, one progress line each."""
    out = []
    for number, library in enumerate(libraries, start=1):
        measured = context.measure(library)
        out.append(measured)
        progress(f"[{number}/{len(libraries)}] measured {library.name}")
    return out


def library_notes(measured: LibraryDiagnostics, library: LibrarySkills) -> dict[str, Any]:
    """What was seen reading and measuring a library (for ``--out``)."""
    notes = dict(measured.notes)
    notes["unreadable"] = list(library.unreadable)
    notes["read_leniently"] = sum(LENIENT_KEY in skill.extra for skill in library.skills)
    return notes


def assemble(matched: Matched, measured: Sequence[LibraryDiagnostics], names: Sequence[str],
             extra: dict[str, tuple[str, list[float]]]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The diagnostics table the statistics take: name -> one value per unit (per-task outcomes: a per-task diagnostic
    averaged over the outcome's tasks, its per-task values kept in the units), and each name's kind."""
    values: dict[str, np.ndarray] = {}
    kinds: dict[str, str] = {}
    by_lib = {m.name: m for m in measured}
    units = matched.units
    for name in names:
        kinds[name] = BY_NAME[name].kind
        column = []
        per_task_rows = []
        for lib in units.names:
            m = by_lib[lib]
            if units.task_outcomes is not None and name in PER_TASK and name in m.per_task:
                cells, point = _point(m.per_task[name], matched.task_columns)
                per_task_rows.append(cells)
                column.append(point)
            else:
                column.append(m.values.get(name, float("nan")))
        values[name] = np.array(column, dtype=float)
        if per_task_rows and len(per_task_rows) == len(units.names):
            units.task_diagnostics[name] = np.array(per_task_rows)
    for name, (kind, column_values) in extra.items():
        values[name] = np.array(column_values, dtype=float)
        kinds[name] = kind
    return values, kinds


def skill_level(matched: Matched, tasks: Sequence[TaskItem], embedder: Embedder, whole: Embedder,
                run_script: Any, *, tau: float, seed: int) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per-skill diagnostics of the one library, for the matched skills, in the units' order."""
    library = matched.libraries[0]
    rows = matched.skill_rows
    every = skill_diagnostics(library.skills, tasks, embedder, whole, run_script=run_script, tau=tau, seed=seed)
    return ({name: every[name][rows] for name in SKILL_DIAGNOSTICS}, dict.fromkeys(SKILL_DIAGNOSTICS, "model-free"))


def parts_of(units: Units, outcomes: Outcomes, tune_on: str | None) -> dict[str, list[int]] | None:
    """``tune``: the units whose column has the value of ``COLUMN=VALUE``; ``held_out``: the others.

    Raises:
        InputError: not ``COLUMN=VALUE``, an unknown column, a part with fewer than 4 units.
    """
    if tune_on is None:
        return None
    column, sep, value = tune_on.partition("=")
    if not sep or not column.strip():
        raise InputError(f"--tune-on takes COLUMN=VALUE (e.g. family=claude), got {tune_on!r}")
    labels = outcomes.columns.get(column.strip())
    if labels is None:
        raise InputError(f"--tune-on {column.strip()!r} is not a column of {outcomes.path}; columns: "
                         f"{', '.join(outcomes.columns) or '(none)'}")
    tune = [i for i, name in enumerate(units.names) if labels.get(name) == value.strip()]
    held = [i for i in range(len(units.names)) if i not in tune]
    if len(tune) < 4 or len(held) < 4:
        raise InputError(f"--tune-on {tune_on}: {len(tune)} units to tune on and {len(held)} held out; each part "
                         "needs 4")
    return {"tune": tune, "held_out": held}


def group_labels(units: Units, outcomes: Outcomes, columns: Sequence[str]) -> dict[str, list[str]]:
    """Grouping name -> one label per unit, from columns of the outcomes file.

    Raises:
        InputError: an unknown column, a unit without a value in it.
    """
    out = {}
    for column in columns:
        labels = outcomes.columns.get(column)
        if labels is None:
            raise InputError(f"--group {column!r} is not a column of {outcomes.path}; columns: "
                             f"{', '.join(outcomes.columns) or '(none)'}")
        missing = [name for name in units.names if name not in labels]
        if missing:
            raise InputError(f"--group {column}: no value for {', '.join(missing[:5])}", path=outcomes.path)
        out[column] = [labels[name] for name in units.names]
    return out


def external_values(units: Units, outcomes: Outcomes, columns: Sequence[str]) -> dict[str, tuple[str, list[float]]]:
    """``--external`` columns as diagnostics (kind external): one number per unit (NaN where empty).

    Raises:
        InputError: an unknown column, or a value that is not a number.
    """
    out = {}
    for column in columns:
        labels = outcomes.columns.get(column)
        if labels is None:
            raise InputError(f"--external {column!r} is not a column of {outcomes.path}; columns: "
                             f"{', '.join(outcomes.columns) or '(none)'}")
        values = []
        for name in units.names:
            text = labels.get(name)
            try:
                values.append(float(text.rstrip("%")) if text else float("nan"))
            except ValueError:
                raise InputError(f"--external {column}: {text!r} ({name}) is not a number",
                                 path=outcomes.path) from None
        out[column] = ("external", values)
    return out


def model_free_names(chosen: Sequence[str] | None, key_points: bool) -> list[str]:
    """The diagnostics measured without a judge: the model-free ones (or those chosen), plus the reference one when
    key points were given."""
    names = list(MODEL_FREE) + (["keypoint_coverage"] if key_points else [])
    if chosen:
        unknown = [name for name in chosen if name not in BY_NAME]
        if unknown:
            raise InputError(f"--diagnostics: unknown {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        names = [name for name in names if name in chosen]
    return names


def run_statistics(matched: Matched, values: dict[str, np.ndarray], kinds: dict[str, str], *,
                   parts: dict[str, list[int]] | None, groupings: dict[str, list[str]], pairs_with: Sequence[str],
                   resamples: int, seed: int) -> ValidationReport:
    """The statistics over the matched units (`validate`): the best chosen from the model-free diagnostics."""
    candidates = [name for name, kind in kinds.items() if kind == "model-free"]
    return validate(matched.units, values, kinds, parts=parts, candidates=candidates,
                    pairs_with=[p for p in pairs_with if p in values], groupings=groupings, resamples=resamples,
                    seed=seed)


def make_context(tasks: Sequence[TaskText], embedder: Embedder, *, key_points: dict[str, list[str]] | None,
                 run_script: Any, tau: float, seed: int,
                 progress: Progress) -> tuple[DiagnosticContext, ChunkedEmbedder]:
    """The tasks embedded once (cut and whole), and the chunked embedder that read them."""
    whole = ChunkedEmbedder(embedder)
    items = task_items([t.id for t in tasks], [t.text for t in tasks])
    progress(f"embedding {len(items)} task instructions (cut at the embedder's window, and whole by chunks)")
    context = DiagnosticContext(items, embedder, whole, lambda text: [c for c, _ in whole.chunks(text)],
                                key_points=key_points, run_script=run_script, tau=tau, seed=seed, progress=progress)
    return context, whole


def judge_libraries(chat: Any, libraries: Sequence[LibrarySkills], tasks: Sequence[TaskItem],
                    measured: Sequence[LibraryDiagnostics], key_points: dict[str, list[str]] | None, *,
                    rubrics: Sequence[str], max_chars: int, retries: int, progress: Progress) -> Any:
    """The LLM rubric of every library through ``chat``, merged into its measured diagnostics; returns the
    `SkillRubric` (its usage and prompt ids)."""
    from skilltransfer.judge.rubric import SkillRubric, judge_library

    rubric = SkillRubric(chat, max_chars=max_chars, retries=retries)
    for library, diagnostics in zip(libraries, measured, strict=True):
        judged = judge_library(rubric, library, tasks, key_points=key_points, rubrics=rubrics, progress=progress)
        diagnostics.values.update(judged.values)
        diagnostics.per_task.update(judged.per_task)
        diagnostics.notes["rubric"] = judged.notes
    return rubric


__all__ = ["DEFAULT_RESAMPLES", "Matched", "ValidationRun", "assemble", "external_values", "group_labels",
           "judge_libraries", "library_name", "library_notes", "make_context", "match", "measure_libraries",
           "model_free_names", "parts_of", "read_libraries", "run_statistics", "skill_level"]
