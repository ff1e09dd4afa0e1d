"""Every spec in ``experiments/`` as shipped runs end to end: ``skilltransfer grid <spec> --task-limit 2`` through the
mock OpenAI-compatible endpoint, which answers every role in its reply format (`skilltransfer.llm.testing.roleplay`,
with failing replies and retried transport faults mixed in), then ``skilltransfer report``.

Each spec: exit 0, no failed stream, the streams the spec plans, every stream's tasks taken from its own env, and the
report tables the spec exists for (Table 2 always; ``coordination``, ``skill_exec``, ``library_organization``,
``reuse``, ``skills_per_run``, ``skill_effects`` and ``utility_effects``, ``forgetting``, ``capacity`` when its
streams use them). The second variant answers the inducer with text no skill can be parsed from: every stream that
reads an earlier phase's library then runs with none and says so.

The specs are globbed, so a spec added to ``experiments/`` is covered without editing this file. Settings are the
smallest that still run every stream kind: 2 tasks per stream, the hash embedder (a documented test double: the
specs' minilm is real retrieval, not what is tested here), multi-env specs as shipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import OFFICEBENCH_TASKS
from helpers_cli import main_cli

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.log import RunFolder
from skilltransfer.runner.build import build_env
from skilltransfer.runner.grid import resolve_streams
from skilltransfer.runner.plan import StreamPlan, plan_streams
from skilltransfer.runner.spec import SPEC_DIR, load_spec

SPECS = sorted(SPEC_DIR.glob("*.yaml"))
PHASED = [path for path in SPECS if any(p.library_from is not None for p in load_spec(str(path)).phases)]
FAULTS = ("rate_limit", "server_error", "disconnect", "garbage")
"""Transport faults the client retries (no ``timeout``: it stalls the answer for ``hang_s``)."""


def _officebench(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec over the real OfficeBench tasks reads them from $OFFICEBENCH_ROOT (else ../shared); skip without them."""
    if not any(entry.name.startswith("officebench") for phase in load_spec(str(path)).phases
               for entry in phase.envs.values()):
        return
    root = Path(os.environ.get("OFFICEBENCH_ROOT") or OFFICEBENCH_TASKS)
    if not root.is_dir():
        pytest.skip(f"{path.stem} runs the real OfficeBench tasks; ../shared/officebench/tasks is absent")
    monkeypatch.setenv("OFFICEBENCH_ROOT", str(root))


def _grid_args(path: Path, out: Path, url: str, *extra: str) -> list[str]:
    """Every model of the spec (``default`` in most; ``model-transfer`` has two) answered by the mock endpoint."""
    labels = sorted({label for phase in load_spec(str(path)).phases for label in phase.models})
    endpoint = [arg for label in labels for arg in (
        "-c", f"models.{label}.base_url={url}", "-c", f"models.{label}.model=mock",
        "-c", f"models.{label}.api_key=mock", "-c", f"models.{label}.backoff_base_s=0",
        "-c", f"models.{label}.max_retries=8")]
    return ["grid", str(path), "--task-limit", "2", "--embedder", "hash:64", "-q", "--out", str(out), *endpoint,
            *extra]


def _plans(path: Path, *extra: str) -> list[StreamPlan]:
    overrides = [extra[i + 1] for i in range(len(extra) - 1) if extra[i] == "-c"]
    return plan_streams(load_spec(str(path), overrides, **{"limits.task_limit": 2}))


