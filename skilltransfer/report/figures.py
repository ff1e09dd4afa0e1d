"""The report's figures (matplotlib, no global pyplot state): each is drawn from the report's tables only."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from skilltransfer.report.build import Report
from skilltransfer.report.success import condition_order

LEVEL_COLORS = {"task": ("#1b7837", "#5aae61", "#a6dba0"), "subtask": ("#08519c", "#3182bd", "#9ecae1")}
"""Level -> colours for no memory, +text, +code (task level green, subtask level blue, as in the paper)."""
FORMAT_STYLE = {"": ":", "text": "-", "code": "--"}


@dataclass
class Drawn:
    """A drawn figure and how many data panels it has."""

    name: str
    title: str
    figure: Figure
    panels: int


def condition_style(condition: str) -> dict[str, Any]:
    level, _, rest = condition.partition("+")
    fmt = rest.split("[", 1)[0]
    shades = LEVEL_COLORS.get(level, ("#555555", "#888888", "#bbbbbb"))
    shade = shades[{"": 0, "text": 1, "code": 2}.get(fmt, 1)]
    return {"color": shade, "linestyle": FORMAT_STYLE.get(fmt, "-.")}


MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""Curve markers that tell models apart when an env's panel holds several (colour and line: the condition)."""


def _series(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (model, condition) series of a figure's rows, models in name order, conditions in the paper's order."""
    return sorted({(r["model"], r["condition"]) for r in rows}, key=lambda mc: (mc[0], condition_order(mc[1])))


def _series_label(model: str, condition: str, models: list[str]) -> str:
    """A series' legend label: the condition, prefixed by the model when the panel holds several models."""
    return f"{model} · {condition}" if len(models) > 1 else condition


def _grid(n: int, ncols: int, width: float = 4.6, height: float = 3.6) -> tuple[Figure, list[Axes]]:
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    figure = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = [figure.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    return figure, axes


def budget_figure(report: Report) -> Drawn | None:
    """Fig. 3: success within a per-task latency / dependency budget, one row per env, one curve per condition."""
    table = report.table("fig3_budget_curves")
    envs = sorted({r["env"] for r in table.rows})
    if not envs:
        return None
    figure, axes = _grid(2 * len(envs), 2)
    for row, env in enumerate(envs):
        for col, (kind, label) in enumerate((("latency", "latency budget per task (s)"),
                                             ("dependency", "dependency budget per task (tokens²)"))):
            ax = axes[2 * row + col]
            rows = table.where(env=env, kind=kind)
            models = sorted({r["model"] for r in rows})
            for model, condition in _series(rows):
                points = [r for r in rows if (r["model"], r["condition"]) == (model, condition)]
                ax.step([p["budget"] for p in points], [p["success_within_pct"] for p in points], where="post",
                        label=_series_label(model, condition, models), linewidth=1.8,
                        marker=MODEL_MARKERS[models.index(model) % len(MODEL_MARKERS)] if len(models) > 1 else None,
                        markevery=0.1, **condition_style(condition))
            budgets = np.array([r["budget"] for r in rows])
            if budgets.size and budgets.min() > 0 and budgets.max() / budgets.min() >= 10:
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(label)
            ax.set_ylabel(f"{report.metric} within budget (%)")
            ax.set_ylim(0, 105)
            ax.set_title(f"{env}: {kind}")
            ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    figure.suptitle("Task success within a per-task budget")
    return Drawn("fig3_budget", "Success within a per-task budget of latency and dependency (Fig. 3)", figure,
                 len(axes))


def _grouped_bars(ax: Axes, groups: list[object], series: list[str], get: Callable[[object, str], dict | None],
                  style: Callable[[str], dict[str, Any]]) -> None:
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        xs: list[float] = []
        ys: list[float] = []
        errs: list[list[float]] = [[], []]
        for g, group in enumerate(groups):
            row = get(group, name)
            if row is None:
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(row["value"])
            errs[0].append(max(0.0, row["value"] - row["low"]))
            errs[1].append(max(0.0, row["high"] - row["value"]))
        ax.bar(xs, ys, width, yerr=errs, capsize=1.5, label=name,
               error_kw={"elinewidth": 0.8, "ecolor": "#444444"}, **style(name))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([str(g) for g in groups])


def _bar_style(condition: str) -> dict[str, Any]:
    style = condition_style(condition)
    hatch = {"-": "", "--": "//", ":": "..", "-.": "xx"}[str(style["linestyle"])]
    return {"color": style["color"], "hatch": hatch, "edgecolor": "white"}


def difficulty_figure(report: Report) -> Drawn | None:
    """Fig. 4: success by difficulty stratum, one panel per env, bars per condition with 95 % CIs."""
    table = report.table("fig4_difficulty")
    envs = sorted({r["env"] for r in table.rows})
    if not envs:
        return None
    figure, axes = _grid(len(envs), 3, width=5.2)
    for ax, env in zip(axes, envs, strict=True):
        rows = table.where(env=env)
        levels = sorted({r["difficulty"] for r in rows})
        models = sorted({r["model"] for r in rows})
        series = {_series_label(m, c, models): (m, c) for m, c in _series(rows)}

        def get(level: object, name: str, rows: list[dict] = rows,
                series: dict[str, tuple[str, str]] = series) -> dict | None:
            hit = [r for r in rows if r["difficulty"] == level and (r["model"], r["condition"]) == series[name]]
            return {"value": hit[0]["success_pct"], "low": hit[0]["ci_low"], "high": hit[0]["ci_high"]} if hit else None

        def style(name: str, series: dict[str, tuple[str, str]] = series, models: list[str] = models) -> dict[str, Any]:
            model, condition = series[name]
            return _bar_style(condition) | ({"alpha": 1.0 - 0.45 * models.index(model) / max(1, len(models) - 1)}
                                            if len(models) > 1 else {})

        _grouped_bars(ax, levels, list(series), get, style)
        ax.set_xlabel("difficulty")
        ax.set_ylabel(f"{report.metric} (%)")
        ax.set_title(env)
        ax.set_ylim(0, 105)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)), fontsize=8)
    figure.suptitle("Task success by difficulty stratum (95 % task-bootstrap CIs)")
    return Drawn("fig4_difficulty", "Success by difficulty stratum (Fig. 4)", figure, len(axes))


