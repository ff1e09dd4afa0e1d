"""Library-level diagnostics that need no LLM, each defined once (docs/external-validity.md; the benchmark's plan,
``benchmarks/external_validity_plan.yaml``, holds the same definitions): what ``validate`` sets beside outcomes.

Scopes. A *pool* diagnostic looks at every skill of a library, as ``score`` does. An *own* diagnostic looks at each
task's own skills: a library that groups its skills in folders named after task groups (SkillLearnBench's
``skills/<library>/<task>/``: the folder the benchmark gives the solver for that task) gives a task the skills under
the folder of its group; a library with no folder named after any task group gives every task all its skills.
A task's group is the first part of its id (``court-form-filling/court-form-filling-1`` -> ``court-form-filling``;
an id without ``/`` is its own group). A per-task value is averaged over the group's tasks, then over the groups.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.metrics.executability import ScriptRunner, check_skill, summarise
from skilltransfer.metrics.scoring import score_library, skill_text
from skilltransfer.metrics.utility import DEFAULT_TAU
from skilltransfer.protocols import Embedder
from skilltransfer.skill import Skill

KINDS = ("model-free", "reference", "llm", "external")
"""model-free: libraries and instructions only (an embedder, no LLM); reference: also key points; llm: an LLM judge;
external: a column of the outcomes file (e.g. a benchmark's published scores)."""


@dataclass(frozen=True)
class Diagnostic:
    """A diagnostic's name, kind, scope and definition (one sentence)."""

    name: str
    kind: str
    scope: str
    definition: str


DIAGNOSTICS: tuple[Diagnostic, ...] = (
    Diagnostic("mean_relevance", "model-free", "pool", "score's mean relevance (knn utility) over the skills"),
    Diagnostic("mean_utility", "model-free", "pool", "score's mean pair utility over the skills: the paper's utility"),
    Diagnostic("max_relevance", "model-free", "pool", "the largest relevance of any skill"),
    Diagnostic("task_coverage", "model-free", "pool", "per task, the largest cosine of its instruction (cut at the "
               "embedder's window) with any skill's description"),
    Diagnostic("task_coverage_whole", "model-free", "pool", "per task, the largest cosine of its whole instruction "
               "with any skill's whole name, description and body (chunked)"),
    Diagnostic("own_coverage", "model-free", "own", "task_coverage over the task's own skills"),
    Diagnostic("own_coverage_whole", "model-free", "own", "task_coverage_whole over the task's own skills"),
    Diagnostic("own_term_coverage", "model-free", "own", "per task, the share of its distinct content words found in "
               "its own skills' name, description and package text"),
    Diagnostic("own_skills", "model-free", "own", "readable skills a task group has, averaged over the groups"),
    Diagnostic("own_words", "model-free", "own", "words of a task group's own skills' package text, summed, averaged "
               "over the groups"),
    Diagnostic("named_files_exist", "model-free", "pool", "of the package paths the SKILL.md bodies name, the share "
               "that exists (1: none named)"),
    Diagnostic("code_blocks_parse", "model-free", "pool", "of the Python and shell code blocks of the bodies, the "
               "share that parses (1: none)"),
    Diagnostic("scripts_start", "model-free", "pool", "of the .py and .sh files the packages ship, the share that "
               "parses and (.py, in the sandbox) starts (1: none)"),
    Diagnostic("exec_checks", "model-free", "pool", "the share of skills that pass every executability check"),
    Diagnostic("keypoint_coverage", "reference", "own", "per task, the mean over its key points of the largest cosine "
               "with any chunk of its own skills' package text"),
    Diagnostic("llm_coverage", "llm", "own", "per task, the share of its key points an LLM judge finds mentioned in "
               "its own skills"),
    Diagnostic("llm_executability", "llm", "own", "the judge's executability (1-5: completeness, determinism, "
               "consistency, usability) of each own skill, mean over a group's skills, then over groups"),
    Diagnostic("llm_safety", "llm", "own", "the judge's safety (1-5, six risks) of each own skill, mean over a group's "
               "skills, then over groups"),
)
BY_NAME = {d.name: d for d in DIAGNOSTICS}
MODEL_FREE = tuple(d.name for d in DIAGNOSTICS if d.kind == "model-free")
PER_TASK = ("task_coverage", "task_coverage_whole", "own_coverage", "own_coverage_whole", "own_term_coverage",
            "keypoint_coverage", "llm_coverage")
"""Diagnostics with one value per task (the others are one value per library, or per task group)."""
_WORD = re.compile(r"[a-z][a-z0-9_]+")
STOP_WORDS = frozenset("""
about above after again against all also and any are because been before being below between both but can could did
does doing down during each few for from further had has have having her here hers herself him himself his how into
its itself just more most must not now off once only other our ours ourselves out over own same she should some such
than that the their theirs them themselves then there these they this those through too under until use used using
very was were what when where which while who whom why will with would you your yours yourself yourselves may might
shall each every via per etc one two three first second make sure please given following based need needs task
""".split())
"""Words a task's content words leave out (English function words and instruction boilerplate)."""


def task_group(task_id: str) -> str:
    """A task's group: the first part of a path-like id, else the id itself."""
    return task_id.split("/", 1)[0] if "/" in task_id else task_id


def content_words(text: str) -> set[str]:
    """The distinct content words of a text: lower-case ``[a-z][a-z0-9_]+`` of 3+ characters, not a stop word."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOP_WORDS}


def package_text(skill: Skill) -> str:
    """A skill's SKILL.md body and the text of its package files the reader loaded, in path order."""
    return "\n\n".join([skill.body, *(skill.resources[path] for path in sorted(skill.resources))])


def whole_skill_text(skill: Skill) -> str:
    """The skill as one text: name, description, body."""
    return f"{skill.name}\n{skill.description}\n\n{skill.body}"


@dataclass(frozen=True)
class TaskItem:
    """One task: its id, instruction and group (`task_group`)."""

    id: str
    text: str
    group: str


def task_items(ids: Sequence[str], texts: Sequence[str]) -> list[TaskItem]:
    return [TaskItem(i, t, task_group(i)) for i, t in zip(ids, texts, strict=True)]


@dataclass
class LibrarySkills:
    """A library as read: its name (the folder name), where it was read from, its skills, and the files that could not
    be read."""

    name: str
    root: Path | None
    skills: list[Skill]
    unreadable: list[str] = field(default_factory=list)

    def folder_of(self, skill: Skill) -> str | None:
        """The first folder below the library's root that holds the skill's package (None: none, or not a folder)."""
        if self.root is None or skill.package is None:
            return None
        try:
            parts = Path(skill.package.folder).resolve().relative_to(self.root.resolve()).parts
        except ValueError:
            return None
        return parts[0] if len(parts) > 1 else None

    def own(self, groups: Sequence[str]) -> dict[str, list[int]] | None:
        """Task group -> indices of its own skills, when the library has a folder named after some task group; None
        when it has none (every task then owns every skill)."""
        folders = [self.folder_of(skill) for skill in self.skills]
        wanted = set(groups)
        if not wanted & {f for f in folders if f is not None}:
            return None
        return {g: [i for i, f in enumerate(folders) if f == g] for g in dict.fromkeys(groups)}


@dataclass
class LibraryDiagnostics:
    """One library's diagnostics: ``values`` (name -> value; NaN: not computable), ``per_task`` (name -> one value per
    task, for per-task diagnostics), and what was seen on the way (``notes``)."""

    name: str
    values: dict[str, float] = field(default_factory=dict)
    per_task: dict[str, np.ndarray] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


def macro_mean(values: np.ndarray, groups: Sequence[str]) -> float:
    """Mean over the groups of the mean over each group's tasks (NaN tasks skipped; NaN when none is left)."""
    means = []
    labels = np.asarray(list(groups))
    for group in dict.fromkeys(groups):
        kept = values[(labels == group) & ~np.isnan(values)]
        if len(kept):
            means.append(float(kept.mean()))
    return float(np.mean(means)) if means else float("nan")


def _max_cos(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Per row, its largest cosine with any column vector (rows x dim against cols x dim); 0 where there is none."""
    if not len(cols):
        return np.zeros(len(rows))
    return np.asarray(rows @ cols.T, dtype=float).max(axis=1)


class DiagnosticContext:
    """What every library is measured against, embedded once: the tasks (their instructions cut at the embedder's
    window and whole), their key points, and the settings.

    Args:
        tasks: the task instructions with ids and groups.
        embedder: the embedder (``score``'s; cached on disk by the caller).
        whole: an embedder that reads long texts whole (`skilltransfer.memory.chunked.ChunkedEmbedder` around
            ``embedder``).
        chunk: splits a text into chunks within the embedder's window (the same chunking).
        key_points: task id -> its key points (the reference diagnostic; None: not computed).
        run_script: starts a shipped script in a sandbox (None: scripts are parsed only).
        tau: abstractness temperature (``score``'s).
        seed: ``score``'s pair-sampling seed.
        progress: called with one line per step a person can follow.
    """

    def __init__(self, tasks: Sequence[TaskItem], embedder: Embedder, whole: Embedder,
                 chunk: Callable[[str], list[str]], *, key_points: Mapping[str, Sequence[str]] | None = None,
                 run_script: ScriptRunner | None = None, tau: float = DEFAULT_TAU, seed: int = 0,
                 progress: Callable[[str], None] | None = None) -> None:
        self.tasks = list(tasks)
        self.groups = [t.group for t in self.tasks]
        self.embedder, self.whole, self.chunk = embedder, whole, chunk
        self.run_script, self.tau, self.seed = run_script, tau, seed
        self.progress = progress or (lambda line: None)
        texts = [t.text for t in self.tasks]
        self.cut_vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        self.whole_vectors = np.asarray(whole.embed(texts), dtype=np.float32)
        self.task_words = [content_words(t.text) for t in self.tasks]
        self.key_points: dict[str, np.ndarray] = {}
        if key_points is not None:
            for task in self.tasks:
                points = [p for p in key_points.get(task.id, []) if p.strip()]
                self.key_points[task.id] = (np.asarray(embedder.embed(points), dtype=np.float32) if points
                                            else np.zeros((0, 1), dtype=np.float32))

    def measure(self, library: LibrarySkills) -> LibraryDiagnostics:
        """Every model-free diagnostic of ``library`` (and ``keypoint_coverage`` when key points were given)."""
        out = LibraryDiagnostics(library.name)
        skills = library.skills
        own = library.own(self.groups)
        out.notes.update({"skills": len(skills), "unreadable": list(library.unreadable),
                          "grouped_by_task": own is not None})
        nan = float("nan")
        if not skills:
            out.values.update(dict.fromkeys(MODEL_FREE, nan))
            out.notes["why"] = "no skill could be read"
            return out
        report = score_library(skills, [t.text for t in self.tasks], self.embedder, tau=self.tau,
                               specificity_mode="pairs", text="description", seed=self.seed,
                               task_ids=[t.id for t in self.tasks])
        relevance = np.array([row.relevance for row in report.skills])
        out.values["mean_relevance"] = float(relevance.mean())
        out.values["mean_utility"] = float(np.mean([row.utility for row in report.skills]))
        out.values["max_relevance"] = float(relevance.max())
        described = np.asarray(self.embedder.embed([skill_text(s, "description") for s in skills]), dtype=np.float32)
        whole = np.asarray(self.whole.embed([whole_skill_text(s) for s in skills]), dtype=np.float32)
        owned = [list(range(len(skills))) if own is None else own.get(t.group, []) for t in self.tasks]
        per_task = {
            "task_coverage": _max_cos(self.cut_vectors, described),
            "task_coverage_whole": _max_cos(self.whole_vectors, whole),
            "own_coverage": np.array([_max_cos(self.cut_vectors[i:i + 1], described[idx])[0]
                                      for i, idx in enumerate(owned)]),
            "own_coverage_whole": np.array([_max_cos(self.whole_vectors[i:i + 1], whole[idx])[0]
                                            for i, idx in enumerate(owned)]),
        }
        texts = [package_text(s) for s in skills]
        skill_words = [content_words(f"{s.name}\n{s.description}\n{text}") for s, text in zip(skills, texts,
                                                                                           strict=True)]
        terms = []
        for words, idx in zip(self.task_words, owned, strict=True):
            found = set().union(*(skill_words[i] for i in idx)) if idx else set()
            terms.append(len(words & found) / len(words) if words else nan)
        per_task["own_term_coverage"] = np.array(terms)
        if self.key_points:
            per_task["keypoint_coverage"] = self._keypoint_coverage(texts, owned)
        out.per_task = per_task
        for name, values in per_task.items():
            out.values[name] = macro_mean(values, self.groups)
        group_rows: dict[str, list[int]] = {}
        for task, idx in zip(self.tasks, owned, strict=True):
            group_rows.setdefault(task.group, idx)
        word_counts = [len(text.split()) for text in texts]
        out.values["own_skills"] = float(np.mean([len(idx) for idx in group_rows.values()]))
        out.values["own_words"] = float(np.mean([sum(word_counts[i] for i in idx) for idx in group_rows.values()]))
        out.notes["groups_without_own_skill"] = sorted(g for g, idx in group_rows.items() if not idx)
        checks = [check_skill(s, self.run_script) for s in skills]
        summary = summarise(checks)
        out.values.update({"named_files_exist": summary.named_files_exist,
                           "code_blocks_parse": summary.code_blocks_parse, "scripts_start": summary.scripts_start,
                           "exec_checks": summary.exec_checks})
        out.notes["executability"] = {
            "named": summary.named, "missing": summary.missing, "blocks": summary.blocks,
            "bad_blocks": summary.bad_blocks, "scripts": summary.scripts, "scripts_failed": summary.scripts_failed,
            "missing_module": summary.missing_module, "unchecked": summary.unchecked,
            "scripts_run": self.run_script is not None,
            "failures": [f"{s.name}: {c.path}: {c.status} ({c.detail})" for s, check in zip(skills, checks, strict=True)
                         for c in check.scripts if c.status in ("error", "syntax", "missing_module")]}
        return out

    def _keypoint_coverage(self, texts: list[str], owned: list[list[int]]) -> np.ndarray:
        chunk_vectors: dict[int, np.ndarray] = {}
        values = []
        for task, idx in zip(self.tasks, owned, strict=True):
            points = self.key_points.get(task.id)
            if points is None or not len(points) or points.shape[1] == 1:
                values.append(float("nan"))
                continue
            for i in idx:
                if i not in chunk_vectors:
                    chunks = self.chunk(texts[i]) or [texts[i]]
                    chunk_vectors[i] = np.asarray(self.embedder.embed(chunks), dtype=np.float32)
            cols = np.concatenate([chunk_vectors[i] for i in idx]) if idx else np.zeros((0, points.shape[1]))
            values.append(float(_max_cos(points, cols).mean()))
        return np.array(values)


def skill_diagnostics(skills: Sequence[Skill], tasks: Sequence[TaskItem], embedder: Embedder, whole: Embedder, *,
                      run_script: ScriptRunner | None = None, tau: float = DEFAULT_TAU,
                      seed: int = 0) -> dict[str, np.ndarray]:
    """Per-skill diagnostics of one library (for skill -> effect outcomes): ``score``'s relevance, utility,
    specificity, abstractness and best match, the best whole-text cosine with any task (``coverage_whole``), its
    package text's words, and whether it passes every executability check (1/0)."""
    report = score_library(list(skills), [t.text for t in tasks], embedder, tau=tau, specificity_mode="pairs",
                           text="description", seed=seed, task_ids=[t.id for t in tasks])
    rows = {row.id: row for row in report.skills}
    scored = [rows[s.id] for s in skills]
    skill_vectors = np.asarray(whole.embed([whole_skill_text(s) for s in skills]), dtype=np.float32)
    task_vectors = np.asarray(whole.embed([t.text for t in tasks]), dtype=np.float32)
    return {
        "relevance": np.array([r.relevance for r in scored]),
        "utility": np.array([r.utility for r in scored]),
        "specificity": np.array([r.specificity for r in scored]),
        "abstractness": np.array([r.abstractness for r in scored]),
        "best_match": np.array([r.best_match for r in scored]),
        "coverage_whole": _max_cos(skill_vectors, task_vectors),
        "words": np.array([float(len(package_text(s).split())) for s in skills]),
        "exec_checks": np.array([float(check_skill(s, run_script).passes) for s in skills]),
    }


SKILL_DIAGNOSTICS = ("relevance", "utility", "specificity", "abstractness", "best_match", "coverage_whole", "words",
                     "exec_checks")
"""The per-skill diagnostics, in table order (`skill_diagnostics`)."""
