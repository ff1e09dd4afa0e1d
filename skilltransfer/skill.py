"""The Skill model: a described, reusable procedure stored as a text note or as a Python function.

A value type every part exchanges (induction writes skills, the memory stores them, agents retrieve them, metrics
score them), so it sits on the base floor with the protocols; `AddResult` is what a skill store did with one.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator

SkillFormat = Literal["text", "code"]
SkillLevel = Literal["task", "subtask"]


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
        tree = ast.parse(body)
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


def content_id(name: str, description: str, body: str) -> str:
    """A stable id derived from a skill's content (12 hex chars)."""
    digest = hashlib.sha256(f"{name}\x00{description}\x00{body}".encode()).hexdigest()
    return f"sk-{digest[:12]}"


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

    @model_validator(mode="after")
    def _fill_derived(self) -> Skill:
        if not self.id:
            self.id = content_id(self.name, self.description, self.body)
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

    def render(self) -> str:
        """How a retrieved skill enters the agent's context: description + body."""
        kind = "Code skill" if self.format == "code" else "Skill"
        head = f"### {kind}: {self.name}\n{self.description}\n"
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