def _expected_tables(plans: list[StreamPlan]) -> set[str]:
    """The report tables the spec's streams call for."""
    configs = [p.config for p in plans]
    wanted = {"table2_success"}
    if any(c.coordination != "none" for c in configs):
        wanted.add("coordination")
    if any(c.skill_exec != "inline" for c in configs):
        wanted.add("skill_exec")
    if any(c.library_organization != "flat" for c in configs):
        wanted.add("library_organization")
    if any(c.reuse != "flat" for c in configs):
        wanted.add("reuse")
    if any(c.has_memory for c in configs):
        wanted.add("skills_per_run")
    if any(c.mask_rate > 0 for c in configs):
        wanted |= {"skill_effects", "utility_effects"}  # diagnostics against the effects (docs/utility-effects.md)
    if any(c.library_snapshot is not None for c in configs):
        wanted |= {"forgetting", "forgetting_matrix"}
    if any(c.memory.capacity is not None for c in configs):
        wanted.add("capacity")  # capped memories against the unbounded one (docs/capacity.md)
    if any(p.source is not None and p.source.split("/")[-2] != p.run.split("/")[-2] for p in plans):
        wanted.add("model_transfer")  # a stream reads a library another model built
    return wanted


def _env_task_ids(plans: list[StreamPlan], work: Path) -> dict[str, set[str]]:
    """Every task id of each stream's env (all splits), one env built per distinct env spec."""
    by_spec: dict[str, set[str]] = {}
    ids: dict[str, set[str]] = {}
    for plan in plans:
        env = plan.config.env
        key = json.dumps([env.name, env.args, env.seed], sort_keys=True, default=str)
        if key not in by_spec:
            by_spec[key] = {t.id for t in build_env(env, work / str(len(by_spec))).tasks()}
        ids[plan.run] = by_spec[key]
    return ids


