"""Skill library import/export: SKILL.md packages, JSONL, saved memory folders, and every bad-input error."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skilltransfer.errors import InputError
from skilltransfer.memory import HashEmbedder, Skill, SkillMemory, export_jsonl, export_skill_md, load_library
from skilltransfer.memory.library import parse_skill_md, read_library

SKILLS = [
    Skill(name="send-email", description="Send an email to a contact", body="1. Open email.\n2. Send: it's done.",
          level="subtask", extra={"license": "MIT"}),
    Skill(name="find_contact", description="Find a contact's email by name", format="code",
          body="def find_contact(apis, name: str) -> str:\n    # caveat: names are case-sensitive\n"
               "    return apis.contacts.search(name)[0].email"),
    Skill(name="Sum Column: v2", description="Sum a spreadsheet column — with ünïcode", body="Add the cells.\n\n---\n"),
]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def comparable(skill: Skill) -> dict:
    data = skill.model_dump(exclude={"package"})  # the manifest of the folder a skill was read from
    data["body"] = data["body"].strip("\n")
    return data


def test_skill_md_round_trip(tmp_path: Path) -> None:
    skills = [s.model_copy(deep=True) for s in SKILLS]
    skills[1].provenance.source_task_id = "task-7"
    skills[1].usage.times_retrieved = 3
    written = export_skill_md(skills, tmp_path / "lib")
    assert [p.parent.name for p in written] == ["send-email", "find-contact", "sum-column-v2"]
    assert "```python" in written[1].read_text()
    loaded = load_library(tmp_path / "lib")
    by_name = {s.name: s for s in loaded}
    assert {name: comparable(s) for name, s in by_name.items()} == {s.name: comparable(s) for s in skills}
    assert by_name["find_contact"].code is not None
    assert by_name["find_contact"].code.function_name == "find_contact"


def test_export_skill_md_makes_slugs_unique(tmp_path: Path) -> None:
    twins = [Skill(name="a b", description="d", body="x"), Skill(name="a-b", description="d", body="y")]
    assert [p.parent.name for p in export_skill_md(twins, tmp_path)] == ["a-b", "a-b-2"]


def test_jsonl_round_trip(tmp_path: Path) -> None:
    path = export_jsonl(SKILLS, tmp_path / "lib.jsonl")
    assert len(path.read_text().splitlines()) == 3
    assert [s.model_dump() for s in load_library(path)] == [s.model_dump() for s in SKILLS]


def test_minimal_jsonl_and_skill_md(tmp_path: Path) -> None:
    path = write(tmp_path / "lib.jsonl", '{"name": "a", "description": "do a", "body": "steps"}\n\n'
                                         '{"name": "f", "description": "do f", "body": "def f():\\n  return 1",'
                                         ' "format": "code"}\n')
    a, f = load_library(path)
    assert (a.format, a.level, f.format) == ("text", "task", "code")
    assert a.id.startswith("sk-")
    md = write(tmp_path / "pkg" / "deep" / "x" / "SKILL.md",
               "---\nname: pdf-tools\ndescription: Work with PDFs\nlicense: Apache-2.0\nallowed-tools: [bash, read]\n"
               "---\n\n# PDF tools\n\nUse pypdf.\n")
    skill = load_library(tmp_path / "pkg")[0]
    assert skill.body == "# PDF tools\n\nUse pypdf."
    assert skill.extra == {"license": "Apache-2.0", "allowed-tools": '["bash", "read"]'}
    assert load_library(md)[0].name == "pdf-tools"


def test_saved_memory_folder_is_a_library(tmp_path: Path) -> None:
    memory = SkillMemory(HashEmbedder(32))
    memory.add_many(SKILLS)
    memory.save(tmp_path / "mem")
    assert [s.id for s in load_library(tmp_path / "mem")] == [s.id for s in memory]


# ---------------------------------------------------------------- bad input

def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope: skill library not found"):
        load_library(tmp_path / "nope")


def test_a_missing_relative_path_says_where_it_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shipped spec's `data/demo_library`, run from another folder: the line names the folder it was read from."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^data/demo_library: skill library not found \(a relative path is read "
                                         rf"from the working directory, {re.escape(str(tmp_path))}: run from"):
        load_library(Path("data/demo_library"))


def test_empty_libraries(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="library is empty: no SKILL.md"):
        load_library(tmp_path / "empty")
    write(tmp_path / "blank.jsonl", "\n\n")
    with pytest.raises(InputError, match=r"blank.jsonl: library is empty"):
        load_library(tmp_path / "blank.jsonl")
    write(tmp_path / "half" / "skills.jsonl", "")
    with pytest.raises(InputError, match="without manifest.json"):
        load_library(tmp_path / "half")


def test_unsupported_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unsupported library"):
        load_library(write(tmp_path / "skills.csv", "a,b"))


@pytest.mark.parametrize(("text", "message", "line"), [
    ("# Title\nno front matter\n", "no YAML front matter", 1),
    ("---\nname: x\ndescription: y\n", "not closed", 1),
    ("---\ndescription: only\n---\nbody\n", "lacks a non-empty string 'name'", 2),
    ("---\nname: x\n---\nbody\n", "lacks a non-empty string 'description'", 2),
    ("---\nname: x\ndescription: \"\"\n---\nbody\n", "'description'", 2),
    ("---\nname: x\ndescription: y\nfoo: [1, 2\n---\nbody\n", "invalid YAML front matter", None),
    ("---\n- a\n- b\n---\nbody\n", "must be a YAML mapping", 2),
    ("---\nname: x\ndescription: y\nformat: binary\n---\nbody\n", "front matter field 'format'", 2),
])
def test_bad_skill_md(tmp_path: Path, text: str, message: str, line: int | None) -> None:
    path = write(tmp_path / "lib" / "s" / "SKILL.md", text)
    with pytest.raises(InputError, match=message) as info:
        load_library(tmp_path / "lib")
    assert str(path) in str(info.value)
    if line is not None:
        assert f"SKILL.md:{line}:" in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "SKILL.md", "---\nname: x\ndescription: y\nbad: : :\n---\nbody\n")
    with pytest.raises(InputError, match=r"SKILL.md:4: invalid YAML"):
        parse_skill_md(path)


@pytest.mark.parametrize(("text", "message", "line"), [
    ('{"name": "a", "description": "d", "body": "b"}\n{"name": "b", "descr\n', "broken JSON line", 2),
    ('{"name": "a", "description": "d", "body": "b"}\n\n[1, 2]\n', "expected a JSON object", 3),
    ('{"name": "a", "body": "b"}\n', "field 'description'", 1),
    ('{"name": "a", "description": "d", "body": "b", "format": "yaml"}\n', "field 'format'", 1),
    ('{"name": "a", "description": "d", "body": "b", "usage": {"times_retrieved": "x"}}\n',
     "field 'usage.times_retrieved'", 1),
])
def test_bad_jsonl(tmp_path: Path, text: str, message: str, line: int) -> None:
    path = write(tmp_path / "lib.jsonl", text)
    with pytest.raises(InputError, match=message) as info:
        load_library(path)
    assert f"lib.jsonl:{line}:" in str(info.value)


def test_non_utf8_files(tmp_path: Path) -> None:
    good = json.dumps({"name": "a", "description": "d", "body": "b"}).encode()
    (tmp_path / "lib.jsonl").write_bytes(good + b"\n" + b'{"name": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"lib.jsonl:2: not UTF-8"):
        load_library(tmp_path / "lib.jsonl")
    (tmp_path / "pkg" / "s").mkdir(parents=True)
    (tmp_path / "pkg" / "s" / "SKILL.md").write_bytes(b"---\nname: x\ndescription: \xff\n---\n")
    with pytest.raises(InputError, match=r"SKILL.md:3: not UTF-8"):
        load_library(tmp_path / "pkg")


def test_duplicate_names(tmp_path: Path) -> None:
    write(tmp_path / "a" / "one" / "SKILL.md", "---\nname: dup\ndescription: first\n---\nA\n")
    write(tmp_path / "a" / "two" / "SKILL.md", "---\nname: dup\ndescription: second\n---\nB\n")
    read = read_library(tmp_path / "a")  # both read, each named by its folder (it was refused whole)
    assert [(s.name, s.description) for s in read.skills] == [("one", "first"), ("two", "second")]
    assert read.renamed == ["dup: the name of 2 skills, each read as its folder's path: one, two"]
    rows = [{"name": n, "description": "d", "body": b} for n, b in [("x", "1"), ("y", "2"), ("x", "3")]]
    write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"duplicate skill name 'x' in .*d.jsonl:1 and .*d.jsonl:3"):
        load_library(tmp_path / "d.jsonl")


def test_a_saved_memory_keeps_skills_that_share_a_name(tmp_path: Path) -> None:
    memory = SkillMemory(HashEmbedder(32))
    memory.add_many([Skill(name="look_first", description="Print the contacts before emailing.", body="1. a"),
                     Skill(name="look_first", description="List the files of the folder to clean.", body="1. b")])
    folder = memory.save(tmp_path / "mem")
    assert [s.description[:5] for s in load_library(folder)] == ["Print", "List "]


def test_memory_folder_errors(tmp_path: Path) -> None:
    memory = SkillMemory(HashEmbedder(32))
    memory.add_many(SKILLS)
    folder = memory.save(tmp_path / "mem")
    (folder / "skills.jsonl").unlink()
    with pytest.raises(InputError, match="has manifest.json but no skills.jsonl"):
        load_library(folder)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=80)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_TEXT.filter(str.strip), description=_TEXT.filter(str.strip), body=_TEXT,
       extra=st.dictionaries(st.from_regex(r"[a-z][a-z_-]{0,10}", fullmatch=True).filter(
           lambda k: k not in {"id", "name", "description", "format", "level", "provenance", "usage", "inputs",
                               "outputs"}), _TEXT, max_size=3))
def test_round_trips_preserve_arbitrary_text(tmp_path: Path, name: str, description: str, body: str,
                                             extra: dict[str, str]) -> None:
    skill = Skill(name=name, description=description, body=body, extra=extra)
    folder = tmp_path / "md"
    shutil.rmtree(folder, ignore_errors=True)
    [loaded] = load_library(export_skill_md([skill], folder)[0])
    assert comparable(loaded) == comparable(skill)
    [from_jsonl] = load_library(export_jsonl([skill], tmp_path / "s.jsonl"))
    assert from_jsonl == skill
