"""The ``contract`` induction variant (procedure + input/output contracts) and induction from successful
trajectories only, with scripted models."""

from __future__ import annotations

import pytest
from helpers_tinyenv import CounterScript, TinyEnv

from skilltransfer.agents import ActionStep, Agent, CallLog, TrajectoryText
from skilltransfer.induction import Inducer, InductionConfig, InductionError, parse_contract_reply
from skilltransfer.induction.inducer import INDUCTION_PROMPTS, OUTCOMES
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.store import SkillMemory

ACTIONS = [ActionStep(0, None, "r", "Look.", "print(apis.counter.get())", "0\n"),
           ActionStep(1, None, "r", "Set.", "apis.counter.add(3)\ncomplete_task()", "(no output)", done=True)]
TRAJECTORY = TrajectoryText(ACTIONS, InductionConfig().max_observation_chars, InductionConfig().max_trajectory_chars)

CONTRACT_SKILL = """NAME: set_counter_value
DESCRIPTION: Set the counter to a target value.
INPUTS:
- the target value, an integer
OUTPUTS:
- the counter holds the target; the new value is reported
BODY:
1. Reset the counter with apis.counter.reset().
2. Add the target with apis.counter.add(<target>).
Output: report apis.counter.get()."""


def test_contract_prompt_files_and_composition() -> None:
    names = {p.stem for p in INDUCTION_PROMPTS.glob("*.md")}
    assert {"contract", "demonstration_contract_text", "demonstration_contract_code", "output_contract_text",
            "output_contract_code", "trajectory_contract"} <= names
    for fmt in ("text", "code"):
        inducer = Inducer(ScriptedModel([]), variant="contract", format=fmt)
        system = inducer.system.text
        assert "## Input and output contracts" in system
        assert "## Abstraction rules" in system
        assert "INPUTS:\n- <each" in system
        assert system.count("## Demonstration") == 1
        assert "OUTPUTS:" in system.split("## Demonstration")[1]
        assert inducer.prompt_id.startswith(f"induction-contract-{fmt}@")
    assert Inducer(ScriptedModel([])).user.name == "trajectory"


@pytest.mark.parametrize("succeeded", [True, False, None])
def test_contract_induction_writes_contracts_and_states_the_outcome(succeeded: bool | None) -> None:
    model = ScriptedModel([CONTRACT_SKILL])
    induced = Inducer(model, variant="contract").induce("Set the counter to 3.", TRAJECTORY, level="subtask",
                                                         calls=CallLog(), succeeded=succeeded)
    skill = induced.skill
    assert skill is not None
    assert induced.status == "induced"
    assert skill.inputs == "- the target value, an integer"
    assert skill.outputs == "- the counter holds the target; the new value is reported"
    assert skill.body.endswith("Output: report apis.counter.get().")  # a step that says "Output:" stays in the body
    assert "INPUTS" not in skill.body
    assert skill.extra["induction_prompt"].startswith("induction-contract-text@")
    user = model.calls[0][1]["content"]
    assert f"# Outcome\n{OUTCOMES[succeeded]}" in user


def test_other_variants_ignore_contract_fields_and_outcome() -> None:
    model = ScriptedModel([CONTRACT_SKILL])
    induced = Inducer(model).induce("g", TRAJECTORY, level="task", calls=CallLog(), succeeded=True)
    assert induced.skill is not None
    assert induced.skill.inputs == ""
    assert "# Outcome" not in model.calls[0][1]["content"]


def test_only_successful_skips_without_a_model_call() -> None:
    inducer = Inducer(ScriptedModel([]), variant="contract", only_successful=True)  # any call would raise
    induced = inducer.induce("g", TRAJECTORY, level="task", calls=CallLog(), succeeded=False)
    assert induced.skipped
    assert induced.skill is None
    assert induced.status == "skipped"
    assert "did not succeed" in induced.error
    with pytest.raises(ValueError, match="needs the caller's verdict"):
        inducer.induce("g", TRAJECTORY, level="task", calls=CallLog())
    ok = Inducer(ScriptedModel([CONTRACT_SKILL]), variant="contract", only_successful=True)
    assert ok.induce("g", TRAJECTORY, level="task", calls=CallLog(), succeeded=True).skill is not None


