"""Skill execution modes and library organisations in the agent (issue 14 §2-§3, §5): isolation of subagents, the
shared step budget, failures, loads once per load, navigation of each organisation, deferred induction."""

from __future__ import annotations

import re
import time

import pytest
from helpers_skill_exec import SkillActionScript, block
from helpers_tinyenv import TinyEnv, role_of, task_start

from skilltransfer.agents import Agent
from skilltransfer.agents.skill_actions import SkillCall, parse_skill_call, render_inputs
from skilltransfer.induction import Inducer
from skilltransfer.induction.inducer import InductionConfig
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.organization import LibraryView, Organization, RoutingNode
from skilltransfer.memory.store import SkillMemory
from skilltransfer.runner.stream_record import context_account
from skilltransfer.skill import Provenance, Skill

BODY = "SECRET-BODY-MARKER: reset the counter, then add the target."
ALPHA = Skill(name="set_counter", description="Set the counter to a target value.", body=BODY,
              inputs="target: the value", outputs="the new counter value",
              provenance=Provenance(source_task_id="t1"), resources={"notes.txt": "resource text"})
BETA = Skill(name="read_counter", description="Read the counter and print it.", body="Call apis.counter.get().",
             provenance=Provenance(source_task_id="t2"))


@pytest.fixture
def env(tmp_path):
    return TinyEnv([4, 7], workdir=tmp_path / "ws")


def memory_of(embedder, *skills: Skill) -> SkillMemory:
    memory = SkillMemory(embedder)
    for skill in skills:
        assert memory.add(skill).action == "added"
    return memory


def solve(env, model, **kwargs):
    episode = env.start(env.tasks()[0])
    try:
        task = Agent(model, **{"harness": "small-model", **kwargs}).task(episode, stream_position=0)
        result = task.run()
        score = episode.evaluate()
        task.finish(score.success)
        return result, score
    finally:
        episode.close()


def windows_of(model: ScriptedModel, result) -> dict[int, list[list[dict]]]:
    """Executor prompts by context window (the model's calls zipped with the call log)."""
    out: dict[int, list[list[dict]]] = {}
    for messages, call in zip(model.calls, result.calls.calls, strict=True):
        if call.role == "executor":
            out.setdefault(call.window, []).append(messages)
    return out


def text_of(prompts: list[list[dict]]) -> str:
    return "\n".join(str(m["content"]) for messages in prompts for m in messages)


# --------------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(("code", "expected"), [
    ('load_skill("a b")', SkillCall("load_skill", "a b")),
    ('print(load_skill(name="x"))', SkillCall("load_skill", "x")),
    ('run_skill("x", {"target": 4})', SkillCall("run_skill", "x", {"target": 4})),
    ("run_skill('x', inputs='all of it')", SkillCall("run_skill", "x", "all of it")),
    ("print(apis.counter.get())", None),
])
def test_parse_skill_call(code, expected):
    assert parse_skill_call(code, frozenset({"load_skill", "run_skill"})) == expected


@pytest.mark.parametrize("code", ['x = load_skill("a")', 'load_skill("a")\nprint(1)', "load_skill(name)",
                                  'load_skill("a", "b")', "run_skill()"])
def test_misused_skill_action_gets_a_usage_error(code):
    answer = parse_skill_call(code, frozenset({"load_skill", "run_skill"}))
    assert isinstance(answer, str)
    assert "harness action" in answer


def test_actions_not_offered_are_python():
    assert parse_skill_call('load_skill("a")', frozenset({"run_skill"})) is None
    assert render_inputs({"a": 1, "b": "two"}) == "- a: 1\n- b: two"


# --------------------------------------------------------------------------------------------- subagent mode
def test_subagent_isolation_output_and_accounting(env, hash_embedder):
    model = ScriptedModel(SkillActionScript())
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent")
    assert score.success
    by_window = windows_of(model, result)
    assert set(by_window) == {0, 1}
    caller, sub = text_of(by_window[0]), text_of(by_window[1])
    assert "SECRET-BODY-MARKER" not in caller  # the caller never sees the skill body
    assert "### Skill: set_counter" in caller
    assert "Input: target: the value" in caller
    assert "SECRET-BODY-MARKER" in sub
    assert "Set the counter to 4." not in sub
    assert "Delegate." not in sub
    assert "- target: 4" in sub
    run_step = next(s for s in result.actions if s.skill_action and s.skill_action["action"] == "run_skill")
    assert run_step.observation.startswith("run_skill('set_counter') returned:\nskill output 4")
    assert run_step.skill_action["status"] == "subtask_done"
    assert "skills/set_counter/" in sub  # resources placed in the workspace and named to the subagent
    account = context_account(result)
    assert account.subagent_calls == 1
    assert account.windows[1].calls == 2
    assert account.windows[1].sent_tokens > 0
    assert account.windows[1].seed_tokens > account.windows[1].sent_tokens
    assert account.windows[1].returned_tokens > 0
    assert account.main.calls == 2
    assert 0 < account.communication_share < 1
    assert [s.window for s in result.actions] == [0, 1, 1, 0]
    assert [s.index for s in result.actions] == [0, 1, 2, 3]


