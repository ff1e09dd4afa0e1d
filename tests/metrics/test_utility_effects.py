"""Cheap diagnostics against randomised skill effects (issue 49): the statistics on hand-checkable data, the shared
task bootstrap, the report's tables on a small scripted grid (the world of ``benchmarks/utility_effects.py``), and
the spec's dry run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers_bench import load_benchmark
from scipy import stats

from skilltransfer.errors import InputError
from skilltransfer.metrics import binned_spearman, score_library
from skilltransfer.metrics.effects import Draw, TaskDraws, effect_replicates, skill_effects
from skilltransfer.metrics.scoring import ScoreReport, SkillScore
from skilltransfer.metrics.surrogate import (
    DIAGNOSTICS,
    MIN_ARM,
    associate,
    diagnostic_values,
    has_contrast,
    rank_correlation,
    surrogate_analysis,
)
from skilltransfer.metrics.validation import auroc, auroc_interval, spearman, spearman_rows
from skilltransfer.report import EmbedderResolver, build_report, load_runs
from skilltransfer.report.utility_effects import BINNED


@pytest.fixture(scope="module")
def world() -> ModuleType:
    return load_benchmark("utility_effects")


# --------------------------------------------------------------------------------------------- statistics
def test_spearman_by_hand_with_ties():
    # y ranks with the tie shared: 1, 2, 3.5, 5, 3.5; x ranks 1..5; Pearson of the ranks
    x, y = [1, 2, 3, 4, 5], [5, 6, 7, 8, 7]
    rx, ry = np.array([1, 2, 3, 4, 5.0]), np.array([1, 2, 3.5, 5, 3.5])
    by_hand = ((rx - 3) @ (ry - 3)) / math.sqrt(((rx - 3) ** 2).sum() * ((ry - 3) ** 2).sum())
    assert spearman(x, y) == pytest.approx(by_hand) == pytest.approx(0.8207826816681233)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([0.1, 0.5, 0.2], [10, 30, 20]) == pytest.approx(1.0)  # ranks only


def test_spearman_is_nan_without_two_distinct_values():
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))  # constant diagnostic
    assert math.isnan(spearman([1, 2, 3], [4, 4, 4]))  # tied effects
    assert math.isnan(spearman([1.0], [2.0]))  # one skill
    with pytest.raises(ValueError, match="1-D of one length"):
        spearman([1, 2], [1, 2, 3])


def test_spearman_rows_match_one_at_a_time_and_drop_rows_with_a_gap():
    x = np.array([0.3, 0.1, 0.2, 0.9])
    ys = np.array([[1, 2, 3, 4], [4, 3, 3, 1], [1, np.nan, 2, 3], [2, 2, 2, 2]], dtype=float)
    out = spearman_rows(x, ys)
    assert out[0] == pytest.approx(spearman(x, ys[0]))
    assert out[1] == pytest.approx(spearman(x, ys[1]))
    assert math.isnan(out[2])
    assert math.isnan(out[3])


def test_auroc_by_hand_with_ties_and_empty_classes():
    # positives 0.35, 0.8 against negatives 0.1, 0.4: 0.35 > 0.1, 0.35 < 0.4, 0.8 > both -> 3 of 4
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    # a positive tied with one negative and below the other: (0.5 + 0) / 2
    assert auroc([1.0, 1.0, 2.0], [True, False, False]) == pytest.approx(0.25)
    assert auroc([0.5, 0.5, 0.5], [True, False, False]) == pytest.approx(0.5)  # a constant score: chance
    assert auroc([0.1, 0.2], [False, False]) is None  # no positive (no harmful skill)
    assert auroc([0.1, 0.2], [True, True]) is None


def test_auroc_interval_needs_two_per_class_and_is_exact_when_separated():
    assert auroc_interval([0.1, 0.2, 0.9], [False, False, True]) == (None, None)
    low, high = auroc_interval([0.1, 0.2, 0.8, 0.9], [False, False, True, True])
    assert (low, high) == (1.0, 1.0)
    low, high = auroc_interval([0.1, 0.5, 0.4, 0.9, 0.3, 0.7], [False, False, True, True, False, True])
    assert low is not None
    assert high is not None
    assert 0.0 <= low <= auroc([0.1, 0.5, 0.4, 0.9, 0.3, 0.7], [False, False, True, True, False, True]) <= high <= 1


def test_rank_correlation_reliability_and_intervals_by_hand():
    d = np.array([1.0, 2, 3, 4, 5])
    estimates = np.array([0.0, 1, 2, 3, 4])  # variance across skills (ddof 1): 2.5
    noise = np.where(np.arange(200)[:, None] % 2 == 0, 0.5, -0.5) * np.ones(5)  # every skill moves +-0.5 together
    result = rank_correlation(d, estimates, estimates + noise)
    # bootstrap variance 0.25 * 200 / 199 per skill; the replicates keep the order, so every rho* is 1
    assert result.reliability == pytest.approx(1 - 0.25 * 200 / 199 / 2.5)
    assert (result.rho, result.corrected, result.low, result.high) == (1.0, 1.0, 1.0, 1.0)
    assert result.replicates == 200
    # half the replicates swap the first two skills: rho* in {1, 0.9}; percentile and basic by hand
    swapped = np.tile(estimates, (200, 1))
    swapped[::2, [0, 1]] = swapped[::2, [1, 0]]
    percentile = rank_correlation(d, estimates, swapped, interval="percentile")
    assert (percentile.low, percentile.high) == pytest.approx((0.9, 1.0))
    basic = rank_correlation(d, estimates, swapped, interval="basic")
    assert (basic.low, basic.high, basic.corrected) == pytest.approx((1.0, 1.0, 1.0))  # 2 - 1 and 2 - 0.9, clipped
    with pytest.raises(ValueError, match="unknown interval"):
        rank_correlation(d, estimates, swapped, interval="bca")


def test_rank_correlation_refuses_an_interval_when_the_effects_are_noise():
    rng = np.random.default_rng(0)
    estimates = np.array([0.01, -0.01, 0.02, 0.0, -0.02])
    result = rank_correlation(np.arange(5.0), estimates, estimates + rng.normal(0, 0.5, (300, 5)))
    assert result.reliability == 0.0
    assert result.low is None
    assert result.rho == pytest.approx(spearman(np.arange(5.0), estimates))
    assert rank_correlation(np.ones(5), estimates, np.tile(estimates, (10, 1))).low is None  # constant diagnostic


# --------------------------------------------------------------------------------------------- the shared bootstrap
def _draws(n: int, effects: dict[str, float], p: float, seed: int) -> list[TaskDraws]:
    """``n`` tasks, each a candidate for every skill, success a coin at 0.5 + the shown skills' effects."""
    rng = np.random.default_rng(seed)
    tasks = []
    for t in range(n):
        shown = {s: bool(rng.random() >= p) for s in effects}
        y = float(rng.random() < 0.5 + sum(e for s, e in effects.items() if shown[s]))
        tasks.append(TaskDraws(f"t{t}", {"success": y}, tuple(Draw(s, 1 - p, shown[s]) for s in effects)))
    return tasks


