"""``skilltransfer library organize|show|prune|export``: build a library organisation (flat, task tree, LLM tree or
graph), save it with the library, and look at it; leave out the skills randomised masking flagged harmful; export any
library as an Agent Skills folder."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from skilltransfer.commands.library_listing import listing, terminal_width
from skilltransfer.commands.option_groups import ModelOptions, model_group, with_groups
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.memory.export import ExportedSkill, ExportReport, export_library, write_agent_skills
from skilltransfer.memory.library import LibraryRead, read_library
from skilltransfer.memory.organization import (
    ORGANIZATION_KINDS,
    LibraryView,
    NodeNotFound,
    Organization,
    flat_organization,
    save_organization,
    task_tree,
)
from skilltransfer.memory.package import DEFAULT_RESOURCE_BYTES, left_out_summary
from skilltransfer.metrics.scoring import declared
from skilltransfer.skill import MAX_RESOURCES_BYTES, Skill
from skilltransfer.util.terminal import echo
from skilltransfer.util.text import terminal_safe

if TYPE_CHECKING:
    from skilltransfer.llm.config import ModelConfig

library_app = typer.Typer(no_args_is_help=True, help="Build and inspect skill libraries: organise one (flat, task "
                                                     "tree, LLM tree or graph), export one as Agent Skills, "
                                                     "decompose one into a skill graph, route a query over the graph.")
"""The ``library`` command group; `skilltransfer.commands.library_lens` adds ``decompose`` and ``route``."""

_BUILD = "Building"

ResourceBytes = Annotated[int, typer.Option(
    "--resource-bytes", min=0, max=MAX_RESOURCES_BYTES,
    help="The most bytes of text loaded for the agent from each skill package (the setting library_resource_bytes; "
         "files SKILL.md names first).")]

Lenient = Annotated[bool, typer.Option(
    "--lenient", help="Also read model-written SKILL.md files the format refuses (no --- fences, a line of text "
    "before them, values YAML refuses), each recorded as read leniently (the setting library_front_matter=lenient).")]


def _read(library: Path, resource_bytes: int = DEFAULT_RESOURCE_BYTES, *, lenient: bool = False) -> LibraryRead:
    """Read a library; each skill that could not be read is one ``warning:`` line on stderr."""
    read = read_library(library, resource_bytes=resource_bytes, lenient=lenient)
    for line in read.unreadable:
        echo(f"warning: {terminal_safe(line)}", err=True)
    return read


def _export_lines(written: list[ExportedSkill]) -> list[str]:
    return [terminal_safe(line) for line in ExportReport(Path(), written).lines()]


@library_app.command("organize")
@with_groups
def organize(
    library: Annotated[Path, typer.Argument(help="Folder of SKILL.md packages, a skills .jsonl, or a memory folder.")],
    kind: Annotated[Literal["tree", "graph", "task-tree", "flat"], typer.Option(
        "--as", help="tree or graph (an LLM groups the skills under routing nodes), task-tree (one node per source "
        "task, no LLM) or flat.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (new) for the organised library: the "
                                      "skills as SKILL.md packages plus organization.json.")],
    height: Annotated[int, typer.Option(min=2, max=3, help="Levels from the top to the skills (tree/graph): 2 = "
                                                           "routing nodes over skills, 3 = a level above those.",
                                        rich_help_panel=_BUILD)] = 2,
    max_groups: Annotated[int | None, typer.Option(min=2, help="Most groups per call (default: the square root of "
                                                               "the items, 2 to 12).", rich_help_panel=_BUILD)] = None,
    batch_size: Annotated[int, typer.Option(min=8, help="Most skills listed in one call.", rich_help_panel=_BUILD)]
    = 60,
    retries: Annotated[int, typer.Option(min=0, help="Re-asks after an unusable reply before falling back to the "
                                                     "task tree.", rich_help_panel=_BUILD)] = 2,
    lenient: Lenient = False,
    *,
    model: Annotated[ModelOptions, model_group(max_tokens="Most completion tokens per call (default 1024).")],
) -> Organization:
    """Organise a skill library and save it, with its skills, in a new folder (reload it with ``library show``)."""
    if kind not in ORGANIZATION_KINDS:
        raise InputError(f"--as must be one of {', '.join(ORGANIZATION_KINDS)}, got {kind!r}")
    check_output_path(out, flag="--out")
    if out.is_dir() and any(out.iterdir()):
        raise InputError("--out: exists and is not empty; give a new folder", path=out)
    config = model.config()  # checks the model flags before any work
    skills = _read(library, lenient=lenient).skills
    if kind == "flat":
        organization = flat_organization(skills)
    elif kind == "task-tree":
        organization = task_tree(skills)
    else:
        settings: dict[str, Any] = {"kind": kind, "height": height, "max_groups": max_groups, "batch_size": batch_size,
                                    "retries": retries}
        if model.max_tokens is not None:
            settings["max_tokens"] = model.max_tokens
        organization = _llm_organization(skills, config, settings)
    folder, written = _write(skills, organization, out)
    view = LibraryView.load(folder)  # what was written reloads and validates
    built = organization.built_by
    echo(view.top(), nl=False)
    echo(f"built by: {built.get('method')}" + (f" ({built['calls']} model calls, {built['retries']} retries)"
                                                    if "calls" in built else ""))
    for note in [*built.get("notes", []), *([f"fallback reason: {built['reason']}"] if "reason" in built else [])]:
        echo(f"note: {note}")
    for line in _export_lines(written):
        echo(f"note: {line}")
    echo(f"wrote {folder} ({len(skills)} skills as Agent Skills folders, organization.json)")
    return organization


def _llm_organization(skills: list[Skill], config: ModelConfig, settings: dict[str, Any]) -> Organization:
    """Build a tree/graph with the model the flags configure (closed afterwards)."""
    from skilltransfer.induction.organize import Organizer
    from skilltransfer.llm import make_model

    chat_model = make_model(config)
    try:
        return Organizer(chat_model, **settings).organize(skills)
    finally:
        close = getattr(chat_model, "close", None)
        if close is not None:
            close()


def _write(skills: list[Skill], organization: Organization, out: Path) -> tuple[Path, list[ExportedSkill]]:
    """Write the library (Agent Skills folders) and its organisation into a temp sibling of ``out``, then move it."""
    out = out.expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        written = write_agent_skills(skills, tmp)
        save_organization(organization, tmp)
        if out.is_dir():
            out.rmdir()  # checked empty above
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out, written


@library_app.command("show")
def show(
    folder: Annotated[Path, typer.Argument(help="Any library: a folder of SKILL.md packages, a skills .jsonl, a run's "
                                                "memory/ folder, or an organised library (library organize).")],
    skill: Annotated[str | None, typer.Option(help="A skill of the library (name, or number in the listing): print it "
                                                   "whole.")]
    = None,
    node: Annotated[str | None, typer.Option(help="Organised libraries: open this routing node (or skill) instead "
                                                  "of the top.")] = None,
    resource_bytes: ResourceBytes = DEFAULT_RESOURCE_BYTES,
    lenient: Lenient = False,
) -> str:
    """List a library's skills (an organised library: its top level), or print one skill whole; say what was read
    (hidden folders, links) and what was not."""
    from skilltransfer.memory.organization import ORGANIZATION_FILE

    organised = folder.is_dir() and (folder / ORGANIZATION_FILE).exists()
    if node is not None:
        if not organised:
            raise InputError(f"--node needs an organised library (with {ORGANIZATION_FILE}); list skills without it "
                             "or print one with --skill NAME", path=folder)
        try:
            text = LibraryView.load(folder).open(node)
        except NodeNotFound as exc:
            raise InputError(f"--node: {exc}", path=folder) from None
    elif skill is not None:
        found = _found(_read(folder, resource_bytes, lenient=lenient).skills, skill, folder)
        left = left_out_summary(found.package) if found.package is not None else None
        text = _skill_text(found) + (f"-- left out: {terminal_safe(left)}\n" if left else "")
    elif organised:
        text = LibraryView.load(folder).top()
    else:
        read = _read(folder, resource_bytes, lenient=lenient)
        text = _listing(read.skills, folder) + "".join(f"left out: {terminal_safe(line)}\n" for line in read.left_out())
        text += "".join(f"{terminal_safe(line)}\n" for line in read.read_lines())
    echo(text, nl=False)
    return text


@library_app.command("prune")
def prune(
    library: Annotated[Path, typer.Argument(help="The library to prune: a folder of SKILL.md packages, a skills "
                                                 ".jsonl or a run's memory/ folder.")],
    harmful: Annotated[list[Path], typer.Option("--harmful", help="Run folders (or grid folders) with masking draws "
                                                                  "(mask_rate > 0): the skills their skill_effects "
                                                                  "table flags harmful are left out. Repeatable.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output (new): a folder of SKILL.md packages, or a "
                                                          "file ending in .jsonl.")],
    seed: Annotated[int, typer.Option(
        help="Seed of this command's random draws: the bootstrap and the randomisation test.")] = 0,
    lenient: Lenient = False,
) -> list[str]:
    """Write the library without the skills randomised masking flagged harmful (``report``'s ``skill_effects``:
    Benjamini-Hochberg at FDR 0.05 over one-sided randomisation tests); print each skill left out with its effect."""
    from skilltransfer.memory.library import export_jsonl
    from skilltransfer.report import load_runs
    from skilltransfer.report.effects import has_draws, skill_effects_table

    as_jsonl = out.suffix == ".jsonl"
    check_output_path(out, flag="--out", folder=not as_jsonl)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("--out: exists; give a new folder or file", path=out)
    skills = _read(library, lenient=lenient).skills
    runs = load_runs(harmful)
    if not has_draws(runs):
        raise InputError("--harmful: no masking draws in these runs; run the library with mask_rate > 0 (e.g. "
                         "-c mask_rate=0.3) first", path=harmful[0])
    rows = skill_effects_table(runs, seed).rows
    flagged = [row for row in rows if row["harmful"]]
    dropped = {row["skill_id"] for row in flagged}
    kept = [_with_effect(skill, rows) for skill in skills if skill.id not in dropped]
    for row in flagged:
        where = "" if any(row["skill_id"] == s.id for s in skills) else " (not in this library)"
        echo(f"harmful: {row['skill']} ({row['skill_id']}) success effect {row['success_effect']:+.3f} "
             f"[{row['success_low']:+.3f}, {row['success_high']:+.3f}], p = {row['p_harm']:.4f}, "
             f"{row['env']}/{row['model']}/{row['condition']}{where}")
    if as_jsonl:
        export_jsonl(kept, out)
    else:
        for line in export_library(kept, out).lines():
            echo(f"note: {terminal_safe(line)}")
    echo(f"wrote {out} ({len(kept)} of {len(skills)} skills; {len(skills) - len(kept)} left out as harmful)")
    return sorted(dropped)


def _with_effect(skill: Skill, rows: list[dict[str, Any]]) -> Skill:
    """``skill`` with its measured success effects (``extra["success_effect"]``: estimate [CI] p_harm, per report
    group, "; "-separated), when the runs measured any."""
    mine = [row for row in rows if row["skill_id"] == skill.id and row["success_effect"] is not None]
    if not mine:
        return skill
    text = "; ".join(f"{row['success_effect']:+.4f} [{row['success_low']:+.4f}, {row['success_high']:+.4f}] "
                     f"p_harm {row['p_harm']:.4f} ({row['env']}/{row['model']}/{row['condition']})" for row in mine)
    return skill.model_copy(update={"extra": {**skill.extra, "success_effect": text}})


@library_app.command("export")
def export(
    library: Annotated[Path, typer.Argument(help="Any library: a folder of SKILL.md packages, a skills .jsonl, or a "
                                                 "run's memory/ folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (new or empty): one Agent Skills folder per "
                                                          "skill.")],
    lenient: Lenient = False,
) -> ExportReport:
    """Export a library as Agent Skills folders that pass the reference validator (agentskills validate): a skill
    read from a folder keeps every file byte for byte with its mode and its SKILL.md body, the front matter only added
    to under metadata (or written anew where the validator refuses the library's, naming the skill and why); what a
    skill folder holds that is not part of its package is one left out: line per skill; the toolkit's fields travel
    as metadata skilltransfer.* entries. Written atomically."""
    check_output_path(out, flag="--out")
    if out.is_symlink() or (out.exists() and any(out.iterdir())):
        raise InputError("--out: exists and is not an empty folder; give a new folder", path=out)
    read = _read(library, lenient=lenient)
    skills = _with_run_origin(read.skills, library)
    report = export_library(skills, out)
    for line in report.lines():
        echo(f"note: {terminal_safe(line)}")
    for line in read.not_kept():  # the words of show's and run's left out: lines
        echo(f"left out: {terminal_safe(line)}")
    for line in read.read_lines()[1:]:
        echo(terminal_safe(line))
    kept = sum(item.kept and not item.rewritten for item in report.skills)
    rewritten = sum(bool(item.rewritten) for item in report.skills)
    copied = sum(item.copied for item in report.skills)
    executable = sum(1 for skill in skills if skill.package is not None for item in skill.package.files
                     if item.mode is not None and item.mode & 0o111)
    written = sum(item.written for item in report.skills)
    left = sum(len(skill.package.left_out) for skill in skills if skill.package is not None)
    skipped = f"; {len(read.unreadable)} could not be read (above)" if read.unreadable else ""
    echo(f"wrote {out}: {len(report.skills)} skills ({kept} SKILL.md kept from the library with metadata "
         f"added, {rewritten} with the front matter written anew, {len(report.skills) - kept - rewritten} "
         f"written from the skills' fields); {copied} package files copied byte for byte with their modes "
         f"({executable} executable), {written} resource files written from text; {left} entries not part "
         f"of a package{' (left out: above)' if left else ''}{skipped}")
    return report


def _with_run_origin(skills: list[Skill], library: Path) -> list[Skill]:
    """Induced skills of a run's ``memory/`` folder with what the run folder says of them: the inducer model
    (``extra["inducer_model"]``, the run's model label) and the run (``provenance.run_id``), where missing."""
    from skilltransfer.log import MEMORY, RunFolder
    from skilltransfer.settings.recorded import read_run_settings

    run = library.parent
    if library.name != MEMORY or not RunFolder(run).exists():
        return skills
    try:
        config = read_run_settings(RunFolder(run)).config
    except (InputError, OSError):
        return skills
    out = []
    for skill in skills:
        if skill.provenance.source_task_id is None:
            out.append(skill)
            continue
        extra = {**skill.extra}
        extra.setdefault("inducer_model", config.model.report_label)
        provenance = skill.provenance.model_copy(update={"run_id": skill.provenance.run_id or config.run})
        out.append(skill.model_copy(update={"extra": extra, "provenance": provenance}))
    return out


def _listing(skills: list[Skill], folder: Path) -> str:
    """One line per skill, fitted to the terminal (`skilltransfer.commands.library_listing`)."""
    return listing(skills, folder, terminal_width())


def _found(skills: list[Skill], wanted: str, folder: Path | None = None) -> Skill:
    """The skill named ``wanted`` (name, id, or number in the listing)."""
    found = next((s for s in skills if wanted in (s.name, s.id)), None)
    if found is None and wanted.isdigit() and 1 <= int(wanted) <= len(skills):
        found = skills[int(wanted) - 1]
    if found is None:
        near = ", ".join(s.name for s in skills[:8]) + (", ..." if len(skills) > 8 else "")
        raise InputError(f"--skill {wanted!r}: no such skill (skills: {terminal_safe(near)})", path=folder)
    return found


def _skill_text(found: Skill) -> str:
    """One skill whole: what the agent sees of it, with where it came from."""
    origin = found.provenance
    where = [f"level {declared(found, 'level')}, format {declared(found, 'format')}"]
    if origin.source_task_id:
        number = f" (task {origin.stream_position + 1} of its stream)" if origin.stream_position is not None else ""
        where.append(f"induced from {origin.source_task_id}{number}" + (f" in run {origin.run_id}"
                                                                          if origin.run_id else ""))
    return terminal_safe(f"{found.render()}\n-- {'; '.join(where)}\n")


def _register_lens_commands() -> None:
    from skilltransfer.commands import library_lens

    library_app.command("decompose")(library_lens.decompose)
    library_app.command("route")(library_lens.route_query)


_register_lens_commands()
