"""Score a skill library against a task set: per-skill utility, relevance and retrieval counts in one ranking, a
summary, and JSON/CSV reports that list the skills in the order the screen shows."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.metrics.crowding import DEFAULT_BAND, Band, CrowdingReport, SkillCrowding, crowding
from skilltransfer.metrics.null_texts import NULL_ID, NULL_TEXTS
from skilltransfer.metrics.retrieval import DEFAULT_TOP_K, RetrievalAccumulator
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
from skilltransfer.version import __version__

REPORT_FORMAT_VERSION = 3
"""Version 3: ``library``, ``task_set`` and ``toolkit_version`` recorded; with ``--effects`` one group per (env,
model, condition) of the runs (``groups``), as ``report`` keeps them. Version 2: ``skills`` in the order of
``ranking`` (with ``rank``), retrieval counts, best-matching task, unknown level/format; version 1 listed skills by
utility whatever the screen showed."""
SKILL_TEXTS = ("description", "description+body")
"""What of a skill is embedded: its description (default; it is what retrieval matches, seed §3.2) or
description + body (long bodies are truncated by the embedder, 256 word pieces for MiniLM)."""
RANK_MEASURES = ("relevance", "utility")
"""What ``score`` ranks by: relevance (default) or the utility of ``--specificity``."""
UNKNOWN = "unknown"
"""The level or format of a skill whose source does not give one (the skill model's defaults are not reported)."""
SHORT_INSTRUCTION_CHARS = 120
"""The best-matching task's instruction in JSON/CSV: whitespace collapsed, at most this many characters."""
UTILITY_HEADERS = {"pairs": "pair utility", "nearest": "nearest utility", "knn": "knn utility"}
"""The screen header of the ``utility`` column under each specificity mode."""


def skill_text(skill: Skill, text: str = "description") -> str:
    """The text of ``skill`` that is embedded for scoring."""
    if text == "description":
        return skill.description
    if text == "description+body":
        return f"{skill.description}\n\n{skill.body}"
    raise ValueError(f"unknown skill text {text!r}; choose one of {', '.join(SKILL_TEXTS)}")


def declared(skill: Skill, field_name: str) -> str:
    """The skill's ``level`` or ``format`` as its source gave it, or `UNKNOWN` when the source did not say (a SKILL.md
    without that key: the skill model then holds its default, task / text, which is no finding about the skill)."""
    return str(getattr(skill, field_name)) if field_name in skill.model_fields_set else UNKNOWN


def short_instruction(text: str, limit: int = SHORT_INSTRUCTION_CHARS) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "\u2026"


@dataclass(frozen=True)
class SkillScore:
    """One skill's utility components, relevance and retrieval counts."""

    id: str
    name: str
    description: str
    level: str
    """As the source gave it, or "unknown" (`declared`)."""
    format: str
    """As the source gave it, or "unknown" (`declared`)."""
    specificity: float
    abstractness: float
    utility: float
    """specificity x abstractness under the report's specificity mode ("pairs": the paper's utility)."""
    best_match: float
    off_domain: bool = False
    """Best match below the task set's own 5th-percentile k-th-neighbour cosine (see ``metrics.utility``)."""
    relevance: float = 0.0
    """The "knn" utility, whatever the mode (the default ranking, with skills inside the null last)."""
    null_off_domain: bool = False
    """Best match inside the embedder's null: at or below `ScoreReport.null_threshold`."""
    nearest_tasks: int = 0
    """Tasks whose nearest skill this is (`skilltransfer.metrics.retrieval`)."""
    top_k_tasks: int = 0
    """Tasks whose top-k retrieved skills include this one."""
    best_task_id: str = ""
    """The task this skill matches best (its cosine is ``best_match``)."""
    best_task_instruction: str = ""
    """That task's instruction, short (`short_instruction`)."""
    effect: float | None = None
    """``score --effects``: the skill's effect on success from randomised masking (shown minus withheld; None when
    the runs did not mask it in both arms); see `skilltransfer.metrics.surrogate.attach_effects`."""
    effect_low: float | None = None
    effect_high: float | None = None
    """The effect's 95 % task-bootstrap interval (the ``skill_effects`` table's)."""
    harmful: bool | None = None
    """Flagged harmful (Benjamini-Hochberg over the tested skills); None when not masked."""
    shown: int | None = None
    """Tasks of the runs that showed the skill (a randomised draw); None when the runs never drew it."""
    withheld: int | None = None
    """Tasks of the runs that withheld it."""
    enough_draws: bool | None = None
    """At least `skilltransfer.metrics.surrogate.MIN_ARM` tasks in each arm: the skill enters the correlations."""
    neighbour: str = ""
    """The name of its nearest other skill of the library by description cosine (`skilltransfer.metrics.crowding`);
    "" in a library of one skill."""
    neighbour_id: str = ""
    neighbour_cosine: float | None = None
    """Their description cosine: the skill's confusability (None without a neighbour)."""
    crowding: str = "clear"
    """``crowded`` (``neighbour_cosine`` in the report's crowding band), ``near-duplicate`` (above) or ``clear``."""
    crowded_cluster: int | None = None
    """Its crowded cluster (1 = the largest, as the summary lists them); None: in none."""


@dataclass(frozen=True)
class ScoreColumn:
    """One column of a skill row: its JSON key and CSV column, its screen header, and whether and how long it stays
    on a narrow screen. Adding a measure to ``score`` is adding a `SkillScore` field and a column here."""

    key: str
    header: str
    priority: int | None = None
    """Screen: columns with the largest priority go first when the table is too wide; None: files only."""
    numeric: bool = True
    files: bool = True
    """Whether the JSON and CSV carry it (False: a screen-only view of other columns)."""

    def cell(self, value: Any) -> str:
        """The screen text of a value of this column."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return "yes" if value else ""
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value)


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
    """In library order; `ranking` gives the report's one order."""
    summary: dict[str, Any] = field(default_factory=dict)
    knn_k: int = 0
    """Neighbour rank k of the off-domain reference (and of "knn" specificity)."""
    off_domain_threshold: float = float("nan")
    """Best matches below this cosine are flagged off-domain."""
    null_threshold: float = float("nan")
    """The embedder's null: the 0.95 quantile of off-topic texts' best matches over these tasks."""
    rank_by: str = "relevance"
    """The one ranking of the screen, the JSON and the CSV: relevance or utility (`RANK_MEASURES`)."""
    top_k: int = DEFAULT_TOP_K
    """Skills retrieved per task in the retrieval counts."""
    min_score: float | None = None
    """The retrieval floor of the counts (None: plain top-k)."""
    crowding: CrowdingReport | None = None
    """How close the skills' descriptions lie to one another (`skilltransfer.metrics.crowding`): band, counts,
    clusters (the per-skill values are the rows' ``neighbour*``, ``crowding`` and ``crowded_cluster``)."""
    effects: dict[str, Any] | None = None
    """``score --effects``: where the effects came from and how they relate to the diagnostics (`attach_effects`:
    ``source``, ``masked``, ``enough_draws``, ``min_arm``, ``associations``); None without ``--effects``."""
    library: str | None = None
    """The library scored, as the command was given it (a path)."""
    task_set: str | None = None
    """The tasks scored against, as the command was given them (a path or an env name; with ``--effects`` and no
    ``--tasks``, the runs' own)."""
    toolkit_version: str = __version__

    def ranked(self) -> list[SkillScore]:
        """Skills by descending utility (ties: by name)."""
        return sorted(self.skills, key=lambda row: (-row.utility, row.name))

    def by_relevance(self) -> list[SkillScore]:
        """Skills inside the embedder's null last, then by descending relevance ("knn" utility; ties: by name)."""
        return sorted(self.skills, key=lambda row: (row.null_off_domain, -row.relevance, row.name))

    def ranking(self) -> list[SkillScore]:
        """The report's one order (``rank_by``): what the screen, the JSON and the CSV list."""
        return self.by_relevance() if self.rank_by == "relevance" else self.ranked()

    def ranking_rule(self) -> str:
        """The ranking in words."""
        if self.rank_by == "relevance":
            return ("skills whose best match lies inside the embedder's null last, then by descending relevance "
                    "(the knn utility); ties by name")
        return (f"by descending utility ({self.specificity_mode} specificity x abstractness); ties by name")

    @property
    def utility_header(self) -> str:
        """The name of the ``utility`` column on screen (it says which specificity made it)."""
        return UTILITY_HEADERS.get(self.specificity_mode, f"{self.specificity_mode} utility")

    def columns(self) -> list[ScoreColumn]:
        """A skill row's columns in screen order (the ranked measure first); JSON keys and CSV columns follow it.

        Screen priorities keep what the command was asked for: rank, name and the ranked measure always, and the
        ``domain`` flags (what the summary's OFF / NULL counts name) or, with ``--effects``, the effect with its
        interval; then the other measure, the retrieval counts, and the rest."""
        effects = self.effects is not None
        measures = {"relevance": ScoreColumn("relevance", "relevance", 0),
                    "utility": ScoreColumn("utility", self.utility_header, 0)}
        ranked, other = measures[self.rank_by], measures["utility" if self.rank_by == "relevance" else "relevance"]
        return [ScoreColumn("rank", "rank", 0), ScoreColumn("name", "name", 0, numeric=False), ranked,
                *(self._effect_columns()[:2] if effects else []),
                ScoreColumn(other.key, other.header, 1),
                ScoreColumn("nearest_tasks", "nearest", 2), ScoreColumn("top_k_tasks", f"top-{self.top_k}", 2),
                ScoreColumn("domain", "domain", 3 if effects else 0, numeric=False, files=False),
                ScoreColumn("best_match", "best cos", 4), ScoreColumn("best_task_id", "best task", 5, numeric=False),
                ScoreColumn("neighbour_cosine", "nn cos", 1),
                ScoreColumn("neighbour", "nearest skill", 5, numeric=False),
                ScoreColumn("crowding", "crowding", numeric=False),
                ScoreColumn("neighbour_id", "neighbour id", numeric=False),
                ScoreColumn("crowded_cluster", "crowded cluster"),
                ScoreColumn("specificity", "specificity", 6), ScoreColumn("abstractness", "abstractness", 6),
                ScoreColumn("level", "level", 7, numeric=False), ScoreColumn("format", "format", 7, numeric=False),
                ScoreColumn("off_domain", "off-domain"), ScoreColumn("null_off_domain", "inside null"),
                ScoreColumn("id", "id", numeric=False), ScoreColumn("description", "description", numeric=False),
                ScoreColumn("best_task_instruction", "best task instruction", numeric=False),
                *(self._effect_columns()[2:] if effects else [])]

    def _effect_columns(self) -> list[ScoreColumn]:
        """The causal columns of ``score --effects``: on screen the effect with its interval (right after the
        ranked measure, never left out) and the harmful flag; in the files each number apart."""
        return [ScoreColumn("effect_ci", "effect [95% CI]", 0, numeric=False, files=False),
                ScoreColumn("harmful_flag", "harm", 1, numeric=False, files=False),
                ScoreColumn("effect", "effect"), ScoreColumn("effect_low", "effect low"),
                ScoreColumn("effect_high", "effect high"), ScoreColumn("harmful", "harmful", numeric=False),
                ScoreColumn("shown", "shown"), ScoreColumn("withheld", "withheld"),
                ScoreColumn("enough_draws", "enough draws", numeric=False)]

    def rows(self, *, files: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """One dict per skill in `ranking` order, keyed by `columns` (``domain``: "NULL", "OFF", both or ""); with
        ``files``, only the columns the JSON and CSV carry; with ``limit``, the first ``limit`` skills only."""
        columns = [column for column in self.columns() if column.files or not files]
        out = []
        for rank, row in enumerate(self.ranking()[:limit], start=1):
            values = {**vars(row), "rank": rank,  # vars: asdict deep-copies, 10x slower at 10,000 skills
                      "domain": " ".join(flag for flag, on in (("NULL", row.null_off_domain),
                                                                ("OFF", row.off_domain)) if on),
                      "effect_ci": _effect_ci(row), "harmful_flag": "HARM" if row.harmful else ""}
            out.append({column.key: values[column.key] for column in columns})
        return out

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

    def retrieval_rule(self) -> dict[str, Any]:
        """How the retrieval counts were made (recorded in the JSON report)."""
        floor = f", hits below cosine {self.min_score:g} dropped" if self.min_score is not None else ""
        return {"rule": f"each task's text is the query; skills ranked by cosine with their {self.skill_text} (the "
                        f"run's embedding retrieval), top {self.top_k}{floor}; ties by library order",
                "top_k": self.top_k, "min_score": self.min_score}

    def provenance(self) -> dict[str, Any]:
        """What was scored, against what, by which toolkit (the JSON's top keys, the CSV's last columns)."""
        return {"library": self.library, "task_set": self.task_set, "toolkit_version": self.toolkit_version}

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": REPORT_FORMAT_VERSION, **self.provenance(), "embedder": self.embedder,
                "tau": self.tau,
                "specificity_mode": self.specificity_mode, "skill_text": self.skill_text, "n_tasks": self.n_tasks,
                "n_reference": self.n_reference, "sampled": self.sampled, "seed": self.seed,
                "ranking": {"by": self.rank_by, "rule": self.ranking_rule()},
                "off_domain_rule": self.off_domain_rule(), "null_rule": self.null_rule(),
                "retrieval_rule": self.retrieval_rule(), "skills": self.rows(files=True), "summary": self.summary,
                **({"crowding": self.crowding.to_dict()} if self.crowding is not None else {}),
                **({"effects": self.effects} if self.effects is not None else {})}

    def to_csv(self) -> str:
        """One row per skill in `ranking` order, with the settings repeated on every row so each row stands alone."""
        keys = [column.key for column in self.columns() if column.files]
        settings = {"ranked_by": self.rank_by, "embedder": self.embedder, "tau": self.tau,
                    "specificity_mode": self.specificity_mode, "skill_text": self.skill_text, "n_tasks": self.n_tasks,
                    "top_k": self.top_k, "min_score": "" if self.min_score is None else self.min_score,
                    "off_domain_threshold": self.off_domain_threshold, "null_threshold": self.null_threshold,
                    **({"crowding_band": self.crowding.band.describe()} if self.crowding is not None else {}),
                    **({"effects_from": self.effects["source"]} if self.effects is not None else {}),
                    **{key: "" if value is None else value for key, value in self.provenance().items()}}
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*keys, *settings])
        for row in self.rows(files=True):
            writer.writerow([str(row[key]).lower() if isinstance(row[key], bool) else row[key] for key in keys]
                            + list(settings.values()))
        return buffer.getvalue()


