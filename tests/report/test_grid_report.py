"""End to end: ``skilltransfer grid`` (2 counter envs x 6 conditions, a scripted model behind the mock server), then
``skilltransfer report`` on the grid's folder; every checked table is recomputed here from the run folders' logs
(``results.jsonl``, trajectories, ``memory/skills.jsonl``) with the public ``skilltransfer.metrics`` functions."""

from __future__ import annotations

import csv
import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_cli import main_output
from helpers_grid import spec_data, write_spec
from helpers_runs import PNG, skill_reply
from helpers_tinyenv import CounterScript

from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.metrics import (
    binned_spearman,
    bootstrap_ci,
    score_library,
    stratified_bootstrap_ci,
    transfer_density,
)
from skilltransfer.settings.config import CONDITIONS
from skilltransfer.skill import Skill

ENVS = {"graded": {"env": "helpers_runs:GradedTinyEnv", "args": {"targets": [3, 5, 2, 7, 4, 9, 6]}},
        "plain": {"env": "helpers_tinyenv:TinyEnv", "args": {"targets": [13, 20, 17, 14, 19], "start": 2}}}
"""Two counter-env variants: different targets, instruction styles (context sentences) and difficulty labels."""
TARGETS = {env: entry["args"]["targets"] for env, entry in ENVS.items()}
ALL = list(CONDITIONS)
LEVELS = ("task", "subtask")


def seen_condition(prompt: str) -> str:
    """What an executor prompt reveals about its stream's condition: agent level and retrieved skill format."""
    level = "subtask" if "# Current subtask" in prompt else "task"
    kind = "code" if "### Code skill:" in prompt else "text" if "### Skill:" in prompt else "none"
    return f"{level}/{kind}"


def fails(mode: str, target: int) -> bool:
    """The scripted model's fixed mistakes: about 40 % of (condition seen, target) pairs add one too many."""
    return random.Random(f"{mode}/{target}").random() < 0.4


class GridScript(CounterScript):
    """``CounterScript`` whose executor fails a deterministic, condition-dependent subset of tasks; induction replies
    depend on the task's target (not on call order), so concurrent streams induce the same skills on every run."""

    def __init__(self) -> None:
        super().__init__(self.induce)

    @staticmethod
    def induce(_n: int, messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m["content"]) for m in messages)
        targets = re.findall(r"[Ss]et the counter to (-?\d+)", text)  # none for the "read the counter" subtask
        return skill_reply("code" if "Skill format: code" in text else "text")(int(targets[0]) if targets else 0,
                                                                             messages)

    def execute(self, messages: list[dict[str, Any]]) -> str:  # type: ignore[override]
        reply = CounterScript.execute(messages)
        mode = seen_condition(str(messages[1]["content"]))
        return re.sub(r"add\((\d+)\)", lambda m: f"add({int(m[1]) + fails(mode, int(m[1]))})", reply)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(grid out folder, report folder): the grid and the report, both through the CLI."""
    root = tmp_path_factory.mktemp("grid_report")
    with MockServer(GridScript(), latency_s=0.005) as server:
        spec = write_spec(root, spec_data(root, server.url, envs=ENVS, memory={"validate_code": False}))
        code, output = main_output("grid", str(spec), "--no-progress", "--allow-import", "helpers_runs",
                                   "--allow-import", "helpers_tinyenv")
    assert code == 0, output
    assert "12 streams run, 0 already finished, 0 failed" in output
    code, output = main_output("report", str(root / "out"), "--out", str(root / "report"), "--embedder", "hash:64")
    assert code == 0, output
    return root / "out", root / "report"


# --------------------------------------------------------------------------------------------- the logs, by hand
def records(out: Path, env: str, condition: str) -> list[dict[str, Any]]:
    """A run's ``results.jsonl`` lines in stream order."""
    path = out / env / "mock" / condition / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["position"])


def per_task(out: Path, env: str, condition: str) -> dict[str, float]:
    return {r["task_id"]: float(r["success"]) for r in records(out, env, condition)}


