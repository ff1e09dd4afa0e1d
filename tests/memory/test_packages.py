"""Skill packages: contracts and resource files through SKILL.md, JSONL and memory folders; old libraries and memory
folders; resource name rules and caps; defensive writes of a package into a workspace."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from skilltransfer.errors import InputError
from skilltransfer.memory import (
    HashEmbedder,
    PackageWriteError,
    Skill,
    SkillMemory,
    export_jsonl,
    export_skill_md,
    load_library,
    materialize_skill,
)
from skilltransfer.memory.library import package_dirname
from skilltransfer.memory.package import MAX_PACKAGE_FILES, left_out_summary, read_package
from skilltransfer.memory.store import MANIFEST, SKILLS_JSONL
from skilltransfer.skill import MAX_RESOURCE_BYTES, MAX_RESOURCES, MAX_RESOURCES_BYTES, resource_name_problem

PACKAGE = Skill(name="find_contact_email", description="Find a contact's email address by their full name.",
                body="1. Search the contacts by name.\n2. Report the `email` field.",
                inputs="- the contact's full name", outputs="- the email address, as text",
                resources={"scripts/lookup.py": "def lookup(name):\n    return name\n",
                           "examples/example 1.md": "Dana -> dana@example.com\r\nkept CRLF\n"})


def without_package(skill: Skill) -> Skill:
    """The skill as held, less the manifest of the folder it was read from."""
    return skill.model_copy(update={"package": None})


def test_skill_md_keeps_contracts_and_resources(tmp_path: Path) -> None:
    [written] = export_skill_md([PACKAGE], tmp_path / "lib")
    front = written.read_text().split("---")[1]
    assert "  skilltransfer.inputs: '- the contact''s full name'" in front
    assert "  skilltransfer.outputs:" in front
    assert (written.parent / "examples" / "example 1.md").read_bytes() == b"Dana -> dana@example.com\r\nkept CRLF\n"
    assert (written.parent / "scripts" / "lookup.py").is_file()
    [loaded] = load_library(tmp_path / "lib")
    assert without_package(loaded) == PACKAGE
    assert loaded.package is not None
    assert all(item.loaded for item in loaded.package.files)


def test_jsonl_and_memory_keep_packages(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    [from_jsonl] = load_library(export_jsonl([PACKAGE], tmp_path / "lib.jsonl"))
    assert from_jsonl == PACKAGE
    memory = SkillMemory(hash_embedder)
    memory.add(PACKAGE)
    memory.save(tmp_path / "mem")
    assert json.loads((tmp_path / "mem" / MANIFEST).read_text())["format_version"] == 2
    assert SkillMemory.load(tmp_path / "mem", hash_embedder).get(PACKAGE.id) == PACKAGE
    assert load_library(tmp_path / "mem") == [PACKAGE]


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=60)
_SEGMENT = st.from_regex(r"[a-zA-Z0-9_\u00e9\u4e2d][a-zA-Z0-9_+()\-\u00e9]{0,8}(\.[a-z]{1,3})?", fullmatch=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=_TEXT, outputs=_TEXT,
       resources=st.dictionaries(st.lists(_SEGMENT, min_size=1, max_size=3).map("/".join),
                                 st.text(st.characters(blacklist_categories=("Cs",)), max_size=200), max_size=4))
def test_packages_round_trip_everywhere(tmp_path: Path, inputs: str, outputs: str, resources: dict[str, str]) -> None:
    files = set(resources)
    resources = {name: text for name, text in resources.items()  # a file name may not also be a folder, nor unsafe
                 if not any(other.startswith(name + "/") for other in files) and not resource_name_problem(name)}
    skill = Skill(name="pkg", description="A package.", body="Do it.", inputs=inputs, outputs=outputs,
                  resources=resources)
    assert skill.inputs == inputs.strip()
    folder = tmp_path / "md"
    shutil.rmtree(folder, ignore_errors=True)
    [loaded] = load_library(export_skill_md([skill], folder)[0])
    assert without_package(loaded) == skill
    [from_jsonl] = load_library(export_jsonl([skill], tmp_path / "s.jsonl"))
    assert from_jsonl == skill
    memory = SkillMemory(HashEmbedder(dim=16))
    memory.add(skill)
    memory.save(tmp_path / "mem")
    assert SkillMemory.load(tmp_path / "mem", HashEmbedder(dim=16)).get(skill.id) == skill


def test_front_matter_contracts_as_lists_and_bad_types(tmp_path: Path) -> None:
    folder = tmp_path / "lib" / "a"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: a\ndescription: d\ninputs:\n  - the name\n  - the date\n"
                                     "outputs: the event id\n---\nbody\n")
    [skill] = load_library(tmp_path / "lib")
    assert skill.inputs == "- the name\n- the date"
    assert skill.outputs == "the event id"
    (folder / "SKILL.md").write_text("---\nname: a\ndescription: d\noutputs: {a: 1}\n---\nbody\n")
    with pytest.raises(InputError, match=r"SKILL.md:2: front matter 'outputs' must be text or a list of strings"):
        load_library(tmp_path / "lib")


def test_old_memory_folders_and_libraries_load_unchanged(tmp_path: Path, hash_embedder: HashEmbedder) -> None:
    old = Skill(name="plain", description="A skill from before packages.", body="1. step")
    digest = hashlib.sha256(f"{old.name}\x00{old.description}\x00{old.body}".encode()).hexdigest()
    assert old.id == f"sk-{digest[:12]}"  # ids of skills without packages did not change
    assert Skill(name="plain", description=old.description, body=old.body, inputs="x").id != old.id
    memory = SkillMemory(hash_embedder)
    memory.add(old)
    folder = memory.save(tmp_path / "mem")
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "format_version": 1}))
    lines = [json.loads(line) for line in (folder / SKILLS_JSONL).read_text().splitlines()]
    for line in lines:
        for key in ("inputs", "outputs", "resources"):
            del line[key]
    (folder / SKILLS_JSONL).write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = SkillMemory.load(folder, hash_embedder)
    assert loaded.get(old.id) == old
    loaded.save(folder)
    assert json.loads((folder / MANIFEST).read_text())["format_version"] == 2
    (folder / MANIFEST).write_text(json.dumps({**manifest, "format_version": 3}))
    with pytest.raises(InputError, match="format_version 3 is not supported"):
        SkillMemory.load(folder, hash_embedder)


@pytest.mark.parametrize("name", ["", "/abs", "../x", "a/../b", "a//b", "a/", ".hidden", "a/.git/x", "a\\b",
                                  "SKILL.md", "x/SKILL.md", "skill.md", "a\x00b", "a\nb", "e\u0301.txt", "x" * 201,
                                  "a ", " a", "a..b", "a/./b", "a\u202eb", "a:b"])
def test_unsafe_resource_names_are_refused(name: str, tmp_path: Path) -> None:
    assert resource_name_problem(name) is not None
    with pytest.raises(ValidationError):
        Skill(name="a", description="d", body="b", resources={name: "x"})
    line = json.dumps({"name": "a", "description": "d", "body": "b", "resources": {name: "x"}})
    (tmp_path / "l.jsonl").write_text(line + "\n")
    with pytest.raises(InputError, match=r"l.jsonl:1: field 'resources'"):
        load_library(tmp_path / "l.jsonl")


@pytest.mark.parametrize("name", ["scripts/run.py", "examples/example 1.md", "donn\u00e9es/\u00e9t\u00e9.csv",
                                  "a-b_c+d@e=f,(g)[h].tar.gz", "README"])
def test_safe_resource_names(name: str) -> None:
    assert resource_name_problem(name) is None


@pytest.mark.parametrize(("resources", "message"), [
    ({"big.txt": "x" * (MAX_RESOURCE_BYTES + 1)}, "over the"),
    ({f"f{i}.txt": "x" for i in range(MAX_RESOURCES + 1)}, "at most"),
    ({f"f{i}.txt": "x" * MAX_RESOURCE_BYTES for i in range(MAX_RESOURCES_BYTES // MAX_RESOURCE_BYTES + 1)},
     "resources total"),
    ({"a": "x", "a/b": "y"}, "both a file and a folder"),
    ({"a.txt": "\ud800"}, "lone surrogate"),
])
def test_resource_caps(resources: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Skill(name="a", description="d", body="b", resources=resources)


def test_package_folder_import_takes_text_files_and_reports_the_rest(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    outer = lib / "outer"
    (outer / "scripts").mkdir(parents=True)
    (outer / "SKILL.md").write_text("---\nname: outer\ndescription: d\n---\nbody\n")
    (outer / "scripts" / "a.py").write_text("print(1)\n")
    (outer / "logo.png").write_bytes(b"\x89PNG\xff\xfe")
    (outer / ".hidden").write_text("secret")
    (outer / "__pycache__").mkdir()
    (outer / "__pycache__" / "a.pyc").write_bytes(b"\x00")
    (outer / "big.txt").write_text("x" * (MAX_RESOURCE_BYTES + 1))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "passwd").write_text("root:x:0:0")
    (outer / "link.txt").symlink_to(tmp_path / "outside" / "passwd")
    (outer / "linkdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (outer / "nested").mkdir()
    (outer / "nested" / "SKILL.md").write_text("---\nname: nested\ndescription: d2\n---\nbody\n")
    (outer / "nested" / "data.txt").write_text("rows\n")
    skills = {skill.name: skill for skill in load_library(lib)}
    assert skills["outer"].resources == {"scripts/a.py": "print(1)\n"}
    package = skills["outer"].package
    assert package is not None
    assert [(f.path, f.loaded, f.note) for f in package.files] == [
        (".hidden", False, "a name an agent's resource cannot have"),  # kept in the package, never shown
        ("big.txt", False, f"over the {MAX_RESOURCE_BYTES}-byte limit of one text file"),
        ("logo.png", False, "binary, not UTF-8 text"), ("scripts/a.py", True, "")]
    assert package.files[2].sha256 == hashlib.sha256(b"\x89PNG\xff\xfe").hexdigest()
    assert package.files[2].size == 6
    assert sorted(package.left_out) == ["__pycache__/ (a cache folder, not part of the package)",
                                        "link.txt (a symbolic link, not followed)",
                                        "linkdir/ (a symbolic link, not followed)"]
    line = left_out_summary(package)
    assert line is not None
    assert "3 of 4 files not loaded" in line
    assert "link.txt" in line
    nested = skills["nested"]
    assert nested.resources == {"data.txt": "rows\n"}
    assert nested.package is not None
    assert left_out_summary(nested.package) is None


def test_merge_takes_the_package_with_the_body(hash_embedder: HashEmbedder) -> None:
    memory = SkillMemory(hash_embedder)
    plain = Skill(name="a", description=PACKAGE.description, body="short")
    memory.add(plain)
    result = memory.add(PACKAGE)
    assert result.action == "merged"
    stored = memory.get(plain.id)
    assert (stored.body, stored.inputs, stored.outputs, stored.resources) == (
        PACKAGE.body, PACKAGE.inputs, PACKAGE.outputs, PACKAGE.resources)


def test_render_shows_contracts_only_when_present() -> None:
    plain = Skill(name="a", description="Do a.", body="1. x")
    assert plain.render() == "### Skill: a\nDo a.\n1. x\n"
    text = PACKAGE.render()
    assert text.startswith("### Skill: find_contact_email\nFind a contact's email address by their full name.\n"
                           "Input:\n- the contact's full name\nOutput:\n- the email address, as text\n"
                           "Resources: examples/example 1.md, scripts/lookup.py\n1. Search")
    assert PACKAGE.body not in PACKAGE.render_card()


def test_materialize_writes_the_package(tmp_path: Path) -> None:
    folder = materialize_skill(PACKAGE, tmp_path)
    assert folder == tmp_path / "skills" / "find_contact_email"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "SKILL.md", "examples/example 1.md", "scripts/lookup.py"]
    assert (folder / "examples" / "example 1.md").read_bytes() == PACKAGE.resources["examples/example 1.md"].encode()
    assert [without_package(s) for s in load_library(folder / "SKILL.md")] == [PACKAGE]
    assert package_dirname("../evil name") == "evil-name"


def _tamper(ws: Path, outside: Path, how: str) -> None:
    skills = ws / "skills"
    package = skills / "find_contact_email"
    if how == "skills-link":
        skills.symlink_to(outside, target_is_directory=True)
        return
    skills.mkdir()
    if how == "skills-file":
        skills.rmdir()
        skills.write_text("not a folder")
    elif how == "package-link":
        package.symlink_to(outside, target_is_directory=True)
    elif how == "package-file":
        package.write_text("junk")
    elif how == "package-fifo":
        os.mkfifo(package)
    elif how == "package-dir":
        (package / "scripts").mkdir(parents=True)
        (package / "junk.txt").write_text("old")
        (package / "scripts" / "lookup.py").symlink_to(outside / "victim.txt")
        (package / "examples").symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize("how", ["skills-link", "skills-file", "package-link", "package-file", "package-fifo",
                                 "package-dir"])
def test_materialize_never_writes_through_what_the_agent_left(tmp_path: Path, how: str) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    _tamper(ws, outside, how)
    folder = materialize_skill(PACKAGE, ws)
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    assert (outside / "victim.txt").read_text() == "keep me"
    assert not (ws / "skills").is_symlink()
    assert not folder.is_symlink()
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "SKILL.md", "examples", "examples/example 1.md", "scripts", "scripts/lookup.py"]
    assert [p.name for p in (ws / "skills").iterdir()] == ["find_contact_email"]  # the old one is gone


def test_materialize_refuses_bad_places(tmp_path: Path) -> None:
    with pytest.raises(PackageWriteError, match="not a plain name"):
        materialize_skill(PACKAGE, tmp_path, dirname="..")
    with pytest.raises(PackageWriteError, match="cannot write skill package"):
        materialize_skill(PACKAGE, tmp_path / "missing")


def test_a_skill_md_atop_a_big_tree_reads_a_bounded_part(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text("---\nname: top\ndescription: d\n---\nbody\n")
    for block in range(MAX_PACKAGE_FILES // 250 + 2):
        folder = tmp_path / f"d{block:03d}"
        folder.mkdir()
        for index in range(250):
            (folder / f"f{index}.bin").write_bytes(b"\xff")
    [skill] = load_library(tmp_path / "SKILL.md")
    assert skill.resources == {}
    assert skill.package is not None
    assert len(skill.package.files) == MAX_PACKAGE_FILES
    past = (MAX_PACKAGE_FILES // 250 + 2) * 250 - MAX_PACKAGE_FILES
    assert len(skill.package.left_out) == past  # each file past the cap named, with why
    assert all(line.endswith(f"(past the {MAX_PACKAGE_FILES}-file limit of one package, not read)")
               for line in skill.package.left_out)
    line = left_out_summary(skill.package)
    assert line is not None
    assert f"and {MAX_PACKAGE_FILES - 20} more" in line
    assert f"not part of the package ({past})" in line


def test_a_folder_of_exactly_the_file_limit_is_not_called_truncated(tmp_path: Path) -> None:
    for index in range(MAX_PACKAGE_FILES):
        (tmp_path / f"f{index:04d}.bin").write_bytes(b"\xff")
    package, _ = read_package(tmp_path, "", b"")
    assert package.left_out == []
    (tmp_path / "one-more.bin").write_bytes(b"\xff")
    package, _ = read_package(tmp_path, "", b"")
    assert len(package.left_out) == 1
    assert package.left_out[0].endswith(f"(past the {MAX_PACKAGE_FILES}-file limit of one package, not read)")
