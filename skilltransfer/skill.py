"""The Skill model: a described, reusable procedure stored as a text note or as a Python function.

A value type every part exchanges (induction writes skills, the memory stores them, agents retrieve them, metrics
score them), so it sits on the base floor with the protocols; `AddResult` is what a skill store did with one.

A skill is also a *package* (study "Subagents vs Agent Skills" §2, §3.2: s = ((q_in, h, q_out), m, R)): beside its
description h and instructions m (the body) it may carry natural-language input and output contracts (q_in, q_out)
and resource files R (scripts, examples: relative path -> text). Resource names are relative POSIX paths checked by
`resource_name_problem` (no ``..``, no absolute paths, no hidden or odd characters), and their sizes are capped, so a
package can be written into any folder without escaping it.

A skill read from a package folder (the Agent Skills format) also carries its `Package`: a manifest of every file of
the folder (relative path, size, SHA-256, whether its text was loaded into ``resources`` and why not), from which an
export copies the files byte for byte; the skill itself holds only the text the agent may be shown.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from skilltransfer.util import pyast
from skilltransfer.util.text import as_plain_lines, truncate

SkillFormat = Literal["text", "code"]
SkillLevel = Literal["task", "subtask"]

MAX_RESOURCE_BYTES = 256 * 1024
"""The largest resource file a skill package carries (UTF-8 bytes)."""
MAX_RESOURCES_BYTES = 1024 * 1024
"""The most resource bytes one skill package carries in all."""
MAX_RESOURCES = 100
"""The most resource files one skill package carries."""
MAX_RESOURCE_NAME = 200
"""The longest resource path (characters)."""
CONTRACT_CHARS = 2000
"""A contract (``inputs`` / ``outputs``) is shown within this many characters wherever it enters a prompt."""
INSTRUCTION_FILE = "SKILL.md"
"""The package's instruction file (the body); no resource may take its name."""
_SEGMENT = re.compile(r"[\w+@=,()\[\]-]+(?:[. ][\w+@=,()\[\]-]+)*")
"""One path component: word characters and a few punctuation marks, single dots/spaces between them (so no
hidden names, no leading/trailing dot or space, no '..')."""


class Provenance(BaseModel):
    """Where a skill was induced."""

    source_task_id: str | None = None
    stream_position: int | None = None
    """Index of the source task in its stream (0-based)."""
    subtask_index: int | None = None
    """Index of the source subtask within its task (subtask-level skills only)."""
    run_id: str | None = None


class UsageStats(BaseModel):
    """How often a skill was retrieved, and how often the retrieving task succeeded."""

    times_retrieved: int = 0
    successes_when_retrieved: int = 0


class CodeSignature(BaseModel):
    """The entry-point function of a code skill."""

    function_name: str
    signature: str
    """E.g. ``find_contact_email(apis, name: str) -> str``."""


def parse_code_signature(body: str, preferred_name: str | None = None) -> CodeSignature:
    """Find the skill's function in ``body``: the one named ``preferred_name`` if given, else the first top-level def.

    Raises:
        ValueError: the body does not parse or defines no (matching) top-level function.
    """
    try:
        tree = pyast.parse(body)
    except SyntaxError as exc:
        raise ValueError(f"code does not parse: {exc.msg} (line {exc.lineno})") from exc
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        raise ValueError("code defines no top-level function")
    chosen = functions[0]
    if preferred_name is not None:
        named = [f for f in functions if f.name == preferred_name]
        if not named:
            raise ValueError(f"code does not define function {preferred_name!r}")
        chosen = named[0]
    args = ast.unparse(chosen.args)
    returns = f" -> {ast.unparse(chosen.returns)}" if chosen.returns is not None else ""
    return CodeSignature(function_name=chosen.name, signature=f"{chosen.name}({args}){returns}")


