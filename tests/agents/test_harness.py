"""The harness seam (issue 29): each guard alone through the real loop with a scripted model (it fires, and stays
silent when switched off), the presets and their resolution, the ``paper`` agent's prompts, and the loop modules,
which name no guard."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers_tinyenv import DOCS, TEXT_SKILL, CounterScript, TinyEnv, role_of, task_start

from skilltransfer.agents import Agent, InductionStep, PlanStep, SummaryStep
from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.harness import BY_NAME, GUARDS, PRESETS, default_preset, make_harness, resolve_agent
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.errors import InputError
from skilltransfer.induction import Inducer
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory import SkillMemory
from skilltransfer.report.summary import summarize_run
from skilltransfer.runner.stream import run_stream
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Skill

EXAMPLE = '''## Example (another task): "Set the counter to 2."
Thought: Reset first.
```python
print(apis.counter.reset())
```
Observation: 0
Thought: Now add 2 and finish.
```python
apis.counter.add(2)
complete_task()
```
Observation: Task marked as complete.
'''
PLAN = '''## Example plan (another task): "Set the counter to 2."
SUBTASK: reset the counter
SUBTASK: add 2 and call complete_task()
'''
READ = "```python\nprint(apis.counter.get())\n```"
DONE_CODE = "```python\ncomplete_task()\n```"
AGENT_GUARDS = [spec.name for spec in GUARDS if spec.where == "agent"]


@dataclasses.dataclass
class Run:
    result: Any
    score: Any
    model: ScriptedModel


def _solve(tmp_path: Path, script: Any, *, guards: list[str], docs: str = DOCS, instruction: str | None = None,
           **config: Any) -> Run:
    env = TinyEnv([4], workdir=tmp_path / f"ws-{len(guards)}")
    env.docs = docs
    task = env.tasks()[0]
    if instruction is not None:
        task = dataclasses.replace(task, instruction=instruction)
    model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
    episode = env.start(task)
    try:
        result = Agent(model, harness="custom", guards=guards, **config).run(episode)
        return Run(result, episode.evaluate(), model)
    finally:
        episode.close()


def _replies(*replies: str) -> Callable[[list[dict[str, Any]]], str]:
    """A task-level executor replying ``replies`` in turn (the last one again when they run out)."""
    seq = list(replies)

    def reply(messages: list[dict[str, Any]]) -> str:
        n = sum(1 for m in messages[task_start(messages):] if m["role"] == "assistant")
        return seq[min(n, len(seq) - 1)]

    return reply


def _subtask_script(plans: list[str], executor: list[str], summary: str = "- the counter was read",
                    induction: str = TEXT_SKILL) -> Callable[[list[dict[str, Any]]], str]:
    """Planner replies by planner turn (the last one again), executor replies by step of the current subtask."""

    turns = {"n": 0}

    def reply(messages: list[dict[str, Any]]) -> str:
        role = role_of(messages)
        if role == "planner":
            user = messages[1]["content"]
            if "# Subtasks so far" in user:  # the subtask_history guard lists them
                done = len(re.findall(r"^\d+\. ", user.split("# Subtasks so far")[1], re.MULTILINE))
            else:  # the paper's planner sees goal and summary only: count the planner's fresh turns
                done = turns["n"] if len(messages) == 2 else max(0, turns["n"] - 1)
                turns["n"] += len(messages) == 2
            return plans[min(done, len(plans) - 1)]
        if role == "summarizer":
            return summary
        if role == "induction":
            return induction
        return _replies(*executor)(messages)

    return reply


def _records(result: Any, guard: str) -> list[Any]:
    return [r for step in result.steps for r in getattr(step, "guards", []) if r.guard == guard]


# --------------------------------------------------------------------------------------------- one guard at a time
def _stop_sequence(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, _replies("Add.\n```python\nprint(apis.counter.add(4))\n```\nObservation: 4", DONE_CODE),
                 guards=guards)
    shown = run.model.calls[1][2]["content"]
    return run.model.params[0].get("stop") == ["\nObservation:"] and "Observation: 4" not in shown


def _example_plan(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, CounterScript(), guards=guards, docs=f"{DOCS}\n\n{PLAN}", level="subtask")
    executor = [c for c in run.model.calls if role_of(c) == "executor"]
    planner = [c for c in run.model.calls if role_of(c) == "planner"]
    return "## Example plan" not in executor[0][0]["content"] and planner[0][0]["content"].rstrip().endswith(
        "SUBTASK: add 2 and call complete_task()")


def _subtask_history(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, CounterScript(), guards=guards, level="subtask")
    planner = [c for c in run.model.calls if role_of(c) == "planner"]
    shown = ["# Subtasks so far" in c[1]["content"] for c in planner]
    assert all(shown) or not any(shown)
    return len(planner) >= 2 and all(shown) and "# Subtasks so far\n1. Read the current counter value. -> " in \
        planner[1][1]["content"]


def _demonstration(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, CounterScript(), guards=guards, docs=f"{DOCS}\n\n{EXAMPLE}")
    first = run.model.calls[0]
    return len(first) > 2 and "## Example (another task)" not in first[0]["content"]


def _error_hints(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, _replies("```python\nimport apis.counter\n```", DONE_CODE), guards=guards)
    return "is not a module you can import" in run.result.actions[0].observation and bool(
        _records(run.result, "error_hints"))


def _stuck_detection(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, _replies("```python\napis.counter.add('x')\n```"), guards=guards, step_limit=8)
    return run.result.exit_status == "stuck"


def _premature_done(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, lambda messages: "DONE", guards=guards, level="subtask")
    plans = [s for s in run.result.steps if isinstance(s, PlanStep)]
    return plans[0].refused == "premature_planner_done"


def _planner_copies(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: 1. Read the counter -> stuck: it looped", "DONE"],
                             [READ, "SUBTASK DONE: 0"])
    run = _solve(tmp_path, script, guards=guards, level="subtask")
    plans = [s for s in run.result.steps if isinstance(s, PlanStep)]
    return plans[0].subtask == "Read the counter"


def _repeated_subtask(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: Read the counter."], [READ, "SUBTASK DONE: it is 0"])
    run = _solve(tmp_path, script, guards=guards, level="subtask", subtask_limit=3)
    return any(isinstance(s, PlanStep) and s.refused == "repeated_subtask" for s in run.result.steps)


def _closing_subtask(tmp_path: Path, guards: list[str]) -> bool:
    def executor(messages: list[dict[str, Any]]) -> str:
        if "Finish the task now" in messages[task_start(messages)]["content"]:
            return "```python\napis.counter.add(4)\ncomplete_task()\n```"
        return _replies(READ, "SUBTASK DONE: it is 0")(messages)

    script = _subtask_script(["SUBTASK: Read the counter.", "DONE"], [])
    run = _solve(tmp_path, lambda m: executor(m) if role_of(m) == "executor" else script(m), guards=guards,
                 level="subtask")
    return any(isinstance(s, PlanStep) and s.decision == "closing" for s in run.result.steps) and run.score.success


def _done_on_repeat(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: Read the counter.", "DONE"],
                             [READ, f"SUBTASK DONE: it is 0\n{READ}", "SUBTASK DONE: it is 0"])
    run = _solve(tmp_path, script, guards=guards, level="subtask")
    return len(run.result.actions) == 2 and run.result.actions[1].observation.startswith("(subtask marked done")


def _early_completion(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: Read the counter.", "DONE"],
                             ["```python\nprint(apis.counter.get())\ncomplete_task()\n```", "SUBTASK DONE: it is 0"])
    run = _solve(tmp_path, script, guards=guards, level="subtask")
    return run.result.actions[0].refused == "early_completion"


def _ungrounded_answer(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, _replies('```python\ncomplete_task(answer="42")\n```', DONE_CODE), guards=guards)
    return run.result.actions[0].refused == "ungrounded_answer"


def _unmade_completion(tmp_path: Path, guards: list[str]) -> bool:
    run = _solve(tmp_path, _replies(READ, DONE_CODE, "```python\napis.counter.add(4)\n```", DONE_CODE),
                 guards=guards, instruction="Change the counter to 4.")
    return run.result.actions[1].refused == "unmade_completion"


def _ungrounded_report(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: Read the counter.", "DONE"],
                             [READ, "SUBTASK DONE: the counter is 99", "SUBTASK DONE: the counter is 0"])
    run = _solve(tmp_path, script, guards=guards, level="subtask")
    return run.result.actions[1].refused == "ungrounded_report"


def _grounded_summary(tmp_path: Path, guards: list[str]) -> bool:
    script = _subtask_script(["SUBTASK: Read the counter.", "DONE"], [READ, "SUBTASK DONE: it is 0"],
                             summary="- the counter is 0\n- the counter was 77 before")
    run = _solve(tmp_path, script, guards=guards, level="subtask")
    summaries = [s for s in run.result.steps if isinstance(s, SummaryStep)]
    return summaries[0].dropped == ["- the counter was 77 before"]


def _retrieval_floor(tmp_path: Path, guards: list[str], hash_embedder: Any) -> bool:
    memory = SkillMemory(hash_embedder)
    memory.add(Skill(name="zebra", description="Feed the zebras of the quantum zoo at dawn.", body="b"))
    run = _solve(tmp_path, _replies(DONE_CODE), guards=guards, memory=memory)
    return run.result.retrievals[0].below_min_score == 1 and not run.result.retrievals[0].skills


def _induction_gate(tmp_path: Path, guards: list[str], hash_embedder: Any) -> bool:
    script = _subtask_script(["DONE"], ["```python\n1/0\n```"])
    run = _solve(tmp_path, script, guards=guards, memory=SkillMemory(hash_embedder),
                 inducer=Inducer(ScriptedModel(script)), step_limit=2)
    statuses = [s.status for s in run.result.steps if isinstance(s, InductionStep)]
    return statuses == ["skipped"]


def _grounded_skills(tmp_path: Path, guards: list[str], hash_embedder: Any) -> bool:
    bogus = TEXT_SKILL.replace("apis.counter.reset()", "apis.counter.wipe_everything()")
    script = _subtask_script(["DONE"], [DONE_CODE], induction=bogus)
    run = _solve(tmp_path, script, guards=guards, memory=SkillMemory(hash_embedder),
                 inducer=Inducer(ScriptedModel(script)))
    statuses = [s.status for s in run.result.steps if isinstance(s, InductionStep)]
    return statuses == ["ungrounded"]


SCENARIOS: dict[str, Callable[..., bool]] = {
    "stop_sequence": _stop_sequence, "example_plan": _example_plan, "demonstration": _demonstration,
    "error_hints": _error_hints, "stuck_detection": _stuck_detection, "premature_done": _premature_done,
    "planner_copies": _planner_copies, "subtask_history": _subtask_history, "repeated_subtask": _repeated_subtask,
    "closing_subtask": _closing_subtask,
    "done_on_repeat": _done_on_repeat, "early_completion": _early_completion,
    "ungrounded_answer": _ungrounded_answer, "unmade_completion": _unmade_completion,
    "ungrounded_report": _ungrounded_report, "grounded_summary": _grounded_summary,
    "retrieval_floor": _retrieval_floor, "induction_gate": _induction_gate, "grounded_skills": _grounded_skills,
}


def test_every_agent_guard_has_a_scenario():
    assert sorted(SCENARIOS) == sorted(AGENT_GUARDS)


@pytest.mark.parametrize("name", AGENT_GUARDS)
def test_each_guard_alone_fires_and_is_silent_when_off(tmp_path, name, hash_embedder):
    scenario = SCENARIOS[name]
    extra = (hash_embedder,) if name in ("retrieval_floor", "induction_gate", "grounded_skills") else ()
    assert scenario(tmp_path / "on", [name], *extra), f"{name} did not fire alone"
    assert not scenario(tmp_path / "off", [], *extra), f"{name} fired while off"


# --------------------------------------------------------------------------------------------- presets
def test_presets_resolve_switches_and_an_explicit_switch_wins():
    paper = resolve_agent(AgentConfig(harness="paper"), "small-model")
    assert paper.guards == []
    assert paper.stop == []
    assert paper.stuck_detection is False
    assert paper.retrieval_min_score == -1
    assert paper.induce_without_working_code is True
    assert paper.demonstration == "inline"
    small = resolve_agent(AgentConfig(), "small-model")
    assert small.harness == "small-model"
    assert small.guards == AGENT_GUARDS
    assert resolve_agent(small, "paper") == small  # idempotent
    less = resolve_agent(AgentConfig(stuck_detection=False), "small-model")
    assert less.guards == [name for name in AGENT_GUARDS if name != "stuck_detection"]
    with pytest.raises(InputError, match="unknown harness feature"):
        resolve_agent(AgentConfig(harness="custom", guards=["stuck"]), "paper")
    with pytest.raises(InputError, match="needs agent.guards"):
        resolve_agent(AgentConfig(harness="custom"), "paper")
    assert set(PRESETS["small-model"]) == set(BY_NAME)


class _Embedded(ScriptedModel):
    """A scripted double that says it is the embedded model (as `skilltransfer.llm.local.LocalModel` does)."""

    embedded = True


def test_an_agent_built_directly_gets_the_streams_default_preset(tmp_path):
    """One default rule: ``Agent(model)`` for an API model runs ``paper`` (as a stream naming no preset does), for
    the embedded model (also behind a wrapper such as the response cache) ``small-model``; a resolved config passes
    through unchanged, and the harness refuses settings nobody resolved."""
    from skilltransfer.llm import make_model
    from skilltransfer.llm.cache import ResponseCache
    from skilltransfer.llm.chain import CachedModel

    api = make_model("qwen3@http://127.0.0.1:9/v1")  # a CLI model string; nothing is called
    assert Agent(api).config.harness == "paper"
    assert Agent(api).config.guards == []
    assert default_preset("openai") == "paper"
    assert default_preset("local") == "small-model"
    assert Agent(ScriptedModel(["x"])).config.harness == "paper"
    wrapped = CachedModel(_Embedded(["x"]), ResponseCache(str(tmp_path / "c.sqlite"), "rw"))
    assert Agent(wrapped).config.harness == "small-model"
    assert Agent(wrapped).config.guards == AGENT_GUARDS
    assert Agent(api, harness="small-model").config.harness == "small-model"  # a named preset wins
    resolved = resolve_agent(AgentConfig(), "small-model")
    assert Agent(api, config=resolved).config is resolved  # resolved once, by whoever built the settings
    with pytest.raises(ValueError, match="resolved agent settings"):
        make_harness(AgentConfig(), AgentPrompts.load(None))


def test_a_stream_resolves_its_preset_once(monkeypatch, tmp_path):
    """The preset is resolved when the stream's settings are first validated; validating them again (a recorded
    config, the run log), labelling them and building the agent resolve nothing."""
    import skilltransfer.settings.config as config_module

    calls = []
    real = config_module.resolve_agent
    monkeypatch.setattr(config_module, "resolve_agent", lambda *a: calls.append(a) or real(*a))
    config = StreamConfig(env="office", condition="subtask+text", model={"name": "local"}, runs_dir=str(tmp_path),
                          agent={"stuck_detection": False})
    again = StreamConfig.model_validate(config.model_dump())
    assert again == config
    assert config.harness_label() == "small-model-stuck_detection"
    agent_config = config.agent_config()
    assert Agent(ScriptedModel(["x"]), config=agent_config).config is agent_config
    assert len(calls) == 1


def test_a_stream_resolves_its_preset_by_model_and_env(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    local = StreamConfig(env="apps", condition="task+text", model={"name": "local"})
    assert local.agent.harness == "small-model"
    assert local.mask_instance_names is True
    assert local.env.args == {}
    assert {"instance_mask", "docs_example", "focused_docs"} <= set(local.agent.guards or ())
    assert local.condition_label() == "task+text"
    api = StreamConfig(env="apps", condition="task+text", model={"name": "openai", "base_url": "http://x/v1"})
    assert api.agent.harness == "paper"
    assert api.agent.guards == []
    assert api.env.args == {"docs_example": False, "focused_docs": False}
    assert api.mask_instance_names is False
    assert api.condition_label() == "task+text"  # the model's default preset is not tagged
    paper_local = StreamConfig(env="office", condition="task", agent={"harness": "paper"}, model={"name": "local"})
    assert paper_local.condition_label() == "task[harness=paper]"
    left_out = StreamConfig(env="office", condition="task", agent={"stuck_detection": False}, model={"name": "local"})
    assert left_out.harness_label() == "small-model-stuck_detection"
    assert StreamConfig.model_validate(left_out.model_dump()) == left_out  # config.json reads back the same


def test_the_paper_preset_prompts_hold_nothing_a_guard_added(tmp_path):
    """The paper agent's executor and planner see the env's docs as given and the plain prompts; no stop, no extra
    turns, no refusal; the small-model agent's prompts differ."""
    docs = f"{DOCS}\n\n{EXAMPLE}\n{PLAN}"
    prompts = AgentPrompts.load(None)
    runs = {}
    for preset in ("paper", "small-model"):
        env = TinyEnv([4], workdir=tmp_path / preset)
        env.docs = docs
        model = ScriptedModel(CounterScript())
        episode = env.start(env.tasks()[0])
        try:
            Agent(model, level="subtask", harness=preset).run(episode)
        finally:
            episode.close()
        runs[preset] = model
    paper = runs["paper"]
    executor = [c for c in paper.calls if role_of(c) == "executor"]
    planner = [c for c in paper.calls if role_of(c) == "planner"]
    rules = prompts.executor_subtask_rules.render()
    for messages in executor:
        assert messages[0]["content"] == prompts.executor_system.render(docs=docs.strip(), subtask_rules=rules)
        assert messages[1]["role"] == "user"
        assert messages[1]["content"].startswith("# Overall task")
    assert planner[0][0]["content"] == prompts.planner.render(docs=docs.strip(), example="")
    assert all("stop" not in params and "temperature" not in params for params in paper.params)
    small = [c for c in runs["small-model"].calls if role_of(c) == "executor"]
    assert small[0][0]["content"] != executor[0][0]["content"]
    assert len(small[0]) > 2  # the worked example as turns