@pytest.mark.parametrize(("reply", "inputs", "outputs", "note"), [
    ("**NAME:** `a_b`\n**Description:** does things.\n**Input:** a name\n**Output:** an email\n**BODY:**\nstep",
     "a name", "an email", ""),
    ("NAME: a_b\nDESCRIPTION: does things.\nBODY:\nstep one\nINPUTS:\n- a name\nOUTPUTS:\n- an email",
     "- a name", "- an email", ""),
    ("NAME: a_b\nDESCRIPTION: does things.\nINPUTS: a name\nBODY:\nstep\noutputs: lower case stays in the body",
     "a name", "", "no OUTPUTS contract"),
    ("NAME: a_b\nDESCRIPTION: does things.\nBODY:\nstep", "", "", "no INPUTS or OUTPUTS contract"),
    ("NAME: a_b\nDESCRIPTION: d\nINPUTS: x\nOUTPUTS: y\nBODY:\nstep\n\nNAME: second\nDESCRIPTION: e\nBODY:\nz",
     "x", "y", "more than one skill"),
])
def test_parse_contract_replies(reply: str, inputs: str, outputs: str, note: str) -> None:
    parsed = parse_contract_reply(reply, "text")
    assert parsed.name == "a_b"
    assert parsed.description in ("does things.", "d")
    assert (parsed.inputs, parsed.outputs) == (inputs, outputs)
    assert note in parsed.note
    if not note:
        assert parsed.note == ""
    assert parsed.body.startswith("step")
    assert "second" not in parsed.body


def test_parse_contract_code_reply() -> None:
    reply = ("NAME: set_it\nDESCRIPTION: set it\nINPUTS:\n- n: the value\nOUTPUTS:\n- returns n\nBODY:\n"
             "```python\ndef set_it(n):\n    return n\n```")
    parsed = parse_contract_reply(reply, "code")
    assert parsed.body == "def set_it(n):\n    return n"
    assert parsed.inputs == "- n: the value"


@pytest.mark.parametrize(("reply", "message"), [
    ("no fields at all", "NAME, BODY"),
    ("NAME: a\nINPUTS: x\nBODY:\nstep", "DESCRIPTION"),
    ("NAME: a\nDESCRIPTION: d\nINPUTS: x\nBODY:\n  ", "non-empty"),
])
def test_unparseable_contract_replies(reply: str, message: str) -> None:
    with pytest.raises(InductionError, match=message):
        parse_contract_reply(reply, "text")


@pytest.mark.parametrize("level", ["task", "subtask"])
def test_agent_with_contract_induction_stores_packages(tmp_path, level: str, hash_embedder) -> None:
    script = CounterScript(induction=CONTRACT_SKILL)
    model = ScriptedModel(script)
    memory = SkillMemory(hash_embedder)
    env = TinyEnv([2], workdir=tmp_path)
    episode = env.start(env.tasks()[0])
    agent = Agent(model, memory=memory, inducer=Inducer(model, variant="contract"), level=level,
                  harness="small-model")
    task = agent.task(episode)
    task.run()
    assert len(memory) == 0  # the contract prompt states the outcome: induction waits for the verdict
    assert task.skills.deferred
    task.finish(succeeded=True)
    episode.close()
    [skill] = list(memory)  # the subtask level's second skill is a near-duplicate of the first
    assert skill.inputs == "- the target value, an integer"
    assert "Input:\n- the target value" in skill.render()


def test_grid_spec_runs_the_contract_variant(tmp_path) -> None:
    import yaml

    from skilltransfer.llm.testing.mock_server import MockServer
    from skilltransfer.memory import load_library
    from skilltransfer.runner.grid import run_grid
    from skilltransfer.runner.spec import load_spec

    with MockServer(CounterScript(CONTRACT_SKILL), latency_s=0.0) as server:
        spec = {"name": "c", "out": str(tmp_path / "out"), "conditions": ["task+text"], "embedder": "hash:64",
                "envs": {"a": {"env": "helpers_tinyenv:TinyEnv", "args": {"targets": [3, 5]}}},
                "models": {"mock": {"name": "openai", "base_url": server.url, "model": "mock", "backoff_base_s": 0,
                                    "max_retries": 1}},
                "induction_variants": ["contract"]}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        summary = run_grid(load_spec(str(tmp_path / "spec.yaml")))
    assert summary.counts["done"] == 1
    [outcome] = summary.outcomes
    [skill] = load_library(tmp_path / "out" / outcome.run / "memory")
    assert skill.outputs == "- the counter holds the target; the new value is reported"
    assert skill.extra["induction_prompt"].startswith("induction-contract-text@")