def _group_means(rows: list[SkillScore], key: str) -> dict[str, dict[str, float]]:
    groups: dict[str, list[SkillScore]] = {}
    for row in rows:
        groups.setdefault(getattr(row, key), []).append(row)
    return {name: {"n": len(members),
                   "mean_relevance": float(np.mean([r.relevance for r in members])),
                   "mean_utility": float(np.mean([r.utility for r in members])),
                   "mean_specificity": float(np.mean([r.specificity for r in members])),
                   "mean_abstractness": float(np.mean([r.abstractness for r in members]))}
            for name, members in sorted(groups.items())}


def summarize(rows: list[SkillScore], n_tasks: int, tasks_without_hit: int = 0) -> dict[str, Any]:
    """Library-level summary: counts, mean/median relevance and utility, component means, means by level and by
    format, and what retrieval does with the library."""
    utilities = np.array([r.utility for r in rows])
    relevances = np.array([r.relevance for r in rows])
    return {"n_skills": len(rows), "n_tasks": n_tasks,
            "mean_relevance": float(relevances.mean()), "median_relevance": float(np.median(relevances)),
            "mean_utility": float(utilities.mean()), "median_utility": float(np.median(utilities)),
            "mean_specificity": float(np.mean([r.specificity for r in rows])),
            "mean_abstractness": float(np.mean([r.abstractness for r in rows])),
            "mean_best_match": float(np.mean([r.best_match for r in rows])),
            "n_off_domain": sum(r.off_domain for r in rows),
            "n_null_off_domain": sum(r.null_off_domain for r in rows),
            "retrieval": {"n_nearest_for_some_task": sum(r.nearest_tasks > 0 for r in rows),
                          "n_in_no_top_k": sum(r.top_k_tasks == 0 for r in rows),
                          "n_tasks_without_hit": tasks_without_hit},
            "by_level": _group_means(rows, "level"), "by_format": _group_means(rows, "format")}


