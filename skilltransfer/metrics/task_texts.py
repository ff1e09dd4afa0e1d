"""Load task instructions (the N texts skill utility is measured against) from the common on-disk layouts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.util.files import iter_jsonl, read_text

TEXT_FIELDS = ("instruction", "task", "query", "text")
"""Fields tried in order when ``field`` is not given."""


def _pick_field(record: dict[str, Any], field: str | None, path: Path, line: int | None) -> str:
    if field is not None:
        if field not in record:
            raise InputError(f"missing field {field!r}; fields present: {', '.join(record) or '(none)'}",
                             path=path, line=line)
        return field
    for name in TEXT_FIELDS:
        if name in record:
            return name
    raise InputError(f"none of the fields {', '.join(TEXT_FIELDS)} found (use --field); fields present: "
                     f"{', '.join(record) or '(none)'}", path=path, line=line)


def _text_of(record: Any, field: str | None, path: Path, line: int | None) -> str:
    if isinstance(record, str):
        text = record
    elif isinstance(record, dict):
        name = _pick_field(record, field, path, line)
        value = record[name]
        if not isinstance(value, str):
            raise InputError(f"field {name!r} is {type(value).__name__}, not a string", path=path, line=line)
        text = value
    else:
        raise InputError(f"expected a JSON object or string, got {type(record).__name__}", path=path, line=line)
    if not text.strip():
        raise InputError("empty task text", path=path, line=line)
    return text.strip()


def _load_jsonl(path: Path, field: str | None) -> list[str]:
    texts = []
    for number, raw in iter_jsonl(path):
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=path, line=number) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", path=path, line=number)
        if field is None:  # the first record decides the field; every later record must have it
            field = _pick_field(record, None, path, number)
        texts.append(_text_of(record, field, path, number))
    return texts


def _load_json(path: Path, field: str | None) -> list[str]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    records = data if isinstance(data, list) else [data]
    return [_text_of(record, field, path, None) for record in records]


def _natural_key(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _load_hf_dataset(path: Path, field: str | None) -> list[str]:
    import datasets

    try:
        dataset: Any = datasets.load_from_disk(str(path))
    except Exception as exc:  # any failure here means a bad saved dataset
        raise InputError(f"cannot load the saved dataset: {str(exc).splitlines()[0] if str(exc) else exc!r}",
                         path=path) from None
    if isinstance(dataset, datasets.DatasetDict):
        if len(dataset) != 1:
            raise InputError(f"dataset has splits {', '.join(dataset)}; pass one split's folder", path=path)
        dataset = next(iter(dataset.values()))
    columns = list(dataset.column_names)
    chosen = _pick_field(dict.fromkeys(columns), field, path, None)
    return [_text_of({chosen: value}, chosen, path, row + 1) for row, value in enumerate(dataset[chosen])]


def _load_folder(path: Path, field: str | None) -> list[str]:
    if any((path / marker).exists() for marker in ("dataset_info.json", "state.json", "dataset_dict.json")):
        return _load_hf_dataset(path, field)
    files = sorted(path.rglob("*.json"), key=_natural_key)
    if not files:
        raise InputError("folder holds no *.json task files (nor a saved HF dataset)", path=path)
    texts = []
    for file in files:
        texts.extend(_load_json(file, field))
    return texts


def load_task_texts(path: str | Path, field: str | None = None) -> list[str]:
    """Read task instructions from a file or folder.

    Accepted layouts: a ``.jsonl`` file (one object per line); a ``.txt`` file (one task per line, blank lines
    skipped); a ``.json`` file (an object or a list of objects/strings); a folder saved by HF ``datasets``
    (``save_to_disk``; detected by ``dataset_info.json``/``state.json``/``dataset_dict.json``); any other folder is
    searched recursively for ``*.json`` task files (OfficeBench: ``tasks/<n>-<id>/subtasks/<k>.json``, field ``task``).

    Args:
        path: the file or folder.
        field: the text field; default the first of instruction, task, query, text present (for JSONL: in the first
            record, then required in every record).

    Raises:
        InputError: missing path, unknown suffix, broken JSON(L) line, missing field, non-UTF-8, fewer than 2 tasks.
    """
    path = Path(path)
    if not path.exists():
        raise InputError("task file or folder not found", path=path)
    if path.is_dir():
        texts = _load_folder(path, field)
    elif path.suffix == ".jsonl":
        texts = _load_jsonl(path, field)
    elif path.suffix == ".json":
        texts = _load_json(path, field)
    elif path.suffix == ".txt":
        texts = [line.strip() for line in read_text(path).split("\n") if line.strip()]
    else:
        raise InputError(f"unknown task file type {path.suffix!r}: use .jsonl, .json, .txt or a folder", path=path)
    if len(texts) < 2:
        raise InputError(f"need at least 2 tasks, found {len(texts)}", path=path)
    return texts
