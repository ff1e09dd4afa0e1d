"""benchmarks/external_validity.py on a small checkout in SkillLearnBench's layout written here (the real one is
fetched, never committed): it checks its plan, reads every library (naming the file it cannot read), handles an
instruction longer than the embedder's window, and prints the table, the held-out split and the last line."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers_validate import TASKS, write_benchmark, write_skill

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "external_validity.py"
LAST = re.compile(r"^external validity: best model-free rho (-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]|-) on held-out "
                  r"(-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]|-); paper utility (-?\d\.\d\d|-); "
                  r"benchmark LLM coverage (-?\d\.\d\d|-)$")


def fake_checkout(root: Path) -> Path:
    """skills/ (8 generated libraries, 4 per family, and human_authored with one unreadable SKILL.md), tasks/,
    eval_keypoints/, and a results CSV in the published columns."""
    paths = write_benchmark(root, libraries=8)
    (root / "skills" / "human_authored").mkdir()
    for task, text in TASKS.items():
        write_skill(root / "skills" / "human_authored" / task / "guide", "guide", text, f"1. {text}")  # one name
    broken = root / "skills" / "human_authored" / "poem-writer" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter here\n")
    loose = root / "skills" / "lib-1" / "poem-writer" / "loose"
    loose.mkdir()
    (loose / "SKILL.md").write_text("name: loose\ndescription: Model-written: no fences\n\nBody.\n")  # read leniently
    points = json.loads(paths["key_points"].read_text())
    for task_id, items in points.items():
        folder = root / "eval_keypoints" / task_id
        folder.mkdir(parents=True)
        (folder / "skill-key-points.generated.json").write_text(json.dumps([{"key_point": p} for p in items]))
    rows = [{"library": "no_skill", "method": "no_skill", "model": "", "family": "no_skill", "coverage": "",
             "executability": "", "safety": "", "pass_rate": 10}]
    rows.append({"library": "human_authored", "method": "human_authored", "model": "", "family": "human_authored",
                 "coverage": 90, "executability": 50, "safety": 92, "pass_rate": 75})
    for k in range(8):
        family = "claude" if k % 2 == 0 else "gemini"
        rows.append({"library": f"lib-{k}", "method": f"b{k % 4 + 1}", "model": f"{family}-{k // 4}",
                     "family": family, "coverage": 30 + k, "executability": 45, "safety": 94 - k % 3,
                     "pass_rate": 15 + 5 * (k % 4) + k})
    with (root / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for k in range(8):
        (root / "skills" / f"lib-{k}").rename(root / "skills" / f"lib-{k}")
    return root


@pytest.mark.slow
def test_the_benchmark_prints_the_table_the_split_and_the_last_line(tmp_path: Path) -> None:
    root = fake_checkout(tmp_path / "SkillLearnBench")
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(BENCH), "--skilllearnbench", str(root), "--results",
                           str(root / "results.csv"), "--embedder", "hash:64", "--resamples", "300",
                           "--no-run-scripts", "--out", str(out)], capture_output=True, text=True, timeout=600,
                          env={"SKILLTRANSFER_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert LAST.match(lines[-1]), lines[-1]
    assert "rho, claude 4" in done.stdout
    assert "rho, gemini 4" in done.stdout
    assert "human_authored: 1: " in done.stdout
    assert "no YAML front matter" in done.stdout
    assert "instructions: 6, 1 longer than the embedder's window" in done.stdout
    assert "(1 read leniently" in done.stdout
    data = json.loads(out.read_text())
    plan = yaml.safe_load((BENCH.parent / "external_validity_plan.yaml").read_text())
    assert list(data["diagnostics"]) == [d["name"] for d in plan["diagnostics"] if d["class"] != "llm"]
    assert data["best"] in [d["name"] for d in plan["diagnostics"] if d["class"] == "model-free"]
    assert len(data["units"]) == 8
    assert len(data["with_human"]["units"]) == 9
    assert {row["grouping"] for row in data["groups"]} == {"method", "model"}
    assert data["last_line"] == lines[-1]


@pytest.mark.slow
def test_the_benchmark_adds_the_llm_rubric_through_an_endpoint(tmp_path: Path) -> None:
    from skilltransfer.llm.testing.mock_server import MockServer
    from skilltransfer.llm.testing.roleplay import RolePlay

    root = fake_checkout(tmp_path / "SkillLearnBench")
    out = tmp_path / "result.json"
    with MockServer(RolePlay(fail_rate=0.2, seed=4)) as server:
        done = subprocess.run([sys.executable, str(BENCH), "--skilllearnbench", str(root), "--results",
                               str(root / "results.csv"), "--embedder", "hash:64", "--resamples", "300",
                               "--no-run-scripts", "--model", f"mock@{server.url}", "--api-key", "x", "--out",
                               str(out)], capture_output=True, text=True, timeout=600,
                              env={"SKILLTRANSFER_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                                   "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert LAST.match(done.stdout.strip().splitlines()[-1])
    data = json.loads(out.read_text())
    assert {"llm_coverage", "llm_executability", "llm_safety"} <= set(data["diagnostics"])
    assert data["kinds"]["llm_coverage"] == "llm"
    assert data["rubric"]["usage"]["calls"] > 50
    assert data["rubric"]["usage"]["unparsed"] >= 1
