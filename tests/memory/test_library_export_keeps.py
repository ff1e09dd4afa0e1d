"""An export keeps the library (issue 54, items 3-4): every file of every skill byte for byte with its mode (an
executable script stays executable), dotfiles included, or named in one ``left out:`` line in the words ``show``
uses; the agent's workspace copy keeps modes and binary files; what the export writes passes the reference validator
(``skills-ref``), never less valid than its source, each skill whose front matter had to be written anew named with
the reasons. Each test builds its own small library of the layout it checks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from helpers_agentskills import assert_valid_agent_skills, skill_folders
from helpers_cli import main_cli
from skills_ref import validate

from skilltransfer.memory.agentskills import skill_md_problems
from skilltransfer.memory.export import export_library
from skilltransfer.memory.library import place_skill, read_library
from skilltransfer.memory.package import MAX_PACKAGE_FILE_BYTES

BODY = "# Tool\r\n\r\nRun `scripts/run.sh`.  \r\n"  # CRLF and trailing spaces: the body is kept byte for byte


def files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every regular file below ``folder`` (links not followed): bytes and permission bits."""
    out = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            out[str(path.relative_to(folder))] = (path.read_bytes(), stat.S_IMODE(info.st_mode))
    return out


def body_of(path: Path) -> bytes:
    raw = path.read_bytes()
    first = raw.index(b"---", 3)
    return raw[raw.index(b"\n", first) + 1:]


