"""`skilltransfer report`: tables recomputed by hand from the run logs with the public metric functions, figures."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers_runs import ENV_TARGETS, MODELS, PNG, FlakyScript, GradedTinyEnv, build_runs

from skilltransfer.cli import main
from skilltransfer.errors import InputError
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.log.legacy import upgrade_v1_config
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.metrics import (
    binned_spearman,
    bootstrap_ci,
    score_library,
    stratified_bootstrap_ci,
    transfer_density,
)
from skilltransfer.report import EmbedderResolver, load_run, make_report
from skilltransfer.report.figures import draw_all
from skilltransfer.report.utility import utility_bins
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_runs(tmp_path_factory.mktemp("report"), HashEmbedder(128))


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One env, a baseline and a memory condition: fast, for the tests that need only some run folders."""
    return build_runs(tmp_path_factory.mktemp("small"), HashEmbedder(128), envs=("tiny-b",),
                      conditions=("task", "task+text"))


@pytest.fixture(scope="module")
def built(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("out") / "report"
    report, written = make_report([runs_dir], out)
    return report, written, out


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def run_dir(runs_dir: Path, env: str, model: str, condition: str) -> Path:
    return runs_dir / env / model / condition.replace("+", "_")


def per_task(run: Path) -> dict[str, float]:
    return {r["task_id"]: float(r["success"]) for r in records(run)}


@pytest.mark.slow  # builds 18 runs and a full report once per module (~5-8 s)
def test_table2_matches_bootstrap_of_the_logs(runs_dir: Path, built) -> None:
    report, _, out = built
    table = report.table("table2_success")
    assert len(table.where(model="Average")) == 18  # tiny-a has two models (6 rows), plus 6 + 6 over all envs
    checked = 0
    for env, models in MODELS.items():
        for model in models:
            for condition in ("task", "task+text", "subtask+code"):
                values = per_task(run_dir(runs_dir, env, model, condition))
                mean, low, high = bootstrap_ci(list(values.values()))
                row = table.where(env=env, model=model, condition=condition)[0]
                assert row["n_tasks"] == len(values)
                assert row["success_pct"] == pytest.approx(100 * mean)
                assert (row["ci_low"], row["ci_high"]) == pytest.approx((100 * low, 100 * high))
                if condition == "task":
                    assert row["delta_pts"] is None
                    continue
                base = per_task(run_dir(runs_dir, env, model, condition.split("+")[0]))
                assert row["baseline"] == condition.split("+")[0]
                assert row["delta_pts"] == pytest.approx(100 * (mean - np.mean(list(base.values()))))
                diffs = [values[t] - base[t] for t in sorted(base)]
                _, d_low, d_high = bootstrap_ci(diffs)
                assert (row["delta_ci_low"], row["delta_ci_high"]) == pytest.approx((100 * d_low, 100 * d_high))
                checked += 1
    assert checked == 6
    # the Average row averages each task over the two models first
    x, y = (per_task(run_dir(runs_dir, "tiny-a", m, "subtask+text")) for m in MODELS["tiny-a"])
    mean, low, high = bootstrap_ci([(x[t] + y[t]) / 2 for t in x])
    row = table.where(env="tiny-a", model="Average", condition="subtask+text")[0]
    assert (row["success_pct"], row["ci_low"], row["ci_high"]) == pytest.approx((100 * mean, 100 * low, 100 * high))
    # the all-envs rows average tiny-a's mean (of per-task model averages) and tiny-b's mean: each env weighs the same
    b = per_task(run_dir(runs_dir, "tiny-b", "model-x", "subtask+text"))
    a = [(x[t] + y[t]) / 2 for t in x]
    mean, low, high = stratified_bootstrap_ci([a, list(b.values())])
    assert mean == pytest.approx((np.mean(a) + np.mean(list(b.values()))) / 2)
    row = table.where(env="(all envs)", model="Average", condition="subtask+text")[0]
    assert (row["n_tasks"], row["n_runs"], row["metric"]) == (len(x) + len(b), 3, "success")
    assert (row["success_pct"], row["ci_low"], row["ci_high"]) == pytest.approx((100 * mean, 100 * low, 100 * high))
    pooled = table.where(env="(all envs, pooled)", model="Average", condition="subtask+text")[0]
    assert pooled["success_pct"] == pytest.approx(100 * np.mean(a + list(b.values())))
    csv_lines = (out / "table2_success.csv").read_text().splitlines()
    assert csv_lines[0].startswith("env,model,condition,metric,n_runs,n_tasks,success_pct")
    assert len(csv_lines) == 1 + len(table.rows)
    markdown = (out / "report.md").read_text()
    assert f"{row['success_pct']:.1f} [{row['ci_low']:.1f}, {row['ci_high']:.1f}] ({row['delta_pts']:+.1f})" \
        in markdown


@pytest.mark.slow  # builds 18 runs and a full report once per module (~5-8 s)
def test_budget_curves_and_difficulty(runs_dir: Path, built) -> None:
    report, _, _ = built
    curves = report.table("fig3_budget_curves")
    for model in MODELS["tiny-a"]:  # one curve per model x condition: runs of different models are never pooled
        logs = records(run_dir(runs_dir, "tiny-a", model, "subtask+text"))
        for kind, field in (("latency", "latency_s"), ("dependency", "dependency")):
            rows = curves.where(env="tiny-a", kind=kind, condition="subtask+text", model=model)
            assert len(rows) == 60
            for row in rows[::7] + rows[-1:]:
                within = sum(r["success"] and r[field] <= row["budget"] for r in logs) / len(logs)
                assert row["success_within_pct"] == pytest.approx(100 * within)
            assert rows[-1]["success_within_pct"] == pytest.approx(100 * np.mean([r["success"] for r in logs]))
    strata = report.table("fig4_difficulty")
    both = [per_task(run_dir(runs_dir, "tiny-a", m, "task+code")) for m in MODELS["tiny-a"]]
    difficulty = {r["task_id"]: r["difficulty"] for r in records(run_dir(runs_dir, "tiny-a", "model-x", "task"))}
    assert sorted(set(difficulty.values())) == [1, 2, 3]
    for model, per_model in zip(MODELS["tiny-a"], both, strict=True):  # per model, as fig. 3
        for level in (1, 2, 3):
            values = [per_model[t] for t in per_model if difficulty[t] == level]
            mean, low, high = bootstrap_ci(values)
            row = strata.where(env="tiny-a", condition="task+code", difficulty=level, model=model)[0]
            assert (row["n_tasks"], row["success_pct"], row["ci_low"], row["ci_high"]) == \
                pytest.approx((len(values), 100 * mean, 100 * low, 100 * high))


@pytest.mark.slow  # builds 18 runs and a full report once per module (~5-8 s)
def test_utility_tables_match_score_library(runs_dir: Path, built) -> None:
    report, _, _ = built
    tasks = report.table("task_utility")
    folder = run_dir(runs_dir, "tiny-b", "model-x", "subtask+text")
    run = load_run(folder)
    instructions = [json.loads((folder / r["trajectory"]).read_text())["instruction"] for r in records(folder)]
    skills = list(run.skills.values())
    scores = {row.id: row for row in score_library(skills, instructions, HashEmbedder(128)).skills}
    rows = tasks.where(env="tiny-b", condition="subtask+text")
    expected = []
    for record in records(folder):
        ids = sorted({item["skill_id"] for item in record["retrieved"]})
        if ids:
            expected.append((record["task_id"], float(record["success"]),
                             float(np.mean([scores[i].utility for i in ids]))))
    assert [(r["task_id"], r["success"], pytest.approx(r["mean_utility"])) for r in rows] == expected
    assert len({round(r["mean_utility"], 6) for r in tasks.rows}) > 3  # utilities really differ
    corr = report.table("fig5a_spearman")
    for level in ("task", "subtask"):
        level_rows = tasks.where(level=level)
        result = binned_spearman([r["mean_utility"] for r in level_rows], [r["success"] for r in level_rows], 10)
        row = corr.where(level=level)[0]
        assert row["n_tasks"] == len(level_rows) >= 10
        assert (row["rho"], row["p_value"]) == pytest.approx((result.rho, result.p_value))
        bins = report.table("fig5a_utility_bins").where(level=level)
        assert [b["n"] for b in bins] == [b.n for b in result.bins]
        assert [b["success_pct"] for b in bins] == pytest.approx([100 * b.y_mean for b in result.bins])
        spec = binned_spearman([r["mean_specificity"] for r in level_rows], [r["success"] for r in level_rows], 10)
        comp = report.table("fig5b_components").where(level=level, component="specificity")
        assert [c["mean_value"] for c in comp] == pytest.approx([b.x_mean for b in spec.bins])
        spread_bins, spread_corr = utility_bins(tasks, 10, "spread")
        spread = binned_spearman([r["mean_utility"] for r in level_rows], [r["success"] for r in level_rows], 10,
                                 "spread")
        assert [b["n"] for b in spread_bins.where(level=level)] == [b.n for b in spread.bins]
        assert spread_corr.where(level=level)[0]["rho"] == pytest.approx(spread.rho, nan_ok=True)
    kinds = report.table("fig5cde_utility_by_kind")
    assert {(r["level"], r["format"]) for r in kinds.where(env="tiny-b")} == \
        {("task", "text"), ("task", "code"), ("subtask", "text"), ("subtask", "code")}
    row = kinds.where(env="tiny-b", level="subtask", format="text")[0]
    assert row["n_skills"] == len(skills)
    assert row["mean_utility"] == pytest.approx(np.mean([s.utility for s in scores.values()]))


@pytest.mark.slow  # builds 18 runs and a full report once per module (~5-8 s)
def test_transfer_density_and_skill_counts(runs_dir: Path, built) -> None:
    report, _, _ = built
    density = report.table("fig6_transfer_density")
    for level in ("task", "subtask"):
        events = []
        for condition in (f"{level}+text", f"{level}+code"):
            for record in records(run_dir(runs_dir, "tiny-a", "model-x", condition)) + \
                    records(run_dir(runs_dir, "tiny-a", "model-y", condition)):
                events += [(source, record["position"])  # transfer events: once per task and skill, from earlier
                           for source in {i["skill_id"]: i["source_position"] for i in record["retrieved"]}.values()
                           if source is not None and source < record["position"]]
        n = len(ENV_TARGETS["tiny-a"])
        expected = transfer_density(events, n, n)
        row = density.where(env="tiny-a", level=level)[0]
        assert (row["n_runs"], row["bins"], row["n_events"]) == (4, n, expected.n_events)
        assert row["density"] == pytest.approx(expected.density)
        assert 0 < row["density"] <= 1
    counts = report.table("skills_per_run")
    assert len(counts.rows) == 18
    folder = run_dir(runs_dir, "tiny-a", "model-y", "task+code")
    logs = records(folder)
    row = counts.where(env="tiny-a", model="model-y", condition="task+code")[0]
    statuses = [i["status"] for r in logs for i in r["induced"]]
    assert (row["written"], row["merged"], row["dropped"]) == \
        (statuses.count("added"), statuses.count("merged"), statuses.count("dropped"))
    assert row["written"] >= 1
    assert row["retrievals"] == sum(len(r["retrieved"]) for r in logs)
    assert row["memory_size"] == len((folder / "memory" / "skills.jsonl").read_text().splitlines())
    none = counts.where(env="tiny-a", model="model-y", condition="task")[0]
    assert (none["written"], none["retrievals"], none["transfer_density"]) == (0, 0, None)


@pytest.mark.slow  # builds 18 runs and a full report once per module (~5-8 s)
def test_figures_are_pngs_with_the_right_panels(built) -> None:
    report, written, out = built
    meta = json.loads((out / "figures" / "figures.json").read_text())
    expected = {"fig3_budget": 4, "fig4_difficulty": 2, "fig5a_utility_bins": 2, "fig5b_components": 2,
                "fig5cde_utility_by_kind": 2, "fig6_transfer_density": 2}
    assert {name: entry["panels"] for name, entry in meta.items()} == expected
    for entry in meta.values():
        data = (out / entry["file"]).read_bytes()
        assert data.startswith(PNG)
        assert len(data) > 10_000
        assert f"]({entry['file']})" in (out / "report.md").read_text()
    drawn = {d.name: d for d in draw_all(report)}
    assert {name: len(d.figure.axes) for name, d in drawn.items()} == expected
    lines = drawn["fig3_budget"].figure.axes[0].get_lines()
    assert len(lines) == 6 * len(MODELS["tiny-a"])  # one curve per model x condition (never pooled across models)
    assert '<img src="figures/fig6_transfer_density.png"' in (out / "report.html").read_text()
    assert set(written.csv) >= {"table2_success", "fig3_budget_curves", "fig4_difficulty", "fig5a_spearman",
                                "fig6_transfer_density", "skills_per_run", "task_utility"}


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["skilltransfer", "report", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_cli_single_run_and_errors(small_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    single = run_dir(small_runs, "tiny-b", "model-x", "task+text")
    code, err = run_cli([str(single), "--out", str(tmp_path / "one"), "--metric", "reward"], monkeypatch, capsys)
    assert code == 0, err
    rows = (tmp_path / "one" / "table2_success.csv").read_text().splitlines()
    assert len(rows) == 2
    assert rows[1].startswith(f"tiny-b,model-x,task+text,reward,1,{len(ENV_TARGETS['tiny-b'])},")
    assert (tmp_path / "one" / "figures" / "fig3_budget.png").read_bytes().startswith(PNG)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = run_cli([str(empty), "--out", str(tmp_path / "x")], monkeypatch, capsys)
    assert code == 2
    assert err.startswith(f"error: {empty}: no runs found")
    assert not (tmp_path / "x").exists()
    code, err = run_cli([str(single), "--out", str(tmp_path / "x"), "--metric", "speed"], monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: Invalid value for '--metric': Value error, 'speed' is not one of 'official', "
                          "'success', 'reward'")  # a choice: refused when the command line is read
    code, err = run_cli([str(single), "--out", str(tmp_path / "x"), "--utility-binning", "last"], monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: Invalid value for '--utility-binning': Value error, 'last' is not one of 'first'")
    assert not (tmp_path / "x").exists()


def test_broken_logs_name_the_file_and_line(small_runs: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir(small_runs, "tiny-b", "model-x", "task"), copy)
    lines = (copy / "results.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"success":', '"succes":')
    (copy / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"results\.jsonl:3: field 'success': Field required"):
        make_report([copy], tmp_path / "out")


def test_embedder_resolution(small_runs: Path) -> None:
    run = load_run(run_dir(small_runs, "tiny-b", "model-x", "task+text"))
    assert EmbedderResolver()(run).id == "hash:dim=128:char=1"
    assert EmbedderResolver("hash:64")(run).id == "hash:dim=64:char=1"  # an explicit override wins
    run.log.config.embedder = ""
    assert EmbedderResolver()(run).id == "hash:dim=128:char=1"  # rebuilt from the recorded id
    run.log.embedder_id = "st:some-private-model"
    with pytest.raises(InputError, match="cannot tell which embedder.*pass --embedder"):
        EmbedderResolver()(run)
    run.log.config.embedder = "hash:32"
    with pytest.raises(InputError, match="has id 'hash:dim=32:char=1' but the run recorded"):
        EmbedderResolver()(run)


def test_no_utility_and_nan_safe_cells(small_runs: Path, tmp_path: Path) -> None:
    report, written = make_report([small_runs], tmp_path / "r", utility=False, density_bins=4)
    assert "task_utility" not in report.tables
    assert "fig5a_utility_bins" not in written.figures
    row = report.table("fig6_transfer_density").where(level="task")[0]
    assert row["bins"] == 4
    assert not math.isnan(row["density"])


def test_frozen_library_run_is_its_own_condition(small_runs: Path, tmp_path: Path) -> None:
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(small_runs, runs)
    source = run_dir(runs, "tiny-b", "model-x", "task+text")
    config = StreamConfig(run="task_lib", runs_dir=str(runs / "tiny-b" / "model-x"), condition="task", env="tiny-b",
                          model=ModelSpec(label="model-x"), embedder="hash:128", library=str(source / "memory"))
    env = GradedTinyEnv(ENV_TARGETS["tiny-b"], workdir=tmp_path / "ws")
    run_stream(env, ScriptedModel(FlakyScript("unused", {13, 14})), config, embedder=HashEmbedder(128))
    report, _ = make_report([runs], tmp_path / "out", density_bins=4)
    row = report.table("table2_success").where(condition="task+library")[0]
    lib = per_task(run_dir(runs, "tiny-b", "model-x", "task_lib"))
    base = per_task(run_dir(runs, "tiny-b", "model-x", "task"))
    assert row["baseline"] == "task"
    assert row["delta_pts"] == pytest.approx(100 * (np.mean(list(lib.values())) - np.mean(list(base.values()))))
    assert [r["condition"] for r in report.table("table2_success").rows] == ["task", "task+text", "task+library"]
    assert len(report.table("task_utility").where(condition="task+library")) == len(lib)  # every task retrieved
    counts = report.table("skills_per_run").where(condition="task+library")[0]
    assert (counts["written"], counts["transfer_events"], counts["transfer_density"]) == (0, 0, None)
    assert report.table("fig6_transfer_density").where(level="task")[0]["n_runs"] == 1  # the library run is left out


def test_labels_from_run_and_grid_records(small_runs: Path) -> None:
    run = load_run(run_dir(small_runs, "tiny-b", "model-x", "task+text"))
    assert (run.env, run.model, run.condition) == ("tiny-b", "model-x", "task+text")
    config = run.log.config
    run.log.config = config.model_copy(update={"env": EnvSpec(env="apps", label="apps-small"),
                                               "model": ModelSpec(label="qwen3-8b", name="openai")})
    assert (run.env, run.model) == ("apps-small", "qwen3-8b")
    run.log.config = config.model_copy(update={"env": EnvSpec(env="officebench:/data/officebench/tasks"),
                                               "model": ModelSpec(name="openai", model="qwen3")})
    assert (run.env, run.model) == ("officebench", "qwen3")
    run.log.config = config.model_copy(update={"env": EnvSpec(env="tests.helpers_tinyenv:TinyEnv")})
    assert run.env == "TinyEnv"
    run.log.config = config.model_copy(update={"env": EnvSpec()})
    assert run.env == "tiny"  # the task ids' prefix
    # the strings of the old log format (format_version 1), as run and grid wrote them
    for env, model, labels in [
        (json.dumps({"label": "apps-small", "env": "apps", "order_seed": 1}),
         json.dumps({"label": "qwen3-8b", "name": "openai", "params": {}}), ("apps-small", "qwen3-8b")),
        ('officebench:/data/officebench/tasks {"seed": 0}', "openai:qwen3 temperature=0.0", ("officebench", "qwen3")),
        ("tests.helpers_tinyenv:TinyEnv {}", "local", ("TinyEnv", "local")),
        ("", "", ("tiny", "unknown-model"))]:
        old = {"format_version": 1, "config": {**config.model_dump(include={"run", "runs_dir", "condition"}),
                                               "env": env, "model": model, "agent": {}, "memory": {}}}
        run.log.config = StreamConfig.model_validate(upgrade_v1_config(old)["config"])
        assert (run.env, run.model) == labels
    run.log.config = config
    run.log.config = config.model_copy(update={"induction_variant": "no_demo"})
    assert run.condition == "task+text[no_demo]"


def test_memo_embedder_matches_inner_and_embeds_each_text_once() -> None:
    from skilltransfer.report.embedding import MemoEmbedder

    inner = HashEmbedder(32)
    calls: list[list[str]] = []
    real = inner.embed

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return real(texts)

    inner.embed = counting  # type: ignore[method-assign]
    memo = MemoEmbedder(inner)
    first = memo.embed(["a b", "c d", "a b"])
    second = memo.embed(["c d", "e f"])
    assert np.array_equal(first, real(["a b", "c d", "a b"]))
    assert np.array_equal(second, real(["c d", "e f"]))
    assert calls == [["a b", "c d"], ["e f"]]
    assert (memo.id, memo.dim) == (inner.id, 32)


def test_single_baseline_run_gets_only_the_sections_it_has_data_for(small_runs: Path, tmp_path: Path) -> None:
    report, written = make_report([run_dir(small_runs, "tiny-b", "model-x", "task")], tmp_path / "r")
    assert set(written.figures) == {"fig3_budget", "fig4_difficulty"}
    assert report.table("task_utility").rows == []
    assert report.table("fig6_transfer_density").rows == []
    row = report.table("table2_success").rows[0]
    assert (row["condition"], row["baseline"], row["delta_pts"]) == ("task", None, None)
    markdown = written.markdown.read_text()
    assert "Transfer density D (Fig. 6): no rows (not enough data), see fig6_transfer_density.csv." in markdown