def _endless_subagent(sleep_s: float = 0.0):
    """A script whose caller delegates to a subagent that never reports done, then finishes the task itself."""

    def script(messages):
        if role_of(messages) != "executor":
            return "DONE"
        seeded = any("# Skill task" in str(m["content"]) for m in messages)
        turns = sum(1 for m in messages[task_start(messages):] if m["role"] == "assistant")
        if seeded:
            time.sleep(sleep_s)
            return block(f"print({len(messages)} * {turns})")  # never done: varied code, so no loop is detected
        if turns == 0:
            return block('run_skill("set_counter", {"target": 4})')
        return block("apis.counter.reset()\napis.counter.add(4)\ncomplete_task()")

    return script


@pytest.mark.parametrize("settings", [{}, {"subagent_budget": "own", "subagent_step_limit": None}],
                         ids=["default", "own-none"])
def test_subagent_steps_come_out_of_the_shared_budget_without_their_own(env, hash_embedder, settings):
    model = ScriptedModel(_endless_subagent())
    # the default: a subagent spends the caller's steps (a task with subagents takes no more than its budget)
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent", step_limit=5,
                          **settings)
    assert not score.success
    assert len(result.actions) == 5  # 1 caller step + 4 subagent steps; nothing is left for the caller
    assert result.exit_status == "limits_exceeded"
    failed = result.actions[0]
    assert failed.observation.startswith("run_skill('set_counter') FAILED: the subagent ended with status "
                                         "limits_exceeded after 4 steps")
    assert failed.skill_action["own_budget"] is False
    assert sum(1 for c in result.calls.calls if c.role == "executor") == 5


def test_a_subagent_that_spends_its_own_budget_ends_and_the_caller_goes_on(env, hash_embedder):
    model = ScriptedModel(_endless_subagent())
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent", step_limit=3,
                          subagent_budget="own", subagent_step_limit=4)
    assert score.success  # the caller's own budget of 3 was untouched by the subagent's 4 steps
    assert result.exit_status == "submitted"
    failed = result.actions[0]
    assert failed.observation.startswith("run_skill('set_counter') FAILED: the subagent ended with status "
                                         "limits_exceeded after 4 steps")
    assert {k: failed.skill_action[k] for k in ("status", "steps", "step_limit", "own_budget", "time_limit_s")} == {
        "status": "limits_exceeded", "steps": 4, "step_limit": 4, "own_budget": True, "time_limit_s": None}
    assert [s.window for s in result.actions] == [0, 1, 1, 1, 1, 0]
    assert [s.index for s in result.actions] == list(range(6))


def test_a_subagent_past_its_wall_clock_limit_ends_and_the_caller_goes_on(env, hash_embedder):
    model = ScriptedModel(_endless_subagent(sleep_s=0.3))
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent",
                          subagent_budget="own", subagent_step_limit=10, subagent_time_limit_s=0.2)
    assert score.success
    failed = result.actions[0]
    assert failed.skill_action["status"] == "time_exceeded"
    assert failed.skill_action["steps"] == 1  # the step in flight is not cut; the next one is not taken
    assert failed.skill_action["seconds"] >= 0.2
    assert "ended with status time_exceeded after 1 steps (time limit reached" in failed.observation


def test_unknown_skill_and_group_misuse_are_clear_errors(env, hash_embedder):
    replies = iter([block('run_skill("no_such_skill")'), block("apis.counter.reset()\napis.counter.add(4)\n"
                                                                 "complete_task()")])
    model = ScriptedModel(lambda messages: next(replies))
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent")
    assert score.success
    assert result.actions[0].observation.startswith("run_skill error: no routing node or skill is named "
                                                    "'no_such_skill'")
    assert result.actions[0].error