def events(out: Path, env: str, condition: str) -> list[tuple[int, int]]:
    """(source_position, position) of each transfer event: a task retrieved a skill an earlier task of the same run
    induced, once per task and skill (docs/metrics.md)."""
    return [(source, r["position"]) for r in records(out, env, condition)
            for source in {item["skill_id"]: item["source_position"] for item in r["retrieved"]}.values()
            if source is not None and source < r["position"]]


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def pick(rows: list[dict[str, str]], **match: Any) -> dict[str, str]:
    hits = [r for r in rows if all(r[k] == str(v) for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def floats(row: dict[str, str], *columns: str) -> tuple[float, ...]:
    return tuple(float(row[c]) for c in columns)


# --------------------------------------------------------------------------------------------- tests
def test_grid_wrote_every_stream_and_success_varies_by_condition(made: tuple[Path, Path]) -> None:
    out, _ = made
    success = {}
    orders: dict[str, list[str]] = {}
    for env, targets in TARGETS.items():
        for condition in ALL:
            logs = records(out, env, condition)
            assert sorted(r["task_id"] for r in logs) == sorted(f"tiny/{i}" for i in range(len(targets)))
            orders.setdefault(env, [r["task_id"] for r in logs])
            assert [r["task_id"] for r in logs] == orders[env]  # one order seed: every condition sees one stream
            assert (out / env / "mock" / condition / "memory").is_dir() == (CONDITIONS[condition][1] is not None)
            success[(env, condition)] = np.mean([r["success"] for r in logs])
    assert 0 < min(success.values()) < max(success.values()) <= 1
    assert len(set(success.values())) >= 5
    for env, targets in TARGETS.items():  # the no-memory runs failed exactly where the policy adds one too many
        for level in LEVELS:
            outcome = {r["task_id"]: r["success"] for r in records(out, env, level)}
            assert outcome == {f"tiny/{i}": not fails(f"{level}/none", t) for i, t in enumerate(targets)}
    # the policy saw the condition: memory runs retrieved skills of their own format after the first task
    for env in TARGETS:
        assert all(r["retrieved"] for r in records(out, env, "subtask+code")[1:])
        assert not any(r["retrieved"] for r in records(out, env, "task"))


def test_table2_matches_bootstrap_of_the_logs(made: tuple[Path, Path]) -> None:
    out, report = made
    rows = read_csv(report / "table2_success.csv")
    assert len(rows) == 4 * len(ALL)  # two envs, one model, plus the macro Average and the pooled rows
    for env in TARGETS:
        for condition in ALL:
            values = per_task(out, env, condition)
            mean, low, high = bootstrap_ci(list(values.values()))
            row = pick(rows, env=env, model="mock", condition=condition)
            assert (int(row["n_runs"]), int(row["n_tasks"])) == (1, len(TARGETS[env]))
            assert floats(row, "success_pct", "ci_low", "ci_high") == pytest.approx((100 * mean, 100 * low, 100 * high))
            base_name = condition.split("+")[0]
            if base_name == condition:
                assert (row["baseline"], row["delta_pts"], row["delta_ci_low"]) == ("", "", "")
                continue
            base = per_task(out, env, base_name)
            _, d_low, d_high = bootstrap_ci([values[t] - base[t] for t in sorted(base)])
            assert row["baseline"] == base_name
            assert floats(row, "delta_pts", "delta_ci_low", "delta_ci_high") == pytest.approx(
                (100 * (mean - np.mean(list(base.values()))), 100 * d_low, 100 * d_high))
    for condition in ALL:  # all envs: the mean of the env means (stratified CI), and the tasks of both pooled
        strata = [list(per_task(out, env, condition).values()) for env in sorted(TARGETS)]
        pooled = [v for stratum in strata for v in stratum]
        mean, low, high = stratified_bootstrap_ci(strata)
        assert mean == pytest.approx(float(np.mean([np.mean(s) for s in strata])))
        row = pick(rows, env="(all envs)", model="Average", condition=condition)
        assert (int(row["n_runs"]), int(row["n_tasks"])) == (2, len(pooled))
        assert floats(row, "success_pct", "ci_low", "ci_high") == pytest.approx((100 * mean, 100 * low, 100 * high))
        mean, low, high = bootstrap_ci(pooled)
        row = pick(rows, env="(all envs, pooled)", model="Average", condition=condition)
        assert floats(row, "success_pct", "ci_low", "ci_high") == pytest.approx((100 * mean, 100 * low, 100 * high))


def test_difficulty_strata_match_bootstrap_of_the_logs(made: tuple[Path, Path]) -> None:
    out, report = made
    rows = read_csv(report / "fig4_difficulty.csv")
    for env in TARGETS:
        for condition in ALL:
            logs = records(out, env, condition)
            difficulty = {r["task_id"]: r["difficulty"] for r in logs}
            expected = {f"tiny/{i}": 1 + i % 3 if env == "graded" else 1 for i in range(len(logs))}
            assert difficulty == expected  # what the envs label
            values = per_task(out, env, condition)
            for level in sorted(set(expected.values())):
                stratum = [v for t, v in values.items() if difficulty[t] == level]
                mean, low, high = bootstrap_ci(stratum)
                row = pick(rows, env=env, condition=condition, difficulty=level)
                assert int(row["n_tasks"]) == len(stratum)
                assert floats(row, "success_pct", "ci_low", "ci_high") == pytest.approx(
                    (100 * mean, 100 * low, 100 * high))
    assert len(rows) == len(ALL) * (3 + 1)


def test_transfer_density_matches_the_logs(made: tuple[Path, Path]) -> None:
    out, report = made
    rows = read_csv(report / "fig6_transfer_density.csv")
    assert len(rows) == 2 * len(TARGETS)
    for env, targets in TARGETS.items():
        n = len(targets)
        for level in LEVELS:
            pooled = events(out, env, f"{level}+text") + events(out, env, f"{level}+code")
            expected = transfer_density(pooled, n, min(50, n))
            row = pick(rows, env=env, level=level)
            assert (int(row["n_runs"]), int(row["n_items"]), int(row["bins"])) == (2, n, n)
            assert (int(row["n_events"]), int(row["n_within_bin"])) == (expected.n_events, expected.n_within_bin)
            assert float(row["density"]) == pytest.approx(expected.density)
            assert 0 < float(row["density"]) <= 1


def test_skills_per_run_match_the_logs_and_memory(made: tuple[Path, Path]) -> None:
    out, report = made
    rows = read_csv(report / "skills_per_run.csv")
    assert len(rows) == len(TARGETS) * len(ALL)
    for env, targets in TARGETS.items():
        for condition in ALL:
            logs = records(out, env, condition)
            row = pick(rows, env=env, model="mock", condition=condition)
            statuses = [item["status"] for r in logs for item in r["induced"]]
            retrieved = [item["skill_id"] for r in logs for item in r["retrieved"]]
            assert int(row["tasks"]) == len(logs)
            assert float(row["success_pct"]) == pytest.approx(100 * np.mean([r["success"] for r in logs]))
            assert [int(row[c]) for c in ("written", "merged", "dropped", "pruned")] == \
                [statuses.count(s) for s in ("added", "merged", "dropped", "pruned")]
            assert (int(row["retrievals"]), int(row["distinct_retrieved"])) == (len(retrieved), len(set(retrieved)))
            assert int(row["memory_size"]) == logs[-1]["memory_size"]
            memory = out / env / "mock" / condition / "memory" / "skills.jsonl"
            if CONDITIONS[condition][1] is None:
                assert (row["written"], row["transfer_density"]) == ("0", "")
                assert not memory.exists()
                continue
            assert int(row["written"]) >= 1
            assert int(row["memory_size"]) == len(memory.read_text().splitlines())
            found = events(out, env, condition)
            assert int(row["transfer_events"]) == len(found)
            n = len(targets)
            assert float(row["transfer_density"]) == pytest.approx(transfer_density(found, n, min(50, n)).density)


def test_spearman_of_retrieved_utility_matches_the_logs(made: tuple[Path, Path]) -> None:
    out, report = made
    embedder = HashEmbedder(64)
    by_level: dict[str, list[tuple[float, float]]] = {level: [] for level in LEVELS}
    for env in sorted(TARGETS):
        for condition in ALL:  # the report's row order: env, model, condition
            if CONDITIONS[condition][1] is None:
                continue
            folder = out / env / "mock" / condition
            logs = records(out, env, condition)
            skills = [Skill.model_validate_json(line) for line in
                      (folder / "memory" / "skills.jsonl").read_text().splitlines() if line.strip()]
            instructions = [json.loads((folder / r["trajectory"]).read_text())["instruction"] for r in logs]
            scores = {s.id: s.utility for s in score_library(skills, instructions, embedder).skills}
            for record in logs:
                ids = sorted({item["skill_id"] for item in record["retrieved"]} & set(scores))
                if ids:
                    by_level[CONDITIONS[condition][0]].append((float(np.mean([scores[i] for i in ids])),
                                                               float(record["success"])))
    rows = read_csv(report / "fig5a_spearman.csv")
    assert [r["level"] for r in rows] == list(LEVELS)
    for level, points in by_level.items():
        result = binned_spearman([p[0] for p in points], [p[1] for p in points], 10)
        row = pick(rows, level=level)
        assert (int(row["n_tasks"]), int(row["n_bins"])) == (len(points), 10)
        assert len(points) >= 10
        assert floats(row, "rho", "p_value") == pytest.approx((result.rho, result.p_value))
        assert -1 <= result.rho <= 1  # defined: the bins differ in utility and in success
        bins = [r for r in read_csv(report / "fig5a_utility_bins.csv") if r["level"] == level]
        assert [int(b["n"]) for b in bins] == [b.n for b in result.bins]
        assert [float(b["success_pct"]) for b in bins] == pytest.approx([100 * b.y_mean for b in result.bins])


def test_figures_are_non_empty_pngs_with_the_right_panels(made: tuple[Path, Path]) -> None:
    _, report = made
    meta = json.loads((report / "figures" / "figures.json").read_text())
    # two envs: two budget panels each, one difficulty / utility-kind / heatmap panel each; two agent levels
    assert {name: entry["panels"] for name, entry in meta.items()} == {
        "fig3_budget": 4, "fig4_difficulty": 2, "fig5a_utility_bins": 2, "fig5b_components": 2,
        "fig5cde_utility_by_kind": 2, "fig6_transfer_density": 2}
    markdown = (report / "report.md").read_text()
    for entry in meta.values():
        data = (report / entry["file"]).read_bytes()
        assert data.startswith(PNG)
        assert len(data) > 10_000
        assert f"]({entry['file']})" in markdown
    assert "12 runs, 72 finished tasks; envs: graded, plain; models: mock." in markdown