def utility_bins_figure(report: Report) -> Drawn | None:
    """Fig. 5a: success per utility bin, one panel per agent level, with the Spearman rho and p-value."""
    if "fig5a_utility_bins" not in report.tables:
        return None
    bins, corr = report.table("fig5a_utility_bins"), report.table("fig5a_spearman")
    levels = [r["level"] for r in corr.rows]
    if not levels:
        return None
    figure, axes = _grid(len(levels), 2)
    for ax, level in zip(axes, levels, strict=True):
        rows = bins.where(level=level)
        stat = corr.where(level=level)[0]
        ax.bar([r["bin"] for r in rows], [r["success_pct"] for r in rows],
               color=LEVEL_COLORS[level][1] if level in LEVEL_COLORS else "#777777")
        ax.set_xticks([r["bin"] for r in rows])
        ax.set_xlabel("utility bin (low → high mean retrieved utility)")
        ax.set_ylabel(f"{report.metric} (%)")
        rho = "n/a" if math.isnan(stat["rho"]) else f"{stat['rho']:.2f}"
        p = "n/a" if math.isnan(stat["p_value"]) else f"{stat['p_value']:.3g}"
        ax.set_title(f"{level} level: Spearman ρ = {rho} (p = {p})")
        ax.set_ylim(0, 105)
    figure.suptitle("Task success by the mean utility of the retrieved skills")
    return Drawn("fig5a_utility_bins", "Success by utility bin (Fig. 5a)", figure, len(axes))


def components_figure(report: Report) -> Drawn | None:
    """Fig. 5b: success per bin of specificity and of abstractness (two panels), one curve per agent level."""
    if "fig5b_components" not in report.tables or not report.table("fig5b_components").rows:
        return None
    table = report.table("fig5b_components")
    figure, axes = _grid(2, 2)
    for ax, component in zip(axes, ("specificity", "abstractness"), strict=True):
        for level in ("task", "subtask"):
            rows = table.where(level=level, component=component)
            if rows:
                ax.plot([r["mean_value"] for r in rows], [r["success_pct"] for r in rows], marker="o",
                        color=LEVEL_COLORS[level][1], label=f"{level} (ρ = {rows[0]['rho']:.2f})")
        ax.set_xlabel(f"mean {component} of retrieved skills (bin mean)")
        ax.set_ylabel(f"{report.metric} (%)")
        ax.set_ylim(0, 105)
        ax.set_title(component)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    figure.suptitle("Task success vs specificity and abstractness")
    return Drawn("fig5b_components", "Success vs specificity and abstractness (Fig. 5b)", figure, len(axes))


