"""Run folders for the viewer's tests, made by ``skilltransfer run`` through the mock server over the counter world:
a memory run (``task+text``), its no-memory baseline (``task``) and a subtask-level code run, with a failed task and
agent output that holds markup (an ``<img onerror>`` and a ``<script>``) in an observation, a thought and a skill."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from helpers_cli import cli, run_tiny
from helpers_compose import ComposeScript, plan_json
from helpers_lens import LensCounterScript
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, GivesUpOnFive, TinyEnv

from skilltransfer.coordination import Plan, PlanNode
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.embedders import HashEmbedder
from skilltransfer.memory.library import export_jsonl
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Skill

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).is_file()), None)
"""Debian's chromium, which the browser tests drive through Playwright (None: they skip)."""
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
"""Chromium's flags in the browser tests."""
XSS = "<img src=x onerror=alert(1)> <script>alert(2)</script>"
TARGETS = (3, 5, 2, 4)
PRICE = {"input": 2.0, "output": 8.0}
"""The ``task+text`` run's model price (USD per million tokens): its tasks and summary have a cost."""
FAILS = {5}
"""Targets the executor misses (it adds one too many)."""

XSS_SKILL = f"""NAME: set_counter_value
DESCRIPTION: Set the counter to a target value {XSS}
BODY:
1. Reset the counter with apis.counter.reset().
2. Add the target with apis.counter.add(<target>) and call complete_task().
Caveat: add() needs an int. <script>alert(3)</script>"""


class MarkupScript(CounterScript):
    """`CounterScript` whose executor prints markup in its first look and misses the targets in `FAILS`."""

    def execute(self, messages: list[dict[str, Any]]) -> str:  # type: ignore[override]
        reply = CounterScript.execute(messages)
        reply = reply.replace("Look first.", "Look first <b>bold?</b>.")
        reply = reply.replace("print(apis.counter.get())", f"print(apis.counter.get(), {XSS!r})")
        return re.sub(r"add\((\d+)\)", lambda m: f"add({int(m[1]) + (int(m[1]) in FAILS)})", reply)


PLAN = Plan(task_id="tiny/0", nodes=[
    PlanNode(id="v1", instructions="Read the counter.", expected_output="the counter value"),
    PlanNode(id="v2", instructions="Add 2 to the counter.", depends_on=["v1"], bindings={"start": "outputs.v1"}),
    PlanNode(id="v3", instructions="Add 3 to the counter.", depends_on=["v1"]),
    PlanNode(id="v4", instructions="Read the counter.", depends_on=["v2", "v3"],
             bindings={"a": "outputs.v2", "b": "outputs.v3"}, expected_output="the final value")])


def build_lens_run(root: Path) -> Path:
    """``root/lens/lens``: a lens-reuse run over a frozen two-skill library (scripted in-process; routing decisions
    in its retrieval steps)."""
    library = root / "lens-library.jsonl"
    export_jsonl([Skill(name="set_counter_value", description="Set the counter to a target value.",
                        body="1. Reset the counter with apis.counter.reset().\n2. Add the target with "
                             "apis.counter.add(n).\nCaveat: add() needs an int."),
                  Skill(name="bake_bread", description="Bake bread for the team.",
                        body="1. Heat the oven for the bread.\n2. Knead the bread dough.")], library)
    config = StreamConfig(run="lens", runs_dir=str(root / "lens"), condition="task", library=str(library), reuse="lens")
    env = TinyEnv([3, 5], workdir=root / "ws-lens")
    return run_stream(env, ScriptedModel(LensCounterScript(CounterScript(TEXT_SKILL))), config,
                      embedder=HashEmbedder(dim=128)).path


def build_view_runs(root: Path) -> dict[str, Path]:
    """Four runs under ``root/runs/tiny``: ``task+text`` (priced: `PRICE`), ``task``, ``subtask+code`` (over
    `TARGETS`) and a ``metaskill`` coordinated run of `PLAN`, and a lens run outside it (`build_lens_run`); name -> run
    folder."""
    out = {}
    for condition, induction in (("task+text", XSS_SKILL), ("task", XSS_SKILL), ("subtask+code", CODE_SKILL)):
        path = root / "runs" / "tiny" / condition
        priced = ("-c", f"model.price={json.dumps(PRICE)}") if condition == "task+text" else ()
        with MockServer(replies=MarkupScript(induction)) as server:
            run_tiny(server, path, condition, TARGETS, *priced)
        out[condition] = path
    out["metaskill"] = root / "runs" / "tiny" / "metaskill"
    with MockServer(ComposeScript([plan_json(PLAN)])) as server:
        run_tiny(server, out["metaskill"], "task", (5,), "--coordination", "metaskill", "-c", f"plans={root / 'plans'}")
    out["lens"] = build_lens_run(root)
    return out


def large_run(source: Path, out: Path, tasks: int) -> Path:
    """A ``tasks``-task stream: the source run's config and records repeated with new ids and positions (the task list
    reads only these)."""
    out.mkdir(parents=True)
    config = json.loads((source / "config.json").read_text())
    records = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    lines, ids = [], []
    for position in range(tasks):
        record = dict(records[position % len(records)])
        record.update(position=position, task_id=f"big/{position}", success=position % 3 != 0,
                      reward=float(position % 3 != 0))
        record["induced"] = [dict(i, skill_id=f"sk-{position}", skill_name=f"skill_{position}", status="added")
                             for i in record["induced"]][:1]
        record["retrieved"] = [dict(r, skill_id=f"sk-{p}", name=f"skill_{p}", source_position=p,
                                    source_task_id=f"big/{p}") for r in record["retrieved"]
                               for p in range(max(0, position - 3), position)][:3]
        lines.append(json.dumps(record))
        ids.append(record["task_id"])
    config["task_ids"] = ids
    (out / "config.json").write_text(json.dumps(config))
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    return out