# --------------------------------------------------------------------------------------------- agent-skill mode
def test_agent_skill_loads_appear_once_per_load(env, hash_embedder):
    replies = iter([block('load_skill("set_counter")'), block('print(load_skill("set_counter"))'),
                    block("apis.counter.reset()\napis.counter.add(4)\ncomplete_task()")])
    model = ScriptedModel(lambda messages: next(replies))
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="agent-skill")
    assert score.success
    assert BODY not in text_of(model.calls[:1])  # the list shows the card only
    final = text_of(model.calls[-1:])
    assert final.count(BODY) == 2  # two loads, two copies
    assert text_of(model.calls[1:2]).count(BODY) == 1
    assert context_account(result).skill_loads == 2
    assert "`load_skill(" in text_of(model.calls[:1])
    assert "`run_skill(" not in text_of(model.calls[:1])


def test_inline_flat_prompt_is_unchanged(env, hash_embedder):
    model = ScriptedModel(SkillActionScript())
    solve(env, model, memory=memory_of(hash_embedder, ALPHA))
    first = text_of(model.calls[:1])
    assert BODY in first
    assert "Skill actions" not in first
    assert "# Skills from earlier tasks\nThese skills" in first


# --------------------------------------------------------------------------------------------- organisations
def frozen_view() -> LibraryView:
    org = Organization(kind="graph", roots=["counter work"], nodes=[
        RoutingNode(name="counter work", description="Everything about the counter.", children=["writes"],
                    skills=[BETA.id]),
        RoutingNode(name="writes", description="Changing the counter.", skills=[ALPHA.id])])
    return LibraryView(org, [ALPHA, BETA])


@pytest.mark.parametrize(("organization", "frozen", "groups"), [
    ("task-tree", False, ["task t1", "task t2"]), ("tree", False, ["task t1", "task t2"]),
    ("graph", True, ["counter work"])])
@pytest.mark.parametrize("mode", ["inline", "agent-skill", "subagent", "hybrid"])
def test_navigation_of_each_organisation(env, hash_embedder, organization, frozen, groups, mode):
    model = ScriptedModel(SkillActionScript())
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA, BETA), skill_exec=mode,
                          library_organization=organization, organization=frozen_view() if frozen else None)
    assert score.success
    first = text_of(model.calls[:1])
    for group in groups:
        assert f"- [group] {group}" in first
    assert "### Skill:" not in first  # the top level lists groups only
    built = result.retrievals[0].organization
    assert built is not None
    if organization == "tree":
        assert built["built_by"]["method"].startswith("fallback:task-tree")
    actions = [s.skill_action["action"] for s in result.actions if s.skill_action]
    account = context_account(result)
    if mode == "subagent":  # groups run as subagents too: a routing subagent runs a member
        assert actions[0] == "run_skill"
        assert account.subagent_calls == 2
        assert account.nodes_opened == 0
        assert "`open_node(" not in first
    else:
        assert actions[0] == "open_node"
        assert account.nodes_opened == 1
        assert "## Group: " + groups[0] in text_of(model.calls[1:2])
    if mode == "hybrid":
        assert actions == ["open_node", "run_skill"]
        assert account.subagent_calls == 1
    if mode == "agent-skill":
        assert actions[:2] == ["open_node", "load_skill"]


def test_open_node_on_a_skill_and_load_on_a_group_are_errors(env, hash_embedder):
    replies = iter([block('open_node("set_counter")'), block('load_skill("task t1")'),
                    block("apis.counter.reset()\napis.counter.add(4)\ncomplete_task()")])
    model = ScriptedModel(lambda messages: next(replies))
    result, _ = solve(env, model, memory=memory_of(hash_embedder, ALPHA, BETA), skill_exec="agent-skill",
                      library_organization="task-tree")
    assert "is a skill, not a group" in result.actions[0].observation
    assert "is a group; open it with open_node" in result.actions[1].observation
    assert context_account(result).skill_loads == 0
    assert context_account(result).nodes_opened == 0


# --------------------------------------------------------------------------------------------- induction verdict
@pytest.mark.parametrize("target", [4, 5])
def test_only_successful_induction_waits_for_the_verdict(env, hash_embedder, target):
    def script(messages):
        if role_of(messages) == "induction":
            assert "did not succeed" not in str(messages[-1]["content"])
            return "NAME: s\nDESCRIPTION: set it\nINPUTS: the target\nOUTPUTS: the value\nBODY:\n1. reset\n2. add"
        return block(f"apis.counter.reset()\napis.counter.add({target})\ncomplete_task()")

    memory = SkillMemory(hash_embedder)
    model = ScriptedModel(script)
    inducer = Inducer(model, config=InductionConfig(format="text", variant="contract", only_successful=True))
    result, score = solve(env, model, memory=memory, inducer=inducer)
    assert score.success == (target == 4)
    assert [s.status for s in result.inductions] == (["added"] if target == 4 else ["skipped"])
    assert len(memory) == (1 if target == 4 else 0)