def utility_kind_figure(report: Report) -> Drawn | None:
    """Fig. 5c-e: mean skill utility by level and format, one panel per env, with bootstrap CIs."""
    if "fig5cde_utility_by_kind" not in report.tables or not report.table("fig5cde_utility_by_kind").rows:
        return None
    table = report.table("fig5cde_utility_by_kind")
    envs = sorted({r["env"] for r in table.rows})
    figure, axes = _grid(len(envs), 3, width=4.2)
    for ax, env in zip(axes, envs, strict=True):
        rows = table.where(env=env)
        labels = [f"{r['level']}\n{r['format']}" for r in rows]
        colors = [LEVEL_COLORS.get(r["level"], ("#777777",) * 3)[1 if r["format"] == "text" else 2] for r in rows]
        err = [[r["mean_utility"] - r["ci_low"] for r in rows], [r["ci_high"] - r["mean_utility"] for r in rows]]
        ax.bar(range(len(rows)), [r["mean_utility"] for r in rows], yerr=err, capsize=3,
               color=colors)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels)
        ax.set_ylabel("mean skill utility")
        ax.set_title(f"{env} (n = {sum(r['n_skills'] for r in rows)} skills)")
    figure.suptitle("Skill utility by induction level and format")
    return Drawn("fig5cde_utility_by_kind", "Skill utility by level and format (Fig. 5c-e)", figure, len(axes))