def test_effect_replicates_are_the_resamples_of_the_skill_effects_table():
    tasks = _draws(300, {"a": 0.2, "b": -0.2, "c": 0.0}, 0.5, 3)
    reps = effect_replicates(tasks, resamples=400, seed=7)
    rows = {r.skill_id: r for r in skill_effects(tasks, outcomes=("success",), resamples=400, seed=7)}
    assert reps.skill_ids == ("a", "b", "c")
    for j, skill_id in enumerate(reps.skill_ids):
        interval = rows[skill_id].effects["success"]
        assert reps.estimates[j] == pytest.approx(interval.estimate)
        column = reps.replicates[:, j]
        assert np.percentile(column[~np.isnan(column)], [2.5, 97.5]) == pytest.approx([interval.low, interval.high])
        assert (reps.shown[j], reps.withheld[j]) == (rows[skill_id].shown, rows[skill_id].withheld)


def _score(skill_id: str, **values: float | bool) -> SkillScore:
    base: dict[str, float | bool] = {"specificity": 0.5, "abstractness": 0.5, "utility": 0.25, "best_match": 0.5,
                                     "relevance": 0.25, "off_domain": False, "null_off_domain": False}
    base.update(values)
    return SkillScore(id=skill_id, name=skill_id, description=skill_id, level="task", format="text",
                      specificity=float(base["specificity"]), abstractness=float(base["abstractness"]),
                      utility=float(base["utility"]), best_match=float(base["best_match"]),
                      off_domain=bool(base["off_domain"]), relevance=float(base["relevance"]),
                      null_off_domain=bool(base["null_off_domain"]))


