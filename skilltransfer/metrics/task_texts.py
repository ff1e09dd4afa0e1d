"""Load task instructions (the N texts skill utility is measured against) from the common on-disk layouts, each with
an id (`TaskText`) that reports can name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.util.files import iter_jsonl, read_json, read_text

TEXT_FIELDS = ("instruction", "task", "query", "text")
"""Fields tried in order when ``field`` is not given."""
ID_FIELDS = ("id", "task_id")
"""Fields a record's id is read from (the first present that is a string or an integer)."""


@dataclass(frozen=True)
class TaskText:
    """One task instruction and the id a report names it by."""

    id: str
    text: str


def _record_id(record: Any, fallback: str) -> str:
    if isinstance(record, dict):
        for name in ID_FIELDS:
            value = record.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip()
            if isinstance(value, int) and not isinstance(value, bool):
                return str(value)
    return fallback


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


def _load_jsonl(path: Path, field: str | None) -> list[TaskText]:
    texts = []
    for number, raw in iter_jsonl(path):
        if untrusted.nesting_exceeds(raw):  # measured before the parser recurses
            raise InputError(f"not accepted: nests more than {untrusted.MAX_DEPTH} levels deep", path=path,
                             line=number)
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=path, line=number) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", path=path, line=number)
        if field is None:  # the first record decides the field; every later record must have it
            field = _pick_field(record, None, path, number)
        texts.append(TaskText(_record_id(record, f"line {number}"), _text_of(record, field, path, number)))
    return texts


def _load_json(path: Path, field: str | None, name: str | None = None) -> list[TaskText]:
    """The tasks of a ``.json`` file; ``name`` (the file's id in a task folder) names a record without an id."""
    data = read_json(path, what="task file")  # bounded in depth before it is parsed
    records = data if isinstance(data, list) else [data]
    stem = name if name is not None else path.stem
    return [TaskText(_record_id(record, stem if len(records) == 1 else f"{stem}#{index}"),
                     _text_of(record, field, path, None)) for index, record in enumerate(records, start=1)]


def _natural_key(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]


def _load_hf_dataset(path: Path, field: str | None) -> list[TaskText]:
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
    id_column = next((name for name in ID_FIELDS if name in columns), None)
    ids = dataset[id_column] if id_column is not None else None
    return [TaskText(_record_id({"id": ids[row]} if ids is not None else {}, f"row {row + 1}"),
                     _text_of({chosen: value}, chosen, path, row + 1)) for row, value in enumerate(dataset[chosen])]


def _folder_task_id(file: Path, folder: Path) -> str:
    """A task file's id: its path below the folder without ``.json``; OfficeBench's ``<n>-<id>/subtasks/<k>.json``
    is ``<n>-<id>/<k>``, the id the ``officebench`` env gives that task."""
    parts = list(file.relative_to(folder).with_suffix("").parts)
    if len(parts) == 3 and parts[1] == "subtasks":
        del parts[1]
    return "/".join(parts)


INSTRUCTION_FILE = "instruction.md"
"""A task folder's instruction in the Harbor / Terminal-Bench layout (SkillLearnBench: ``<task>/<instance>/``)."""


def _load_instruction_folders(path: Path, files: list[Path], field: str | None) -> list[TaskText]:
    """One task per ``instruction.md``, its whole text, its id the folder's path below ``path``."""
    if field is not None:
        raise InputError(f"--field reads JSON task files; this folder holds {INSTRUCTION_FILE} files (their whole "
                         "text is the instruction)", path=path)
    texts = []
    for file in sorted(files, key=_natural_key):
        text = read_text(file).strip()
        if not text:
            raise InputError("empty task text", path=file)
        texts.append(TaskText(file.parent.relative_to(path).as_posix() or ".", text))
    return texts


def _load_folder(path: Path, field: str | None) -> list[TaskText]:
    if any((path / marker).exists() for marker in ("dataset_info.json", "state.json", "dataset_dict.json")):
        return _load_hf_dataset(path, field)
    instructions = [file for file in path.rglob(INSTRUCTION_FILE) if file.is_file() and not file.is_symlink()]
    if instructions:
        return _load_instruction_folders(path, instructions, field)
    files = sorted(path.rglob("*.json"), key=_natural_key)
    if not files:
        raise InputError("folder holds no *.json task files (nor a saved HF dataset)", path=path)
    texts = []
    for file in files:
        texts.extend(_load_json(file, field, _folder_task_id(file, path)))
    return texts


def load_task_texts(path: str | Path, field: str | None = None) -> list[str]:
    """Read task instructions from a file or folder (`load_tasks` without the ids)."""
    return [task.text for task in load_tasks(path, field)]


def load_tasks(path: str | Path, field: str | None = None) -> list[TaskText]:
    """Read task instructions, each with an id, from a file or folder.

    Accepted layouts: a ``.jsonl`` file (one object per line); a ``.txt`` file (one task per line, blank lines
    skipped); a ``.json`` file (an object or a list of objects/strings); a folder saved by HF ``datasets``
    (``save_to_disk``; detected by ``dataset_info.json``/``state.json``/``dataset_dict.json``); a folder holding
    ``instruction.md`` files (Harbor / Terminal-Bench / SkillLearnBench: ``<task>/<instance>/instruction.md``; each
    file's whole text is one task); any other folder is searched recursively for ``*.json`` task files (OfficeBench:
    ``tasks/<n>-<id>/subtasks/<k>.json``, field ``task``).

    Args:
        path: the file or folder.
        field: the text field; default the first of instruction, task, query, text present (for JSONL: in the first
            record, then required in every record).

    Ids: a record's ``id`` or ``task_id`` (string or integer); else ``line N`` (JSONL, ``.txt``), ``row N`` (HF
    dataset), the file's path below the folder without ``.json`` (a task folder; OfficeBench ``1-1/0``, as the
    ``officebench`` env names that task), the folder of an ``instruction.md`` below the folder
    (``court-form-filling/court-form-filling-1``), ``<file stem>`` or ``<file stem>#N`` (a ``.json`` file).

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
        texts = [TaskText(f"line {number}", line.strip())
                 for number, line in enumerate(read_text(path).split("\n"), start=1) if line.strip()]
    else:
        raise InputError(f"unknown task file type {path.suffix!r}: use .jsonl, .json, .txt or a folder", path=path)
    if len(texts) < 2:
        raise InputError(f"need at least 2 tasks, found {len(texts)}", path=path)
    return texts