def tool_library(root: Path) -> Path:
    """One skill holding what a real package holds: executable scripts, a dotfile, a binary asset, a read-only file,
    and what cannot be part of a package (a link, an oversize file, a name that is not UTF-8, a git folder)."""
    lib = root / "lib"
    tool = lib / "tool"
    (tool / "scripts").mkdir(parents=True)
    (tool / "assets").mkdir()
    (tool / "SKILL.md").write_bytes(f"---\r\nname: tool\r\ndescription: A tool.\r\n---\r\n{BODY}".encode())
    (tool / "scripts" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (tool / "scripts" / "run.sh").chmod(0o755)
    (tool / "scripts" / "helper.py").write_text("print('help')\n")
    (tool / "scripts" / "helper.py").chmod(0o750)
    (tool / "assets" / ".env.example").write_text("API_KEY=\n")
    (tool / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (tool / "notes.txt").write_text("read only\n")
    (tool / "notes.txt").chmod(0o444)
    (tool / "current").symlink_to("scripts/run.sh")
    with (tool / "assets" / "huge.bin").open("wb") as handle:  # sparse: its size, not its bytes
        handle.truncate(MAX_PACKAGE_FILE_BYTES + 1)
    (tool / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    (tool / ".git").mkdir()
    (tool / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return lib


KEPT = ["SKILL.md", "assets/.env.example", "assets/logo.png", "notes.txt", "scripts/helper.py", "scripts/run.sh"]
NOT_PART = ["current (a symbolic link, not followed)",
            f"assets/huge.bin ({MAX_PACKAGE_FILE_BYTES + 1} bytes, over the {MAX_PACKAGE_FILE_BYTES}-byte limit of a "
            "package file, not read)", "caf\\xe9.txt (a name that is not UTF-8)",
            ".git/ (version control, not part of the package)"]


def test_export_keeps_every_file_with_its_mode_or_names_it(tmp_path: Path, monkeypatch, capsys) -> None:
    lib = tool_library(tmp_path)
    out = tmp_path / "out"
    code, printed, err = main_cli(["library", "export", str(lib), "--out", str(out)], monkeypatch, capsys)
    assert code == 0, err
    source, exported = files_of(lib / "tool"), files_of(out / "tool")
    assert sorted(exported) == KEPT
    for name in KEPT[1:]:  # byte for byte, with its mode (before issue 54: 0o644, the dotfile dropped)
        assert exported[name] == source[name], name
    assert exported["scripts/run.sh"][1] == 0o755
    assert exported["SKILL.md"][1] == source["SKILL.md"][1]
    assert body_of(out / "tool" / "SKILL.md") == BODY.encode()
    [left] = [line for line in printed.splitlines() if line.startswith("left out: ")]
    assert left.startswith("left out: tool: not part of the package (4): ")
    for item in NOT_PART:
        assert item in left, item
    code, shown, _ = main_cli(["library", "show", str(lib)], monkeypatch, capsys)
    assert code == 0
    assert left.removeprefix("left out: tool: ") in shown  # the words show uses
    assert "5 package files copied byte for byte with their modes (2 executable)" in printed
    assert "4 entries not part of a package" in printed
    assert_valid_agent_skills(out, expected=1)


def test_the_workspace_copy_of_a_skill_keeps_modes_and_binary_files(tmp_path: Path) -> None:
    lib = tool_library(tmp_path)
    [skill] = read_library(lib).skills
    (tmp_path / "ws").mkdir()
    placed = place_skill(skill, tmp_path / "ws")
    copy = files_of(placed.folder)
    source = files_of(lib / "tool")
    assert copy["scripts/run.sh"] == source["scripts/run.sh"]  # executable (before: text only, 0o644)
    assert copy["scripts/helper.py"] == source["scripts/helper.py"]
    assert copy["assets/logo.png"] == source["assets/logo.png"]  # binary, byte for byte
    assert placed.more == ["assets/logo.png"]
    assert placed.left_out == ["assets/.env.example (a name an agent's file cannot have)"]
    assert "assets/.env.example" not in copy  # a hidden file is not put before the agent
    (lib / "tool" / "assets" / "logo.png").write_bytes(b"changed")
    again = place_skill(skill, tmp_path / "ws")
    assert "assets/logo.png (changed since the library was read)" in again.left_out
    assert not (again.folder / "assets" / "logo.png").exists()


def flawed_library(root: Path) -> Path:
    """Skills the reference validator refuses as their library wrote them: K-Dense's rowan (a flow-style list under
    metadata), a description over 1,024 characters, a key the format does not allow, an upper-case name."""
    lib = root / "flawed"
    texts = {
        "rowan": "---\nname: rowan\ndescription: Cloud chemistry.\nlicense: Proprietary\nmetadata:\n  skill-author: "
                 "Rowan Science\n  trigger-keywords: [\"pKa prediction\", \"docking\"]\n---\n\n# Rowan\n",
        "long": f"---\nname: long\ndescription: {'word ' * 400}end\n---\n# Long\n",
        "adaptyv": "---\nname: adaptyv\ndescription: Protein assays.\nauthor: K-Dense\n---\n# Adaptyv\n",
        "Upper": "---\nname: Upper_Case\ndescription: Shouting.\n---\n# Upper\n",
        "fine": "---\nname: fine\ndescription: Fine as it is.\n---\n# Fine\n",
    }
    for folder, text in texts.items():
        (lib / folder).mkdir(parents=True)
        (lib / folder / "SKILL.md").write_text(text)
    return lib


def test_an_export_passes_the_validator_where_its_source_did_not(tmp_path: Path, monkeypatch, capsys) -> None:
    lib = flawed_library(tmp_path)
    before = {folder.name for folder in skill_folders(lib) if not validate(folder)}
    assert before == {"fine"}
    out = tmp_path / "out"
    code, printed, err = main_cli(["library", "export", str(lib), "--out", str(out)], monkeypatch, capsys)
    assert code == 0, err
    assert_valid_agent_skills(out, expected=5)  # before issue 54: rowan "Invalid YAML", long kept at 2,000 characters
    notes = [line for line in printed.splitlines() if line.startswith("note: ")]
    assert len(notes) == 4
    reasons = {"rowan": "a flow-style YAML list at line 7 (the format's YAML takes block style only)",
               "long": "description of 2003 characters, over 1024",
               "adaptyv": "front-matter keys the format does not allow: author",
               "upper-case": "name 'Upper_Case' is not lower-case letters, digits and single hyphens"}
    for folder, reason in reasons.items():
        assert any(line.startswith(f"note: {folder}: front matter written anew, the library's is refused by the "
                                   f"format: ") and reason in line for line in notes), (folder, notes)
    for folder in ("rowan", "long", "adaptyv"):
        assert body_of(out / folder / "SKILL.md") == body_of(lib / folder / "SKILL.md")
    rowan = yaml.safe_load((out / "rowan" / "SKILL.md").read_text().split("---")[1])
    assert rowan["metadata"]["trigger-keywords"] == '["pKa prediction", "docking"]'  # a string, as the format wants
    assert rowan["license"] == "Proprietary"
    back = {s.name: s for s in read_library(out).skills}
    source = {s.name: s for s in read_library(lib).skills}
    assert back.keys() == source.keys()
    for name, skill in source.items():  # the whole description, the extra key, the name: kept in metadata
        assert (back[name].description, back[name].body, back[name].extra.get("author")) == (
            skill.description, skill.body, skill.extra.get("author")), name
    assert len(back["long"].description) == 2003
    assert "2 SKILL.md kept from the library" not in printed
    assert "1 SKILL.md kept from the library with metadata added, 4 with the front matter written anew" in printed


def test_skills_read_under_their_folder_paths_export_valid_and_read_back_so(tmp_path: Path) -> None:
    lib = tmp_path / "human_authored"
    for task in ("court-form-filling", "schedule-planning"):
        (lib / task / "pdf" / "scripts").mkdir(parents=True)
        (lib / task / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: A PDF toolkit.\n---\n# PDF\n")
        (lib / task / "pdf" / "scripts" / "fill.py").write_text("print('fill')\n")
        (lib / task / "pdf" / "scripts" / "fill.py").chmod(0o755)
    read = read_library(lib)
    report = export_library(read.skills, tmp_path / "out")
    assert sorted(item.folder for item in report.skills) == ["court-form-filling-pdf", "schedule-planning-pdf"]
    assert all(item.rewritten == ["name 'pdf' differs from its folder '" + item.folder + "'"]
               for item in report.skills)
    assert_valid_agent_skills(tmp_path / "out", expected=2)
    back = read_library(tmp_path / "out")
    assert sorted(s.name for s in back.skills) == ["court-form-filling/pdf", "schedule-planning/pdf"]
    assert [s.id for s in back.skills] == [s.id for s in read.skills]
    assert os.stat(tmp_path / "out" / "schedule-planning-pdf" / "scripts" / "fill.py").st_mode & 0o777 == 0o755


def test_a_leniently_read_skill_exports_valid_and_says_how_it_was_read(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "grid").mkdir(parents=True)
    (lib / "grid" / "SKILL.md").write_text("name: grid-search\ndescription: Grid search: in parallel.\n\n# Grid\n")
    read = read_library(lib, lenient=True)
    export_library(read.skills, tmp_path / "out")
    assert_valid_agent_skills(tmp_path / "out", expected=1)
    front = yaml.safe_load((tmp_path / "out" / "grid-search" / "SKILL.md").read_text().split("---")[1])
    assert front["metadata"]["skilltransfer.extra.lenient_read"] == (
        "front matter without an opening '---' line; values YAML refuses read as text (description)")
    [back] = read_library(tmp_path / "out").skills  # the export reads strictly
    assert (back.name, back.description, back.body) == ("grid-search", "Grid search: in parallel.", "# Grid")


CASES = {
    "ok": "---\nname: ok\ndescription: fine\n---\n",
    "flow-list": "---\nname: flow-list\ndescription: d\nmetadata:\n  tags: [a, b]\n---\n",
    "flow-map": "---\nname: flow-map\ndescription: d\nmetadata: {a: b}\n---\n",
    "block-list": "---\nname: block-list\ndescription: d\nmetadata:\n  tags:\n    - a\n---\n",
    "twice": "---\nname: twice\ndescription: d\ndescription: e\n---\n",
    "dashes": "---\nname: dashes\ndescription: \"a---b\"\n---\n",
    "no-front": "name: no-front\ndescription: d\n",
    "unclosed": "---\nname: unclosed\ndescription: d\n",
    "long": f"---\nname: long\ndescription: {'d' * 1100}\n---\n",
    "extra": "---\nname: extra\ndescription: d\nversion: 1\n---\n",
    "other": "---\nname: elsewhere\ndescription: d\n---\n",
    "Bad_Name": "---\nname: Bad_Name\ndescription: d\n---\n",
    "colon": "---\nname: colon\ndescription: Use when: always\n---\n",
}


@pytest.mark.parametrize("folder", list(CASES))
def test_skill_md_problems_agree_with_the_validator(tmp_path: Path, folder: str) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "SKILL.md").write_text(CASES[folder])
    assert bool(skill_md_problems(CASES[folder], folder)) == bool(validate(tmp_path / folder)), (
        skill_md_problems(CASES[folder], folder), validate(tmp_path / folder))


def test_a_skill_an_agent_loads_is_in_its_workspace_with_its_modes(tmp_path: Path) -> None:
    """Through the agent: ``load_skill`` places the package; its executable script stays executable there and its
    code can run it (before issue 54: text files only, none executable)."""
    from helpers_skill_exec import block
    from helpers_tinyenv import TinyEnv

    from skilltransfer.agents import Agent
    from skilltransfer.llm.testing import ScriptedModel
    from skilltransfer.memory import HashEmbedder
    from skilltransfer.memory.store import SkillMemory

    lib = tool_library(tmp_path)
    memory = SkillMemory(HashEmbedder(32))
    memory.add_many(read_library(lib).skills)
    memory.read_only = True
    check = ("import os, subprocess\nprint('mode', oct(os.stat('skills/tool/scripts/run.sh').st_mode & 0o777))\n"
             "print(subprocess.run(['skills/tool/scripts/run.sh'], capture_output=True, text=True).stdout)\n"
             "apis.counter.reset()\napis.counter.add(4)\ncomplete_task()")
    replies = iter([block('load_skill("tool")'), block(check, "Run it.")])
    env = TinyEnv([4], workdir=tmp_path / "work")
    episode = env.start(env.tasks()[0])
    try:
        agent = Agent(ScriptedModel(lambda messages: next(replies)), memory=memory, library="lib",
                      harness="paper", skill_disclosure="progressive")
        result = agent.task(episode, stream_position=0).run()
        assert episode.evaluate().success
    finally:
        episode.close()
    load, run = result.actions[:2]
    assert "they are also in your workspace folder `skills/tool/`" in load.observation
    assert "mode 0o755" in run.observation
    assert "run" in run.observation.split("mode 0o755", 1)[1]
