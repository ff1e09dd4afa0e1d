"""Every bad CLI input is one ``error:`` line on stderr, exit 2, no traceback and nothing written.

One row per bad input: the command line (with ``{tmp}`` for the test's folder, whose files are set up by `files`)
and a piece of the expected message. The console entry point runs in-process, as ``skilltransfer`` would.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from skilltransfer.cli import main
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.util.files import read_text

TINY = "helpers_tinyenv:TinyEnv"
RUN = ["run", "--env", TINY, "--condition", "task", "--model", "scripted:{tmp}/ok.jsonl", "--embedder", "hash:64",
       "--no-sandbox", "--no-progress", "--out", "{tmp}/new-run"]
SCORE = ["score", "{tmp}/lib.jsonl", "--tasks", "{tmp}/tasks.jsonl", "--embedder", "hash:64"]
GRID_YAML = "name: g\nenvs: {tiny: {env: " + TINY + "}}\nmodels: {s: {name: scripted, script: {tmp}/ok.jsonl}}\n" \
            "conditions: [task]\n"


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-task run folder (the rows corrupt copies of it)."""
    folder = tmp_path_factory.mktemp("good")
    (folder / "ok.jsonl").write_text('"Thought: done\\n```python\\ncomplete_task()\\n```"\n')
    argv = [a.replace("{tmp}", str(folder)) for a in RUN] + ["--env-arg", "targets=[3]"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["skilltransfer", *argv])
        main()
    return folder / "new-run"


def files(tmp: Path, good_run: Path) -> None:
    """The inputs the rows refer to: good ones, and every kind of bad file."""
    (tmp / "ok.jsonl").write_text('"Thought: done\\n```python\\ncomplete_task()\\n```"\n')
    (tmp / "empty").write_bytes(b"")
    (tmp / "blank.jsonl").write_text("\n  \n")
    (tmp / "binary").write_bytes(bytes(range(256)) * 4)
    (tmp / "latin1").write_bytes('"ok"\n"caf\xe9"\n'.encode("latin-1"))
    (tmp / "folder").mkdir()
    (tmp / "a-file").write_text("not a folder\n")
    os.symlink(tmp / "loop-b", tmp / "loop-a")
    os.symlink(tmp / "loop-a", tmp / "loop-b")
    (tmp / "grid.yaml").write_text(GRID_YAML.replace("{tmp}", str(tmp)))
    (tmp / "lib.jsonl").write_text('{"name": "a", "description": "Send an email", "body": "1. x"}\n')
    (tmp / "tasks.jsonl").write_text('{"instruction": "email Bo"}\n{"instruction": "pay Al"}\n')
    (tmp / "run").mkdir()
    (tmp / "run" / "config.json").write_text("{}")
    shutil.copytree(good_run, tmp / "bad-run")
    (tmp / "bad-run" / "results.jsonl").write_bytes(b"\xff\xfe\n")
    (tmp / "odd-run").mkdir()
    (tmp / "odd-run" / "config.json").mkdir()