def test_a_run_records_its_preset(tmp_path, hash_embedder):
    for preset, guards in (("paper", None), ("small-model", None), ("custom", ["stuck_detection"])):
        config = StreamConfig(run=preset, runs_dir=str(tmp_path / "runs"), condition="task+text",
                              agent={"harness": preset, "guards": guards}, model={"name": "local"})
        run_stream(TinyEnv([4], workdir=tmp_path / "ws" / preset), ScriptedModel(CounterScript()), config,
                   embedder=hash_embedder)
        recorded = json.loads((config.path / "config.json").read_text())
        assert recorded["config"]["agent"]["harness"] == preset
        assert recorded["agent"]["harness"] == preset
        expected = [] if preset == "paper" else (guards or [*AGENT_GUARDS, "instance_mask"])
        assert recorded["agent"]["guards"] == expected
        shown = summarize_run(config.path).harness
        assert shown.startswith({"paper": "paper: no guard", "small-model": "small-model: stop_sequence",
                                 "custom": "custom:stuck_detection: stuck_detection"}[preset])


# --------------------------------------------------------------------------------------------- the seam
LOOP_MODULES = ("agents/agent.py", "agents/loop.py", "agents/skill_io.py", "agents/executor.py", "agents/roles.py",
                "agents/result.py",
                "runner/stream.py", "runner/stream_build.py", "runner/stream_record.py", "coordination/runtime.py",
                "coordination/host.py")


