"""``score --effects`` as ``report`` keeps the runs apart (one row per env, condition and skill, every arm that reads
a library), its warnings when the runs read another library, and where a library retrieval names its library
(results.jsonl, ``show``, the viewer). The runs are real streams of a scripted world (benchmarks/utility_effects.py)
over a frozen library, alone and beside the agent's own memory, in two envs."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers_bench import load_benchmark
from helpers_cli import main_cli

from skilltransfer.errors import InputError
from skilltransfer.memory import HashEmbedder, export_jsonl
from skilltransfer.report import EmbedderResolver, build_report, load_runs


@pytest.fixture(scope="module")
def world() -> ModuleType:
    return load_benchmark("utility_effects")


@pytest.fixture(scope="module")
def runs(world: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two envs x two arms (the library alone; beside the agent's own memory), mask rate 0.5, 10 tasks each."""
    from skilltransfer.llm.testing import ScriptedModel
    from skilltransfer.runner.stream import run_stream
    from skilltransfer.settings.config import StreamConfig

    root = tmp_path_factory.mktemp("groups")
    skills, relevance = world.library(2)
    effects = {name: world.effect_of(value) for name, value in relevance.items()}
    library = export_jsonl(skills, root / "lib.jsonl")
    for env in ("north", "south"):
        for use in ("instead", "beside"):
            config = StreamConfig(run=f"{env}-{use}", runs_dir=str(root / "runs"), condition="task+text",
                                  library=str(library), library_use=use, env={"label": env}, embedder=world.EMBEDDER,
                                  mask_rate=0.5, mask_seed=1 if env == "north" else 2,
                                  agent={"top_k": world.LEVELS, "harness": "paper"}, memory={"validate_code": False})
            run_stream(world.VariedEnv(effects, 2, 5, 0, root / f"work-{env}-{use}"),
                       ScriptedModel(world.WORLD.planted_agent), config, embedder=HashEmbedder(world.DIM))
    return root


def test_report_has_diagnostics_rows_for_the_library_beside_the_memory(runs: Path):
    report = build_report(load_runs([runs / "runs"]), embedder_of=EmbedderResolver())
    beside = [r for r in report.table("utility_effects_skills").rows if "+memory" in r["condition"]]
    assert {r["env"] for r in beside} == {"north", "south"}  # the runs' memory holds none of the library's skills
    assert all(r["utility"] is not None for r in beside)
    summary = [r for r in report.table("utility_effects").rows if "+memory" in r["condition"]]
    assert summary
    assert not any("not in the runs'" in r["why"] for r in summary)


def _score(library: Path, runs: Path, **kwargs: object) -> Any:
    from skilltransfer.commands.score import score
    from skilltransfer.metrics.scoring import GroupedScore

    options: dict[str, object] = {"embedder": None, "field": None, "top": None, "out": None, "seed": 0,
                                  "embed_cache": False, "effects": [runs / "runs"], **kwargs}
    result = score(library, None, **options)  # type: ignore[arg-type]
    assert isinstance(result, GroupedScore)
    return result


def test_score_effects_gives_report_s_rows_per_env_arm_and_skill(runs: Path, capsys: pytest.CaptureFixture[str]):
    scored = _score(runs / "lib.jsonl", runs)
    screen = capsys.readouterr().out
    report = build_report(load_runs([runs / "runs"]), embedder_of=EmbedderResolver())
    expected = report.table("utility_effects_skills").rows
    arms = {row["condition"] for row in expected}
    assert len(arms) == 2  # the library alone and beside the memory: both arms have rows in report now
    assert {row["env"] for row in expected} == {"north", "south"}
    assert [(g.env, g.condition) for g in scored.groups] == list(dict.fromkeys((r["env"], r["condition"])
                                                                                 for r in expected))  # report's order
    got = {(g.env, g.model, g.condition, row.id): row for g in scored.groups for row in g.report.skills
           if row.effect is not None}
    want = {(r["env"], r["model"], r["condition"], r["skill_id"]): r for r in expected
            if r["success_effect"] is not None}
    assert set(got) == set(want)
    for key, row in got.items():
        other = want[key]
        assert (row.effect, row.effect_low, row.effect_high, row.shown, row.withheld, row.harmful) == (
            other["success_effect"], other["success_low"], other["success_high"], other["shown"], other["withheld"],
            other["harmful"]), key
        assert row.utility == pytest.approx(other["utility"])
    effects = {(r["env"], r["condition"], r["skill_id"]): r for r in report.table("skill_effects").rows}
    assert {(env, cond, sid) for env, _, cond, sid in got} <= set(effects)
    assert screen.count("== group ") == 4
    assert "effect [95% CI]" in screen


