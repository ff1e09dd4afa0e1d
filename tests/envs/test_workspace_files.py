"""Defensive reads of workspace files: no link followed anywhere on the path, regular files only, size caps."""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import pytest

from skilltransfer.envs.workspace_files import (
    UnsafeFileError,
    check_zip,
    kind,
    list_files,
    list_folders,
    read_bytes,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("content")
    (tmp_path / "d" / "sub").mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    os.symlink("d", tmp_path / "link-dir")
    os.symlink("/etc/hostname", tmp_path / "d" / "link-file")
    os.mkfifo(tmp_path / "d" / "fifo")
    return tmp_path


def test_kind_never_follows_links(root: Path) -> None:
    assert kind(root, "d") == "folder"
    assert kind(root, "d/f.txt") == "file"
    assert kind(root, "link-dir") == "link"
    assert kind(root, "link-dir/f.txt") == "link"  # a link on the path counts as one
    assert kind(root, "d/fifo") == "other"
    assert kind(root, "d/missing") is None
    assert kind(root, "d/f.txt/x") is None


def test_read_refuses_links_fifos_folders_and_escapes(root: Path) -> None:
    assert read_bytes(root, "d/f.txt") == b"content"
    assert read_bytes(root, "./d//f.txt") == b"content"
    cases = {"link-dir/f.txt": "the folder 'link-dir' on its path is a symbolic link", "d/link-file": "symbolic link",
             "d/fifo": "FIFO", "d/sub": "folder", "d/missing": "no such file", "../outside.txt": "not a path inside",
             "/etc/hostname": "not a path inside"}
    for path, reason in cases.items():
        started = time.monotonic()
        with pytest.raises(UnsafeFileError, match=reason):
            read_bytes(root, path)
        assert time.monotonic() - started < 1, path  # a FIFO is refused without blocking


def test_size_caps(root: Path) -> None:
    (root / "big").write_bytes(bytes(2000))
    assert len(read_bytes(root, "big", max_bytes=2000)) == 2000
    with pytest.raises(UnsafeFileError, match="over the 1999-byte limit"):
        read_bytes(root, "big", max_bytes=1999)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("sheet.xml", bytes(10_000))
    check_zip(buffer.getvalue(), "x.xlsx", max_total=10_000)
    with pytest.raises(UnsafeFileError, match="expands to 10000 bytes"):
        check_zip(buffer.getvalue(), "x.xlsx", max_total=9_999)
    with pytest.raises(UnsafeFileError, match="not a valid Office file"):
        check_zip(b"garbage", "x.xlsx")


def test_listings_skip_links_and_special_files(root: Path) -> None:
    assert list_files(root, "d") == ["f.txt"]
    assert list_files(root, "link-dir") == []
    assert list_folders(root, "d") == ["sub"]
    assert list_folders(root, ".") == ["d"]
    for i in range(5):
        (root / "d" / f"n{i}.txt").write_text("")
    with pytest.raises(UnsafeFileError, match="more than 3 entries"):
        list_files(root, "d", max_entries=3)