def transfer_figure(report: Report) -> Drawn | None:
    """Fig. 6: transfer heatmaps, subtask level in the upper triangle (blue), task level in the lower (green)."""
    from matplotlib.colors import LinearSegmentedColormap

    if not report.heatmaps:
        return None
    figure, axes = _grid(len(report.heatmaps), 3, width=4.4, height=4.2)
    for ax, heat in zip(axes, report.heatmaps, strict=True):
        ax.set_facecolor("white")
        extent = (0, heat.bins, heat.bins, 0)
        for level, color, tri in (("subtask", "#08519c", np.triu), ("task", "#1b7837", np.tril)):
            if level not in heat.runs:
                continue
            counts = heat.runs[level] if level == "subtask" else heat.runs[level].T
            shown = np.ma.masked_equal(tri(counts, k=1 if level == "subtask" else -1), 0)
            cmap = LinearSegmentedColormap.from_list(level, ["#ffffff", color])
            ax.imshow(shown, cmap=cmap, vmin=0, vmax=max(1, heat.n_runs[level]), extent=extent,
                      interpolation="nearest")
            x, y = (0.72, 0.2) if level == "subtask" else (0.28, 0.8)
            ax.text(x * heat.bins, y * heat.bins, f"{level}\nD = {heat.density[level]:.3f}",
                    ha="center", va="center", color=color, fontsize=10, fontweight="bold",
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": color, "boxstyle": "round"})
        ax.plot([0, heat.bins], [0, heat.bins], color="#999999", linewidth=0.6)
        ax.set_xlabel("upper: retrieving bin / lower: source bin")
        ax.set_ylabel("upper: source bin / lower: retrieving bin")
        ax.set_title(f"{heat.env} ({heat.bins} bins, {heat.n_items} tasks)")
    figure.suptitle("Transfer density\nsubtask level: upper, blue; task level: lower, green;\n"
                    "darker: more runs transfer between the two bins", fontsize=9)
    return Drawn("fig6_transfer_density", "Transfer density heatmaps (Fig. 6)", figure, len(axes))


REUSE_MARKERS = {"lens": "o", "rewrite-all": "s", "no-walk": "^"}


def lens_cost_figure(report: Report) -> Drawn | None:
    """Adaptation cost (units visited + rewritten) of each routed query against its retrieved-tree size, one series
    per reuse mode, with the mean per tree size and the line cost = size for reference."""
    if "lens_cost_vs_size" not in report.tables or not report.table("lens_cost_vs_size").rows:
        return None
    rows = report.table("lens_cost_vs_size").rows
    figure = Figure(figsize=(5.6, 4.2), layout="constrained")
    ax = figure.add_subplot(1, 1, 1)
    top = max(max(r["retrieved_tree"] for r in rows), 1)
    for reuse in sorted({r["reuse"] for r in rows}):
        mine = [r for r in rows if r["reuse"] == reuse]
        sizes = np.array([r["retrieved_tree"] for r in mine], dtype=float)
        costs = np.array([r["adaptation_cost"] for r in mine], dtype=float)
        marker = REUSE_MARKERS.get(reuse, "x")
        points = ax.scatter(sizes, costs, s=14, alpha=0.45, marker=marker, label=f"{reuse} ({len(mine)} queries)")
        xs = np.unique(sizes)
        color = np.asarray(points.get_facecolor())[0, :3]
        ax.plot(xs, [costs[sizes == x].mean() for x in xs], color=color, linewidth=1.2)
    ax.plot([0, top], [0, top], color="#999999", linestyle=":", linewidth=1, label="cost = tree size")
    ax.set_xlabel("retrieved-tree size n (units under seeds + expansion)")
    ax.set_ylabel("adaptation cost (visited + rewritten units)")
    ax.legend(fontsize=8)
    ax.set_title("Lens routing: adaptation cost vs retrieved-tree size", fontsize=10)
    return Drawn("lens_cost_vs_size", "Adaptation cost against retrieved-tree size", figure, 1)


def forgetting_figure(report: Report) -> Drawn | None:
    """The matrix R[k][j] of each probe group (`forgetting_matrix`) as a heat map: snapshots down, probe tasks across
    (seen tasks in source order, then held-out ones), white 0 % to dark green 100 %, each seen task's first snapshot
    after it outlined."""
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import Rectangle

    if "forgetting_matrix" not in report.tables or not report.table("forgetting_matrix").rows:
        return None
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in report.table("forgetting_matrix").rows:
        groups.setdefault((row["env"], row["model"], row["condition"], row["source"]), []).append(row)
    figure, axes = _grid(len(groups), 2, width=6.0, height=4.2)
    cmap = LinearSegmentedColormap.from_list("r", ["#ffffff", "#1b7837"])
    for ax, ((env, model, condition, _), rows) in zip(axes, sorted(groups.items()), strict=True):
        seen = {r["task_id"]: r["seen_at"] for r in rows}
        tasks = sorted(seen, key=lambda t: (seen[t] is None, seen[t] if seen[t] is not None else 0, t))
        snapshots = sorted({r["snapshot"] for r in rows})
        grid = np.full((len(snapshots), len(tasks)), np.nan)
        for r in rows:
            grid[snapshots.index(r["snapshot"]), tasks.index(r["task_id"])] = r["value_pct"]
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto",
                          interpolation="nearest")
        for j, task in enumerate(tasks):
            after = [i for i, k in enumerate(snapshots) if seen[task] is not None and k >= seen[task] + 1]
            if after:
                ax.add_patch(Rectangle((j - 0.5, after[0] - 0.5), 1, 1, fill=False, edgecolor="#d95f02",
                                       linewidth=1.5))
        ax.set_yticks(range(len(snapshots)), [str(k) for k in snapshots])
        labels = [f"{t}{'' if seen[t] is not None else ' (held out)'}" for t in tasks]
        ax.set_xticks(range(len(tasks)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("snapshot k (library after k source tasks)")
        ax.set_title(f"{env} / {model} / {condition}", fontsize=9)
        figure.colorbar(image, ax=ax, label="R[k][j] (%)")
    figure.suptitle("Probe success per library snapshot (orange: first snapshot after the task was seen)",
                    fontsize=9)
    return Drawn("forgetting_matrix", "Probe success per library snapshot", figure, len(groups))


POLICY_STYLE = {"fifo": ("#1b9e77", "o"), "lru": ("#d95f02", "s"), "utility": ("#7570b3", "^"),
                "effect": ("#e7298a", "D"), "unbounded": ("#555555", None)}
"""Eviction policy -> (colour, marker) of the capacity curves; the unbounded reference is a dashed grey line."""


def capacity_figure(report: Report) -> Drawn | None:
    """The ``capacity`` table as curves against library size: per env x model x condition, success and use precision
    against the bin's mean library size (skills in memory after the task), one line per eviction policy and capacity
    (marker size grows with the capacity; points, set slightly apart, since a capped library's bins pile up at its
    capacity) with 95 % CIs, the unbounded stream a dashed line: how both fall or hold as the pool grows."""
    if "capacity" not in report.tables or not report.table("capacity").rows:
        return None
    rows = report.table("capacity").rows
    groups = sorted({(r["env"], r["model"], r["condition"]) for r in rows})
    capacities = sorted({int(r["capacity"]) for r in rows if r["capacity"] is not None})
    figure, axes = _grid(2 * len(groups), 2, width=5.0, height=3.4)
    for row, (env, model, condition) in enumerate(groups):
        mine = [r for r in rows if (r["env"], r["model"], r["condition"]) == (env, model, condition)]
        lines = sorted({(r["policy"], r["capacity"]) for r in mine},
                       key=lambda line: (list(POLICY_STYLE).index(line[0]) if line[0] in POLICY_STYLE else 99,
                                         line[1] if line[1] is not None else 1 << 30))
        for col, (value, low, high, label) in enumerate((
                ("success_pct", "ci_low", "ci_high", f"{report.metric} (%)"),
                ("use_precision_pct", "use_ci_low", "use_ci_high", "use precision (%)"))):
            ax = axes[2 * row + col]
            for policy, capacity in lines:
                points = sorted((r for r in mine if (r["policy"], r["capacity"]) == (policy, capacity)
                                 and r[value] is not None), key=lambda r: float(r["library_size"]))
                if not points:
                    continue
                shift = 0.0 if capacity is None else 0.04 * (lines.index((policy, capacity)) - len(lines) / 2)
                xs = [float(r["library_size"]) * (1 + shift) for r in points]  # capped points at one size apart
                ys = [r[value] for r in points]
                err = [[y - r[low] for y, r in zip(ys, points, strict=True)],
                       [r[high] - y for y, r in zip(ys, points, strict=True)]]
                color, marker = POLICY_STYLE.get(policy, ("#999999", "x"))
                size = 3 + 2 * capacities.index(int(capacity)) if capacity is not None else 3
                ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, markersize=size, capsize=2, linewidth=1.4,
                            linestyle="--" if capacity is None else "none", elinewidth=0.7,
                            label=policy if capacity is None else f"{policy} @{capacity}")
            ax.set_xlabel("library size (mean skills in memory, per stream-position bin)")
            ax.set_ylabel(label)
            ax.set_ylim(-2, 105)
            ax.set_title(f"{env} / {model} / {condition}", fontsize=8)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, ncol=2)
            else:
                ax.text(0.5, 0.5, "no retrieval whose use is measured", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8, color="#777777")
    figure.suptitle("Growth under a budget: success and use precision against library size (95 % CIs)", fontsize=9)
    return Drawn("capacity_curves", "Success and use precision against library size, by eviction policy and "
                 "capacity", figure, len(axes))