def _run(path: Path, tmp_path: Path, replies: Any, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[Path, str, list[StreamPlan]]:
    out = tmp_path / "grid"
    with MockServer(replies, fault_rate=0.02, fault_kinds=FAULTS, seed=1) as server:
        code, stdout, stderr = main_cli(_grid_args(path, out, server.url, *extra), monkeypatch, capsys)
    status = json.loads((out / "status.json").read_text())["streams"] if (out / "status.json").is_file() else {}
    failed = {run: s["error"] for run, s in status.items() if s["state"] != "done"}
    assert code == 0, (stdout[-3000:], stderr[-2000:], failed)
    assert not failed
    plans = _plans(path, *extra)
    assert set(status) == {p.run for p in plans}
    return out, stdout, plans


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_runs_end_to_end_and_reports(path, tmp_path, monkeypatch, capsys):
    _officebench(path, monkeypatch)
    out, _, plans = _run(path, tmp_path, RolePlay(fail_rate=0.1, seed=1), monkeypatch, capsys)
    env_ids = _env_task_ids(plans, tmp_path / "probe")
    for plan in plans:
        records = RunFolder(out / plan.run).read_records()
        assert len(records) == (0 if plan.config.organize else 2), plan.run  # an organise stream runs no task
        assert {r.task_id for r in records} <= env_ids[plan.run], plan.run
    report = tmp_path / "report"
    code, stdout, stderr = main_cli(["report", str(out), "--out", str(report)], monkeypatch, capsys)
    assert code == 0, (stdout[-2000:], stderr[-2000:])
    for table in _expected_tables(plans):
        rows = (report / f"{table}.csv").read_text().splitlines()
        assert len(rows) > 1, table
    assert (report / "report.md").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("path", PHASED, ids=[p.stem for p in PHASED])
def test_a_source_phase_that_induces_nothing_leaves_its_dependents_running_with_no_skills(path, tmp_path,
                                                                                         monkeypatch, capsys):
    _officebench(path, monkeypatch)
    first = next(iter(load_spec(str(path)).phases[0].envs))
    out, stdout, plans = _run(path, tmp_path, RolePlay(induce=False), monkeypatch, capsys, "-c", f"envs=[{first}]")
    status = json.loads((out / "status.json").read_text())["streams"]
    dependents = [p for p in plans if p.source is not None]
    assert dependents
    for plan in dependents:
        assert status[plan.run]["library"].startswith(f"0 skills from {plan.source}")  # distractors may follow
        assert f"library: 0 skills from {plan.source}" in stdout
    report = tmp_path / "report"
    code, _, _ = main_cli(["report", str(out), "--out", str(report)], monkeypatch, capsys)
    assert code == 0
    ran = next(p for p in dependents if not p.config.organize)
    assert f"{ran.run} (library: 0 skills from {ran.source})" in (report / "report.md").read_text()


@pytest.mark.parametrize("path", PHASED, ids=[p.stem for p in PHASED])
def test_no_stream_evaluates_the_tasks_its_library_came_from_unless_its_spec_says_so(path, monkeypatch):
    _officebench(path, monkeypatch)
    plans, tasks = resolve_streams(load_spec(str(path)))  # what grid --dry-run checks: it refuses an overlap
    for plan in plans:
        if plan.source is None or plan.config.organize:
            continue
        shared = {t.id for t in tasks[plan.run]} & {t.id for t in tasks[plan.source]}
        assert plan.same_tasks or not shared, (plan.run, sorted(shared)[:3])


def test_granularity_reuses_and_evolves_on_tasks_disjoint_from_its_source(monkeypatch):
    plans, tasks = resolve_streams(load_spec("granularity"))
    checked = [p for p in plans if p.phase in ("reuse", "evolve")]
    assert len(checked) == 10
    assert all(p.source is not None and not p.same_tasks for p in checked)
    for plan in checked:
        assert plan.config.env.split == "test"
        assert not {t.id for t in tasks[plan.run]} & {t.id for t in tasks[plan.source]}, plan.run
    evolve = next(p for p in checked if p.phase == "evolve")
    assert len(tasks[evolve.run]) == 6 + 20 + 10  # dev + val + test: the evolve phase has no task limit
    with pytest.raises(InputError, match="runs 10 of the tasks its library was induced from.*same_tasks: true"):
        resolve_streams(load_spec("granularity", ["phases.2.envs.apps.split=dev"]))
    resolve_streams(load_spec("granularity", ["phases.2.envs.apps.split=dev", "phases.2.library_from.same_tasks=true"]))


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_the_studies_index_counts_what_dry_run_counts(path, monkeypatch):
    """docs/studies/index.md says each spec's streams and tasks as `grid --dry-run` counts them (an organise stream
    runs no task)."""
    _officebench(path, monkeypatch)
    index = (Path(__file__).resolve().parents[2] / "docs" / "studies" / "index.md").read_text()
    row = next(line for line in index.splitlines() if line.startswith(f"| [{path.stem}]("))
    plans, tasks = resolve_streams(load_spec(str(path)))
    total = sum(0 if plan.config.organize else len(tasks[plan.run]) for plan in plans)
    assert f"| {len(plans)} streams, {total} tasks |" in row, row


STUDY_PAGES = sorted((Path(__file__).resolve().parents[2] / "docs" / "studies").glob("*.md"))
DRY_RUN_BLOCK = re.compile(r"`grid --dry-run` on [\d-]+:\n\n```text\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize("page", [p for p in STUDY_PAGES if DRY_RUN_BLOCK.search(p.read_text())],
                         ids=lambda p: p.stem)
def test_a_study_pages_streams_are_what_dry_run_prints(page, tmp_path, monkeypatch, capsys):
    """The stream list a study page prints ("`grid --dry-run` on DATE") is `grid <spec> --dry-run`'s, line for line
    (the output folder relative to where it ran: a folder holding the bundled ``data/``, which specs name relative to
    the repository root, as they are run)."""
    spec = SPEC_DIR / f"{page.stem}.yaml"
    assert spec.is_file(), f"{page.name} prints a dry run of no shipped spec"
    _officebench(spec, monkeypatch)
    shutil.copytree(SPEC_DIR.parent / "data", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    code, out, err = main_cli(["grid", page.stem, "--dry-run"], monkeypatch, capsys)
    assert code == 0, err
    block = DRY_RUN_BLOCK.search(page.read_text())
    assert block is not None
    printed = out.replace(f"{tmp_path.resolve()}/", "").splitlines()
    documented = block[1].splitlines()
    assert printed[:len(documented)] == documented
    assert documented[-1].endswith(f"-> runs/grid-{page.stem}")  # the whole list, to its total
