"""The organise step as a grid stream (study "Subagents vs Agent Skills", App. A.1): a stream with ``organize`` set
builds an LLM organisation of its frozen library per kind (``tree``, ``graph``) with the stream's model
(`skilltransfer.induction.organize.Organizer`) instead of running tasks.

Each kind is written to ``<run>/organizations/<kind>/``: the library's skills in a saved memory's layout
(``skills.jsonl`` and a ``manifest.json``, so skills that share a name are kept, as the memory keeps them) and its
``organization.json``, whose ``built_by`` records how it was built (``llm``, or ``fallback:task-tree`` with the
reason: no usable reply). A later phase's ``organization_from`` points each tree/graph stream of the same env, model
and library at the folder of its kind (``organization``), so every execution mode navigates the same organisation.
The run folder's ``config.json`` and an empty ``results.jsonl`` are written last: a stream that did not finish is
built again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from skilltransfer.errors import InputError
from skilltransfer.induction.organize import OrganizeConfig, Organizer
from skilltransfer.log import RESULTS, RunFolder
from skilltransfer.memory.library import MANIFEST, SKILLS_JSONL, export_jsonl
from skilltransfer.memory.organization import LibraryView, Organization, save_organization
from skilltransfer.protocols import ChatModel
from skilltransfer.runner.build import library_skills
from skilltransfer.runner.stream import StreamSummary
from skilltransfer.settings.config import ORGANIZATIONS, StreamConfig
from skilltransfer.settings.recorded import RunSettings
from skilltransfer.util.files import atomic_write_text
from skilltransfer.util.trees import remove_tree


def organization_dir(run_dir: str | Path, kind: str) -> Path:
    """Where an organise stream keeps its organisation of ``kind``."""
    return Path(run_dir) / ORGANIZATIONS / kind


def run_organize_stream(model: ChatModel, config: StreamConfig) -> StreamSummary:
    """Build and save each organisation of ``config.organize`` (see the module docstring; a library without skills
    gets an empty one, ``built_by.method`` "empty library", which the streams reading it ignore); the summary has no
    records.

    Raises:
        InputError: no frozen library.
    """
    if config.library is None:
        raise InputError("an organise stream needs a frozen library (library / library_from)")
    # a source stream that induced nothing: an empty organisation
    skills = library_skills(config.library, lenient=config.library_lenient)
    folder = RunFolder(config.path)
    for kind in config.organize:
        target = organization_dir(config.path, kind)
        if target.exists():
            remove_tree(target)  # left by a run that did not finish
        if not skills:
            save_organization(Organization(kind=kind, built_by={"method": "empty library"}), target)
            continue
        settings = OrganizeConfig(kind=kind, height=config.organize_height)
        if config.agent.harness == "paper":  # no hidden completion cap under paper
            settings = settings.model_copy(update={"max_tokens": None})
        organization = Organizer(model, config=settings).organize(skills)
        target.mkdir(parents=True)
        export_jsonl(skills, target / SKILLS_JSONL)  # the saved-memory layout: skills sharing a name are kept
        atomic_write_text(target / MANIFEST, json.dumps({"kind": "organization", "organization": kind,
                                                         "skills": len(skills), "library": config.library}) + "\n")
        save_organization(organization, target)
        LibraryView.load(target)  # what was written reloads and validates
    log = RunSettings(config=config.recorded(), level=config.level, skill_format=config.skill_format,
                     agent=config.agent_config(), induction=None, prompt_ids={}, embedder_id=None, task_ids=[],
                     created=datetime.now(UTC).isoformat(timespec="seconds"))
    atomic_write_text(folder.config_file, log.to_json())
    atomic_write_text(folder.path / RESULTS, "")
    return StreamSummary(folder.path, [], [])