def utility_effects_figure(report: Report) -> Drawn | None:
    """Each masked skill's effect on success with its 95 % CI against its utility (left) and its relevance (right),
    one row per group; harmful skills in red, off-domain ones hollow; the panel title gives rho and its interval."""
    if "utility_effects_skills" not in report.tables or not report.table("utility_effects_skills").rows:
        return None
    table, summary = report.table("utility_effects_skills"), report.table("utility_effects")
    keys = sorted({(r["env"], r["model"], r["condition"]) for r in table.rows},
                  key=lambda k: (k[0], k[1], condition_order(k[2])))
    figure, axes = _grid(2 * len(keys), 2, width=5.2, height=3.8)
    for row, (env, model, condition) in enumerate(keys):
        rows = [r for r in table.where(env=env, model=model, condition=condition) if r["success_effect"] is not None]
        for col, diagnostic in enumerate(("utility", "relevance")):
            ax = axes[2 * row + col]
            for r in rows:
                color = "#c0392b" if r["harmful"] else "#1f4e79"
                low = r["success_low"] if r["success_low"] is not None else r["success_effect"]
                high = r["success_high"] if r["success_high"] is not None else r["success_effect"]
                ax.errorbar([r[diagnostic]], [r["success_effect"]],
                            yerr=[[r["success_effect"] - low], [high - r["success_effect"]]], fmt="o",
                            color=color, ecolor=color, elinewidth=0.8, capsize=2, markersize=5,
                            markerfacecolor="white" if r["off_domain"] else color,
                            alpha=1.0 if r["enough_draws"] else 0.35)
            ax.axhline(0, color="#888888", linewidth=0.8)
            ax.set_xlabel(f"{diagnostic} (score, against the group's tasks)")
            ax.set_ylabel("effect on success when shown")
            stat = summary.where(env=env, model=model, condition=condition, diagnostic=diagnostic)
            rho = stat[0] if stat else {}
            why = str(rho.get("why") or "").split(";")[0]
            text = f"ρ n/a: {why[:60]}" if rho.get("rho") is None else (
                f"ρ = {rho['rho']:.2f}" + (f", corrected {rho['rho_corrected']:.2f} [{rho['rho_low']:.2f}, "
                                           f"{rho['rho_high']:.2f}]" if rho.get("rho_low") is not None else ""))
            ax.set_title(f"{env} · {model} · {condition}\n{text} over {rho.get('skills', 0)} skills", fontsize=9)
            ax.grid(alpha=0.3)
    figure.suptitle("Skill effect on success (95 % CI) against the cheap diagnostics; red: flagged harmful, hollow: "
                    "off-domain, faint: too few draws", fontsize=9)
    return Drawn("utility_effects", "Skill effect against utility and relevance", figure, len(axes))