def _report(rows: list[SkillScore]) -> ScoreReport:
    return ScoreReport(embedder="hand", tau=0.1, specificity_mode="pairs", skill_text="description", n_tasks=10,
                       n_reference=45, sampled=False, seed=0, skills=rows)


def test_a_diagnostic_that_orders_the_effects_is_found_and_one_that_reverses_them_too():
    effects = {"s1": -0.3, "s2": -0.15, "s3": 0.0, "s4": 0.1, "s5": 0.2, "s6": 0.3}
    tasks = _draws(1500, {s: e / 3 for s, e in effects.items()}, 0.5, 1)  # six at once: keep p in [0, 1]
    rows = [_score(s, utility=0.1 + i / 10, relevance=1 - i / 10) for i, s in enumerate(effects)]
    analysis = surrogate_analysis(_report(rows), tasks, resamples=500, seed=2)
    by = {a.diagnostic: a for a in analysis.associations}
    assert [a.diagnostic for a in analysis.associations] == list(DIAGNOSTICS)
    utility, relevance = by["utility"], by["relevance"]
    assert utility.skills == 6
    assert utility.rho is not None
    assert utility.rho > 0.7
    assert utility.rho_low is not None
    assert utility.rho_low > 0
    assert relevance.rho == pytest.approx(-utility.rho)
    assert utility.replicates == 500
    assert "specificity is the same for every skill" in by["specificity"].why
    assert by["specificity"].rho is None
    assert by["in_domain"].rho is None  # no skill off-domain: a constant flag
    for join in analysis.skills:
        assert join.enough_draws
        assert join.effect is not None


def test_the_harmful_auroc_reads_the_diagnostic_low():
    effects = {f"s{i}": e for i, e in enumerate([-0.4, -0.4, 0.0, 0.0, 0.1, 0.1])}
    tasks = _draws(1200, {s: e / 2 for s, e in effects.items()}, 0.5, 5)
    rows = [_score(s, utility=u, off_domain=i < 2) for i, (s, u) in enumerate(zip(effects, [0.1, 0.2, 0.5, 0.6, 0.7,
                                                                                          0.8], strict=True))]
    analysis = surrogate_analysis(_report(rows), tasks, resamples=300, seed=1)
    flagged = {j.score.id for j in analysis.skills if j.effect is not None and j.effect.harmful}
    assert flagged == {"s0", "s1"}
    by = {a.diagnostic: a for a in analysis.associations}
    assert by["utility"].harmful == 2
    assert by["utility"].auroc_harmful == pytest.approx(1.0)  # both harmful skills have the lowest utility
    assert by["in_domain"].auroc_harmful == pytest.approx(1.0)  # and are the off-domain ones
    assert by["utility"].auroc_harmful_low == pytest.approx(1.0)


def test_too_few_skills_no_harmful_skill_and_one_skill_say_so():
    tasks = _draws(200, {"a": 0.1, "b": 0.0, "c": -0.1}, 0.5, 2)
    rows = [_score("a", utility=0.3), _score("b", utility=0.2), _score("c", utility=0.1)]
    analysis = surrogate_analysis(_report(rows), tasks, resamples=200)
    utility = next(a for a in analysis.associations if a.diagnostic == "utility")
    assert utility.rho is None
    assert any("3 skills with at least" in why and "rho needs 5" in why for why in utility.why)
    if utility.harmful == 0:
        assert utility.auroc_harmful is None
        assert any("no skill flagged harmful" in why for why in utility.why)
    one = surrogate_analysis(_report([_score("a")]), _draws(60, {"a": 0.1}, 0.5, 0), resamples=100)
    assert one.associations[0].skills == 1
    assert one.associations[0].rho is None
    assert one.associations[0].auroc_harmful is None