@pytest.mark.parametrize(("own", "left"), [(15, 48), (None, 46)])
def test_subtask_level_subagent_budget(env, hash_embedder, own, left):
    def script(messages):
        role = role_of(messages)
        if role == "planner":
            return SkillActionScript.plan(messages)
        if role == "summarizer":
            return "- the counter was set"
        seeded = any("# Skill task" in str(m["content"]) for m in messages)
        turns = sum(1 for m in messages[task_start(messages):] if m["role"] == "assistant")
        if seeded:
            return block("apis.counter.reset()\nprint(apis.counter.add(4))") if turns == 0 else "SUBTASK DONE: 4"
        first = str(messages[task_start(messages)]["content"])
        if "Read the current counter" in first.split("# Current subtask")[1]:
            return block('run_skill("set_counter", {"target": 4})') if turns == 0 else "SUBTASK DONE: it is 4"
        return block("complete_task()")

    model = ScriptedModel(script)
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA), skill_exec="subagent",
                          level="subtask", subagent_budget="own" if own else "caller", subagent_step_limit=own)
    assert score.success
    assert [(s.index, s.subtask_index, s.window) for s in result.actions] == [
        (0, 0, 0), (1, 0, 1), (2, 0, 1), (3, 0, 0), (4, 1, 0)]
    assert context_account(result).subagent_calls == 1
    planner_prompts = [m for m, c in zip(model.calls, result.calls.calls, strict=True) if c.role == "planner"]
    # 50 - the caller's 2, and the subagent's 2 when it draws from the task's budget
    assert f"Executor steps left: {left};" in text_of(planner_prompts[1:2])


@pytest.mark.parametrize("mode", ["inline", "subagent"])
def test_default_streams_record_the_prompt_ids_they_always_did(tmp_path, hash_embedder, mode):
    from skilltransfer.log import RunFolder
    from skilltransfer.runner.stream import run_stream
    from skilltransfer.settings.config import StreamConfig

    config = StreamConfig(run="r", runs_dir=str(tmp_path), condition="task+text", skill_exec=mode,
                          embedder="hash:128")
    run_stream(TinyEnv([4], workdir=tmp_path / "ws"), ScriptedModel(SkillActionScript()), config,
               embedder=hash_embedder)
    ids = RunFolder(tmp_path / "r").read_config().prompt_ids
    assert ("subagent_task" in ids) == (mode == "subagent")
    assert "executor_task" in ids


# --------------------------------------------------------------------------------------------- whole-library exposure
FIRST_VIEW = "Retrieved for this task (first view"


@pytest.mark.parametrize("exposure", ["whole", "retrieved"])
def test_whole_library_is_navigable_with_open_node_through_the_loop(env, hash_embedder, exposure):
    """top_k 1: one skill is retrieved; with the whole library exposed the other one's group opens and loads."""
    seen: dict[str, str] = {}

    def script(messages):
        first = str(messages[task_start(messages)]["content"])
        turns = sum(1 for m in messages[task_start(messages):] if m["role"] == "assistant")
        if turns == 0:
            cards = re.findall(r"^### Skill: (.+)$", first, re.MULTILINE)  # the first view (whole exposure)
            groups = re.findall(r"^- \[group\] task (t\d)", first, re.MULTILINE)
            retrieved = cards[0] if cards else {"t1": "set_counter", "t2": "read_counter"}[groups[0]]
            seen["retrieved"], seen["other"] = retrieved, ({"set_counter", "read_counter"} - {retrieved}).pop()
            group = "task t2" if seen["other"] == "read_counter" else "task t1"
            return block(f'open_node("{group}")')
        if turns == 1:
            return block(f'load_skill("{seen["other"]}")')
        return block("apis.counter.reset()\napis.counter.add(4)\ncomplete_task()")

    model = ScriptedModel(script)
    result, score = solve(env, model, memory=memory_of(hash_embedder, ALPHA, BETA), skill_exec="agent-skill",
                          library_organization="task-tree", library_exposure=exposure, top_k=1)
    assert score.success
    opened, loaded = result.actions[0], result.actions[1]
    body = {"set_counter": BODY, "read_counter": BETA.body}[seen["other"]]
    first_prompt = text_of(model.calls[:1])
    if exposure == "whole":
        assert FIRST_VIEW in first_prompt
        assert "[group] task t1" in first_prompt
        assert "[group] task t2" in first_prompt  # both groups: the whole library, not the top-1
        assert opened.observation.startswith("## Group: task t")
        assert f"### Skill: {seen['other']}" in opened.observation
        assert body in loaded.observation
        assert result.retrievals[0].organization["exposure"] == "whole"
        assert result.retrievals[0].organization["skills"] == 2
    else:
        assert FIRST_VIEW not in first_prompt
        assert opened.observation.startswith("open_node error: no routing node or skill is named")
        assert loaded.observation.startswith("load_skill error: no routing node or skill is named")


