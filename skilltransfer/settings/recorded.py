"""A run's recorded settings, typed: `RunSettings` is ``config.json`` (`skilltransfer.log.RunConfigLog`) with the
stream's, the agent's and the induction's settings read into their own types, and the check that refuses to resume
a run folder with other settings than it was started with.
"""

from __future__ import annotations

import json
from typing import Any

from skilltransfer.agents.config import AgentConfig, AgentLevel
from skilltransfer.errors import InputError
from skilltransfer.induction.inducer import InductionConfig
from skilltransfer.log import FORMAT_VERSION, RunConfigLog, RunFolder
from skilltransfer.settings.config import RECORDED_MODEL_FIELDS, ModelSpec, StreamConfig


class RunSettings(RunConfigLog[StreamConfig, AgentConfig, InductionConfig]):
    """``config.json`` of a run with its settings typed (`StreamConfig`, `AgentConfig`, `InductionConfig`)."""

    level: AgentLevel

    def to_json(self) -> str:
        """The file's text: the model recorded by what shapes its answers only (`RECORDED_MODEL_FIELDS`), nothing
        that does not change results (no endpoint, key, cache, sandboxing)."""
        transport = set(ModelSpec.model_fields) - set(RECORDED_MODEL_FIELDS)
        exclude: Any = {"config": {"model": transport, "embedder_cache": True, "env": {"sandboxed"}}}
        if self.library_utility is None:  # the file of every other stream is as it was
            exclude["library_utility"] = True
        return self.model_dump_json(indent=2, exclude=exclude) + "\n"


def read_run_settings(folder: RunFolder) -> RunSettings:
    """A run folder's ``config.json``, typed.

    Raises:
        InputError: not a run folder, or a config that is not JSON or not a run config (naming the field).
    """
    return folder.read_config_as(RunSettings)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _leaf_changes(before: Any, after: Any, key: str) -> list[str]:
    """``key.path: was X, now Y`` for each leaf where two JSON values differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[str] = []
        for name in dict.fromkeys([*before, *after]):
            out += _leaf_changes(before.get(name), after.get(name), f"{key}.{name}" if key else str(name))
        return out
    return [] if before == after else [f"{key}: was {_short(before)}, now {_short(after)}"]


def setting_changes(before: StreamConfig, after: StreamConfig) -> list[str]:
    """The settings in which two recorded streams differ, each as ``config.key.path: was X, now Y`` (what only
    selects tasks is left out, as in `StreamConfig.differences`)."""
    out: list[str] = []
    for name in before.differences(after):
        out += _leaf_changes(before.model_dump(mode="json", include={name}),
                             after.model_dump(mode="json", include={name}), "config")
    return out


def _resumable_settings(folder: RunFolder) -> RunSettings:
    before = read_run_settings(folder)
    if before.format_version != FORMAT_VERSION:
        raise InputError(f"run folder of log format_version {before.format_version} (an older skilltransfer) "
                         "cannot be resumed; show and report still read it; use another run folder",
                         path=folder.config_file)
    return before


def check_resume(folder: RunFolder, log: RunSettings) -> None:
    """Refuse to resume a run folder started with other settings than ``log``'s (before `RunFolder.start` touches
    it); a folder that does not exist yet is started as new.

    A stream that extends the saved one (a larger limit) may resume, unless its library is filtered by utility over
    the stream; ``config.json`` then records the longer stream.

    Raises:
        InputError: the folder holds a link or special file, or was started with other settings (naming which).
    """
    if not folder.exists():
        return
    folder.refuse_links()
    before = _resumable_settings(folder)
    changed = setting_changes(before.config, log.config)
    keys = ("level", "skill_format", "agent", "induction", "prompt_ids", "embedder_id")
    changed += _leaf_changes(before.model_dump(mode="json", include=set(keys)),
                             log.model_dump(mode="json", include=set(keys)), "")
    extends = log.task_ids[: len(before.task_ids)] == before.task_ids
    if not extends or (log.config.library_filter is not None and log.task_ids != before.task_ids):
        # a utility-filtered library depends on the whole stream, so it cannot be extended
        changed.append(f"task_ids: was {_short(before.task_ids)}, now {_short(log.task_ids)}")
    _refuse(folder, changed)
    if len(log.task_ids) > len(before.task_ids):
        folder.write_config(before.model_copy(update={"task_ids": log.task_ids, "config": log.config}))


def check_settings(folder: RunFolder, config: StreamConfig) -> None:
    """Refuse, before anything runs or is drawn, a stream whose settings differ from the ones ``folder`` was started
    with (the rest is checked when the run starts: `check_resume`).

    Raises:
        InputError: naming each differing setting with both values, and the flag that picks another folder.
    """
    if folder.config_file.is_file():
        _refuse(folder, setting_changes(_resumable_settings(folder).config, config.recorded()))


def _refuse(folder: RunFolder, changed: list[str]) -> None:
    if changed:
        raise InputError(f"this run folder was started with different settings ({'; '.join(changed)}): give "
                         "another output folder (--out DIR), or rerun with the recorded settings, or delete the "
                         "folder",
                         path=folder.config_file)
