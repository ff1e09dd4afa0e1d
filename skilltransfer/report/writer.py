"""Write a report folder: one CSV per table, PNG figures (+ ``figures.json``), ``report.md`` and ``report.html``."""

from __future__ import annotations

import html
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.log.provenance import provenance_differences
from skilltransfer.report.build import Report
from skilltransfer.report.figures import Drawn, draw_all
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import ALL_ENVS, AVERAGE, POOLED, condition_order
from skilltransfer.report.table import Table, fmt, natural_key
from skilltransfer.util.files import atomic_write_text, new_file_mode

FIGURE_DIR = "figures"
LONG_TABLES = {"fig3_budget_curves", "task_utility", "lens_cost_vs_size", "forgetting_matrix", "selection_skills"}
"""Tables shown only as CSV (too long for the Markdown page)."""
SECTIONS: list[tuple[str, list[str], str | None]] = [
    ("Task success (Table 2)", ["table2_success"], None),
    ("Tokens and cost", ["cost"], None),
    ("Coordination interfaces", ["coordination", "judgments"], None),
    ("Execution modes and library organisations (issue 14)", ["skill_exec", "library_organization",
                                                                "peak_context_paired", "distractors"], None),
    ("Reuse modes: flat and skill-graph routing", ["reuse", "lens_cost_vs_size"], "lens_cost_vs_size"),
    ("Per-skill causal effects (randomised masking)", ["skill_effects"], None),
    ("Does a cheap score predict a skill's effect? (diagnostics against randomised effects)",
     ["utility_effects", "utility_effects_skills"], "utility_effects"),
    ("Libraries across models", ["model_transfer"], None),
    ("Backward transfer and forgetting", ["forgetting", "forgetting_matrix"], "forgetting_matrix"),
    ("Retrieved, used, helped", ["skill_use"], None),
    ("Which skill the agent picks: selection and library size", ["selection", "selection_skills", "selection_scale",
                                                                "selection_slope", "selection_confusability"],
     "selection_scale"),
    ("Growth under a budget: capacity and eviction", ["capacity"], "capacity_curves"),
    ("Registry evolution", ["evolution_test", "evolution_rounds"], None),
    ("Success within a per-task budget (Fig. 3)", ["fig3_budget_curves"], "fig3_budget"),
    ("Success by difficulty (Fig. 4)", ["fig4_difficulty"], "fig4_difficulty"),
    ("Skill utility and success (Fig. 5a)", ["fig5a_spearman", "fig5a_utility_bins", "task_utility"],
     "fig5a_utility_bins"),
    ("Specificity and abstractness (Fig. 5b)", ["fig5b_components"], "fig5b_components"),
    ("Utility by level and format (Fig. 5c-e)", ["fig5cde_utility_by_kind"], "fig5cde_utility_by_kind"),
    ("Transfer density (Fig. 6)", ["fig6_transfer_density"], "fig6_transfer_density"),
    ("Skills per run", ["skills_per_run"], None),
]


@dataclass
class Written:
    """What ``write_report`` wrote."""

    out: Path
    markdown: Path
    html: Path
    csv: dict[str, Path] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    panels: dict[str, int] = field(default_factory=dict)


def _save_png(drawn: Drawn, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, new_file_mode())
    os.close(fd)
    try:
        drawn.figure.savefig(tmp, format="png", dpi=120)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _table2_pivot(table: Table) -> tuple[list[str], list[list[str]]]:
    conditions = sorted({r["condition"] for r in table.rows}, key=condition_order)
    keys = sorted({(r["env"], r["model"]) for r in table.rows},
                  key=lambda k: (k[0] in (ALL_ENVS, POOLED), k[0] == POOLED, natural_key(k[0]), k[1] == AVERAGE,
                                 natural_key(k[1])))
    body = []
    for env, model in keys:
        cells = [env, model, str(table.where(env=env, model=model)[0].get("metric") or "")]
        for condition in conditions:
            hit = table.where(env=env, model=model, condition=condition)
            if not hit:
                cells.append("–")
                continue
            row = hit[0]
            cell = f"{fmt(row['success_pct'])} [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]"
            if row["delta_pts"] is not None:
                cell += f" ({row['delta_pts']:+.1f})"
            cells.append(cell)
        body.append(cells)
    return ["env", "model", "metric", *conditions], body