def test_distractors_join_the_frozen_library(tmp_path, hash_embedder):
    from skilltransfer.errors import InputError
    from skilltransfer.memory.distractors import distractor_skills, max_distractors
    from skilltransfer.memory.library import export_jsonl
    from skilltransfer.runner.stream import run_stream
    from skilltransfer.settings.config import StreamConfig

    skills = distractor_skills(40)
    assert len({s.name for s in skills}) == 40
    assert [s.name for s in distractor_skills(5)] == [s.name for s in skills[:5]]  # deterministic prefix
    assert all(s.inputs and s.outputs and s.provenance.source_task_id.startswith("distractor/") for s in skills)
    with pytest.raises(InputError, match="at most"):
        distractor_skills(max_distractors() + 1)
    library = export_jsonl([ALPHA], tmp_path / "lib.jsonl")
    config = StreamConfig(run="d", runs_dir=str(tmp_path), condition="task", library=str(library), distractors=12,
                          skill_exec="agent-skill", library_exposure="whole", embedder="hash:128")
    assert config.condition_label() == "task+library[agent-skill][whole][distractors=12]"
    summary = run_stream(TinyEnv([4], workdir=tmp_path / "ws"), ScriptedModel(SkillActionScript()), config,
                         embedder=hash_embedder)
    assert summary.records[0].memory_size == 13
    with pytest.raises(InputError, match="distractors are added to a frozen library"):
        StreamConfig(condition="task+text", distractors=3).check_skill_exec()


def test_organise_stream_keeps_skills_that_share_a_name(tmp_path, hash_embedder):
    """A run's memory may hold two skills with one name (ids differ): the organise stream's folder keeps both."""
    from skilltransfer.log import RunFolder
    from skilltransfer.runner.organize import organization_dir, run_organize_stream
    from skilltransfer.settings.config import StreamConfig

    twin = Skill(name="set_counter", description="Post a message to the team channel.", body="Call apis.chat.post.",
                 provenance=Provenance(source_task_id="t9"))
    memory = SkillMemory(hash_embedder)
    memory.add_many([ALPHA, twin])
    memory.save(tmp_path / "memory")
    config = StreamConfig(run="org", runs_dir=str(tmp_path), condition="task+text", library=str(tmp_path / "memory"),
                          organize=["tree", "graph"], embedder="hash:128")
    run_organize_stream(ScriptedModel(lambda messages: "No groups here."), config)
    for kind in ("tree", "graph"):
        view = LibraryView.load(organization_dir(tmp_path / "org", kind))
        assert sorted(s.id for s in view.skills) == sorted([ALPHA.id, twin.id])
        assert view.organization.built_by["method"] == "fallback:task-tree"
    assert RunFolder.is_run(tmp_path / "org")
    assert RunFolder(tmp_path / "org").read_records() == []


def test_organise_stream_builds_hierarchies_of_the_height_it_is_given(tmp_path, hash_embedder, monkeypatch):
    """The study builds hierarchies of height 2 and 3: ``organize_height`` reaches the organiser."""
    from skilltransfer.runner import organize
    from skilltransfer.settings.config import StreamConfig

    seen: list[int] = []
    real = organize.Organizer

    class Spy(real):  # type: ignore[misc, valid-type]
        def organize(self, skills):
            seen.append(self.config.height)
            return super().organize(skills)

    monkeypatch.setattr(organize, "Organizer", Spy)
    memory = SkillMemory(hash_embedder)
    memory.add_many([ALPHA])
    memory.save(tmp_path / "memory")
    for height in (2, 3):
        config = StreamConfig(run=f"org{height}", runs_dir=str(tmp_path), condition="task+text",
                              library=str(tmp_path / "memory"), organize=["tree"], organize_height=height,
                              embedder="hash:128")
        organize.run_organize_stream(ScriptedModel(lambda messages: "No groups here."), config)
    assert seen == [2, 3]
    assert StreamConfig(condition="task").organize_height == 2
