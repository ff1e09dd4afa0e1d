"""Score a skill library against a task set: per-skill utility rows, a summary, and JSON/CSV reports."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.metrics.null_texts import NULL_ID, NULL_TEXTS
from skilltransfer.metrics.utility import (
    DEFAULT_TAU,
    NULL_QUANTILE,
    OFF_DOMAIN_QUANTILE,
    SPECIFICITY_MODES,
    null_threshold,
    utility_scores,
)
from skilltransfer.protocols import Embedder
from skilltransfer.skill import Skill
from skilltransfer.util.files import atomic_write_text

REPORT_FORMAT_VERSION = 1
SKILL_TEXTS = ("description", "description+body")
"""What of a skill is embedded: its description (default; it is what retrieval matches, seed §3.2) or
description + body (long bodies are truncated by the embedder, 256 word pieces for MiniLM)."""


def skill_text(skill: Skill, text: str = "description") -> str:
    """The text of ``skill`` that is embedded for scoring."""
    if text == "description":
        return skill.description
    if text == "description+body":
        return f"{skill.description}\n\n{skill.body}"
    raise ValueError(f"unknown skill text {text!r}; choose one of {', '.join(SKILL_TEXTS)}")


@dataclass(frozen=True)
class SkillScore:
    """One skill's utility components."""

    id: str
    name: str
    description: str
    level: str
    format: str
    specificity: float
    abstractness: float
    utility: float
    best_match: float
    off_domain: bool = False
    """Best match below the task set's own 5th-percentile k-th-neighbour cosine (see ``metrics.utility``)."""
    relevance: float = 0.0
    """The "knn" utility, whatever the mode: the ranking ``score`` shows first."""
    null_off_domain: bool = False
    """Best match inside the embedder's null: at or below `ScoreReport.null_threshold`."""