def _cells(table: Table) -> tuple[list[str], list[list[str]]]:
    if table.name == "table2_success":
        return _table2_pivot(table)
    digits = {"density": 3, "rho": 3, "p_value": 4, "transfer_density": 3, "mean_utility": 3, "mean_value": 3,
              "communication_share": 3,
              "mean_specificity": 3, "mean_abstractness": 3}
    if "mean_utility" in table.columns:
        digits.update(ci_low=3, ci_high=3)
    if table.name.startswith("utility_effects"):
        digits.update({c: 3 for c in table.columns if c not in ("p_harm", "binned_p")}, p_harm=4, binned_p=4)
    if table.name == "skill_effects":
        digits.update({f"{o}_{p}": 3 for o in ("success", "reward") for p in ("effect", "low", "high")}, p_harm=4)
    columns = [c for c in table.columns if c != "path"]
    rows = [[fmt(r.get(c), digits.get(c, 1)) for c in columns] for r in table.rows]
    return columns, rows


def _markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(columns: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _header(report: Report) -> list[str]:
    envs = sorted({run.env for run in report.runs})
    models = sorted({run.model for run in report.runs})
    tasks = sum(len(run.records) for run in report.runs)
    empty = [f"{run.name} (library: 0 skills from {run.log.config.frozen_library_name()})"
             + (f" + its {len(run.skills)} distractors" if run.skills else "") for run in report.runs
             if run.frozen_library and len(run.skills) <= run.log.config.distractors]  # only distractors: none induced
    return [f"{len(report.runs)} runs, {tasks} finished tasks; envs: {', '.join(envs)}; models: {', '.join(models)}.",
            f"Metric: task {report.metric}. Settings: " + ", ".join(f"{k}={v}" for k, v in report.settings.items())
            + ". Every number is recomputable from the run logs with skilltransfer.metrics (see each CSV).",
            *([f"Runs over an empty library (their source induced no skill; they ran with none but any distractors): "
               f"{'; '.join(empty)}."]
              if empty else []), *_reasoning(report.runs), *_grouping(report.runs),
            *provenance_differences({run.name: run.log.provenance for run in report.runs})]


def _reasoning(runs: list[RunLog]) -> list[str]:
    """One line naming, per run whose model reasoned or whose replies a completion cap cut, its reasoning tokens
    (part of its completion tokens) and its cut replies; nothing when no run did."""
    parts = []
    for run in runs:
        thought = sum(r.reasoning_tokens for r in run.records)
        cut = sum(r.length_cut_calls for r in run.records)
        if thought or cut:
            completion = sum(r.completion_tokens for r in run.records) or 1
            parts.append(f"{run.name} {thought:,} reasoning tokens ({thought / completion:.0%} of its completion "
                         f"tokens), {cut:,} replies cut by the completion cap")
    return [f"Reasoning (kept apart from the answers, counted in completion tokens): {'; '.join(parts)}."] \
        if parts else []


def _grouping(runs: list[RunLog]) -> list[str]:
    """What the report pooled and what it kept apart: runs are grouped by env, model and condition labels and every
    other setting; only repeats of identical settings (order seeds) pool."""
    groups: dict[tuple[str, str, str], list[RunLog]] = {}
    for run in runs:
        groups.setdefault((run.env, run.model, run.condition), []).append(run)
    pooled = [f"{env} / {model} / {condition}: {len(members)} runs (order seeds "
              f"{', '.join(str(r.log.config.order_seed) for r in members)})"
              for (env, model, condition), members in groups.items() if len(members) > 1]
    tagged = sorted({f"{run.model_tags.strip()} {run.condition_tags}".strip() for run in runs
                     if run.model_tags or run.condition_tags})
    lines = ["Grouping: runs are grouped by their full settings; only repeats of identical settings (order seeds) "
             "are pooled" + (f": {'; '.join(pooled)}." if pooled else " (none here: every group is one run).")]
    if tagged:
        lines.append("Runs whose labels agree but whose settings differ are kept apart and labelled by every "
                     f"setting that differs: {'; '.join(tagged)}.")
    return lines


def render(report: Report, figures: dict[str, str], as_html: bool) -> str:
    """The report page as Markdown or HTML (figures referenced by relative path)."""
    parts: list[str] = []
    esc = html.escape if as_html else (lambda s: s)
    title = "skilltransfer report"
    parts.append(f"<h1>{title}</h1>" if as_html else f"# {title}")
    parts += [f"<p>{esc(line)}</p>" if as_html else line for line in _header(report)]
    for heading, names, figure in SECTIONS:
        present = [report.tables[n] for n in names if n in report.tables]
        if not present and figure not in figures:
            continue
        parts.append(f"<h2>{esc(heading)}</h2>" if as_html else f"## {heading}")
        if figure in figures:
            parts.append(f'<img src="{figures[figure]}" alt="{esc(heading)}" style="max-width:100%">' if as_html
                         else f"![{heading}]({figures[figure]})")
        for table in present:
            link = f"{table.name}.csv"
            note = f"{table.note} Data: {link}" if table.note else f"Data: {link}"
            if table.name in LONG_TABLES or not table.rows:
                why = f"{len(table.rows)} rows" if table.rows else "no rows (not enough data)"
                line = f"{table.title}: {why}, see {link}."
                parts.append(f"<p>{esc(line)}</p>" if as_html else f"{line}\n")
                continue
            columns, rows = _cells(table)
            if as_html:
                parts += [f"<h3>{esc(table.title)}</h3>", _html_table(columns, rows), f"<p><i>{esc(note)}</i></p>"]
            else:
                parts += [f"### {table.title}", _markdown_table(columns, rows), f"\n_{note}_\n"]
    if as_html:
        style = ("body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;"
                 "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px}")
        return f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style>" \
               f"</head><body>{''.join(parts)}</body></html>\n"
    return "\n\n".join(parts) + "\n"


def clear_report(out: Path) -> None:
    """Remove what an earlier report wrote in ``out`` (a folder holding ``report.json``): its pages, CSV files and
    figures, so that no stale table or figure outlives the report that made it. Other files are left alone."""
    if not (out / "report.json").is_file():
        return
    own = [*out.glob("*.csv"), *(out / FIGURE_DIR).glob("*.png"), out / FIGURE_DIR / "figures.json",
           out / "report.md", out / "report.html", out / "report.json"]
    for path in own:
        if path.is_file() and not path.is_symlink():
            path.unlink()


def write_report(report: Report, out: str | Path) -> Written:
    """Write every table as CSV, every figure as PNG (+ ``figures.json`` with panel counts), and the pages."""
    out = Path(out)
    clear_report(out)
    out.mkdir(parents=True, exist_ok=True)
    written = Written(out, out / "report.md", out / "report.html")
    for name, table in report.tables.items():
        path = out / f"{name}.csv"
        atomic_write_text(path, table.to_csv())
        written.csv[name] = path
    meta: dict[str, Any] = {}
    for drawn in draw_all(report):
        path = out / FIGURE_DIR / f"{drawn.name}.png"
        _save_png(drawn, path)
        written.figures[drawn.name] = path
        written.panels[drawn.name] = drawn.panels
        meta[drawn.name] = {"file": f"{FIGURE_DIR}/{path.name}", "title": drawn.title, "panels": drawn.panels}
    atomic_write_text(out / FIGURE_DIR / "figures.json", json.dumps(meta, indent=2) + "\n")
    runs = [{"run": run.name, "path": str(run.path), "env": run.env, "model": run.model, "condition": run.condition,
             "tasks": len(run.records), "provenance": run.log.provenance} for run in report.runs]
    atomic_write_text(out / "report.json", json.dumps({"settings": report.settings, "runs": runs}, indent=2) + "\n")
    relative = {name: f"{FIGURE_DIR}/{path.name}" for name, path in written.figures.items()}
    atomic_write_text(written.markdown, render(report, relative, as_html=False))
    atomic_write_text(written.html, render(report, relative, as_html=True))
    return written
