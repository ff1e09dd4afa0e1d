"""``prompts.jsonl`` of a run folder (`PromptStore`): every message sent to the model and every raw reply, each stored
once by content id (`message_id`); a trajectory's calls name them by id.
"""

from __future__ import annotations

import errno
import hashlib
import json
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.util.files import new_file_mode

MAX_PROMPTS_BYTES = 2 << 30
"""The largest prompts.jsonl read."""
MESSAGE_ID_CHARS = 16
_LINE_HEAD = '{"id":"'


def message_id(message: Mapping[str, Any]) -> str:
    """A message's content id: the first 16 hex digits of the SHA-256 of its canonical JSON (sorted keys)."""
    canonical = json.dumps(message, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:MESSAGE_ID_CHARS]


def reply_message(reply: str) -> dict[str, str]:
    """A raw reply as the message it is stored as (so a reply sent back in the next prompt is the same line)."""
    return {"role": "assistant", "content": reply}


def reasoning_message(reasoning: str) -> dict[str, str]:
    """A reply's reasoning as stored beside it (role "reasoning": no prompt ever holds such a message)."""
    return {"role": "reasoning", "content": reasoning}


class PromptStore:
    """``prompts.jsonl``: every message sent to the model and every reply, each stored once by content id.

    One line per distinct message: ``{"id": "<message_id>", "message": {...}}`` (ASCII JSON).

    Args:
        path: the file (created on the first `add`).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._known: set[str] | None = None
        self._lock = threading.Lock()
        """Serialises `add` (a stream may run independent tasks in threads)."""

    def _lines(self) -> Iterable[str]:
        """The file's complete lines (a partial last line, from an interrupted append, is left out).

        The file is opened inside its folder without following a link, and read through that descriptor (a run
        folder given to show/view/resume may be anyone's).

        Raises:
            InputError: the file is a link, not a regular file or over `MAX_PROMPTS_BYTES`.
        """
        try:
            data = untrusted.read_bytes(self.path.name, root=self.path.parent, max_bytes=MAX_PROMPTS_BYTES)
        except untrusted.UntrustedFileError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise InputError(exc.reason, path=self.path) from None
        return data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace").split("\n")

    def known(self) -> set[str]:
        """The ids stored so far, each checked against its message (`verify`).

        Raises:
            InputError: a line whose id is not its message's content id (naming the file and line).
        """
        if self._known is None:
            self._known = self.verify()
        return self._known

    def verify(self) -> set[str]:
        """The ids of the file's lines, each checked to be its message's content id (`message_id`): a folder that maps
        a known id to other text would show a forged prompt and keep the real one from being logged.

        Raises:
            InputError: a line whose id is not its message's content id, or that is not a stored message.
        """
        found: set[str] = set()
        for number, line in enumerate(self._lines(), start=1):
            if not line.strip():
                continue
            key, message = _stored_line(line)
            if key is None or message is None or message_id(message) != key:
                raise InputError("a stored message's id is not the content id of its text (a forged or damaged "
                                 "prompt log; not read)", path=self.path, line=number)
            found.add(key)
        return found

    def add(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        """Store the messages not stored yet (one flushed append) and return every message's id, in order."""
        with self._lock:
            return self._add(messages)

    def _add(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        known = self.known()
        ids, new = [], []
        for message in messages:
            key = message_id(message)
            ids.append(key)
            if key not in known:
                known.add(key)
                new.append(json.dumps({"id": key, "message": message}, ensure_ascii=True, separators=(",", ":")))
        if new:  # appended inside the run folder, never through a link
            try:
                untrusted.append(self.path.parent, self.path.name, ("\n".join(new) + "\n").encode("ascii"),
                                 mode=new_file_mode())
            except untrusted.UntrustedFileError as exc:
                raise InputError(exc.reason, path=self.path) from None
        return ids

    def read(self, ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Id -> message for ``ids`` (all when None); ids not stored are left out, as are unreadable lines."""
        wanted = set(ids) if ids is not None else None
        found: dict[str, dict[str, Any]] = {}
        for number, line in enumerate(self._lines(), start=1):
            key = line[len(_LINE_HEAD):len(_LINE_HEAD) + MESSAGE_ID_CHARS]
            if not line.startswith(_LINE_HEAD) or (wanted is not None and key not in wanted):
                continue
            key_read, message = _stored_line(line)
            if message is None:
                continue
            if key_read != key or message_id(message) != key:
                raise InputError(f"message {key}: the id is not the content id of its text (a forged or damaged "
                                 "prompt log; not shown)", path=self.path, line=number)
            found[key] = message
        return found

    def size(self) -> int:
        """The file's size in bytes (0 when missing, a link or not a regular file)."""
        try:
            info = self.path.lstat()
        except OSError:
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def repair(self) -> None:
        """Cut off a partial last line left by an interrupted append (through one descriptor, no link followed)."""
        try:
            untrusted.cut_partial_line(self.path.parent, self.path.name, max_bytes=MAX_PROMPTS_BYTES)
        except untrusted.UntrustedFileError as exc:
            raise InputError(exc.reason, path=self.path) from None
        self._known = None


def _stored_line(line: str) -> tuple[str | None, dict[str, Any] | None]:
    """The id and message of one ``prompts.jsonl`` line ((None, None) when it is not one)."""
    try:
        value = untrusted.parse_json(line)
    except untrusted.UntrustedFileError:
        return None, None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not isinstance(value.get("message"),
                                                                                                dict):
        return None, None
    return value["id"], value["message"]