def score_library(skills: Sequence[Skill], task_texts: Sequence[str], embedder: Embedder, *, tau: float = DEFAULT_TAU,
                  specificity_mode: str = "pairs", text: str = "description", seed: int = 0,
                  task_ids: Sequence[str] | None = None, rank_by: str = "relevance", top_k: int = DEFAULT_TOP_K,
                  min_score: float | None = None, band: Band = DEFAULT_BAND) -> ScoreReport:
    """Embed skills and tasks with ``embedder`` and compute every skill's utility (seed §6.1), relevance and
    retrieval counts (`skilltransfer.metrics.retrieval`).

    Args:
        skills: the library (at least one skill).
        task_texts: the task instructions (at least two).
        embedder: anything with ``embed(list[str]) -> np.ndarray`` and an ``id``.
        tau: abstractness temperature.
        specificity_mode: "pairs" (paper), "nearest" or "knn".
        text: "description" (default; what retrieval matches) or "description+body".
        seed: pair-sampling seed (used only above 10^7 task pairs).
        task_ids: the tasks' ids, as the report names a skill's best-matching task (default: 1, 2, ...).
        rank_by: the report's one ranking, "relevance" or "utility".
        top_k: skills retrieved per task in the retrieval counts.
        min_score: the retrieval floor of the counts (None: plain top-k).
        band: the crowding band (each skill's nearest other skill by description cosine, whatever ``text``).
    """
    if not skills:
        raise ValueError("no skills to score")
    if len(task_texts) < 2:
        raise ValueError("need at least 2 task texts")
    if specificity_mode not in SPECIFICITY_MODES:
        raise ValueError(f"unknown specificity mode {specificity_mode!r}")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if rank_by not in RANK_MEASURES:
        raise ValueError(f"unknown ranking {rank_by!r}; choose one of {', '.join(RANK_MEASURES)}")
    ids = [str(n) for n in range(1, len(task_texts) + 1)] if task_ids is None else [str(i) for i in task_ids]
    if len(ids) != len(task_texts):
        raise ValueError(f"{len(ids)} task ids for {len(task_texts)} task texts")
    skill_vecs = embedder.embed([skill_text(skill, text) for skill in skills])
    task_vecs = embedder.embed(list(task_texts))
    retrieval = RetrievalAccumulator(len(skills), len(task_texts), k=top_k, min_score=min_score)
    scores = utility_scores(skill_vecs, task_vecs, tau=tau, specificity_mode=specificity_mode, seed=seed,
                            on_tile=retrieval.add)  # one pass over the cosines for both
    counts = retrieval.counts()
    null = null_threshold(embedder.embed(list(NULL_TEXTS)), task_vecs)
    descriptions = skill_vecs if text == "description" else embedder.embed([skill.description for skill in skills])
    crowded = crowding([skill.id for skill in skills], np.asarray(descriptions, dtype=np.float32), band)
    names = {skill.id: skill.name for skill in skills}
    rows = [SkillScore(id=skill.id, name=skill.name, description=skill.description, level=declared(skill, "level"),
                       format=declared(skill, "format"), specificity=float(scores.specificity[i]),
                       abstractness=float(scores.abstractness[i]), utility=float(scores.utility[i]),
                       best_match=float(scores.best_match[i]), off_domain=bool(scores.off_domain[i]),
                       relevance=float(scores.relevance[i]), null_off_domain=bool(scores.best_match[i] <= null),
                       nearest_tasks=int(counts.nearest[i]), top_k_tasks=int(counts.in_top_k[i]),
                       best_task_id=ids[int(counts.best_task[i])],
                       best_task_instruction=short_instruction(task_texts[int(counts.best_task[i])]),
                       **_crowding_fields(crowded.skills[i], names))
            for i, skill in enumerate(skills)]
    return ScoreReport(embedder=str(embedder.id), tau=float(tau), specificity_mode=specificity_mode, skill_text=text,
                       n_tasks=len(task_texts), n_reference=scores.n_reference, sampled=scores.sampled, seed=seed,
                       skills=rows, summary=summarize(rows, len(task_texts), counts.tasks_without_hit),
                       knn_k=scores.knn_k, off_domain_threshold=scores.off_domain_threshold, null_threshold=null,
                       rank_by=rank_by, top_k=top_k, min_score=min_score, crowding=crowded)


