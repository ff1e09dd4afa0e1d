"""The one reader of untrusted files (`skilltransfer.untrusted`) and the deep-safe tree walker
(`skilltransfer.util.trees`): what they refuse, without blocking, at any depth."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.untrusted import UntrustedFileError
from skilltransfer.util import trees
from skilltransfer.util.files import read_json, read_text


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.json").write_text('{"stolen": true}')
    (folder / "ok.json").write_text('{"a": [1, 2]}')
    (folder / "deep.json").write_text("[" * 100_000)
    (folder / "deep-closed.json").write_text("[" * 500 + "]" * 500)
    os.mkfifo(folder / "fifo")
    os.symlink("/dev/zero", folder / "zero")
    os.symlink("../../other", folder / "sub" / "out")
    return folder


@pytest.mark.parametrize(("relative", "reason"), [
    ("fifo", "is a FIFO"), ("zero", "is a symbolic link"), ("deep.json", "nests more than 64 levels"),
    ("deep-closed.json", "nests more than 64 levels"), ("../other/x.json", "not a path inside"),
    ("/etc/passwd", "not a path inside"), ("sub/out/x.json", "'out' on its path is a symbolic link"),
    ("missing", "no such file"), ("sub", "a folder"),
])
def test_reads_inside_a_root_refuse_what_is_not_a_regular_file_of_it(run: Path, relative: str, reason: str) -> None:
    started = time.monotonic()
    with pytest.raises(UntrustedFileError, match=reason):
        untrusted.read_json(relative, root=run)
    assert time.monotonic() - started < 2, "refused without blocking or allocating"
    assert untrusted.read_json("ok.json", root=run) == {"a": [1, 2]}


def test_user_paths_may_be_links_but_must_lead_to_a_regular_file_under_the_cap(run: Path) -> None:
    for path, reason in ((run / "zero", "a character device"), (run / "fifo", "a FIFO"),
                         (Path("/dev/zero"), "a character device")):
        with pytest.raises(UntrustedFileError, match=reason):
            untrusted.read_bytes(path)
    (run / "big").write_bytes(bytes(3000))
    with pytest.raises(UntrustedFileError, match="over the 2999-byte limit"):
        untrusted.read_bytes(run / "big", max_bytes=2999)
    os.symlink(run / "ok.json", run / "link.json")
    assert untrusted.read_json(run / "link.json") == {"a": [1, 2]}


def test_commands_get_one_line_input_errors(run: Path) -> None:
    with pytest.raises(InputError, match=r"fifo: cannot read library: is a FIFO"):
        read_text(run / "fifo", what="library")
    with pytest.raises(InputError, match="nests more than 64 levels deep"):
        read_json(run / "deep.json", what="trajectory")
    with pytest.raises(InputError, match="does not exist"):
        read_text(run / "missing")


BOMB = "name: x\ndescription: y\nlol: &a [x, x, x, x, x, x, x, x, x]\nl2: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
       "l3: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"


@pytest.mark.parametrize(("text", "reason"), [
    (BOMB, "anchors"), ("x: *a\n", "found undefined alias|aliases"), ("k: " + "[" * 5000, "nests more than"),
    ("!!python/object/apply:os.system ['true']", "constructor"),
])
def test_yaml_without_aliases_or_depth(text: str, reason: str) -> None:
    with pytest.raises(UntrustedFileError, match=reason):
        untrusted.parse_yaml(text, "SKILL.md", first_line=2)
    assert untrusted.parse_yaml("name: x\nitems: [1, {a: b}]\n") == {"name": "x", "items": [1, {"a": "b"}]}


def _chain(root: Path, depth: int) -> None:
    """A chain of folders whose path is far longer than PATH_MAX, with a file, a link and a FIFO at the bottom."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d" * 30, dir_fd=fd)
        child = os.open("d" * 30, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    file = os.open("data", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
    os.write(file, bytes(100_000))
    os.close(file)
    os.symlink("/etc/passwd", "link", dir_fd=fd)
    os.mkfifo("fifo", dir_fd=fd)
    os.close(fd)


def test_tree_operations_handle_paths_longer_than_path_max(deep_tmp_path: Path) -> None:
    _chain(deep_tmp_path / "ws", 300)  # ~9,300 characters of path
    used = trees.usage([deep_tmp_path / "ws"])
    assert used.entries == 303
    assert used.bytes >= 100_000
    left = trees.copy_tree(deep_tmp_path / "ws", deep_tmp_path / "copy")
    assert [item.rsplit("/", 1)[-1] for item in sorted(left)] == ["fifo (a FIFO, not copied)",
                                                                  "link (a symbolic link, not copied)"]
    found, skipped = trees.files(deep_tmp_path / "copy")
    assert [path.rsplit("/", 1)[-1] for path in found] == ["data"]
    assert not skipped
    if os.geteuid() == 0:
        trees.chown_tree(deep_tmp_path / "ws", 54321, 54321)
        assert trees.usage([deep_tmp_path / "ws"]).entries == 303
    trees.remove_tree(deep_tmp_path / "ws")
    trees.remove_tree(deep_tmp_path / "copy")
    assert sorted(os.listdir(deep_tmp_path)) == []


def test_tree_operations_restore_access_and_stop_at_the_entry_cap(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "x").write_bytes(bytes(10_000))
    for index in range(20):
        (root / f"f{index}").write_text("x")
    os.chmod(root / "locked", 0o000)
    capped = trees.usage([root], max_entries=5)
    assert capped.truncated
    assert trees.usage([root]).entries == 22
    trees.remove_tree(root)
    assert not root.exists()
