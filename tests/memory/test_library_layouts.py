"""Skill libraries in the layouts published libraries ship in (issue 54): skills in hidden folders (openai/skills'
``skills/.curated``), skill folders that are links (inside the library: followed; out of it: named), task folders
in which a skill name repeats (a benchmark's human-authored library), model-written SKILL.md files without ``---``
fences (read only when asked, and recorded as such). Each test builds its own small library of that layout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers_cli import main_cli

from skilltransfer.errors import InputError
from skilltransfer.memory.layout import find_skills
from skilltransfer.memory.library import LENIENT_KEY, read_library
from skilltransfer.settings import StreamConfig


def skill(folder: Path, name: str, description: str = "", body: str = "Do it.", head: str = "") -> Path:
    """A SKILL.md in ``folder`` (made) with this name and description."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: {description or 'The skill ' + name + '.'}\n{head}---\n"
                    f"{body}\n")
    return path


def openai_like(root: Path) -> Path:
    """openai/skills as published: skills only in hidden folders, plus a git folder and a cache folder."""
    lib = root / "skills"
    for group, names in ((".curated", ("gh-fix-ci", "notion-capture")), (".system", ("skill-creator",)),
                         (".experimental", ("create-plan",))):
        for name in names:
            skill(lib / group / name, name)
    skill(lib / ".git" / "refs" / "stash", "not-a-skill")
    skill(lib / "node_modules" / "pkg", "not-a-skill-either")
    return lib


def test_skills_in_hidden_folders_are_read_and_version_control_is_not(tmp_path: Path, monkeypatch, capsys) -> None:
    lib = openai_like(tmp_path)  # before issue 54: "library is empty: no SKILL.md files found"
    read = read_library(lib)
    assert sorted(s.name for s in read.skills) == ["create-plan", "gh-fix-ci", "notion-capture", "skill-creator"]
    assert read.unreadable == []
    lines = read.read_lines()
    assert lines[0] == (f"read: 4 skills of 4 SKILL.md files in {lib}; 4 in hidden folders (.curated 2, "
                        ".experimental 1, .system 1)")
    assert "not looked in: .git/ (version control), node_modules/ (a cache folder)" in lines
    skill(lib / "plain", "plain-skill")  # a library mixing plain and hidden folders: every skill, said so
    code, out, err = main_cli(["library", "show", str(lib)], monkeypatch, capsys)
    assert code == 0, err
    assert "5 skills in" in out
    assert "read: 5 skills of 5 SKILL.md files" in out
    assert "4 in hidden folders" in out
    assert "not looked in: .git/ (version control)" in out


