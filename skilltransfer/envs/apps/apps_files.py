"""Storage apps: file_system and notes."""

from __future__ import annotations

import posixpath
from typing import Any

from skilltransfer.envs.apps.api import ApiError, Db, api, login_api, paginate, register_app

register_app("file_system", "The user's files and directories under /home.")
register_app("notes", "Free-text notes with titles.")

# ---------------------------------------------------------------- file_system
login_api("file_system")


def _norm_path(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/home"):
        raise ApiError(f"Paths are absolute and under /home, got {path!r}.")
    return posixpath.normpath(path)


def _file(db: Db, path: str) -> dict[str, Any]:
    row = db.one("SELECT * FROM files WHERE path = ?", _norm_path(path))
    if row is None:
        raise ApiError(f"No file at {path}.")
    return row


def _require_dir(db: Db, path: str) -> None:
    if db.one("SELECT path FROM directories WHERE path = ?", path) is None:
        raise ApiError(f"No directory {path}.")


@api("file_system")
def show_directory(db: Db, path: str = "/home", page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """List the entries (files and sub-directories) directly inside a directory, sorted by name.

    Args:
        path: absolute directory path, e.g. /home/documents.
        page_index: 0-based page number.
        page_limit: entries per page (at most 20).

    Returns:
        list of {"path", "type": "file" | "directory"}.
    """
    path = _norm_path(path)
    _require_dir(db, path)
    entries = [{"path": r["path"], "type": "directory"} for r in db.all("SELECT path FROM directories")
               if posixpath.dirname(r["path"]) == path and r["path"] != path]
    entries += [{"path": r["path"], "type": "file"} for r in db.all("SELECT path FROM files")
                if posixpath.dirname(r["path"]) == path]
    return paginate(sorted(entries, key=lambda e: e["path"]), page_index, page_limit)


@api("file_system")
def search_files(db: Db, query: str, page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """Find files whose name contains some text, anywhere under /home, sorted by path.

    Args:
        query: case-insensitive text to find in the file name.
        page_index: 0-based page number.
        page_limit: files per page (at most 20).

    Returns:
        list of {"path", "created_at"}.
    """
    rows = [{"path": r["path"], "created_at": r["created_at"]}
            for r in db.all("SELECT * FROM files ORDER BY path") if query.lower() in posixpath.basename(r["path"])
            .lower()]
    return paginate(rows, page_index, page_limit)


@api("file_system")
def show_file(db: Db, path: str) -> dict[str, Any]:
    """Show a file with its content.

    Args:
        path: absolute file path.

    Returns:
        {"path", "content", "created_at"}.
    """
    row = _file(db, path)
    return {"path": row["path"], "content": row["content"], "created_at": row["created_at"]}


@api("file_system")
def create_file(db: Db, path: str, content: str = "") -> dict[str, str]:
    """Create a new file in an existing directory.

    Args:
        path: absolute path of the new file.
        content: its text.

    Returns:
        {"message": str}.
    """
    path = _norm_path(path)
    _require_dir(db, posixpath.dirname(path))
    if db.one("SELECT id FROM files WHERE path = ?", path) or db.one("SELECT path FROM directories WHERE path = ?",
                                                                      path):
        raise ApiError(f"{path} already exists.")
    db.run("INSERT INTO files (path, content, created_at) VALUES (?, ?, ?)", path, str(content), db.now())
    return {"message": f"Created {path}."}


@api("file_system")
def create_directory(db: Db, path: str) -> dict[str, str]:
    """Create a directory (its parent must exist).

    Args:
        path: absolute path of the new directory.

    Returns:
        {"message": str}.
    """
    path = _norm_path(path)
    _require_dir(db, posixpath.dirname(path))
    if db.one("SELECT path FROM directories WHERE path = ?", path):
        raise ApiError(f"Directory {path} already exists.")
    db.run("INSERT INTO directories (path) VALUES (?)", path)
    return {"message": f"Created directory {path}."}


@api("file_system")
def move_file(db: Db, source: str, destination: str) -> dict[str, str]:
    """Move or rename a file; destination is the new full file path (its directory must exist).

    Args:
        source: current absolute file path.
        destination: new absolute file path.

    Returns:
        {"message": str}.
    """
    row = _file(db, source)
    destination = _norm_path(destination)
    if db.one("SELECT path FROM directories WHERE path = ?", destination):
        raise ApiError(f"{destination} is a directory; give the full new file path, e.g. {destination}/"
                       f"{posixpath.basename(row['path'])}.")
    _require_dir(db, posixpath.dirname(destination))
    if db.one("SELECT id FROM files WHERE path = ?", destination):
        raise ApiError(f"{destination} already exists.")
    db.run("UPDATE files SET path = ? WHERE id = ?", destination, row["id"])
    return {"message": f"Moved {row['path']} to {destination}."}


@api("file_system")
def delete_file(db: Db, path: str) -> dict[str, str]:
    """Delete a file.

    Args:
        path: absolute file path.

    Returns:
        {"message": str}.
    """
    row = _file(db, path)
    db.run("DELETE FROM files WHERE id = ?", row["id"])
    return {"message": f"Deleted {row['path']}."}


# ---------------------------------------------------------------- notes
login_api("notes")


def _note_view(row: dict[str, Any], full: bool = True) -> dict[str, Any]:
    view = {"note_id": row["id"], "title": row["title"], "created_at": row["created_at"],
            "updated_at": row["updated_at"]}
    if full:
        view["content"] = row["content"]
    return view


@api("notes")
def search_notes(db: Db, query: str = "", page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """Find notes whose title or content contains some text, newest first (without content).

    Args:
        query: case-insensitive text ("" matches all).
        page_index: 0-based page number.
        page_limit: notes per page (at most 20).

    Returns:
        list of {"note_id", "title", "created_at", "updated_at"}.
    """
    q = query.lower()
    rows = [r for r in db.all("SELECT * FROM notes ORDER BY created_at DESC, id DESC")
            if q in r["title"].lower() or q in r["content"].lower()]
    return paginate([_note_view(r, full=False) for r in rows], page_index, page_limit)


@api("notes")
def show_note(db: Db, note_id: int) -> dict[str, Any]:
    """Show a note with its content.

    Args:
        note_id: the note's id.

    Returns:
        {"note_id", "title", "created_at", "updated_at", "content"}.
    """
    return _note_view(db.get("notes", note_id, "note"))


@api("notes")
def create_note(db: Db, title: str, content: str) -> dict[str, Any]:
    """Create a note.

    Args:
        title: the note's title.
        content: its text.

    Returns:
        {"message": str, "note_id": int}.
    """
    if not str(title).strip():
        raise ApiError("title must not be empty.")
    now = db.now()
    note_id = db.run("INSERT INTO notes (title, content, created_at, updated_at) VALUES (?, ?, ?, ?)", title,
                     str(content), now, now)
    return {"message": "Note created.", "note_id": note_id}


@api("notes")
def update_note(db: Db, note_id: int, title: str | None = None, content: str | None = None) -> dict[str, str]:
    """Replace a note's title and/or content.

    Args:
        note_id: the note's id.
        title: new title (None keeps it).
        content: new content (None keeps it).

    Returns:
        {"message": str}.
    """
    row = db.get("notes", note_id, "note")
    db.run("UPDATE notes SET title = ?, content = ?, updated_at = ? WHERE id = ?", row["title"] if title is None
           else title, row["content"] if content is None else str(content), db.now(), note_id)
    return {"message": f"Note {note_id} updated."}


@api("notes")
def delete_note(db: Db, note_id: int) -> dict[str, str]:
    """Delete a note.

    Args:
        note_id: the note's id.

    Returns:
        {"message": str}.
    """
    db.get("notes", note_id, "note")
    db.run("DELETE FROM notes WHERE id = ?", note_id)
    return {"message": f"Note {note_id} deleted."}