HARNESS = "skilltransfer.agents.harness"
SEAM_MODULES = {HARNESS, f"{HARNESS}.base", f"{HARNESS}.presets"}
"""What a loop may import of the harness: the seam and the registry (the guards' modules are grouped by the hooks they
serve, e.g. ``harness.completion``, and hold the guard classes)."""


@pytest.mark.parametrize("module", LOOP_MODULES)
def test_the_loop_modules_name_no_guard(module):
    import skilltransfer

    source = (Path(skilltransfer.__file__).parent / module).read_text()
    tree = ast.parse(source)
    guard_modules = {spec.target.split(":")[0] for spec in GUARDS if spec.target}
    assert guard_modules
    assert not guard_modules & SEAM_MODULES  # the guards live outside the seam
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not imported & guard_modules
    from_harness = {name for name in imported if name == HARNESS or name.startswith(f"{HARNESS}.")}
    assert from_harness <= SEAM_MODULES, f"a loop module imports a guard module: {sorted(from_harness - SEAM_MODULES)}"
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not strings & set(BY_NAME), "a loop module names a guard"
    classes = {target.split(":")[1] for spec in GUARDS if (target := spec.target)}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not names & classes, "a loop module names a guard class"


def test_every_hook_of_the_seam_has_a_guard_that_uses_it():
    """The seam is no wider than the guards need: each hook of `Guard` is overridden by at least one guard, and the
    executor's and summarizer's reply cuts share one ``reply`` hook, the planner's prompt parts one
    ``planner_opening`` (issue 40: single-user hooks folded; 18 hooks before, 16 after)."""
    import inspect

    from skilltransfer.agents.harness.base import Guard
    from skilltransfer.util.imports import load_target

    hooks = {name for name, member in vars(Guard).items()
             if inspect.isfunction(member) and not name.startswith("_")} - {"spent", "refuse_once", "run_state"}
    classes = [load_target(spec.target, what="guard") for spec in GUARDS if spec.target]
    users = {hook: [cls.name for cls in classes if hook in vars(cls)] for hook in hooks}
    assert all(users.values()), {hook: names for hook, names in users.items() if not names}
    assert {"reply", "planner_opening"} <= hooks
    assert not hooks & {"shown_reply", "summary_reply", "planner_docs", "planner_history"}
    assert len(hooks) == 16