def _crowding_fields(row: SkillCrowding, names: dict[str, str]) -> dict[str, Any]:
    """A `SkillScore`'s crowding fields from its `skilltransfer.metrics.crowding.SkillCrowding`."""
    return {"neighbour": names.get(row.neighbour_id, "") if row.neighbour_id else "",
            "neighbour_id": row.neighbour_id or "", "neighbour_cosine": row.cosine, "crowding": row.label,
            "crowded_cluster": row.cluster + 1 if row.cluster is not None else None}


def _effect_ci(row: SkillScore) -> str:
    """The screen cell of an effect: ``+0.120 [-0.050, +0.290]``, ``+0.120`` without an interval, ``-`` when the
    skill was not masked in both arms."""
    if row.effect is None:
        return "-"
    if row.effect_low is None or row.effect_high is None:
        return f"{row.effect:+.3f}"
    return f"{row.effect:+.3f} [{row.effect_low:+.3f}, {row.effect_high:+.3f}]"


@dataclass(frozen=True)
class GroupScore:
    """One group of runs (env x model x condition, as ``report`` groups them) and the library scored and joined with
    its effects (``score --effects``)."""

    env: str
    model: str
    condition: str
    runs: list[str]
    """The group's run folders."""
    report: ScoreReport

    def key(self) -> dict[str, Any]:
        return {"env": self.env, "model": self.model, "condition": self.condition}