def test_a_skill_with_a_thin_arm_is_left_out_of_the_correlation():
    tasks = _draws(400, {f"s{i}": 0.0 for i in range(5)}, 0.5, 4)
    # s5: a candidate of 40 tasks, withheld from MIN_ARM - 1 of them
    thin = [TaskDraws(f"x{i}", {"success": float(i % 2)}, (Draw("s5", 0.5, i >= MIN_ARM - 1),)) for i in range(40)]
    rows = [_score(f"s{i}", utility=i / 10) for i in range(6)]
    analysis = surrogate_analysis(_report(rows), [*tasks, *thin], resamples=100)
    joins = {j.score.id: j for j in analysis.skills}
    assert [joins[f"s{i}"].enough_draws for i in range(6)] == [True] * 5 + [False]
    assert joins["s5"].effect is not None  # estimated (in the per-skill rows), not correlated
    assert joins["s5"].effect.withheld == MIN_ARM - 1
    assert analysis.associations[0].skills == 5
    assert len(analysis.masked) == 6


def test_no_randomised_draw_means_no_contrast():
    unmasked = [TaskDraws(f"t{i}", {"success": 1.0}, (Draw("a", 1.0, True),)) for i in range(10)]
    assert not has_contrast(unmasked)
    assert has_contrast(_draws(5, {"a": 0.0}, 0.5, 0))
    analysis = surrogate_analysis(_report([_score("a")]), unmasked)
    assert analysis.masked == []
    assert analysis.skills[0].effect is None


def test_flags_enter_oriented_higher_is_better():
    values = diagnostic_values(_score("a", off_domain=True, null_off_domain=False))
    assert values["in_domain"] == 0.0
    assert values["outside_null"] == 1.0
    assert set(values) == set(DIAGNOSTICS)


def test_associate_with_constant_effects_says_so():
    from skilltransfer.metrics.effects import EffectReplicates, Interval, SkillEffect

    ids = tuple(f"s{i}" for i in range(6))
    reps = EffectReplicates(ids, np.zeros(6), np.zeros((50, 6)), np.full(6, 20), np.full(6, 20))
    effects = {s: SkillEffect(s, 40, 20, 20, {"success": Interval(0.0, -0.1, 0.1)}) for s in ids}
    rows = associate({s: {"utility": i / 10} for i, s in enumerate(ids)}, effects, reps)
    assert rows[0].rho is None
    assert rows[0].why[0] == "the estimated effects are all equal"


# --------------------------------------------------------------------------------------------- the report
@pytest.fixture(scope="module")
def grid(world, tmp_path_factory) -> Path:
    """One masked stream of the planted world (6 topics x 4 skills, 40 tasks per topic) and one unmasked."""
    root = tmp_path_factory.mktemp("ue")
    _, relevance = world.library(6)
    planted = {n: world.effect_of(r) for n, r in relevance.items()}
    world.run_world(root, 0, planted, groups=6, per_topic=40, mask_rate=0.5, tag="masked")
    return root


@pytest.mark.slow
def test_the_report_joins_score_and_effects_per_group(world, grid, tmp_path):
    report = build_report(load_runs([grid]), embedder_of=EmbedderResolver())
    summary, skills = report.table("utility_effects"), report.table("utility_effects_skills")
    assert [r["diagnostic"] for r in summary.rows] == list(DIAGNOSTICS)
    assert len(skills.rows) == 24
    # the diagnostics are `score`'s: the library against the group's task instructions, the run's embedder
    library, _ = world.library(6)
    direct = {row.name: row for row in score_library(library, world.task_texts(6, 40), world.HashEmbedder(1024))
              .skills}
    for row in skills.rows:
        for key in ("utility", "specificity", "abstractness", "relevance", "best_match", "off_domain",
                    "null_off_domain"):
            assert row[key] == pytest.approx(getattr(direct[row["skill"]], key)), (row["skill"], key)
    # the effects are the skill_effects table's
    effects = {r["skill_id"]: r for r in report.table("skill_effects").rows}
    for row in skills.rows:
        for key in ("success_effect", "success_low", "success_high", "p_harm", "harmful", "candidates"):
            assert row[key] == effects[row["skill_id"]][key]
    utility = summary.where(diagnostic="utility")[0]
    assert utility["masked"] == 24
    assert utility["skills"] == sum(r["enough_draws"] for r in skills.rows)
    assert utility["rho"] == pytest.approx(spearman(
        [r["utility"] for r in skills.rows if r["enough_draws"]],
        [r["success_effect"] for r in skills.rows if r["enough_draws"]]))
    assert utility["rho_low"] <= utility["rho_high"]
    # the binned task-level analysis: the paper's over the same records
    runs = load_runs([grid])
    scored = {row.id: row for row in score_library(library, world.task_texts(6, 40), world.HashEmbedder(1024))
              .skills}
    means, success = [], []
    for record in runs[0].records:
        ids = sorted({hit.skill_id for hit in record.retrieved})
        if ids:
            means.append(float(np.mean([scored[i].utility for i in ids])))
            success.append(float(record.success))
    expected = binned_spearman(means, success, 10)
    assert utility["binned_tasks"] == len(success)
    assert utility["binned_rho"] == pytest.approx(expected.rho)
    assert "binned: not for a 0/1 flag" in summary.where(diagnostic="in_domain")[0]["why"]
    assert set(BINNED) < set(DIAGNOSTICS)
    assert json.dumps(summary.rows)


