"""An on-disk (SQLite) response cache keyed by the full request (`skilltransfer.llm.chain.CachedModel` is the layer
that answers from it).

Modes: ``off`` (pass through), ``rw`` (answer hits from disk, record misses: an interrupted run resumes without
paying twice) and ``ro`` (replay: every call must hit, a miss is an error). The key is the SHA-256 of the canonical
JSON of the request (model, messages, params, extra_body) plus its occurrence number within this wrapper, so a run
that repeats an identical request gets the same sequence of answers on replay. The cache also records what context
fitting asked the model (its context window and each prompt's token count), so a replay fits prompts identically
without the model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal

from skilltransfer.errors import InputError
from skilltransfer.protocols import Completion

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    request TEXT NOT NULL,
    completion TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE TABLE IF NOT EXISTS facts (
    key TEXT PRIMARY KEY,
    value INTEGER
)
"""


CacheMode = Literal["off", "rw", "ro"]
"""off, rw (read-write) or ro (read-only: replay)."""
CACHE_MODE_ALIASES: dict[str, CacheMode] = {
    "off": "off", "none": "off", "rw": "rw", "read-write": "rw", "ro": "ro", "read-only": "ro", "replay": "ro",
}


def normalise_cache_mode(mode: str) -> CacheMode:
    """Map user spellings (read-write, read-only, replay, ...) to "off" | "rw" | "ro"."""
    try:
        return CACHE_MODE_ALIASES[mode.strip().lower()]
    except KeyError:
        raise InputError(f"Unknown cache mode {mode!r}. Available: off, rw (read-write), ro (read-only/replay)"
                         ) from None


class CacheMiss(InputError):
    """A replay (read-only) cache has no answer for a request."""


def request_key(request: dict[str, Any]) -> str:
    """SHA-256 of the request's canonical JSON (sorted keys, no whitespace)."""
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """The SQLite store: ``get``/``put`` completions by (key, occurrence).

    Args:
        path: the SQLite file (created with its folder in rw mode; must exist in ro mode).
        mode: "rw" or "ro" (aliases read-write, read-only, replay).
    """

    def __init__(self, path: str | Path, mode: str = "rw") -> None:
        self.path = Path(path)
        self.mode: CacheMode = normalise_cache_mode(mode)
        if self.mode == "off":
            raise InputError("ResponseCache needs mode rw or ro; use no cache for off")
        if self.mode == "ro" and not self.path.is_file():
            raise InputError("replay cache file does not exist; record it first with cache mode rw", path=self.path)
        if self.mode == "rw":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            uri = f"file:{self.path}?mode=ro" if self.mode == "ro" else f"file:{self.path}"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
            if self.mode == "rw":
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                self._db.commit()
            self._db.execute("SELECT 1 FROM responses LIMIT 1")
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a response cache ({exc})", path=self.path) from None

    def get(self, key: str, seq: int = 0) -> Completion | None:
        """The stored completion, marked ``cached=True``, or None."""
        with self._lock:
            row = self._db.execute("SELECT completion FROM responses WHERE key = ? AND seq = ?", (key, seq)).fetchone()
        if row is None:
            return None
        known = {f.name for f in dataclasses.fields(Completion)}
        data = {k: v for k, v in json.loads(row[0]).items() if k in known}
        data["cached"] = True
        return Completion(**data)

    def put(self, key: str, seq: int, request: dict[str, Any], completion: Completion) -> None:
        """Store a completion (one transaction: a crash leaves either the whole row or none)."""
        if self.mode != "rw":
            raise InputError("cannot write to a read-only (replay) cache", path=self.path)
        data = dataclasses.asdict(completion)
        data["cached"] = False
        blob = json.dumps(data, ensure_ascii=False, default=str)
        request_blob = json.dumps(request, ensure_ascii=False, default=str)
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                             (key, seq, request_blob, blob, time.time()))

    def fact(self, key: str) -> tuple[bool, int | None]:
        """(known, value) of a recorded fact (a context window, a prompt's token count)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT value FROM facts WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:  # a cache written before facts were recorded
            return False, None
        return (True, row[0]) if row is not None else (False, None)

    def put_fact(self, key: str, value: int | None) -> None:
        """Record a fact (rw mode only; ignored in ro mode)."""
        if self.mode != "rw":
            return
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO facts VALUES (?, ?)", (key, value))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