# --------------------------------------------------------------------------------------------- done when (issue 29)
def _stubborn(messages: list[dict[str, Any]]) -> str:
    """A planner that says DONE at once (and plans one subtask after a refusal); an executor that repeats failing
    code."""
    role = role_of(messages)
    if role == "planner":
        return "SUBTASK: add 4 to the counter" if messages[-1]["content"].startswith("REFUSED") else "DONE"
    if role == "summarizer":
        return "- nothing worked"
    return "Add it.\n```python\napis.counter.add('4')\n```"


@pytest.mark.parametrize("level", ["subtask", "task"])
def test_run_paper_records_no_refusal_and_no_stuck_and_small_model_does(tmp_path, level):
    from helpers_cli import records_of, run_tiny, trajectory_of

    from skilltransfer.llm.testing.mock_server import MockServer

    outcome = {}
    with MockServer(replies=_stubborn) as server:
        for preset in ("paper", "small-model"):
            out = tmp_path / preset
            result = run_tiny(server, out, level, (4,), "-c", f"agent.harness={preset}", "--max-steps", "8")
            assert f"| harness {preset} (" in " ".join(result.output.split())  # printed when the run starts
            record = records_of(out)[0]
            steps = trajectory_of(out, record).steps
            outcome[preset] = (record["exit_status"], [r for s in steps for r in s.get("guards", [])],
                               json.loads((out / "config.json").read_text())["agent"]["harness"])
    status, records, recorded = outcome["paper"]
    assert recorded == "paper"
    assert records == []
    assert status == ("planner_done" if level == "subtask" else "limits_exceeded")
    status, records, recorded = outcome["small-model"]
    assert recorded == "small-model"
    assert status == "stuck"
    kinds = {(r["guard"], r["kind"]) for r in records}
    assert ("stuck_detection", "end") in kinds
    if level == "subtask":
        assert ("premature_done", "refuse") in kinds