def distinct_text_skill(_: int, messages: list[dict[str, Any]]) -> str:
    """A text skill of its own per target (none merges with another), naming the counter's calls."""
    target = int(re.findall(r"[Ss]et the counter to (-?\d+)", " ".join(str(m["content"]) for m in messages))[0])
    return (f"NAME: counter_recipe_{target}\nDESCRIPTION: Counter recipe {target} with its own words {target * 7}.\n"
            f"BODY:\n1. Reset with apis.counter.reset().\n2. Add {target} with apis.counter.add({target}).")


def build_study_report(root: Path) -> Path:
    """``root/report``: the report of the forgetting and capacity studies in miniature (scripted in-process over the
    counter world): a growing ``task+text`` source (unbounded), probes of its snapshots 0-2, and the same stream with
    its memory capped at 1 skill under fifo and lru. It has the ``forgetting_matrix`` and ``capacity_curves``
    figures and their tables."""
    from skilltransfer.report import build_report, load_runs
    from skilltransfer.report.writer import write_report

    runs = root / "runs"

    def stream(run: str, targets: tuple[int, ...], **cfg: Any) -> Path:
        config = StreamConfig(run=run, runs_dir=str(runs), agent={"harness": "paper"}, **cfg)
        return run_stream(TinyEnv(list(targets), workdir=root / "ws" / run),
                          ScriptedModel(CounterScript(distinct_text_skill)), config, embedder=HashEmbedder(dim=64)).path

    source = stream("source", TARGETS, condition="task+text", memory={"dedup_threshold": 1.01})
    for k in range(3):
        stream(f"probe/snap{k}", TARGETS, condition="task+text", library=str(source / "memory"), library_snapshot=k)
    for policy in ("fifo", "lru"):
        stream(f"cap-{policy}", TARGETS, condition="task+text",
               memory={"dedup_threshold": 1.01, "capacity": 1, "eviction": policy})
    write_report(build_report(load_runs([runs])), root / "report")
    return root / "report"


def build_model_transfer_report(root: Path) -> Path:
    """``root/report``: the model-transfer study in miniature (scripted in-process over the counter world): model
    ``a`` builds a library, model ``b`` (which gives up on 5) runs without memory and with a's library frozen."""
    from skilltransfer.report import build_report, load_runs
    from skilltransfer.report.writer import write_report

    runs = root / "runs"

    def stream(run: str, label: str, condition: str, script: CounterScript, **cfg: Any) -> Path:
        config = StreamConfig(run=run, runs_dir=str(runs), condition=condition, model={"label": label},
                              agent={"harness": "paper"}, **cfg)
        return run_stream(TinyEnv([3, 5, 2], workdir=root / "ws" / run.replace("/", "_")), ScriptedModel(script),
                          config, embedder=HashEmbedder(dim=64)).path

    build = stream("build/a", "a", "task+text", CounterScript())
    stream("none/b", "b", "task", GivesUpOnFive())
    stream("use/b", "b", "task+text", CounterScript(), library=str(build / "memory"))
    write_report(build_report(load_runs([runs])), root / "report")
    return root / "report"


LONG_SKILLS = Path(__file__).parent / "data" / "long_skills"
"""Two Agent Skills with a 64-character name and a 1,000-character description (its README)."""
DEMO_LIBRARY = Path(__file__).parents[1] / "data" / "demo_library"
STUDY_RUNS = {"none": ("task",), "induced": ("task+text",), "demo": ("task+text", "--library", str(DEMO_LIBRARY)),
              "long": ("task+text", "--library", str(LONG_SKILLS)),
              "top": ("task+text", "--library", str(DEMO_LIBRARY), "--library-filter", "top")}
"""The library study's runs: name -> condition and library flags."""


def build_library_study(root: Path) -> dict[str, Path]:
    """A library study on the bundled office env (3 tasks), run by ``skilltransfer run`` through the mock server's
    role play with a third of its replies failing: no skills, the agent's own induced skills, two frozen libraries
    (`DEMO_LIBRARY`, `LONG_SKILLS`: their runs differ only in it, so ``report`` tags the condition with it) and the
    top half of the demo library by utility (`STUDY_RUNS`), beside a cross-level grid on apps (2 tasks: two
    induced-skill streams and two over their frozen libraries); name -> run folder under ``root/study`` ("grid": the
    grid's folder)."""
    from skilltransfer.llm.testing.roleplay import RolePlay

    out = {}
    with MockServer(RolePlay(fail_rate=0.3, seed=1)) as server:
        for name, (condition, *flags) in STUDY_RUNS.items():
            out[name] = root / "study" / f"office-{name}"
            cli("run", "--env", "office", "--condition", condition, "--model", "openai/mock", "--base-url",
                server.url, "--api-key", "x", "--embedder", "hash:64", "--limit", "3", "--out", str(out[name]),
                "--no-progress", *flags)
        out["grid"] = root / "study" / "grid-cross-level"
        cli("grid", str(Path(__file__).parents[1] / "experiments" / "cross-level.yaml"), "-c", "envs=[apps]",
            "--limit", "2", "-c", "models.default.model=mock", "-c", f"models.default.base_url={server.url}",
            "-c", "models.default.api_key=x", "--embedder", "hash:64", "--out", str(out["grid"]), "--no-progress")
    return out
