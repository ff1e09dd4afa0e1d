"""Skill induction: one skill from one finished trajectory (task level) or sub-trajectory (subtask level).

Both levels use the same prompt, assembled from files in ``skilltransfer/induction/prompts``: the instruction, the
skill format (text or code), one demonstration, the abstraction rules and the output format; the user message holds
the trajectory's goal (the task instruction or the subtask text) and its steps. Variants for ablations drop the
demonstration (``no_demo``) or the abstraction rules (``no_rules``). The model answers ``NAME:`` / ``DESCRIPTION:`` /
``BODY:``; a reply without them (or, for code, without a code block) is *unparseable*: the caller logs and skips it.

The ``contract`` variant (study "Subagents vs Agent Skills" §3.2, §4) writes a skill package: procedural instructions
plus explicit input/output contracts (``INPUTS:`` / ``OUTPUTS:`` fields, stored as ``Skill.inputs`` / ``outputs``),
from a prompt that explains contracts, shows a contract demonstration and tells the model whether the trajectory
succeeded. With ``skills_per_task`` (least, most) it writes a set of that many such skills, one per sub-procedure,
from a whole task's trajectory in one call (`Inducer.induce_set`; the study's 3-5 packages per task).
``InductionConfig.only_successful`` induces only from (sub)trajectories the caller says succeeded.
``InductionConfig.lessons`` (text skills) induces a failed (sub)trajectory with the lessons prompt instead: a skill
that says what went wrong and how to avoid it (ReasoningBank's use of failures; the ``full`` prompt's "learn from both"
is the naive one), marked ``Skill.extra["lesson"] = "true"``; successful ones are induced as usual.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skilltransfer.induction.abstraction import instance_names, instance_paths, mask_names, mask_values
from skilltransfer.protocols import ChatModel, ModelCalls, Trajectory
from skilltransfer.skill import Provenance, Skill, SkillFormat, SkillLevel, parse_code_signature
from skilltransfer.util.prompts import Prompt, load_prompt

INDUCTION_PROMPTS = Path(__file__).resolve().parent / "prompts"
PromptVariant = Literal["full", "no_demo", "no_rules", "contract"]
PROMPT_VARIANTS: tuple[str, ...] = ("full", "no_demo", "no_rules", "contract")
OUTCOMES = {True: "The goal was achieved.",
            False: "The goal was NOT achieved: keep only the steps that worked and the caveats learnt.",
            None: "Unknown whether the goal was achieved."}
"""The outcome line of the ``contract`` variant's user message, by the caller's success verdict."""

_FIELD = r"^[ \t>*_#]*{name}[ \t*_]*:[ \t*_]*"
_NAME = re.compile(_FIELD.format(name="NAME") + r"(.*)$", re.MULTILINE | re.IGNORECASE)
_DESCRIPTION = re.compile(_FIELD.format(name="DESCRIPTION") + r"(.*?)(?=" + _FIELD.format(name="BODY") + ")",
                          re.MULTILINE | re.IGNORECASE | re.DOTALL)
_BODY = re.compile(_FIELD.format(name="BODY"), re.MULTILINE | re.IGNORECASE)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_SECTION = re.compile(_FIELD.format(name=r"(DESCRIPTION|INPUTS?|OUTPUTS?)"), re.MULTILINE | re.IGNORECASE)
_TRAILING_CONTRACT = re.compile(_FIELD.format(name=r"(INPUTS?|OUTPUTS?)"), re.MULTILINE)
"""A contract written after the body: only an upper-case field line counts (a step may say "Output: ...")."""


_PROMPT_ECHO = re.compile(r"^#{1,3}[ \t]*(Abstraction rules|Output|Input and output contracts|Demonstration)\b.*$",
                          re.MULTILINE | re.IGNORECASE)
"""A heading of the induction prompt's own sections: a body that reaches one has started copying the prompt."""


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
    mask_instance_names: bool = True
    """Replace the goal's multi-word proper names (and their words) with ``<name>``, its file paths (also as the
    start of a longer path) with ``<path>`` and the caller's instance values (``induce(values=...)``) with ``<value>``
    in the skill's name, description and text body (`skilltransfer.induction.abstraction`): the prompt's abstraction
    rule, enforced; what was masked is recorded in ``Skill.extra["masked_names"]`` ("; "-separated). Code bodies are
    left as written."""
    only_successful: bool = False
    """Induce only from (sub)trajectories the caller says succeeded (``induce(..., succeeded=True)``), as the study
    synthesises its packages from successful trajectories; others are skipped without a model call."""
    lessons: bool = False
    """Induce a (sub)trajectory the caller says failed with the lessons prompt (``prompts/lessons.md``: what went
    wrong and how to avoid it) instead of the variant's; text skills only. Needs the verdict."""
    skills_per_task: tuple[int, int] | None = None
    """(least, most): the ``contract`` variant writes a set of this many skills from a whole task's trajectory in one
    call (`Inducer.induce_set`; the study synthesises 3-5 packages per task; the subtask-level agent asks for it after
    the verdict); None: one skill per call."""


    @model_validator(mode="after")
    def _lessons_are_text(self) -> InductionConfig:
        if self.lessons and (self.format != "text" or self.variant == "contract" or self.only_successful):
            raise ValueError("lessons induces text lessons from failures: it needs the text format, not the contract "
                             "variant, and not only_successful (which induces nothing from failures)")
        return self

    @property
    def needs_verdict(self) -> bool:
        """Whether induction waits for the task's verdict: ``only_successful``, ``lessons`` or the ``contract``
        variant (which tells the model the outcome)."""
        return self.only_successful or self.lessons or self.variant == "contract"


