"""Skill induction: one skill from one finished trajectory (task level) or sub-trajectory (subtask level).

Both levels use the same prompt, assembled from files in ``skilltransfer/induction/prompts``: the instruction, the
skill format (text or code), one demonstration, the abstraction rules and the output format; the user message holds
the trajectory's goal (the task instruction or the subtask text) and its steps. Variants for ablations drop the
demonstration (``no_demo``) or the abstraction rules (``no_rules``). The model answers ``NAME:`` / ``DESCRIPTION:`` /
``BODY:``; a reply without them (or, for code, without a code block) is *unparseable*: the caller logs and skips it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skilltransfer.protocols import ChatModel, ModelCalls, Trajectory
from skilltransfer.skill import Provenance, Skill, SkillFormat, SkillLevel, parse_code_signature
from skilltransfer.util.prompts import Prompt, load_prompt

INDUCTION_PROMPTS = Path(__file__).resolve().parent / "prompts"
PromptVariant = Literal["full", "no_demo", "no_rules"]
PROMPT_VARIANTS: tuple[str, ...] = ("full", "no_demo", "no_rules")

_FIELD = r"^[ \t>*_#]*{name}[ \t*_]*:[ \t*_]*"
_NAME = re.compile(_FIELD.format(name="NAME") + r"(.*)$", re.MULTILINE | re.IGNORECASE)
_DESCRIPTION = re.compile(_FIELD.format(name="DESCRIPTION") + r"(.*?)(?=" + _FIELD.format(name="BODY") + ")",
                          re.MULTILINE | re.IGNORECASE | re.DOTALL)
_BODY = re.compile(_FIELD.format(name="BODY"), re.MULTILINE | re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


class InductionError(ValueError):
    """The induction reply could not be parsed into a skill."""


class InductionConfig(BaseModel):
    """Settings of skill induction."""

    model_config = ConfigDict(extra="forbid")

    format: SkillFormat = "text"
    """"text": the body is a workflow note; "code": the body is one Python function."""
    variant: PromptVariant = "full"
    """Prompt variant: "full" (instruction + demonstration + abstraction rules), "no_demo" or "no_rules"."""
    max_observation_chars: int = Field(default=1500, ge=100)
    """Each observation in the rendered trajectory is cut to this many characters (the caller renders it)."""
    max_trajectory_chars: int = Field(default=24000, ge=1000)
    """The whole rendered trajectory is cut (head and tail kept) to this many characters (the caller renders it)."""
    prompt_dir: str | None = None
    """A folder of replacement induction prompt files (same names as the packaged ones)."""
    model_params: dict[str, Any] = Field(default_factory=dict)
    """Extra sampling parameters for the induction call."""


@dataclass
class Induced:
    """One induction attempt: the skill (None when unparseable), the reply and the prompt id."""

    skill: Skill | None
    prompt_id: str
    reply: str
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


def parse_skill_reply(reply: str, fmt: SkillFormat) -> tuple[str, str, str, str]:
    """Parse ``NAME`` / ``DESCRIPTION`` / ``BODY`` fields into (name, description, body, note).

    Only the first skill is kept (one skill per trajectory); ``note`` says when more were given.

    Raises:
        InductionError: a field is missing or empty, or a code skill has no code.
    """
    name_match = _NAME.search(reply)
    body_match = _BODY.search(reply, name_match.end() if name_match else 0)
    description_match = _DESCRIPTION.search(reply, name_match.end() if name_match else 0)
    if name_match is None or body_match is None or description_match is None:
        missing = [f for f, m in (("NAME", name_match), ("DESCRIPTION", description_match), ("BODY", body_match))
                   if m is None]
        raise InductionError(f"reply lacks the field(s) {', '.join(missing)}")
    name = name_match.group(1).strip().strip("`*_ ").strip()
    description = " ".join(description_match.group(1).split())
    body = reply[body_match.end():]
    note = ""
    extra = _NAME.search(body)
    if extra is not None:
        body, note = body[: extra.start()], "the reply held more than one skill; only the first was kept"
    body = body.strip("\n").rstrip()
    if fmt == "code":
        block = _CODE_BLOCK.search(body)
        if block is not None:
            body = block.group(1).strip("\n")
        elif "def " not in body:
            raise InductionError("code skill reply has no ```python block with a function")
    if not name or not description or not body.strip():
        raise InductionError("NAME, DESCRIPTION and BODY must all be non-empty")
    return name, description, body, note


class Inducer:
    """Turns a finished (sub-)trajectory into one skill with a chat model.

    Args:
        model: the chat model (usually the agent's own policy).
        config: induction settings; keyword arguments override its fields (e.g. ``format="code"``).
    """

    def __init__(self, model: ChatModel, *, config: InductionConfig | None = None, **kwargs: Any) -> None:
        self.model = model
        self.config = InductionConfig.model_validate({**(config or InductionConfig()).model_dump(), **kwargs})
        self.system = self._compose()
        self.user = load_prompt("trajectory", self.config.prompt_dir, default_folder=INDUCTION_PROMPTS)

    def _compose(self) -> Prompt:
        fmt, variant = self.config.format, self.config.variant
        names = ["instruction", f"format_{fmt}"]
        if variant != "no_demo":
            names.append(f"demonstration_{fmt}")
        if variant != "no_rules":
            names.append(f"rules_{fmt}")
        names.append(f"output_{fmt}")
        parts = [load_prompt(n, self.config.prompt_dir, default_folder=INDUCTION_PROMPTS).text.strip() for n in names]
        return Prompt(f"induction-{variant}-{fmt}", "\n\n".join(parts) + "\n")

    @property
    def prompt_id(self) -> str:
        """Id of the composed system prompt (variant, format and a hash of the text)."""
        return self.system.id

    def induce(self, goal: str, trajectory: Trajectory, *, level: SkillLevel, calls: ModelCalls,
               provenance: Provenance | None = None) -> Induced:
        """Ask the model for one skill; an unparseable reply gives ``Induced(skill=None, error=...)``.

        Args:
            goal: the trajectory's goal: the task instruction (task level) or the subtask text (subtask level).
            trajectory: the trajectory's action steps as text (the agent renders them, cut to ``max_observation_chars``
                per observation and ``max_trajectory_chars`` in all); fitting may re-render it with steps elided.
            level: recorded on the skill.
            calls: the task's call log (the call is recorded with role "induction"; it fits the prompt to the
                model's window, eliding the oldest steps first).
            provenance: where the trajectory came from.

        Raises:
            ContextExceeded: the prompt cannot fit the model's window even with the trajectory elided.
        """
        messages = [{"role": "system", "content": self.system.text},
                    {"role": "user", "content": self.user.render(goal=goal.strip(), trajectory=trajectory.render(),
                                                                 format=self.config.format)}]
        completion = calls.complete(self.model, messages, "induction", trajectory=trajectory,
                                    **self.config.model_params)
        out = Induced(None, self.prompt_id, completion.text, prompt_tokens=completion.prompt_tokens,
                      completion_tokens=completion.completion_tokens)
        try:
            name, description, body, note = parse_skill_reply(completion.text, self.config.format)
        except InductionError as exc:
            out.error = str(exc)
            return out
        if self.config.format == "code":
            try:  # name the skill after its entry point so the agent can call it by that name
                name = parse_code_signature(body, preferred_name=name if name.isidentifier() else None).function_name
            except ValueError:
                try:
                    name = parse_code_signature(body).function_name
                except ValueError:
                    pass  # broken code: the memory prunes it and logs why
        out.skill = Skill(name=name, description=description, body=body, format=self.config.format, level=level,
                          provenance=provenance or Provenance(), extra={"induction_prompt": self.prompt_id})
        out.error = note
        return out