SCALE_SERIES = (("pick_accuracy_pct", "pick accuracy", "#1f4e79", "o"), ("pass_pct", "pass rate", "#1b7837", "s"),
                ("hit1_pct", "Hit@1", "#999999", "^"))


def selection_scale_figure(report: Report) -> Drawn | None:
    """The ``selection_scale`` table against library size (log scale): per env x model x condition, pick accuracy,
    pass rate and Hit@1 with 95 % CIs; the panel title gives pick accuracy's slope per doubling and its R²."""
    if "selection_scale" not in report.tables or not report.table("selection_scale").rows:
        return None
    rows = report.table("selection_scale").rows
    slopes = report.tables.get("selection_slope")
    groups = sorted({(r["env"], r["model"], r["condition"]) for r in rows},
                    key=lambda k: (k[0], k[1], condition_order(k[2])))
    figure, axes = _grid(len(groups), 3, width=5.0, height=3.6)
    for ax, (env, model, condition) in zip(axes, groups, strict=True):
        mine = sorted((r for r in rows if (r["env"], r["model"], r["condition"]) == (env, model, condition)),
                      key=lambda r: float(r["library_size"]))
        for key, label, color, marker in SCALE_SERIES:
            points = [r for r in mine if r[key] is not None]
            if not points:
                continue
            xs = [float(r["mean_size"]) for r in points]
            ys = [float(r[key]) for r in points]
            err = [[y - (r[f"{key}_low"] if r[f"{key}_low"] is not None else y) for y, r in zip(ys, points,
                                                                                             strict=True)],
                   [(r[f"{key}_high"] if r[f"{key}_high"] is not None else y) - y for y, r in zip(ys, points,
                                                                                              strict=True)]]
            ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, capsize=2, linewidth=1.4, elinewidth=0.7,
                        label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("library size (skills each task chose from)")
        ax.set_ylabel("%")
        ax.set_ylim(-2, 105)
        fit = slopes.where(env=env, model=model, condition=condition, metric="pick_accuracy") if slopes else []
        text = ""
        if fit and fit[0]["per_doubling_pts"] is not None:
            r2 = fit[0]["r2"]
            text = f"\npick accuracy {fit[0]['per_doubling_pts']:+.1f} pts per doubling" + (
                f", R² {r2:.2f}" if r2 is not None else "")
        ax.set_title(f"{env} / {model} / {condition}{text}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle("Selection against library size (95 % CIs)", fontsize=9)
    return Drawn("selection_scale", "Pick accuracy and pass rate against library size", figure, len(axes))


FIGURES: tuple[Callable[[Report], Drawn | None], ...] = (
    budget_figure, difficulty_figure, utility_bins_figure, components_figure, utility_kind_figure, transfer_figure,
    lens_cost_figure, forgetting_figure, capacity_figure, utility_effects_figure, selection_scale_figure)


def draw_all(report: Report) -> list[Drawn]:
    """Every figure the report has data for."""
    return [drawn for make in FIGURES if (drawn := make(report)) is not None]