@dataclass
class ScoreReport:
    """Per-skill utility of a library against a task set, the settings used, and a summary."""

    embedder: str
    tau: float
    specificity_mode: str
    skill_text: str
    n_tasks: int
    n_reference: int
    """Pair (or nearest-task) cosines specificity was measured against."""
    sampled: bool
    seed: int
    skills: list[SkillScore]
    summary: dict[str, Any] = field(default_factory=dict)
    knn_k: int = 0
    """Neighbour rank k of the off-domain reference (and of "knn" specificity)."""
    off_domain_threshold: float = float("nan")
    """Best matches below this cosine are flagged off-domain."""
    null_threshold: float = float("nan")
    """The embedder's null: the 0.95 quantile of off-topic texts' best matches over these tasks."""

    def ranked(self) -> list[SkillScore]:
        """Skills by descending utility (ties: by name)."""
        return sorted(self.skills, key=lambda row: (-row.utility, row.name))

    def by_relevance(self) -> list[SkillScore]:
        """Skills inside the embedder's null last, then by descending relevance ("knn" utility; ties: by name)."""
        return sorted(self.skills, key=lambda row: (row.null_off_domain, -row.relevance, row.name))

    def null_rule(self) -> dict[str, Any]:
        """How the absolute off-domain flag was decided (recorded in the JSON report)."""
        return {"rule": f"best_match <= the {NULL_QUANTILE:g} quantile of the best matches of {len(NULL_TEXTS)} "
                        "off-topic texts over the same tasks", "null": NULL_ID, "quantile": NULL_QUANTILE,
                "threshold": self.null_threshold}

    def off_domain_rule(self) -> dict[str, Any]:
        """How the off-domain flag was decided (recorded in the JSON report)."""
        return {"rule": f"best_match < the {OFF_DOMAIN_QUANTILE:g} quantile of each task's cosine to its k-th "
                        "nearest other task", "k": self.knn_k, "quantile": OFF_DOMAIN_QUANTILE,
                "threshold": self.off_domain_threshold}

    def to_dict(self) -> dict[str, Any]:
        keys = ("id", "name", "description", "level", "format", "specificity", "abstractness", "utility", "best_match",
                "off_domain", "relevance", "null_off_domain")
        return {"format_version": REPORT_FORMAT_VERSION, "embedder": self.embedder, "tau": self.tau,
                "specificity_mode": self.specificity_mode, "skill_text": self.skill_text, "n_tasks": self.n_tasks,
                "n_reference": self.n_reference, "sampled": self.sampled, "seed": self.seed,
                "off_domain_rule": self.off_domain_rule(), "null_rule": self.null_rule(),
                "skills": [{key: asdict(row)[key] for key in keys} for row in self.ranked()],
                "summary": self.summary}

    def to_csv(self) -> str:
        """One row per skill (ranked), with the settings repeated on every row so each row stands alone."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["rank", "id", "name", "level", "format", "specificity", "abstractness", "utility",
                         "best_match", "off_domain", "description", "embedder", "tau", "specificity_mode", "skill_text",
                         "n_tasks", "off_domain_threshold", "relevance", "null_off_domain", "null_threshold"])
        for rank, row in enumerate(self.ranked(), start=1):
            writer.writerow([rank, row.id, row.name, row.level, row.format, row.specificity, row.abstractness,
                             row.utility, row.best_match, str(row.off_domain).lower(), row.description, self.embedder,
                             self.tau, self.specificity_mode, self.skill_text, self.n_tasks,
                             self.off_domain_threshold, row.relevance, str(row.null_off_domain).lower(),
                             self.null_threshold])
        return buffer.getvalue()


def _group_means(rows: list[SkillScore], key: str) -> dict[str, dict[str, float]]:
    groups: dict[str, list[SkillScore]] = {}
    for row in rows:
        groups.setdefault(getattr(row, key), []).append(row)
    return {name: {"n": len(members),
                   "mean_utility": float(np.mean([r.utility for r in members])),
                   "mean_specificity": float(np.mean([r.specificity for r in members])),
                   "mean_abstractness": float(np.mean([r.abstractness for r in members]))}
            for name, members in sorted(groups.items())}


def summarize(rows: list[SkillScore], n_tasks: int) -> dict[str, Any]:
    """Library-level summary: counts, mean/median utility, component means, and means by level and by format."""
    utilities = np.array([r.utility for r in rows])
    return {"n_skills": len(rows), "n_tasks": n_tasks,
            "mean_utility": float(utilities.mean()), "median_utility": float(np.median(utilities)),
            "mean_specificity": float(np.mean([r.specificity for r in rows])),
            "mean_abstractness": float(np.mean([r.abstractness for r in rows])),
            "mean_best_match": float(np.mean([r.best_match for r in rows])),
            "n_off_domain": sum(r.off_domain for r in rows),
            "n_null_off_domain": sum(r.null_off_domain for r in rows),
            "by_level": _group_means(rows, "level"), "by_format": _group_means(rows, "format")}


def score_library(skills: Sequence[Skill], task_texts: Sequence[str], embedder: Embedder, *, tau: float = DEFAULT_TAU,
                  specificity_mode: str = "pairs", text: str = "description", seed: int = 0) -> ScoreReport:
    """Embed skills and tasks with ``embedder`` and compute every skill's utility (seed §6.1).

    Args:
        skills: the library (at least one skill).
        task_texts: the task instructions (at least two).
        embedder: anything with ``embed(list[str]) -> np.ndarray`` and an ``id``.
        tau: abstractness temperature.
        specificity_mode: "pairs" (paper), "nearest" or "knn".
        text: "description" (default; what retrieval matches) or "description+body".
        seed: pair-sampling seed (used only above 10^7 task pairs).
    """
    if not skills:
        raise ValueError("no skills to score")
    if len(task_texts) < 2:
        raise ValueError("need at least 2 task texts")
    if specificity_mode not in SPECIFICITY_MODES:
        raise ValueError(f"unknown specificity mode {specificity_mode!r}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    skill_vecs = embedder.embed([skill_text(skill, text) for skill in skills])
    task_vecs = embedder.embed(list(task_texts))
    scores = utility_scores(skill_vecs, task_vecs, tau=tau, specificity_mode=specificity_mode, seed=seed)
    null = null_threshold(embedder.embed(list(NULL_TEXTS)), task_vecs)
    rows = [SkillScore(id=skill.id, name=skill.name, description=skill.description, level=skill.level,
                       format=skill.format, specificity=float(scores.specificity[i]),
                       abstractness=float(scores.abstractness[i]), utility=float(scores.utility[i]),
                       best_match=float(scores.best_match[i]), off_domain=bool(scores.off_domain[i]),
                       relevance=float(scores.relevance[i]), null_off_domain=bool(scores.best_match[i] <= null))
            for i, skill in enumerate(skills)]
    return ScoreReport(embedder=str(embedder.id), tau=float(tau), specificity_mode=specificity_mode, skill_text=text,
                       n_tasks=len(task_texts), n_reference=scores.n_reference, sampled=scores.sampled, seed=seed,
                       skills=rows, summary=summarize(rows, len(task_texts)), knn_k=scores.knn_k,
                       off_domain_threshold=scores.off_domain_threshold, null_threshold=null)


def write_report(report: ScoreReport, path: str | Path) -> Path:
    """Write the report atomically as ``.json`` or ``.csv`` (chosen by suffix).

    Raises:
        InputError: any other suffix.
    """
    path = Path(path)
    if path.suffix == ".json":
        atomic_write_text(path, json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    elif path.suffix == ".csv":
        atomic_write_text(path, report.to_csv())
    else:
        raise InputError(f"unknown output type {path.suffix!r}: use .json or .csv", path=path)
    return path
