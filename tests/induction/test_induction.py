"""Skill induction: the shared prompt and its variants, reply parsing, one skill per (sub-)trajectory."""

from __future__ import annotations

import pytest
from helpers_tinyenv import CODE_SKILL, TEXT_SKILL, CounterScript, TinyEnv, role_of

from skilltransfer.agents import ActionStep, Agent, CallLog, TrajectoryText
from skilltransfer.induction import PROMPT_VARIANTS, Inducer, InductionConfig, InductionError, parse_skill_reply
from skilltransfer.induction.abstraction import instance_names, instance_paths, instance_values, mask_names, mask_values
from skilltransfer.induction.inducer import INDUCTION_PROMPTS
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.memory.store import SkillMemory
from skilltransfer.settings.config import StreamConfig
from skilltransfer.skill import Provenance

ACTIONS = [ActionStep(0, None, "r", "Look.", "print(apis.counter.get())", "0\n"),
           ActionStep(1, None, "r", "", None, "FORMAT ERROR", format_error=True),
           ActionStep(2, None, "r", "Set.", "apis.counter.add(3)\ncomplete_task()", "(no output)", done=True)]
TRAJECTORY = TrajectoryText(ACTIONS, InductionConfig().max_observation_chars, InductionConfig().max_trajectory_chars)


def test_parse_text_reply():
    name, description, body, note = parse_skill_reply(TEXT_SKILL, "text")
    assert name == "set_counter_value"
    assert description == "Set the counter to a target value."
    assert body.startswith("1. Reset the counter")
    assert body.endswith("add() needs an int.")
    assert note == ""


def test_parse_code_reply_and_markdown_decorations():
    name, _, body, _ = parse_skill_reply(CODE_SKILL, "code")
    assert name == "set_counter_to"
    assert body.startswith("def set_counter_to(target):")
    assert "```" not in body
    decorated = "**NAME:** `x_y`\n**DESCRIPTION:** does\nthings.\n**BODY:**\nstep one"
    assert parse_skill_reply(decorated, "text") == ("x_y", "does things.", "step one", "")


def test_parse_keeps_only_the_first_skill():
    two = TEXT_SKILL + "\n\nNAME: second\nDESCRIPTION: other\nBODY:\nmore"
    name, _, body, note = parse_skill_reply(two, "text")
    assert name == "set_counter_value"
    assert "second" not in body
    assert "more than one skill" in note


@pytest.mark.parametrize(("reply", "fmt", "message"), [
    ("I could not find a reusable skill.", "text", "NAME, DESCRIPTION, BODY"),
    ("NAME: a\nBODY:\nx", "text", "DESCRIPTION"),
    ("NAME: a\nDESCRIPTION: b\nBODY:\n   ", "text", "non-empty"),
    ("NAME: a\nDESCRIPTION: b\nBODY:\njust prose, no function", "code", "no ```python block"),
])
def test_unparseable_replies(reply, fmt, message):
    with pytest.raises(InductionError, match=message):
        parse_skill_reply(reply, fmt)


def _system(variant: str, fmt: str) -> str:
    return Inducer(ScriptedModel([]), variant=variant, format=fmt).system.text


@pytest.mark.parametrize("fmt", ["text", "code"])
def test_prompt_variants(fmt):
    full, no_demo, no_rules = (_system(v, fmt) for v in ("full", "no_demo", "no_rules"))
    assert "## Demonstration" in full
    assert "## Abstraction rules" in full
    assert "## Demonstration" not in no_demo
    assert "## Abstraction rules" in no_demo
    assert "## Demonstration" in no_rules
    assert "## Abstraction rules" not in no_rules
    assert "exactly ONE skill" in full
    assert "## Output" in no_demo
    assert "## Output" in no_rules
    rule = "become function PARAMETERS" if fmt == "code" else "Drop instance-specific values"
    assert rule in full
    ids = {Inducer(ScriptedModel([]), variant=v, format=fmt).prompt_id for v in PROMPT_VARIANTS}
    assert len(ids) == len(PROMPT_VARIANTS) == 4
    assert all(i.startswith("induction-") and f"-{fmt}@" in i for i in ids)


