"""An episode's final artifacts, for judging two runs' results side by side: the submitted answer and the
workspace's changed files rendered as text.

The hook (the stream runner calls it; phase B of issue 15): ``before = snapshot_workspace(episode.workspace)`` right
after ``env.start(task)``, and ``episode_artifacts(episode, before)`` after ``episode.evaluate()`` (the agent's
processes are stopped then, the workspace is still there), written to ``artifacts/<task file>.json`` of the run.

Reading is harness-side and defensive (`skilltransfer.envs.workspace_files`): no link is followed, only regular files
are read, each up to ``MAX_FILE_BYTES``, at most ``MAX_FILES`` files are listed, Office files are zip-checked before
parsing. A file is compared by its SHA-256. Text is rendered as UTF-8 (``.xlsx``/``.docx``/``.pdf`` with the office
env's readers, as its checks read them); anything else is one line naming its size. A file that cannot be read or
rendered is one line saying why. Worlds held on the harness side (the apps env's database) have no files: their
artifact is the answer alone.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer.envs import workspace_files
from skilltransfer.envs.workspace_files import UnsafeFileError
from skilltransfer.sandbox.bounded import call_bounded

FORMAT_VERSION = 1
MAX_FILES = 2_000
"""The most files a snapshot lists (beyond: the snapshot says it stopped)."""
MAX_FILE_BYTES = 8 << 20
"""The largest file compared and rendered."""
MAX_FILE_CHARS = 20_000
"""Each changed file's text is cut to this many characters (head kept, the cut said)."""
MAX_DEPTH = 16

Snapshot = dict[str, str]
"""Relative POSIX path -> SHA-256 of the content (or ``"unreadable: <why>"``)."""


def _walk(root: Path, relative: PurePosixPath, depth: int, out: list[str]) -> None:
    if depth > MAX_DEPTH or len(out) >= MAX_FILES:
        return
    try:
        entries = sorted(os.scandir(root / relative), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = relative / entry.name
        if entry.is_dir(follow_symlinks=False):
            _walk(root, path, depth + 1, out)
        elif entry.is_file(follow_symlinks=False):
            out.append(str(path))
        if len(out) >= MAX_FILES:
            return


def snapshot_workspace(root: str | Path) -> Snapshot:
    """Every regular file under ``root`` (no links followed) with the SHA-256 of its content."""
    root = Path(root)
    paths: list[str] = []
    _walk(root, PurePosixPath("."), 0, paths)
    out: Snapshot = {}
    for path in paths:
        try:
            out[path] = hashlib.sha256(workspace_files.read_bytes(root, path, MAX_FILE_BYTES)).hexdigest()
        except UnsafeFileError as exc:
            out[path] = f"unreadable: {exc}"
    return out


def render_file(root: str | Path, relative: str, *, timeout_s: float = 30.0, memory_mb: int = 1024) -> str:
    """A workspace file as text for a judge (see the module docstring). Office files and PDFs are parsed in a
    forked child under ``timeout_s`` and ``memory_mb`` (`skilltransfer.sandbox.bounded`): a file of millions of
    cells is shown as not rendered, it does not stall the run."""
    from skilltransfer.envs.office.office_tools import files

    root = Path(root)
    try:
        data = workspace_files.read_bytes(root, relative, MAX_FILE_BYTES)
        suffix = PurePosixPath(relative).suffix.lower()
        if suffix in (".xlsx", ".docx"):
            stream = workspace_files.check_zip(data, relative).getvalue()
            parse = files.xlsx_text if suffix == ".xlsx" else files.docx_text
            text = call_bounded(lambda: _cut(parse(stream)), timeout_s=timeout_s, memory_mb=memory_mb,
                                what="rendering the file")
        elif suffix == ".pdf":
            text = call_bounded(lambda: _cut(files.pdf_text(data)), timeout_s=timeout_s, memory_mb=memory_mb,
                                what="rendering the file")
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return f"(binary file, {len(data):,} bytes)"
    except UnsafeFileError as exc:
        return f"(not read: {exc})"
    except Exception as exc:  # noqa: BLE001 - a corrupt document is shown as such, never raised
        return f"(not rendered: {type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
    return _cut(text)


def _cut(text: str) -> str:
    if len(text) > MAX_FILE_CHARS:
        text = f"{text[:MAX_FILE_CHARS]}\n[... {len(text) - MAX_FILE_CHARS:,} more characters cut]"
    return text


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def episode_artifacts(episode: Any, before: Snapshot) -> dict[str, Any]:
    """The artifacts record of a finished episode (a ``WorkspaceEpisode``: ``workspace``, ``submission``, ``task``).

    Args:
        episode: the episode, evaluated and not yet closed (one without a ``workspace`` has no files).
        before: ``snapshot_workspace(episode.workspace)`` taken when the episode started.

    Returns:
        ``{"format_version", "task_id", "submitted", "answer", "files": [{"path", "status", "text"}], "unchanged"}``;
        ``status`` is "added", "changed" or "deleted" (a deleted file has no text), files sorted by path.
    """
    workspace = getattr(episode, "workspace", None)
    limits = getattr(getattr(episode, "runner", None), "limits", None)  # the sandbox's evaluation limits, if any
    timeout_s = float(getattr(limits, "evaluation_s", 30.0))
    memory_mb = int(getattr(limits, "evaluation_memory_mb", 1024))
    after = snapshot_workspace(workspace) if workspace is not None else {}
    files = []
    for path in sorted(set(before) | set(after)):
        if path not in after or workspace is None:
            files.append({"path": path, "status": "deleted", "text": ""})
        elif path not in before or before[path] != after[path]:
            files.append({"path": path, "status": "added" if path not in before else "changed",
                          "text": render_file(workspace, path, timeout_s=timeout_s, memory_mb=memory_mb)})
    submission = getattr(episode, "submission", None)
    return {"format_version": FORMAT_VERSION, "task_id": episode.task.id,
            "submitted": bool(getattr(submission, "done", False)),
            "answer": _jsonable(getattr(submission, "answer", None)), "files": files,
            "unchanged": sum(1 for path in after if path in before and before[path] == after[path])}