def resource_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a resource path of a skill package (None when it can).

    A resource path is relative, POSIX (``/`` separators), at most ``MAX_RESOURCE_NAME`` characters, made of
    components that match word characters and ``+@=,()[]-`` joined by single dots or spaces (no ``.``/``..``
    component, no hidden file, no control or format character), none of them named ``SKILL.md`` (the instruction
    file; below the root it would make a nested package).
    """
    if not name:
        return "empty resource name"
    if len(name) > MAX_RESOURCE_NAME:
        return f"resource name longer than {MAX_RESOURCE_NAME} characters"
    if name.startswith("/") or "\\" in name:
        return f"resource name {name!r} is not a relative POSIX path"
    if unicodedata.normalize("NFC", name) != name:
        return f"resource name {name!r} is not in Unicode NFC form"
    parts = name.split("/")
    for part in parts:
        if not _SEGMENT.fullmatch(part):
            return f"resource name {name!r} has an unsafe component {part!r}"
        if part.casefold() == INSTRUCTION_FILE.casefold():
            return f"resource name {name!r} uses the instruction file's name {INSTRUCTION_FILE} (a nested package)"
    return None


def content_id(name: str, description: str, body: str, *, inputs: str = "", outputs: str = "",
               resources: Mapping[str, str] | None = None, files: Mapping[str, str] | None = None) -> str:
    """A stable id derived from a skill's content (12 hex chars); contracts and resources count only when present,
    so a skill without them keeps the id it had before packages existed. ``files`` (relative path -> SHA-256) are a
    package folder's files: they count, when there are any, instead of ``resources`` (the text loaded from them,
    which depends on a limit), so a package's id does not depend on how much of it was loaded."""
    text = f"{name}\x00{description}\x00{body}"
    if inputs or outputs or resources:
        text += "\x00" + json.dumps([inputs, outputs, sorted((resources or {}).items())], ensure_ascii=False)
    if files:
        text += "\x00files\x00" + json.dumps(sorted(files.items()), ensure_ascii=False)
    return f"sk-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


class PackageFile(BaseModel):
    """One file of a skill's package folder, as read."""

    path: str
    """Relative POSIX path below the package folder."""
    size: int
    """Bytes."""
    sha256: str
    """Hex SHA-256 of the bytes read; an export copies the file only if it still has this hash."""
    loaded: bool = False
    """Its text is in ``Skill.resources`` (what the agent can be shown)."""
    note: str = ""
    """Why its text was not loaded ("" when it was): binary, over a limit, a name a resource cannot have."""


class Package(BaseModel):
    """The files of a skill read from a package folder (`skilltransfer.memory.package.read_package`): the manifest
    an export copies from, and what was left out of the text the agent sees."""

    folder: str
    """The package folder the skill was read from (absolute); an export copies the files' bytes from there."""
    instruction_sha256: str
    """Hex SHA-256 of the ``SKILL.md`` read."""
    files: list[PackageFile] = Field(default_factory=list)
    """Every file of the package but ``SKILL.md``, sorted by path."""
    left_out: list[str] = Field(default_factory=list)
    """Entries below the folder that are not part of the package, each ``"path (reason)"``: links (never
    followed), FIFOs and other special files, hidden entries, names a file list cannot hold, files over the caps."""

    def not_loaded(self) -> list[PackageFile]:
        """The package's files whose text is not in ``Skill.resources``."""
        return [item for item in self.files if not item.loaded]

    def hashes(self) -> dict[str, str]:
        """Relative path -> SHA-256 of every file (what `content_id` counts)."""
        return {item.path: item.sha256 for item in self.files}