@dataclass
class GroupedScore:
    """``score --effects``: one `ScoreReport` per group of the runs (one row per env, model, condition and skill,
    as ``report``'s ``skill_effects`` table), or one over every run with ``--pool``."""

    groups: list[GroupScore]
    pooled: bool = False

    def to_dict(self) -> dict[str, Any]:
        first = self.groups[0].report
        return {"format_version": REPORT_FORMAT_VERSION, **first.provenance(), "pooled": self.pooled,
                "groups": [{**group.key(), "runs": group.runs,
                            **{k: v for k, v in group.report.to_dict().items()
                               if k not in ("format_version", *first.provenance())}} for group in self.groups]}

    def to_csv(self) -> str:
        """The groups' CSVs, one after another under one header, each row led by its group's env, model and
        condition."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for index, group in enumerate(self.groups):
            rows = list(csv.reader(io.StringIO(group.report.to_csv())))
            if index == 0:
                writer.writerow(["env", "model", "condition", *rows[0]])
            for row in rows[1:]:
                writer.writerow([group.env, group.model, group.condition, *row])
        return out.getvalue()


def _json(value: Any, depth: int = 0) -> str:
    """``value`` as JSON indented by 2, except that each object of a ``skills`` list takes one line: as readable, and
    written by the C encoder (``indent`` makes ``json`` encode in Python: 3 s for 10,000 skills)."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        items = []
        for key, item in value.items():
            if key == "skills" and isinstance(item, list) and item:
                rows = f",\n{inner}  ".join(json.dumps(row, ensure_ascii=False) for row in item)
                items.append(f"{inner}{json.dumps(key)}: [\n{inner}  {rows}\n{inner}]")
            else:
                items.append(f"{inner}{json.dumps(key)}: {_json(item, depth + 1)}")
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and any(isinstance(item, dict | list) for item in value):
        return "[\n" + ",\n".join(f"{inner}{_json(item, depth + 1)}" for item in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def write_report(report: ScoreReport | GroupedScore, path: str | Path) -> Path:
    """Write the report atomically as ``.json`` or ``.csv`` (chosen by suffix).

    Raises:
        InputError: any other suffix.
    """
    path = Path(path)
    if path.suffix == ".json":
        atomic_write_text(path, _json(report.to_dict()) + "\n")
    elif path.suffix == ".csv":
        atomic_write_text(path, report.to_csv())
    else:
        raise InputError(f"unknown output type {path.suffix!r}: use .json or .csv", path=path)
    return path