@pytest.mark.slow
def test_the_report_writes_the_tables_and_the_figure(grid, tmp_path):
    from skilltransfer.report import make_report

    _, written = make_report([grid], tmp_path / "report")
    assert "utility_effects" in written.figures
    assert written.figures["utility_effects"].read_bytes().startswith(b"\x89PNG")
    assert written.panels["utility_effects"] == 2
    page = written.markdown.read_text()
    assert "Diagnostics against randomised effects" in page
    assert "Each masked skill: diagnostics and effect on success" in page
    assert (tmp_path / "report" / "utility_effects.csv").read_text().count("\n") == len(DIAGNOSTICS) + 1


def test_a_report_without_masking_or_without_utility_has_no_such_table(world, tmp_path):
    _, relevance = world.library(2)
    planted = {n: world.effect_of(r) for n, r in relevance.items()}
    world.run_world(tmp_path, 0, planted, groups=2, per_topic=3, mask_rate=0.5, tag="m")
    runs = load_runs([tmp_path])
    assert "utility_effects" not in build_report(runs).tables  # --no-utility: no embedder
    report = build_report(runs, embedder_of=EmbedderResolver())
    rows = report.table("utility_effects").rows
    assert all(r["rho"] is None for r in rows)  # 3 tasks per skill: nothing has enough draws
    assert all("skills with at least" in r["why"] for r in rows)
    assert all(r["binned_rho"] is None for r in rows if r["diagnostic"] in BINNED)
    assert any("fewer than 10 bins" in r["why"] for r in rows)


# --------------------------------------------------------------------------------------------- the viewer
def test_the_viewer_lists_report_folders_and_reads_their_tables_as_text(tmp_path):
    from skilltransfer.view import Catalog
    from skilltransfer.view.reports import MAX_ROWS

    report = tmp_path / "study" / "report"
    report.mkdir(parents=True)
    (report / "report.json").write_text(json.dumps({"settings": {"seed": 0}, "runs": [{"run": "r", "tasks": 3}]}))
    (report / "table2_success.csv").write_text("env,success_pct\napps,50.0\n")
    (report / "utility_effects.csv").write_text("diagnostic,rho,why\nutility,0.5,\"<img src=x onerror=alert(1)>\"\n")
    rows = "".join(f"s{i},{i}\n" for i in range(MAX_ROWS + 5))
    (report / "utility_effects_skills.csv").write_text("skill,utility\n" + rows)
    (tmp_path / "elsewhere.csv").write_text("secret\n1\n")
    (report / "skill_effects.csv").symlink_to(tmp_path / "elsewhere.csv")  # a link is not followed
    catalog = Catalog([tmp_path / "study"])
    [entry] = catalog.index()["reports"]
    assert entry["label"] == "study/report"
    page = catalog.report(entry["key"])
    assert [t["name"] for t in page["tables"]] == ["utility_effects", "utility_effects_skills", "table2_success"]
    first = page["tables"][0]
    assert first["rows"] == [["utility", "0.5", "<img src=x onerror=alert(1)>"]]  # text, rendered as text
    skills = page["tables"][1]
    assert (len(skills["rows"]), skills["total"]) == (MAX_ROWS, MAX_ROWS + 5)
    assert page["figures_prefix"] == "study/report/figures/"
    with pytest.raises(InputError, match="no report"):
        catalog.report("p0000000000")