def test_prompt_files_exist():
    names = {p.stem for p in INDUCTION_PROMPTS.glob("*.md")}
    assert {"instruction", "trajectory", "rules_text", "rules_code", "demonstration_text", "demonstration_code",
            "output_text", "output_code", "format_text", "format_code"} <= names


def test_induce_text_skill_with_provenance():
    model = ScriptedModel([TEXT_SKILL])
    calls = CallLog()
    induced = Inducer(model).induce("Set the counter to 3.", TRAJECTORY, level="task", calls=calls,
                                    provenance=Provenance(source_task_id="t1", stream_position=4))
    skill = induced.skill
    assert skill is not None
    assert skill.format == "text"
    assert skill.level == "task"
    assert skill.provenance.stream_position == 4
    assert skill.extra["induction_prompt"] == induced.prompt_id
    assert [c.role for c in calls.calls] == ["induction"]
    user = model.calls[0][1]["content"]
    assert "Set the counter to 3." in user
    assert "apis.counter.add(3)" in user
    assert "Action: (none: format error)" in user


def test_induce_code_skill_named_after_its_function():
    reply = "NAME: Counter Setter\nDESCRIPTION: set it\nBODY:\n```python\ndef set_it(n):\n    return n\n```"
    induced = Inducer(ScriptedModel([reply]), format="code").induce("g", TRAJECTORY, level="subtask", calls=CallLog())
    assert induced.skill.name == "set_it"
    assert induced.skill.code.signature == "set_it(n)"


def test_induce_unparseable_returns_no_skill():
    induced = Inducer(ScriptedModel(["Sorry, nothing to learn here."])).induce("g", TRAJECTORY, level="task",
                                                                                calls=CallLog())
    assert induced.skill is None
    assert "lacks" in induced.error
    assert induced.reply == "Sorry, nothing to learn here."


def test_same_prompt_for_both_levels(tmp_path):
    """Task-level and subtask-level induction send the identical system prompt."""
    systems = {}
    for level in ("task", "subtask"):
        script = CounterScript()
        model = ScriptedModel(script)
        env = TinyEnv([2], workdir=tmp_path / level)
        episode = env.start(env.tasks()[0])
        Agent(model, memory=SkillMemory(_embedder()), inducer=Inducer(model), level=level,
              harness="small-model").run(episode)
        episode.close()
        systems[level] = {c[0]["content"] for c in model.calls if role_of(c) == "induction"}
    assert len(systems["task"]) == 1
    assert systems["task"] == systems["subtask"]


def _embedder():
    from skilltransfer.memory.embedders import HashEmbedder

    return HashEmbedder(dim=64)


@pytest.mark.parametrize("level", ["task", "subtask"])
def test_one_skill_per_trajectory_and_unparseable_is_skipped(tmp_path, level, hash_embedder):
    replies = ["garbage, no fields", TEXT_SKILL.replace("set_counter_value", "other_name")]
    script = CounterScript(induction=lambda n, messages: replies[n % 2])
    model = ScriptedModel(script)
    memory = SkillMemory(hash_embedder)
    env = TinyEnv([2], workdir=tmp_path)
    episode = env.start(env.tasks()[0])
    result = Agent(model, memory=memory, inducer=Inducer(model), level=level, harness="small-model").run(episode)
    episode.close()
    expected = 1 if level == "task" else 2  # one induction per trajectory / per sub-trajectory
    assert script.roles.count("induction") == expected
    assert len(result.inductions) == expected
    assert result.inductions[0].status == "unparseable"
    assert result.inductions[0].reply == "garbage, no fields"
    assert len(memory) == expected - 1


def test_config_rejects_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        InductionConfig(variant="tiny")


def test_instance_names_of_a_goal():
    assert instance_names("What is Olga Nguyen's phone number?") == ["Olga Nguyen"]
    assert instance_names("I need to call Nadia Brennan. What's their phone number?") == ["Nadia Brennan"]
    assert instance_names("Call Olga Nguyen now, then email Jean-Luc Picard") == ["Jean-Luc Picard", "Olga Nguyen"]
    assert instance_names("What is the title of my note about the dentist?") == []