CASES: list[tuple[str, list[str], str]] = [
    # --script: empty, blank, binary, bad UTF-8, a folder, a symlink loop
    ("script-empty", [*RUN, "--model", "scripted:{tmp}/empty"], "empty: replies file holds no replies"),
    ("script-blank", [*RUN, "--model", "scripted:{tmp}/blank.jsonl"], "blank.jsonl: replies file holds no replies"),
    ("script-binary", [*RUN, "--model", "scripted:{tmp}/binary"], "binary:2: not UTF-8 text (byte 0x80)"),
    ("script-latin1", [*RUN, "--model", "scripted:{tmp}/latin1"], "latin1:2: not UTF-8 text (byte 0xe9)"),
    ("script-folder", [*RUN, "--model", "scripted:{tmp}/folder"], "folder: replies file is a folder"),
    ("script-loop", [*RUN, "--model", "scripted:{tmp}/loop-a"], "loop-a: cannot read replies file (a symlink loop)"),
    # grid specs and -c files: binary, bad UTF-8
    ("grid-binary", ["grid", "{tmp}/binary", "--dry-run"], "binary:2: not UTF-8 text"),
    ("grid-latin1", ["grid", "{tmp}/latin1", "--dry-run"], "latin1:2: not UTF-8 text"),
    ("grid-c-binary", ["grid", "{tmp}/grid.yaml", "-c", "{tmp}/binary", "--dry-run"], "binary:2: not UTF-8"),
    # --out / --workdir: an existing file, a symlink loop, below a file
    ("run-out-file", [*RUN, "--out", "{tmp}/a-file"], "a-file: --out: exists and is not a folder"),
    ("run-out-loop", [*RUN, "--out", "{tmp}/loop-a"], "loop-a: --out: unusable path (a symlink loop)"),
    ("run-out-below-file", [*RUN, "--out", "{tmp}/a-file/run"], "--out: {tmp}/a-file is a file, not a folder"),
    ("run-out-below-loop", [*RUN, "--out", "{tmp}/loop-a/run"], "loop-a/run: --out: unusable path (a symlink loop)"),
    ("run-out-config-folder", [*RUN, "--out", "{tmp}/odd-run"], "config.json: not a file, so --out is not a run"),
    ("run-workdir-file", [*RUN, "--workdir", "{tmp}/a-file"], "a-file: --workdir: exists and is not a folder"),
    ("grid-out-file", ["grid", "{tmp}/grid.yaml", "--out", "{tmp}/a-file", "--allow-import", "helpers_tinyenv"],
     "a-file: out: exists and is not a"),
    ("grid-out-loop", ["grid", "{tmp}/grid.yaml", "--out", "{tmp}/loop-a", "--no-progress", "--allow-import",
                       "helpers_tinyenv"],
     "loop-a: out: unusable path"),
    ("report-out-file", ["report", "{tmp}/run", "--out", "{tmp}/a-file"], "a-file: --out: exists and is not a"),
    ("report-out-loop", ["report", "{tmp}/run", "--out", "{tmp}/loop-a"], "loop-a: --out: unusable path"),
    ("score-out-folder", [*SCORE, "--out", "{tmp}/folder.json"], None),
    ("score-out-below-file", [*SCORE, "--out", "{tmp}/a-file/r.json"], "{tmp}/a-file is a file, not a folder"),
    # values accepted before: a bogus split, env args of the wrong type or name, negative --max-chars
    ("envs-split", ["envs", "show", "datasci", "--split", "bogus"], "unknown split 'bogus'"),
    ("env-arg-not-int", [*RUN, "--env", "apps", "--env-arg", "seed=abc"],
     "env 'apps': argument seed=\"abc\": Input should be a valid integer"),
    ("env-arg-fraction", [*RUN, "--env-arg", "start=2.5"], "argument start=2.5: Input should be a valid integer"),
    ("env-arg-list", [*RUN, "--env-arg", "targets=[1, \"x\"]"], "argument targets=[1, \"x\"]"),
    ("env-arg-unknown", [*RUN, "--env", "office", "--env-arg", "colour=3"], "unexpected keyword argument 'colour'"),
    ("show-max-chars", ["show", "{tmp}/run", "--task", "1", "--max-chars", "-5"], "'--max-chars': Input should be"),
    # found by fuzzing
    ("env-module", [*RUN, "--env", "os:path"], "env 'os:path' is not a class with tasks()"),
    ("env-empty-module", [*RUN, "--env", ":"], "env class ':' cannot be imported"),
    ("base-url", [*RUN[:9], "--base-url", "localhost:8000", "--model", "openai/m"],
     "endpoint 'localhost:8000' is not an http(s) URL"),
    ("temperature", [*RUN, "--temperature", "nan"], "'--temperature': Input should be greater than or equal to 0"),
    ("temperature-c", [*RUN, "-c", "model.params.temperature=.nan"], "temperature must be a number >= 0, got nan"),
    ("retry-budget", [*RUN, "--retry-budget", "-1"], "'--retry-budget': Input should be greater than or equal to 0"),
    ("retry-budget-c", [*RUN, "-c", "model.retry_budget_s=-1"], "field 'model.retry_budget_s': Input should be"),
    ("run-config-binary", [*RUN, "--config", "{tmp}/binary"], "binary:2: not UTF-8 text"),
    ("run-config-key", [*RUN, "-c", "agent.topk=3"], "field 'agent.topk': unknown key; allowed: step_limit,"),
    ("library-missing", [*RUN, "--library", "{tmp}/nope"], "nope: skill library not found"),
    ("library-binary", [*RUN, "--library", "{tmp}/binary.jsonl"], "binary.jsonl:2: not UTF-8"),
    ("results-binary", ["show", "{tmp}/bad-run"], "results.jsonl:1: not UTF-8 text (byte 0xff)"),
    ("embedder-dim", [*SCORE[:-1], "hash:100000000000000000000"], "8 <= DIM <= 65536"),
    ("tau-inf", [*SCORE, "--tau", "inf"], "--tau must be a number > 0"),
    ("density-bins", ["report", "{tmp}/run", "--density-bins", "0", "--out", "{tmp}/r"], "'--density-bins'"),
    ("serve-port", ["serve", "--port", "99999"], "'--port': Input should be less than or equal to 65535"),
    ("view-missing", ["view", "{tmp}/nope"], "nope: no such run folder"),
    ("view-port", ["view", "{tmp}/run", "--port", "99999"], "'--port': Input should be less than or equal to 65535"),
    ("view-export-file", ["view", "{tmp}/run", "--export", "{tmp}/a-file"], "a-file: --export: exists and is not a"),
    ("view-export-foreign", ["view", "{tmp}/run", "--export", "{tmp}/odd-run"], "not an earlier export"),
    ("unknown-command", ["bogus"], "No such command 'bogus'. (see: "),
    ("missing-option", ["run", "--env", "apps"], "condition: required; give --condition"),
    ("missing-argument", ["show"], "Missing argument 'run'. (see: "),
]