# --------------------------------------------------------------------------------------------- the spec
def test_the_spec_dry_runs_a_frozen_library_plus_off_domain_skills_masked_on_held_out_tasks(monkeypatch, capsys,
                                                                                           tmp_path):
    from helpers_cli import main_cli

    from skilltransfer.runner.grid import resolve_streams
    from skilltransfer.runner.spec import load_spec

    plans, tasks = resolve_streams(load_spec("utility-effects"))
    masked = [p for p in plans if p.phase == "masked"]
    assert len(plans) == 4
    assert len(masked) == 2
    for plan in masked:
        assert plan.config.mask_rate == 0.5
        assert plan.config.distractors == 12
        assert plan.config.agent.top_k == 8
        assert plan.source is not None
        assert not {t.id for t in tasks[plan.run]} & {t.id for t in tasks[plan.source]}  # held-out tasks
        assert len(tasks[plan.run]) == 325
    monkeypatch.chdir(tmp_path)
    code, out, err = main_cli(["grid", "utility-effects", "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    assert "4 streams, 932 tasks" in out


# --------------------------------------------------------------------------------------------- score --effects
def _score_effects(world: ModuleType, library: Path, runs: Path, out: Path | None = None) -> ScoreReport:
    """The one group's report of ``score --effects`` (one masked run)."""
    from skilltransfer.commands.score import score
    from skilltransfer.metrics.scoring import GroupedScore

    grouped = score(library, None, embedder=world.EMBEDDER, field=None, top=None, out=out, seed=0, embed_cache=False,
                    effects=[runs])
    assert isinstance(grouped, GroupedScore)
    assert len(grouped.groups) == 1
    return grouped.groups[0].report


@pytest.mark.slow
def test_score_effects_puts_the_report_numbers_beside_the_diagnostics(world, grid, tmp_path, capsys):
    library = grid / "library-masked0.jsonl"
    out = tmp_path / "score.json"
    scored = _score_effects(world, library, grid, out)
    screen = " ".join(capsys.readouterr().out.split())  # lines wrapped at the terminal's width joined
    report = build_report(load_runs([grid]), embedder_of=EmbedderResolver())
    per_skill = {r["skill_id"]: r for r in report.table("utility_effects_skills").rows}
    assert len(per_skill) == 24
    for row in scored.skills:  # the effects, draws and flags are the report's (same runs, seed, bootstrap)
        expected = per_skill[row.id]
        assert (row.effect, row.effect_low, row.effect_high) == (
            expected["success_effect"], expected["success_low"], expected["success_high"])
        assert (row.harmful, row.shown, row.withheld, row.enough_draws) == (
            expected["harmful"], expected["shown"], expected["withheld"], expected["enough_draws"])
        assert row.utility == pytest.approx(expected["utility"])  # against the runs' own tasks, the run's embedder
    utility = next(a for a in scored.effects["associations"] if a["diagnostic"] == "utility")
    assert utility["rho"] == pytest.approx(report.table("utility_effects").where(diagnostic="utility")[0]["rho"])
    assert scored.effects["masked"] == 24
    assert scored.effects["enough_draws"] == sum(r["enough_draws"] for r in per_skill.values())
    [saved] = json.loads(out.read_text())["groups"]
    assert saved["effects"]["source"] == str(next(grid.glob("*/config.json")).parent)
    assert [r["name"] for r in saved["skills"]] == [r.name for r in scored.ranking()]
    assert {"effect", "effect_low", "effect_high", "harmful", "shown", "withheld", "enough_draws"} <= set(
        saved["skills"][0])
    assert "effect [95% CI]" in screen
    assert f"24 of 24 skills masked in both arms, {scored.effects['enough_draws']} with at least {MIN_ARM}" in screen
    assert "utility vs effect over" in screen


def test_score_effects_refuses_runs_without_masking_in_one_line(world, tmp_path):
    _, relevance = world.library(2)
    planted = {n: world.effect_of(r) for n, r in relevance.items()}
    world.run_world(tmp_path, 0, planted, groups=2, per_topic=3, mask_rate=0.0, tag="plain")
    with pytest.raises(InputError, match="no randomised masking draws in its 1 run") as caught:
        _score_effects(world, tmp_path / "library-plain0.jsonl", tmp_path)
    assert "\n" not in str(caught.value)


def test_score_needs_tasks_or_effects(world, tmp_path):
    from skilltransfer.commands.score import score

    with pytest.raises(InputError, match="give --tasks"):
        score(tmp_path, None, embedder="hash:64", field=None, top=None, out=None, seed=0, embed_cache=False)