# --------------------------------------------------------------------------------------------- a set per task
SET_REPLY = "\n\n".join(CONTRACT_SKILL.replace("set_counter_value", name).replace("Set the counter", what)
                        for name, what in (("read_counter_value", "Read the counter"),
                                           ("reset_the_counter", "Reset the counter"),
                                           ("set_counter_value", "Set the counter")))


@pytest.mark.parametrize(("reply", "stored", "note"), [
    (SET_REPLY, 3, ""),
    (CONTRACT_SKILL, 1, "the reply held 1 skill(s), 1 usable; asked for 3-5")])
def test_subtask_level_contract_induction_writes_a_set_per_task(tmp_path, hash_embedder, reply, stored, note):
    """skills_per_task: after the verdict, one call over the whole task (its subtasks listed) writes 3-5 skills."""
    script = CounterScript(induction=reply)
    model = ScriptedModel(script)
    memory = SkillMemory(hash_embedder)
    env = TinyEnv([2], workdir=tmp_path)
    episode = env.start(env.tasks()[0])
    inducer = Inducer(model, variant="contract", skills_per_task=(3, 5))
    assert inducer.set_system is not None
    assert "Write between 3 and 5 skills" in inducer.set_system.text
    agent = Agent(model, memory=memory, inducer=inducer, level="subtask", harness="small-model")
    task = agent.task(episode)
    result = task.run()
    assert len(task.skills.deferred) >= 2  # one per subtask, kept for the verdict
    task.finish(succeeded=True)
    episode.close()
    assert script.induction_calls == 1  # one call for the whole task
    prompt = [m for m, c in zip(model.calls, result.calls.calls, strict=True) if c.role == "induction"][0]
    assert "Subtasks it was carried out in:\n1. " in prompt[1]["content"]
    assert len(memory) == stored
    steps = result.inductions
    assert len(steps) == stored
    assert all(step.status == "added" for step in steps)
    assert all(step.reason == note for step in steps)
    assert all(s.outputs and s.extra["induction_prompt"].startswith("induction-contract_set-text@") for s in memory)
    assert sum(step.prompt_tokens > 0 for step in steps) == 1  # the call's tokens are counted once


def test_the_stream_asks_for_a_set_only_at_subtask_level_with_the_contract_variant() -> None:
    from skilltransfer.settings.config import StreamConfig

    def per_task(**kwargs):
        config = StreamConfig(env="apps", **kwargs).induction_config()
        return config.skills_per_task if config is not None else None

    assert per_task(condition="subtask+text", induction_variant="contract") == (3, 5)
    assert per_task(condition="task+text", induction_variant="contract") is None
    assert per_task(condition="subtask+text") is None
    assert per_task(condition="subtask+text", induction_variant="contract", skills_per_task=None) is None


def test_a_body_that_goes_on_copying_the_prompt_is_cut() -> None:
    """The embedded model went on after its body with the prompt's '## Abstraction rules' section (seen on
    Qwen2.5-Coder-1.5B): the body ends before it and the note says so."""
    parsed = parse_contract_reply(CONTRACT_SKILL + "\n\n## Abstraction rules\n- Drop instance-specific values.", "text")
    assert parsed.body.endswith("Output: report apis.counter.get().")
    assert "Abstraction" not in parsed.body
    assert "'Abstraction rules' section: cut" in parsed.note


def test_the_set_sees_every_subtask_even_one_whose_code_failed(tmp_path, hash_embedder) -> None:
    """The per-subtask gate (no code ran without an error) does not drop a subtask from the task's set: the set is
    induced from the whole task, and the gate applies to the whole task."""
    script = CounterScript(induction=SET_REPLY)
    model = ScriptedModel(script)
    env = TinyEnv([2], workdir=tmp_path)
    episode = env.start(env.tasks()[0])
    agent = Agent(model, memory=SkillMemory(hash_embedder),
                  inducer=Inducer(model, variant="contract", skills_per_task=(3, 5)), level="subtask",
                  induce_without_working_code=False, harness="small-model")
    task = agent.task(episode)
    result = task.run()
    planned = [step.subtask for step in result.steps if type(step).__name__ == "PlanStep" and step.subtask]
    assert len(task.skills.deferred) == len(planned)  # every subtask waits for the set, none gated on its own
    task.finish(succeeded=True)
    episode.close()
    assert [s.status for s in result.inductions] == ["added"] * 3
