"""Loading the real OfficeBench task instances from a task folder (``tasks/<n_apps>-<id>/subtasks/<k>.json``).

Each instance becomes a :class:`RealTask`: its TaskSpec (id ``"<folder>/<k>"``, difficulty = the folder's number of
apps, template = the folder id), the folder (with ``testbed/`` and ``reference/``) and its evaluation list.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.protocols import TaskSpec
from skilltransfer.util.trees import files

ENV_ROOT = "OFFICEBENCH_ROOT"
"""Environment variable naming the default OfficeBench task folder."""

REPORTED_BROKEN = {"1-10/3", "1-14/2", "1-15/1", "1-15/2"}
"""Instances whose ground truth users of the benchmark reported as broken."""

PASSES_UNTOUCHED = {"1-2/1", "1-11/3", "2-16/0", "2-25/0"}
"""Instances whose checks already pass on the untouched testbed (a do-nothing agent succeeds; measured here)."""

MAX_TASK_JSON_BYTES = 1 << 20
"""The largest ``subtasks/<k>.json`` read."""
REQUIRED_FIELDS = ("username", "date", "time", "task", "evaluation")
NEEDS_FILE = {"evaluate_excel_cell_value", "evaluate_excel_cell_comparator", "evaluate_file_exist",
              "evaluate_file_not_exist"}
DOC_APPS = {"ics": "calendar", "email": "email", "xlsx": "excel", "docx": "word", "doc": "word", "pdf": "pdf"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


@dataclass(frozen=True)
class RealTask:
    """One OfficeBench instance."""

    spec: TaskSpec
    folder: Path
    evaluation: list[dict[str, Any]]

    @property
    def testbed(self) -> Path:
        return self.folder / "testbed"


def resolve_root(source: str) -> Path:
    """``"officebench"`` -> ``$OFFICEBENCH_ROOT``; ``"officebench:<path>"`` -> that path."""
    _, _, raw = source.partition(":")
    raw = raw or os.environ.get(ENV_ROOT, "")
    if not raw:
        raise InputError(f"source 'officebench' needs a path: use 'officebench:<tasks folder>' or set ${ENV_ROOT}")
    root = Path(raw).expanduser()
    if not root.is_dir():
        raise InputError("OfficeBench task folder does not exist", path=root)
    return root


def _now(config: dict[str, Any], path: Path) -> dt.datetime:
    text = f"{config['date']} {config['time']}"
    for fmt in ("%Y-%m-%d %I:%M %p", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"):
        try:
            return dt.datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise InputError(f"field date/time: cannot read {text!r}", path=path)


def _broken_reason(task_id: str, folder: Path, evaluation: list[dict[str, Any]]) -> str | None:
    if task_id in REPORTED_BROKEN:
        return "ground truth reported broken by benchmark users"
    for item in evaluation:
        args = item.get("args") or {}
        if item.get("function") in NEEDS_FILE and "file" not in args:
            return f"{item.get('function')} names no file"
        expected = str(args.get("expected_file", ""))
        if "reference/" in expected and not (folder / "reference" / expected.split("reference/", 1)[1]).is_file():
            return f"expected file {expected} is missing"
    return None


def _subprocedures(evaluation: list[dict[str, Any]]) -> list[str]:
    """Sub-procedures inferred from what the checks look at (real tasks carry no annotation)."""
    names: list[str] = []
    for item in evaluation:
        function, args = item.get("function"), item.get("args") or {}
        doc_type = args.get("doc_type")
        if doc_type == "email":
            names.append("send_email")
        elif doc_type == "ics" or function == "evaluate_calendar_no_overlap":
            names.append("create_calendar_event")
        elif doc_type == "txt":
            names.append("write_answer_file")
        elif doc_type in ("docx", "doc"):
            names.append("write_docx_summary")
        elif doc_type == "pdf":
            names.append("convert_to_pdf")
        elif function in ("evaluate_excel_cell_value", "evaluate_excel_cell_comparator", "evaluate_diff_contain_text",
                          "evaluate_exact_match") or doc_type == "xlsx":
            names.append("update_excel_cell")
    return list(dict.fromkeys(names))


def load_task(folder: Path, config_path: Path) -> RealTask:
    """Read one ``subtasks/<k>.json``; a malformed file raises InputError naming it."""
    try:  # task folders are untrusted input: a regular file under the cap, no link below the folder followed
        config = untrusted.read_json(config_path.relative_to(folder), root=folder, max_bytes=MAX_TASK_JSON_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise InputError(f"cannot read task JSON: {exc.reason}", path=config_path) from None
    if not isinstance(config, dict):
        raise InputError("task JSON must be an object", path=config_path)
    for key in REQUIRED_FIELDS:
        if key not in config:
            raise InputError(f"missing field {key!r}", path=config_path)
    evaluation = config["evaluation"]
    if not isinstance(evaluation, list) or not all(isinstance(i, dict) and "function" in i for i in evaluation):
        raise InputError("field 'evaluation' must be a list of {function, args} objects", path=config_path)
    match = re.fullmatch(r"([123])-\d+", folder.name)
    if match is None:
        raise InputError("task folder name must look like '<n_apps>-<id>'", path=folder)
    task_id = f"{folder.name}/{config_path.stem}"
    now = _now(config, config_path)
    username = str(config["username"])
    weekday = config.get("weekday") or now.strftime("%A")
    instruction = (f"{config['task']}\n\n(You act as {username}. Current date and time: {weekday}, "
                   f"{now:%Y-%m-%d %H:%M}. Files are under data/, emails under emails/<user>/, calendars under "
                   f"calendar/<user>.ics. If asked for an answer file such as data/answer.txt, write it there.)")
    apps = sorted({DOC_APPS[a["doc_type"]] for a in (i.get("args") or {} for i in evaluation)
                   if a.get("doc_type") in DOC_APPS})
    testbed = folder / "testbed"
    images = testbed.is_dir() and any(PurePosixPath(p).suffix.lower() in IMAGE_SUFFIXES
                                      for p in files(testbed, max_entries=100_000)[0])
    broken = _broken_reason(task_id, folder, evaluation)
    metadata: dict[str, Any] = {
        "source": "officebench", "folder": folder.name, "instance": config_path.stem, "username": username,
        "now": now.strftime("%Y-%m-%d %H:%M:%S"), "subprocedures": _subprocedures(evaluation),
        "subprocedures_inferred": True, "needs_ocr": bool(images), "known_broken": broken,
        "passes_untouched": task_id in PASSES_UNTOUCHED,
    }
    spec = TaskSpec(id=task_id, instruction=instruction, difficulty=int(match.group(1)), template=folder.name,
                    apps=tuple(apps), split="test", metadata=metadata)
    return RealTask(spec=spec, folder=folder, evaluation=evaluation)


def _sort_key(path: Path) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", path.name)
    return tuple(int(n) for n in numbers)


def load_officebench(root: Path) -> list[RealTask]:
    """Every instance under ``root`` (sorted by folder, then instance number)."""
    tasks = []
    folders = sorted((p for p in Path(root).iterdir() if p.is_dir() and (p / "subtasks").is_dir()), key=_sort_key)
    for folder in folders:
        for config_path in sorted((folder / "subtasks").glob("*.json"), key=_sort_key):
            tasks.append(load_task(folder, config_path))
    if not tasks:
        raise InputError("no OfficeBench tasks found (expected <n>-<id>/subtasks/<k>.json)", path=root)
    return tasks