OLGA_SKILL = ("NAME: Get Olga Nguyen phone\nDESCRIPTION: Retrieve Olga Nguyen's phone number.\nBODY:\n"
              "1. Search contacts for Olga Nguyen (query=\"Olga Nguyen\").\n2. Olga's entry holds `phone`.")


def test_names_of_the_goal_are_masked_in_text_skills_and_recorded():
    goal = "What is Olga Nguyen's phone number?"
    skill = Inducer(ScriptedModel([OLGA_SKILL])).induce(goal, TRAJECTORY, level="task", calls=CallLog()).skill
    assert skill is not None
    assert skill.name == "Get <name> phone"
    assert skill.description == "Retrieve <name>'s phone number."
    assert skill.body == '1. Search contacts for <name> (query="<name>").\n2. <name>\'s entry holds `phone`.'
    assert skill.extra["masked_names"] == "Olga Nguyen"
    kept = Inducer(ScriptedModel([OLGA_SKILL]), mask_instance_names=False).induce(goal, TRAJECTORY, level="task",
                                                                                    calls=CallLog()).skill
    assert kept is not None
    assert "Olga Nguyen" in kept.body
    assert "masked_names" not in kept.extra
    other = Inducer(ScriptedModel([OLGA_SKILL])).induce("Count the notes.", TRAJECTORY, level="task",
                                                         calls=CallLog()).skill
    assert other is not None
    assert "masked_names" not in other.extra


def test_code_bodies_keep_what_the_model_wrote():
    reply = ("NAME: olga_phone\nDESCRIPTION: Olga Nguyen's phone.\nBODY:\n```python\ndef olga_phone(apis):\n"
             "    return 'Olga Nguyen'\n```")
    skill = Inducer(ScriptedModel([reply]), format="code").induce("Find Olga Nguyen's phone", TRAJECTORY,
                                                                  level="task", calls=CallLog()).skill
    assert skill is not None
    assert skill.name == "olga_phone"
    assert skill.description == "<name>'s phone."
    assert "'Olga Nguyen'" in skill.body


def test_a_stream_switches_name_masking_off():
    on = StreamConfig(run="r", condition="task+text").induction_config()
    off = StreamConfig(run="r", condition="task+text", mask_instance_names=False).induction_config()
    assert on is not None
    assert off is not None
    assert on.mask_instance_names
    assert not off.mask_instance_names


def test_goal_paths_are_masked_also_as_the_start_of_a_longer_path():
    goal = "List the files of data/astronomy, read data/astronomy/README.md and describe the CSV file."
    paths = instance_paths(goal)
    assert paths == ["data/astronomy/README.md", "data/astronomy"]
    text = "Load data/astronomy/planets.csv; see data/astronomy/README.md. Not data/astronomyx or mydata/astronomy."
    assert mask_names(text, paths) == "Load <path>/planets.csv; see <path>. Not data/astronomyx or mydata/astronomy."


def test_paths_of_the_goal_are_masked_in_text_skills_and_recorded():
    reply = ("NAME: count_missing\nDESCRIPTION: Count rows without a value in data/astronomy.\nBODY:\n"
             "1. Read data/astronomy/README.md.\n2. Load data/astronomy/planets.csv with pandas, dtype=str.")
    goal = "How many distinct planets in data/astronomy have no recorded radius? See data/astronomy/README.md."
    skill = Inducer(ScriptedModel([reply])).induce(goal, TRAJECTORY, level="task", calls=CallLog()).skill
    assert skill is not None
    assert skill.description == "Count rows without a value in <path>."
    assert skill.body == "1. Read <path>.\n2. Load <path>/planets.csv with pandas, dtype=str."
    assert skill.extra["masked_names"] == "data/astronomy/README.md; data/astronomy"


OFFICE_DOCS = ("apis.excel.read_file(file_path): The rows of a sheet. apis.email.list_emails(username): email_id, "
               "from, to, subject and content.")