# --------------------------------------------------------------------------------------------- one build (issue 29)
def test_a_run_checks_and_loads_its_library_and_organisation_once(tmp_path, monkeypatch):
    from helpers_cli import run_tiny

    from skilltransfer.llm.testing.mock_server import MockServer
    from skilltransfer.memory.library import export_skill_md
    from skilltransfer.memory.organization import LibraryView, Organization, RoutingNode, save_organization
    from skilltransfer.runner import build

    skill = Skill(name="set-it", description="Set the counter to a target value.", body="Reset, then add.")
    library = tmp_path / "library"
    export_skill_md([skill], library)
    save_organization(Organization(kind="graph", roots=["counter"], nodes=[
        RoutingNode(name="counter", description="Counter work.", skills=[skill.id])]), library)
    calls: dict[str, int] = {"library": 0, "organization": 0, "check": 0}
    read_library, load_view, check = build.read_library, LibraryView.load, StreamConfig.check_skill_exec

    def counted(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(build, "read_library", counted("library", read_library))
    monkeypatch.setattr(LibraryView, "load", staticmethod(counted("organization", load_view)))
    monkeypatch.setattr(StreamConfig, "check_skill_exec", counted("check", check))
    with MockServer(replies=CounterScript()) as server:
        run_tiny(server, tmp_path / "out", "task", (4,), "--library", str(library), "--library-organization", "graph",
                 "-c", f"organization={library}")
    assert calls == {"library": 1, "organization": 1, "check": 1}


def test_the_report_tags_the_harness_when_the_runs_of_a_table_differ(tmp_path, hash_embedder):
    from skilltransfer.report.runs import load_runs

    def stream(root: Path, preset: str) -> Path:
        config = StreamConfig(run=preset, runs_dir=str(root), condition="task+text", agent={"harness": preset},
                              model={"name": "local"})
        run_stream(TinyEnv([4], workdir=root / "ws" / preset), ScriptedModel(CounterScript()), config,
                   embedder=hash_embedder)
        return config.path

    both = [stream(tmp_path / "both", "paper"), stream(tmp_path / "both", "small-model")]
    assert sorted(run.condition for run in load_runs(both)) == ["task+text[harness=paper]",
                                                                "task+text[harness=small-model]"]
    alone = stream(tmp_path / "alone", "paper")
    assert [run.condition for run in load_runs([alone])] == ["task+text"]  # one harness in the table: no tag