def test_pool_says_it_pools_and_gives_one_group(runs: Path, capsys: pytest.CaptureFixture[str]):
    scored = _score(runs / "lib.jsonl", runs, pool=True)
    assert len(scored.groups) == 1
    assert scored.pooled
    assert len(scored.groups[0].runs) == 4
    assert "every run pooled: --pool" in capsys.readouterr().out


def test_runs_of_another_library_are_refused_or_warned(world: ModuleType, runs: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]):
    from skilltransfer.skill import Skill

    other = export_jsonl([Skill(name=f"other{i}", description=f"other skill {i} about kayaks", body="-")
                          for i in range(3)], tmp_path / "other.jsonl")
    with pytest.raises(InputError, match="none of the 8 skills its runs masked is in") as caught:
        _score(other, runs)
    assert "lib.jsonl" in str(caught.value)  # names the library the runs read
    skills, _ = world.library(2)
    half = export_jsonl(skills[:4], tmp_path / "half.jsonl")
    scored = _score(half, runs)
    err = capsys.readouterr().err
    assert "warning:" in err
    assert "4 of the 8 skills its runs masked are not in" in err
    assert all(len(g.report.skills) == 4 for g in scored.groups)


def test_grouped_json_and_csv_name_groups_library_task_set_and_version(runs: Path, tmp_path: Path):
    from skilltransfer.metrics.scoring import REPORT_FORMAT_VERSION
    from skilltransfer.version import __version__

    out = tmp_path / "g.json"
    _score(runs / "lib.jsonl", runs, out=out)
    data = json.loads(out.read_text())
    assert data["format_version"] == REPORT_FORMAT_VERSION == 3
    assert (data["library"], data["task_set"], data["toolkit_version"]) == (
        str(runs / "lib.jsonl"), "the runs' own tasks", __version__)
    assert [g["env"] for g in data["groups"]] == ["north", "north", "south", "south"]
    assert all(g["skills"] and g["effects"]["masked"] >= 1 for g in data["groups"])
    csv_out = tmp_path / "g.csv"
    _score(runs / "lib.jsonl", runs, out=csv_out)
    header, *rows = csv_out.read_text().splitlines()
    assert header.startswith("env,model,condition,rank,name,")
    assert {"library", "task_set", "toolkit_version", "effects_from"} <= set(header.split(","))
    assert len(rows) == 4 * 8


# --------------------------------------------------------------------------------------------- library retrievals
def test_a_library_retrieval_names_its_library_in_the_record_show_and_view(runs: Path, monkeypatch, capsys):
    from skilltransfer.log import RunFolder
    from skilltransfer.view import Catalog

    run = runs / "runs" / "north-instead"
    records = list(RunFolder(run).read_records())
    hits = [hit for record in records for hit in record.retrieved]
    assert hits
    assert {(hit.source, hit.library) for hit in hits} == {("library", "lib.jsonl")}
    beside = [hit for record in RunFolder(runs / "runs" / "north-beside").read_records() for hit in record.retrieved]
    assert {(hit.source, hit.library) for hit in beside} == {("library", "lib.jsonl")}
    code, out, _ = main_cli(["show", str(run), "--task", "1"], monkeypatch, capsys)
    assert code == 0
    assert "from library lib.jsonl" in out
    assert "from ? (task ?)" not in out
    catalog = Catalog([runs / "runs"])
    key = next(r["key"] for r in catalog.index()["runs"] if r["label"].endswith("north-instead"))
    tasks = catalog.run(key)["tasks"]
    assert {(h["source"], h["library"]) for t in tasks for h in t["retrieved"]} == {("library", "lib.jsonl")}