def test_instance_values_of_a_task():
    rows = "[['Product', 'Units', 'Revenue'], ['keyboard', 589, 8211], ['desk lamp', 241, 3992]]"
    task = "In data/sales.xlsx, change the Revenue of keyboard to 2090."
    trajectory = f"rows = apis.excel.read_file('data/sales.xlsx')\n{rows}\napis.excel.set_cell(path, 2, 3, 2090)"
    assert instance_values(task, trajectory, OFFICE_DOCS) == ["keyboard", "Revenue", "2090"]
    assert instance_values(task, rows, OFFICE_DOCS) == ["keyboard", "Revenue"]  # 2090 never used: no value
    mail = "Forward the email with the subject 'Notes from the hiring panel' in Quinn's mailbox to Paul."
    listing = "[{'email_id': '1.eml', 'subject': 'Notes from the hiring panel', 'from': 'quinn@example.com'}]"
    assert instance_values(mail, listing, OFFICE_DOCS) == ["Notes from the hiring panel"]  # 'subject' is documented
    event = "Add 'team sync' to Yara's calendar on Monday, August 05, 2024 from 12:00 to 13:00."
    code = "create_event(username, 'team sync', '2024-08-05 12:00:00', '2024-08-05 13:00:00')"
    assert instance_values(event, code, OFFICE_DOCS) == ["team sync"]  # 2024 stands alone only in the task
    assert instance_values("Count the notes of Olga Nguyen.", "['Olga Nguyen']", "") == []  # a name: <name>


def test_mask_values_quoted_bare_and_in_a_skill_name():
    values = ["keyboard", "Revenue", "2090"]
    text = "Find 'keyboard': rows.index('keyboard'); set the Revenue of keyboard to 2090, not 20901 or 2024-05-03."
    assert mask_values(text, values) == ("Find <value>: rows.index(<value>); set the <value> of <value> to <value>, "
                                         "not 20901 or 2024-05-03.")
    assert mask_values("keyboard_row_idx", values) == "keyboard_row_idx"
    assert mask_values("update_revenue_for_keyboard", values, identifier=True) == "update_<value>_for_<value>"


def test_instance_values_are_masked_in_text_skills_and_recorded():
    reply = ("NAME: update_revenue_for_keyboard\nDESCRIPTION: Set the Revenue of keyboard in <path>.\nBODY:\n"
             "1. Find the row: `[r[0] for r in rows].index('keyboard') + 1`.\n"
             "2. `apis.excel.set_cell(p, row, 1, 2090)`.")
    skill = Inducer(ScriptedModel([reply])).induce("Finish the task now.", TRAJECTORY, level="subtask",
                                                   calls=CallLog(), values=["keyboard", "Revenue", "2090"]).skill
    assert skill is not None
    assert skill.name == "update_<value>_for_<value>"
    assert skill.description == "Set the <value> of <value> in <path>."
    assert skill.body == ("1. Find the row: `[r[0] for r in rows].index(<value>) + 1`.\n"
                          "2. `apis.excel.set_cell(p, row, 1, <value>)`.")
    assert skill.extra["masked_names"] == "keyboard; Revenue; 2090"
    kept = Inducer(ScriptedModel([reply]), mask_instance_names=False).induce(
        "Finish the task now.", TRAJECTORY, level="subtask", calls=CallLog(), values=["keyboard"]).skill
    assert kept is not None
    assert "'keyboard'" in kept.body


@pytest.mark.parametrize("level", ["task", "subtask"])
def test_the_agent_masks_the_task_values_its_trajectory_used(tmp_path, level, hash_embedder):
    """The counter target (a 3-digit number of the instruction) is masked in a skill whose trajectory used it, at
    subtask level too, where the induction goal is the subtask text; the read-only first subtask never used it."""
    reply = "NAME: set_counter_to_305\nDESCRIPTION: Set the counter to 305.\nBODY:\n1. apis.counter.add(305)."
    model = ScriptedModel(CounterScript(induction=reply))
    memory = SkillMemory(hash_embedder)
    env = TinyEnv([305], workdir=tmp_path)
    episode = env.start(env.tasks()[0])
    Agent(model, memory=memory, inducer=Inducer(model), level=level, harness="small-model").run(episode)
    episode.close()
    skills = list(memory)
    assert len(skills) == (1 if level == "task" else 2)
    setting = skills[-1]
    assert (setting.name, setting.description, setting.body) == (
        "set_counter_to_<value>", "Set the counter to <value>.", "1. apis.counter.add(<value>).")
    assert setting.extra["masked_names"] == "305"
    if level == "subtask":
        assert skills[0].description == "Set the counter to 305."