@dataclass
class Induced:
    """One induction attempt: the skill (None when unparseable or skipped), the reply and the prompt id."""

    skill: Skill | None
    prompt_id: str
    reply: str
    error: str = ""
    """Why there is no skill, or a note on the skill (e.g. a missing contract)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    skipped: bool = False
    """No model call was made (``only_successful`` and the trajectory did not succeed)."""

    @property
    def status(self) -> str:
        """"induced", "unparseable" or "skipped"."""
        return "skipped" if self.skipped else "induced" if self.skill is not None else "unparseable"


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
    body, note = _split_off_next_skill(reply[body_match.end():])
    return name, description, _finish_body(body, fmt, name, description), note


def _split_off_next_skill(body: str) -> tuple[str, str]:
    extra = _NAME.search(body)
    if extra is not None:
        return body[: extra.start()], "the reply held more than one skill; only the first was kept"
    return body, ""


def _finish_body(body: str, fmt: SkillFormat, name: str, description: str) -> str:
    body = body.strip("\n").rstrip()
    if fmt == "code":
        block = _CODE_BLOCK.search(body)
        if block is not None:
            body = block.group(1).strip("\n")
        elif "def " not in body:
            raise InductionError("code skill reply has no ```python block with a function")
    if not name or not description or not body.strip():
        raise InductionError("NAME, DESCRIPTION and BODY must all be non-empty")
    return body


@dataclass(frozen=True)
class ContractReply:
    """A parsed reply of the ``contract`` variant."""

    name: str
    description: str
    body: str
    inputs: str
    outputs: str
    note: str = ""
    """What was odd but repaired: more than one skill, a missing contract."""


def _contract_sections(text: str, pattern: re.Pattern[str]) -> tuple[dict[str, str], int]:
    """The DESCRIPTION/INPUTS/OUTPUTS sections in ``text`` (first of each kind) and where the first one starts."""
    matches = list(pattern.finditer(text))
    sections: dict[str, str] = {}
    for index, match in enumerate(matches):
        key = match.group(1).upper().rstrip("S")
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        sections.setdefault(key, text[match.end():end].strip())
    return sections, matches[0].start() if matches else len(text)


def parse_contract_reply(reply: str, fmt: SkillFormat) -> ContractReply:
    """Parse ``NAME`` / ``DESCRIPTION`` / ``INPUTS`` / ``OUTPUTS`` / ``BODY`` (``INPUT``/``OUTPUT`` too, any case and
    markdown decoration; contracts may also follow the body as upper-case fields). A missing contract leaves it empty
    and says so in ``note``.

    Raises:
        InductionError: NAME, DESCRIPTION or BODY is missing or empty, or a code skill has no code.
    """
    name_match = _NAME.search(reply)
    start = name_match.end() if name_match else 0
    body_match = _BODY.search(reply, start)
    if name_match is None or body_match is None:
        missing = [f for f, m in (("NAME", name_match), ("BODY", body_match)) if m is None]
        raise InductionError(f"reply lacks the field(s) {', '.join(missing)}")
    head, _ = _contract_sections(reply[start:body_match.start()], _SECTION)
    if "DESCRIPTION" not in head:
        raise InductionError("reply lacks the field(s) DESCRIPTION")
    body, note = _split_off_next_skill(reply[body_match.end():])
    echoed = _PROMPT_ECHO.search(body)
    if echoed is not None:  # a small model copies the prompt's next section after its body
        body = body[:echoed.start()]
        note = "; ".join(filter(None, [note, f"the reply went on with the prompt's {echoed.group(1)!r} section: cut"]))
    tail, cut = _contract_sections(body, _TRAILING_CONTRACT)
    body = body[:cut]
    contracts = {key: head.get(key) or tail.get(key, "") for key in ("INPUT", "OUTPUT")}
    missing = [f"{key}S" for key, text in contracts.items() if not text]
    if missing:
        note = "; ".join(filter(None, [note, f"the reply has no {' or '.join(missing)} contract"]))
    name = name_match.group(1).strip().strip("`*_ ").strip()
    description = " ".join(head["DESCRIPTION"].split())
    body = _finish_body(body, fmt, name, description)
    return ContractReply(name, description, body, contracts["INPUT"], contracts["OUTPUT"], note)


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
        user = "trajectory_contract" if self.config.variant == "contract" else "trajectory"
        self.user = load_prompt(user, self.config.prompt_dir, default_folder=INDUCTION_PROMPTS)
        self.set_system = self._compose(as_set=True) if self.config.skills_per_task is not None else None
        self.lessons_system = (Prompt("induction-lessons-text", load_prompt(
            "lessons", self.config.prompt_dir, default_folder=INDUCTION_PROMPTS).text.strip() + "\n")
            if self.config.lessons else None)

    def _compose(self, *, as_set: bool = False) -> Prompt:
        fmt, variant = self.config.format, self.config.variant
        if as_set:
            least, most = self.config.skills_per_task or (1, 1)
            names = ["instruction", f"format_{fmt}", "contract", f"demonstration_contract_{fmt}", f"rules_{fmt}",
                     f"output_contract_set_{fmt}"]
            parts = [load_prompt(n, self.config.prompt_dir, default_folder=INDUCTION_PROMPTS).text.strip()
                     for n in names]
            text = "\n\n".join(parts).replace("{{min_skills}}", str(least)).replace("{{max_skills}}", str(most))
            return Prompt(f"induction-contract_set-{fmt}", text + "\n")
        if variant == "contract":
            names = ["instruction", f"format_{fmt}", "contract", f"demonstration_contract_{fmt}", f"rules_{fmt}",
                     f"output_contract_{fmt}"]
        else:
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
               provenance: Provenance | None = None, succeeded: bool | None = None,
               values: Sequence[str] = ()) -> Induced:
        """Ask the model for one skill; an unparseable reply gives ``Induced(skill=None, error=...)``.

        Args:
            goal: the trajectory's goal: the task instruction (task level) or the subtask text (subtask level).
            trajectory: the trajectory's action steps as text (the agent renders them, cut to ``max_observation_chars``
                per observation and ``max_trajectory_chars`` in all); fitting may re-render it with steps elided.
            level: recorded on the skill.
            calls: the task's call log (the call is recorded with role "induction"; it fits the prompt to the
                model's window, eliding the oldest steps first).
            provenance: where the trajectory came from.
            succeeded: whether the (sub)trajectory reached its goal (None: not known). With ``only_successful``, a
                trajectory that did not succeed is skipped (``Induced.skipped``) without a model call; the
                ``contract`` variant tells the model the outcome.
            values: the task's instance values (`skilltransfer.induction.abstraction.instance_values`), masked as
                ``<value>`` with the goal's names and paths when ``mask_instance_names`` is on.

        Raises:
            ContextExceeded: the prompt cannot fit the model's window even with the trajectory elided.
            ValueError: ``only_successful`` is set but no verdict was given (``succeeded`` is None).
        """
        if self.config.only_successful and succeeded is None:
            raise ValueError("InductionConfig.only_successful needs the caller's verdict: pass succeeded=True/False")
        if self.config.only_successful and not succeeded:
            return Induced(None, self.prompt_id, "", "not induced: the trajectory did not succeed (only_successful)",
                           skipped=True)
        lesson = self.lessons_system is not None and succeeded is False
        system = self.lessons_system if lesson and self.lessons_system is not None else self.system
        messages = [{"role": "system", "content": system.text},
                    {"role": "user", "content": self.user.render(goal=goal.strip(), trajectory=trajectory.render(),
                                                                 format=self.config.format,
                                                                 outcome=OUTCOMES[succeeded])}]
        completion = calls.complete(self.model, messages, "induction", trajectory=trajectory,
                                    **self.config.model_params)
        out = Induced(None, system.id, completion.text, prompt_tokens=completion.prompt_tokens,
                      completion_tokens=completion.completion_tokens)
        contracts: dict[str, str] = {}
        try:
            if self.config.variant == "contract":
                parsed = parse_contract_reply(completion.text, self.config.format)
                name, description, body, note = parsed.name, parsed.description, parsed.body, parsed.note
                contracts = {"inputs": parsed.inputs, "outputs": parsed.outputs}
            else:
                name, description, body, note = parse_skill_reply(completion.text, self.config.format)
        except InductionError as exc:
            out.error = str(exc)
            return out
        out.skill = self._skill(goal, name, description, body, level, provenance, values, contracts.get("inputs", ""),
                                contracts.get("outputs", ""), prompt_id=system.id)
        if lesson:
            out.skill.extra["lesson"] = "true"
        out.error = note
        return out

    def _skill(self, goal: str, name: str, description: str, body: str, level: SkillLevel,
               provenance: Provenance | None, values: Sequence[str], inputs: str, outputs: str, *,
               prompt_id: str | None = None) -> Skill:
        """The parsed fields as a skill: a code skill named after its entry point, instance names and values
        masked (``mask_instance_names``)."""
        if self.config.format == "code":
            try:  # name the skill after its entry point so the agent can call it by that name
                name = parse_code_signature(body, preferred_name=name if name.isidentifier() else None).function_name
            except ValueError:
                try:
                    name = parse_code_signature(body).function_name
                except ValueError:
                    pass  # broken code: the memory prunes it and logs why
        extra: dict[str, Any] = {"induction_prompt": prompt_id or self.prompt_id}
        mask = self.config.mask_instance_names
        names = instance_names(goal) + instance_paths(goal) if mask else []
        written = "\n".join((name, description, body))
        masked = [n for n in names if mask_names(written, [n]) != written]
        written = mask_names(written, masked)
        masked_values = [v for v in (values if mask else ()) if mask_values(written, [v], identifier=True) != written]
        if masked or masked_values:
            description = mask_values(mask_names(description, masked), masked_values)
            if self.config.format == "text":
                body = mask_values(mask_names(body, masked), masked_values)
            if self.config.format == "text" or not name.isidentifier():
                name = mask_values(mask_names(name, masked), masked_values, identifier=True)
            extra["masked_names"] = "; ".join(masked + masked_values)
        return Skill(name=name, description=description, body=body, format=self.config.format, level=level,
                     provenance=provenance or Provenance(), extra=extra, inputs=inputs, outputs=outputs)

    def induce_set(self, goal: str, trajectory: Trajectory, *, level: SkillLevel, calls: ModelCalls,
                   provenance: Provenance | None = None, succeeded: bool | None = None,
                   values: Sequence[str] = ()) -> list[Induced]:
        """Ask for a set of ``skills_per_task`` contract skills from a whole task's trajectory in one call (``goal``:
        the instruction and the subtasks it was carried out in); each parsed skill is one `Induced` (masked as in
        `induce`), the first carrying the call's tokens; an unparseable reply gives one `Induced` with the error, and
        a set of the wrong size is kept with a note.

        Raises:
            ContextExceeded: the prompt cannot fit the model's window even with the trajectory elided.
            ValueError: no ``skills_per_task``, or ``only_successful`` without a verdict.
        """
        if self.set_system is None or self.config.skills_per_task is None:
            raise ValueError("induce_set needs InductionConfig.skills_per_task")
        if self.config.only_successful and succeeded is None:
            raise ValueError("InductionConfig.only_successful needs the caller's verdict: pass succeeded=True/False")
        if self.config.only_successful and not succeeded:
            return [Induced(None, self.set_system.id, "", "not induced: the task did not succeed (only_successful)",
                            skipped=True)]
        messages = [{"role": "system", "content": self.set_system.text},
                    {"role": "user", "content": self.user.render(goal=goal.strip(), trajectory=trajectory.render(),
                                                                 format=self.config.format,
                                                                 outcome=OUTCOMES[succeeded])}]
        completion = calls.complete(self.model, messages, "induction", trajectory=trajectory,
                                    **self.config.model_params)
        starts = [m.start() for m in _NAME.finditer(completion.text)] or [0]
        chunks = [completion.text[a:b] for a, b in zip(starts, [*starts[1:], len(completion.text)], strict=True)]
        least, most = self.config.skills_per_task
        out: list[Induced] = []
        for chunk in chunks[:most]:
            one = Induced(None, self.set_system.id, chunk)
            try:
                parsed = parse_contract_reply(chunk, self.config.format)
            except InductionError as exc:
                one.error = str(exc)
            else:
                one.skill = self._skill(goal, parsed.name, parsed.description, parsed.body, level, provenance, values,
                                        parsed.inputs, parsed.outputs, prompt_id=self.set_system.id)
                one.error = parsed.note
            out.append(one)
        good = sum(one.skill is not None for one in out)
        if not least <= good <= most or len(chunks) > most:
            note = f"the reply held {len(chunks)} skill(s), {good} usable; asked for {least}-{most}"
            for one in out:
                one.error = "; ".join(filter(None, [one.error, note]))
        out[0].prompt_tokens, out[0].completion_tokens = completion.prompt_tokens, completion.completion_tokens
        out[0].reply = completion.text
        return out
