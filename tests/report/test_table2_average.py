"""Table 2's Average is the paper's estimand: the plain mean of the env averages (stratified task-bootstrap CI), the
task-pooled mean its own named row; each env is scored by its benchmark's official metric unless --metric says."""

from __future__ import annotations

import pytest

from skilltransfer.envs.registry import ENVS, official_metric, resolve
from skilltransfer.log import TaskRecord
from skilltransfer.metrics import stratified_bootstrap_ci
from skilltransfer.report.runs import RunLog
from skilltransfer.report.success import ALL_ENVS, POOLED, table2
from skilltransfer.settings.config import EnvSpec, ModelSpec, StreamConfig
from skilltransfer.settings.recorded import RunSettings


def run(env: str, condition: str, results: list[tuple[bool, float]]) -> RunLog:
    """A loaded run of ``env`` (the registry name its config records) with one record per (success, reward)."""
    config = StreamConfig(run=f"{env}-{condition}", env=EnvSpec(env=env), model=ModelSpec(label="m"),
                          condition=condition)
    log = RunSettings.model_construct(config=config)
    records = [TaskRecord.model_construct(task_id=f"{env}/{i}", success=ok, reward=reward, difficulty=1)
               for i, (ok, reward) in enumerate(results)]
    return RunLog(path=config.path, log=log, records=records)


def row(table, env: str, condition: str = "task") -> dict:
    return table.where(env=env, condition=condition)[0]


def test_macro_average_is_the_mean_of_env_averages_and_pooled_is_named() -> None:
    runs = [run("apps", "task", [(True, 1.0)] * 2), run("office", "task", [(False, 0.0)] * 4)]
    table = table2(runs)
    assert row(table, ALL_ENVS)["success_pct"] == pytest.approx(50.0)  # (100 + 0) / 2: the paper's Average
    assert row(table, POOLED)["success_pct"] == pytest.approx(100 / 3)  # 2 of 6 tasks
    assert row(table, ALL_ENVS)["n_tasks"] == 6
    # the CI resamples tasks within each env: both envs are constant, so the Average cannot move
    assert (row(table, ALL_ENVS)["ci_low"], row(table, ALL_ENVS)["ci_high"]) == pytest.approx((50.0, 50.0))


def test_macro_ci_and_paired_delta_are_stratified() -> None:
    apps = [(i % 2 == 0, 0.0) for i in range(6)]
    office = [(i % 3 == 0, 0.0) for i in range(9)]
    apps_mem = [(True, 0.0)] * 6
    office_mem = [(i % 3 != 2, 0.0) for i in range(9)]
    runs = [run("apps", "task", apps), run("office", "task", office), run("apps", "task+text", apps_mem),
            run("office", "task+text", office_mem)]
    table = table2(runs, seed=3)
    mean, low, high = stratified_bootstrap_ci([[float(s) for s, _ in apps_mem], [float(s) for s, _ in office_mem]],
                                              seed=3)
    got = row(table, ALL_ENVS, "task+text")
    assert (got["success_pct"], got["ci_low"], got["ci_high"]) == pytest.approx((100 * mean, 100 * low, 100 * high))
    diffs = [[float(a[0]) - float(b[0]) for a, b in zip(apps_mem, apps, strict=True)],
             [float(a[0]) - float(b[0]) for a, b in zip(office_mem, office, strict=True)]]
    d_mean, d_low, d_high = stratified_bootstrap_ci(diffs, seed=3)
    assert (got["delta_pts"], got["delta_ci_low"], got["delta_ci_high"], got["delta_tasks"]) == pytest.approx(
        (100 * d_mean, 100 * d_low, 100 * d_high, 15))
    assert got["baseline"] == "task"


def test_each_env_reports_its_official_metric_and_metric_overrides_all() -> None:
    runs = [run("apps", "task", [(True, 1.0), (False, 0.5)]), run("datasci", "task", [(False, 0.25), (False, 0.75)])]
    table = table2(runs)
    assert (row(table, "apps")["metric"], row(table, "apps")["success_pct"]) == ("success", pytest.approx(50.0))
    assert (row(table, "datasci")["metric"], row(table, "datasci")["success_pct"]) == ("reward", pytest.approx(50.0))
    assert row(table, ALL_ENVS)["metric"] == "reward/success"
    forced = table2(runs, metric="success")
    assert (row(forced, "datasci")["metric"], row(forced, "datasci")["success_pct"]) == ("success", 0.0)
    assert table2(runs, metric="reward").where(env="apps")[0]["success_pct"] == pytest.approx(75.0)


def test_every_env_declares_its_official_metric() -> None:
    declared = {name: resolve(target).official_metric for name, target in ENVS.items() if name != "scienceworld"}
    assert declared == {"apps": "success", "office": "success", "datasci": "reward"}
    assert official_metric("officebench:/any/tasks") == "success"
    assert official_metric("mypkg.envs:Plugin") == "success"  # a report never imports a module a run log names
    assert official_metric("") == "success"