class Skill(BaseModel):
    """A reusable skill: a short description (what retrieval matches) and a body (what the agent reads/calls)."""

    id: str = ""
    """Unique id; derived from the content when left empty."""
    name: str
    description: str
    body: str
    format: SkillFormat = "text"
    level: SkillLevel = "task"
    provenance: Provenance = Field(default_factory=Provenance)
    usage: UsageStats = Field(default_factory=UsageStats)
    code: CodeSignature | None = None
    """Parsed entry point, for code skills only."""
    extra: dict[str, str] = Field(default_factory=dict)
    """Other metadata (e.g. extra SKILL.md front-matter fields), kept on round trips."""
    inputs: str = ""
    """Input contract (q_in): what the caller must supply to use the skill, in natural language ("" when none)."""
    outputs: str = ""
    """Output contract (q_out): what the skill produces or returns when done ("" when none)."""
    resources: dict[str, str] = Field(default_factory=dict)
    """Resource files of the package (scripts, examples): relative path -> text (see `resource_name_problem`)."""
    package: Package | None = None
    """For a skill read from a package folder: every file of it (`Package`); ``resources`` then holds the text of
    those loaded. None for induced skills and JSONL lines without it (and left out of their JSON)."""

    @field_validator("inputs", "outputs")
    @classmethod
    def _strip_contract(cls, value: str) -> str:
        return value.strip()

    @field_validator("resources")
    @classmethod
    def _check_resources(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_RESOURCES:
            raise ValueError(f"a skill carries at most {MAX_RESOURCES} resource files, got {len(value)}")
        total = 0
        for name, text in value.items():
            problem = resource_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:
                raise ValueError(f"resource {name!r} is not valid Unicode text (a lone surrogate)") from None
            if size > MAX_RESOURCE_BYTES:
                raise ValueError(f"resource {name!r} is {size} bytes, over the {MAX_RESOURCE_BYTES}-byte limit")
            total += size
        if total > MAX_RESOURCES_BYTES:
            raise ValueError(f"resources total {total} bytes, over the {MAX_RESOURCES_BYTES}-byte limit")
        folders = {"/".join(name.split("/")[:i]) for name in value for i in range(1, name.count("/") + 1)}
        clash = sorted(folders & set(value))
        if clash:
            raise ValueError(f"resource {clash[0]!r} is both a file and a folder")
        return dict(sorted(value.items()))

    @model_serializer(mode="wrap")
    def _drop_absent_package(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.package is None and isinstance(data, dict):
            data.pop("package", None)  # skills without a package serialise as before packages had files
        return data

    @model_validator(mode="after")
    def _fill_derived(self) -> Skill:
        if not self.id:
            files = self.package.hashes() if self.package is not None else None
            self.id = content_id(self.name, self.description, self.body, inputs=self.inputs, outputs=self.outputs,
                                 resources=None if files else self.resources, files=files)
        if self.format == "code" and self.code is None:
            try:
                preferred = self.name if self.name.isidentifier() else None
                self.code = parse_code_signature(self.body, preferred_name=preferred)
            except ValueError:
                try:
                    self.code = parse_code_signature(self.body)
                except ValueError:
                    self.code = None  # invalid code: the memory prunes it with the reason
        return self

    def contracts(self) -> str:
        """The contract lines (``Input: ...``, ``Output: ...``) and resource names, "" when the skill has none.

        Each contract is shown within `CONTRACT_CHARS` (cut in the middle, saying how much) and as text: a line that
        would open a heading or a code fence of its own is escaped (`skilltransfer.util.text.as_plain_lines`)."""
        shown = [(label, as_plain_lines(truncate(text, CONTRACT_CHARS)))
                 for label, text in (("Input", self.inputs), ("Output", self.outputs)) if text]
        lines = [f"{label}:\n{text.strip()}" if "\n" in text.strip() or text.startswith("- ") else f"{label}: {text}"
                 for label, text in shown]  # lists go below
        if self.resources:
            lines.append(f"Resources: {', '.join(self.resources)}")
        return "".join(f"{line}\n" for line in lines)

    def render_card(self) -> str:
        """What a listing shows of a skill without its body: heading, description and contracts."""
        kind = "Code skill" if self.format == "code" else "Skill"
        return f"### {kind}: {self.name}\n{self.description}\n{self.contracts()}"

    def render(self) -> str:
        """How a retrieved skill enters the agent's context: description (+ contracts, when any) + body."""
        head = self.render_card()
        if self.format == "code":
            call = f"Callable as `{self.code.signature}`.\n" if self.code else ""
            return f"{head}{call}```python\n{self.body.strip()}\n```\n"
        return f"{head}{self.body.strip()}\n"


@dataclass(frozen=True)
class AddResult:
    """What a skill store (``SkillStore.add``) did with an offered skill."""

    action: Literal["added", "merged", "dropped", "pruned"]
    skill_id: str
    """Id of the skill that was offered."""
    target_id: str | None = None
    """For merged/dropped: the stored skill it was folded into or duplicated."""
    reason: str = ""