def test_a_skills_own_git_folder_is_named_by_its_package_not_the_library(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    skill(lib / "checkout", "checkout")
    (lib / "checkout" / ".git").mkdir()
    (lib / "checkout" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (lib / "checkout" / ".gitignore").write_text("*.pyc\n")
    read = read_library(lib)
    package = read.skills[0].package
    assert package is not None
    assert [item.path for item in package.files] == [".gitignore"]  # a dotfile is part of the package
    assert package.left_out == [".git/ (version control, not part of the package)"]
    assert not any(line.startswith("not looked in") for line in read.read_lines())


def test_skill_folders_that_are_links_are_followed_inside_the_library_and_named_outside(tmp_path: Path) -> None:
    outside = tmp_path / "checkouts"
    skill(outside / "far-skill", "far-skill")
    lib = tmp_path / "lib"
    skill(lib / "plain", "plain")
    skill(lib / "node_modules" / "vendored", "vendored")  # not looked in, but reached through a link
    (lib / "vendored").symlink_to("node_modules/vendored", target_is_directory=True)
    (lib / "again").symlink_to("plain", target_is_directory=True)  # read once, at its own place
    (lib / "far").symlink_to(outside / "far-skill", target_is_directory=True)
    (lib / "gone").symlink_to(tmp_path / "missing", target_is_directory=True)
    (lib / "group").mkdir()
    (lib / "group" / "up").symlink_to("..", target_is_directory=True)  # a loop
    read = read_library(lib)
    assert sorted(s.name for s in read.skills) == ["plain", "vendored"]
    assert all("far" not in str(s.package.folder) for s in read.skills if s.package)
    vendored = next(s for s in read.skills if s.name == "vendored")
    assert vendored.package is not None
    assert Path(vendored.package.folder) == (lib / "node_modules" / "vendored").resolve()
    lines = "\n".join(read.read_lines())
    assert "; 1 through links" in lines
    assert "link followed: vendored: a link to node_modules/vendored inside the library, 1 skills read" in lines
    assert "link followed: again: a link to plain inside the library, 0 skills read through it (1 read at their " \
           "own place)" in lines
    assert f"not read: far: a link to {outside / 'far-skill'}, out of the library (not followed)" in lines
    assert f"not read: gone: a link to {tmp_path / 'missing'}, which does not exist (not followed)" in lines
    assert "group/up: a link to .. inside the library, a folder already looked in" in lines
    assert "not looked in: node_modules/ (a cache folder)" in lines


def test_a_library_of_links_out_of_it_only_is_empty_and_says_why(tmp_path: Path) -> None:
    outside = tmp_path / "checkouts"
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("one", "two"):
        skill(outside / name, name)
        (lib / name).symlink_to(outside / name, target_is_directory=True)
    with pytest.raises(InputError, match=r"library is empty: no SKILL.md files found; not read: one: a link to "
                                         r".*, out of the library \(not followed\); two: "):
        read_library(lib)


def test_task_folders_repeating_a_skill_name_are_all_read_under_their_folder_paths(tmp_path: Path) -> None:
    lib = tmp_path / "human_authored"
    for task in ("court-form-filling", "nlp-paper-reproduction", "schedule-planning"):
        skill(lib / task / "pdf", "pdf", "A PDF toolkit.", body="# The same body in every task")
    skill(lib / "offer-letter" / "docx", "docx")
    read = read_library(lib)  # before issue 54: "error: duplicate skill name 'pdf' in ..."
    names = [s.name for s in read.skills]
    assert names == ["court-form-filling/pdf", "nlp-paper-reproduction/pdf", "docx", "schedule-planning/pdf"]
    assert len({s.id for s in read.skills}) == 4  # one body, three ids: the name is part of the content id
    assert read.renamed == ["pdf: the name of 3 skills, each read as its folder's path: court-form-filling/pdf, "
                            "nlp-paper-reproduction/pdf, schedule-planning/pdf"]
    ids = {s.name: s.id for s in read.skills}
    (lib / "another-task" / "tool").mkdir(parents=True)  # the names and ids: the same with another skill beside
    skill(lib / "another-task" / "tool", "tool")
    again = {s.name: s.id for s in read_library(lib).skills}
    assert {name: again[name] for name in ids} == ids  # a skill of another name changes none of them


def test_a_skill_whose_own_id_is_taken_is_named_and_the_rest_read(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    head = "metadata:\n  skilltransfer.id: sk-fixed\n"
    skill(lib / "a" / "copy", "copy", head=head)
    skill(lib / "b" / "copy", "copy", head=head)
    skill(lib / "c" / "other", "other")
    read = read_library(lib)
    assert [s.name for s in read.skills] == ["a/copy", "other"]
    [line] = read.unreadable
    assert line == (f"{lib}/b/copy/SKILL.md: duplicate skill id 'sk-fixed', read from {lib}/a/copy/SKILL.md "
                    "(skill not read)")


FENCELESS = "name: grid-search\ndescription: Run a grid search in parallel.\n\n# Grid search\n\nSteps.\n"
LABELLED = "[SKILL]\n---\nname: d3-chart\ndescription: Draw a bubble chart.\n---\n\n# D3\n"
UNCLOSED = "---\nname: half-open\ndescription: Front matter never closed.\n\n# Body\n"
COLON = "---\nname: simpo\ndescription: Implement SimPO. Triggers on: SimPO, preference loss.\n---\n# SimPO\n"
JUNK = "*.png\")\n    frames = sorted(glob.glob('x'))\n"


def model_written(root: Path) -> Path:
    lib = root / "b4-skill-creator"
    for name, text in (("grid-search", FENCELESS), ("d3-chart", LABELLED), ("half-open", UNCLOSED),
                       ("simpo", COLON), ("junk", JUNK)):
        (lib / "task" / name).mkdir(parents=True)
        (lib / "task" / name / "SKILL.md").write_text(text)
    skill(lib / "task" / "fine", "fine")
    return lib


def test_model_written_skill_files_are_read_leniently_only_when_asked(tmp_path: Path, monkeypatch, capsys) -> None:
    lib = model_written(tmp_path)
    strict = read_library(lib)
    assert [s.name for s in strict.skills] == ["fine"]
    assert len(strict.unreadable) == 5
    assert all(line.endswith("(skill not read)") for line in strict.unreadable)
    lenient = read_library(lib, lenient=True)
    got = {s.name: (s.extra.get(LENIENT_KEY), s.description, s.body) for s in lenient.skills}
    assert got == {
        "grid-search": ("front matter without an opening '---' line", "Run a grid search in parallel.",
                        "# Grid search\n\nSteps."),
        "d3-chart": ("front matter after 1 line of text", "Draw a bubble chart.", "# D3"),
        "half-open": ("front matter not closed by a '---' line", "Front matter never closed.", "# Body"),
        "simpo": ("values YAML refuses read as text (description)",
                  "Implement SimPO. Triggers on: SimPO, preference loss.", "# SimPO"),
        "fine": (None, "The skill fine.", "Do it."),
    }
    [junk] = lenient.unreadable  # what even the lenient reading cannot read is named, the rest read
    assert "junk/SKILL.md:1: no YAML front matter" in junk
    code, out, err = main_cli(["library", "show", str(lib), "--lenient"], monkeypatch, capsys)
    assert code == 0, err
    assert "5 skills in" in out
    assert "read leniently: front matter without an opening '---' line (1 skill): grid-search" in out
    assert err.count("(skill not read)") == 1
    code, out, err = main_cli(["library", "show", str(lib)], monkeypatch, capsys)
    assert code == 0
    assert err.count("(skill not read)") == 5


def test_the_lenient_reading_is_a_setting_recorded_with_the_run(tmp_path: Path) -> None:
    lib = model_written(tmp_path)
    config = StreamConfig(run="lenient", runs_dir=str(tmp_path / "runs"), condition="task", library=str(lib),
                          library_front_matter="lenient")
    assert config.library_lenient
    assert json.loads(config.model_dump_json())["library_front_matter"] == "lenient"
    from skilltransfer.runner.build import stream_library_read

    read = stream_library_read(config)
    assert read is not None
    assert len(read.skills) == 5
    strict = stream_library_read(config.model_copy(update={"library_front_matter": "strict"}))
    assert strict is not None
    assert [s.name for s in strict.skills] == ["fine"]


def test_find_skills_names_a_skill_file_that_is_not_a_regular_file(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    skill(lib / "real", "real")
    (lib / "linked").mkdir()
    (lib / "linked" / "SKILL.md").symlink_to(lib / "real" / "SKILL.md")
    layout = find_skills(lib, max_entries=1000)
    assert [spot.where for spot in layout.spots] == ["real"]
    assert layout.refused == [f"{lib}/linked/SKILL.md: a SKILL.md must be a regular file, this is a symbolic link "
                              "(skill not read)"]


def test_a_skill_folder_whose_name_is_not_utf8_is_named_and_the_rest_read(tmp_path: Path, monkeypatch,
                                                                            capsys) -> None:
    lib = tmp_path / "lib"
    skill(lib / "fine", "fine")
    skill(lib / os.fsdecode(b"caf\xe9"), "cafe")
    read = read_library(lib)
    assert [s.name for s in read.skills] == ["fine"]
    assert read.unreadable == [f"{lib}/caf\\xe9/SKILL.md: a folder name that is not UTF-8 (skill not read)"]
    code, _, err = main_cli(["library", "show", str(lib)], monkeypatch, capsys)
    assert code == 0
    assert "caf\\xe9/SKILL.md: a folder name that is not UTF-8" in err