def snapshot(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` (symlinks not followed) with its size."""
    return {str(p.relative_to(folder)): p.lstat().st_size for p in folder.rglob("*")}


@pytest.mark.parametrize(("argv", "needle"), [pytest.param(argv, needle, id=name) for name, argv, needle in CASES])
def test_bad_input_is_one_error_line(argv: list[str], needle: str | None, tmp_path: Path, good_run: Path,
                                     monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    files(tmp_path, good_run)
    if needle is None:  # a folder where the file should go
        (tmp_path / "folder.json").mkdir()
        needle = "folder.json: --out: is a folder; give a file name"
    (tmp_path / "binary.jsonl").write_bytes((tmp_path / "binary").read_bytes())
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "argv", ["skilltransfer", *(a.replace("{tmp}", str(tmp_path)) for a in argv)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, (out, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert needle.replace("{tmp}", str(tmp_path)) in lines[0]
    assert "Traceback" not in out + err
    assert snapshot(tmp_path) == before  # nothing written, nothing half-written
    assert not (tmp_path / "runs").exists()


def test_read_text_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"one\ntwo \xff\n")
    with pytest.raises(InputError, match=r"x.txt:2: not UTF-8 text \(byte 0xff\)"):
        read_text(path)
    with pytest.raises(InputError, match="spec does not exist"):
        read_text(tmp_path / "nope", what="spec")
    path.write_text("fine\n")
    assert read_text(path) == "fine\n"


def test_check_output_path_accepts_what_can_be_created(tmp_path: Path) -> None:
    assert check_output_path(tmp_path, flag="--out") == tmp_path
    assert check_output_path(tmp_path / "a" / "b", flag="--out") == tmp_path / "a" / "b"
    assert check_output_path(tmp_path / "r.json", flag="--out", folder=False) == tmp_path / "r.json"
    os.symlink(tmp_path, tmp_path / "link")
    assert check_output_path(tmp_path / "link", flag="--out") == tmp_path / "link"
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    with pytest.raises(InputError, match="dangling: --out: a symlink to nothing"):
        check_output_path(tmp_path / "dangling", flag="--out")
    assert not (tmp_path / "a").exists()  # checking creates nothing


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_check_output_path_refuses_a_read_only_parent(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(InputError, match="permission denied"):
        check_output_path(locked / "run", flag="--out")
