"""Reading and writing skills for one task (seed §3.2): `TaskSkills`.

Reading, before each (sub)task: retrieve the top-k skills by description (or what the stream's retriever chooses),
load code skills into the episode's namespace, and render the executor prompt's skills section (or the skill actions
of ``config.skill_exec`` / ``config.library_organization``, `skilltransfer.agents.skill_actions`; under progressive
disclosure of a library, `skilltransfer.agents.disclosure`, always the latter; a library beside the agent's own memory,
`skilltransfer.memory.joint.JointMemory`: the induced skills in full and the library's disclosed, in one section
each, and a retrieval floor for the library's skills only). Writing, after each
finished (sub-)trajectory: induce one skill (`skilltransfer.induction.Inducer`) and add it to the memory. Each read
and each write is a step of the task's result (`RetrievalStep`, `InductionStep`); the task's harness may drop
retrieved skills, refuse an induction or a skill.

When the inducer needs the task's verdict (``only_successful`` or the ``contract`` variant), or writes one set of
skills per task (``skills_per_task`` at subtask level), induction waits: the trajectories are kept here and induced
by `TaskSkills.induce_deferred` once the caller has evaluated the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.decisions import Refuse
from skilltransfer.agents.disclosure import Disclosure, DisclosureOrigin, full_block, one_line
from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.prompts import DISCLOSURE_SECTIONS, AgentPrompts
from skilltransfer.agents.result import AgentResult
from skilltransfer.agents.skill_actions import SkillActions, organize_retrieved
from skilltransfer.agents.steps import CallLog, TrajectoryText
from skilltransfer.agents.views import InductionView
from skilltransfer.induction.abstraction import instance_values
from skilltransfer.induction.inducer import Induced, Inducer
from skilltransfer.llm.context import ContextLengthError, context_window
from skilltransfer.log import ActionStep, GuardRecord, InductionStep, RetrievalStep
from skilltransfer.memory.joint import JointMemory
from skilltransfer.memory.organization import LibraryView
from skilltransfer.protocols import (
    ChatModel,
    Completion,
    Episode,
    Message,
    Retrieval,
    RetrievalMask,
    SkillRetriever,
    SkillStore,
)
from skilltransfer.skill import Provenance, Skill
from skilltransfer.util.prompts import Prompt


@dataclass(frozen=True)
class SkillSource:
    """What a stream shares across tasks for reading and writing skills (`skilltransfer.agents.Agent`'s arguments).

    Attributes:
        model: the agent's model (a retriever's roles call it unless ``role_models`` names another).
        memory: the skill memory; None: no skills.
        inducer: writes skills into ``memory``; None (or a read-only memory): no induction.
        retriever: chooses the skills section; None: the top-k by description.
        organization: a frozen library organisation the retrieved skills are shown in.
        role_models: another model for a role the retriever calls (``{"verifier": m}``).
        library: the name of the frozen library ``memory`` holds (its folder or file name: the header of progressive
            disclosure names it); None: "memory".
    """

    model: ChatModel
    memory: SkillStore | None = None
    inducer: Inducer | None = None
    retriever: SkillRetriever | None = None
    organization: LibraryView | None = None
    role_models: Mapping[str, ChatModel] = field(default_factory=dict)
    library: str | None = None


def _of_library(memory: SkillStore, skill: Skill) -> bool:
    """Whether ``skill`` is a library's: every skill of a read-only memory, the library's part of a `JointMemory`."""
    return memory.from_library(skill.id) if isinstance(memory, JointMemory) else memory.read_only


def _origin(memory: SkillStore, skill: Skill, library: str | None) -> dict[str, str]:
    """Where a retrieved skill came from, as its trajectory step and ``results.jsonl`` record it: ``source``
    ``library`` (with the library's name, ``library``) for a library's skill, ``memory`` for one the run induced
    beside a library; nothing when the run has only its own memory."""
    if not isinstance(memory, JointMemory) and not memory.read_only:
        return {}
    if not _of_library(memory, skill):
        return {"source": "memory"}
    return {"source": "library", **({"library": library} if library else {})}


@dataclass
class _Deferred:
    """A finished (sub-)trajectory waiting for the task's verdict before induction."""

    goal: str
    actions: list[ActionStep]
    index: int | None


class _LoggedModel:
    """A model behind the task's call log under one role (what a `SkillRetriever` calls): every call is fitted and
    recorded like the agent's own; a prompt that cannot fit raises ``ContextLengthError``."""

    def __init__(self, model: ChatModel, calls: CallLog, role: str) -> None:
        self.model, self.calls, self.role = model, calls, role

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        try:
            return self.calls.complete(self.model, messages, self.role, **params)
        except ContextExceeded as exc:
            raise ContextLengthError(exc.message) from exc


class TaskSkills:
    """One task's reads from and writes to the skill memory (see the module docstring).

    Args:
        source: the stream's memory, inducer and retriever.
        config: the agent's resolved settings; prompts: its prompts.
        episode: the running task.
        result: where the steps go (``result.steps``) and the calls are logged (``result.calls``).
        harness: the task's guards.
        origin: ``stream_position`` and ``run_id`` for the provenance of the skills written.
    """

    def __init__(self, source: SkillSource, config: AgentConfig, prompts: AgentPrompts, episode: Episode,
                 result: AgentResult, harness: Harness, origin: Mapping[str, Any]) -> None:
        self.source, self.config, self.prompts, self.episode = source, config, prompts, episode
        self.result, self.harness, self.origin = result, harness, dict(origin)
        self.deferred: list[_Deferred] = []

    # ----------------------------------------------------------------- reading
    def retrieve(self, query: str, kind: str, index: int | None) -> Retrieval:
        """Retrieve the skills for ``query``, load code skills into the namespace and record a `RetrievalStep`;
        nothing without a memory (or with ``top_k`` 0)."""
        memory, result = self.source.memory, self.result
        if memory is None or self.config.top_k <= 0:
            return Retrieval([])
        records: list[GuardRecord] = []
        retriever = self.source.retriever
        below = 0
        if retriever is None or isinstance(retriever, RetrievalMask):
            hits = memory.retrieve(query, k=self.config.top_k)
            floor = self.config.library_min_score
            if floor is not None and (memory.read_only or isinstance(memory, JointMemory)):
                # a frozen library's floor (for its skills only), before the harness sees the hits
                kept = [(skill, score) for skill, score in hits if score >= floor or not _of_library(memory, skill)]
                below, hits = len(hits) - len(kept), kept
            shaped = self.harness.retrieved(query, Retrieval(hits))
            got, records = shaped.value, shaped.records
            if retriever is not None:
                got = retriever.mask(got)
        else:
            models = self.source.role_models
            got = retriever.retrieve(query, self.config.top_k, lambda role: _LoggedModel(
                models.get(role, self.source.model), result.calls, role))
        step = RetrievalStep(query=query, query_kind=kind, subtask_index=index, route=got.log,
                             below_min_score=below + sum(len(record.removed) for record in records), guards=records)
        load_errors: dict[str, str | None] = {}
        for skill, _ in reversed(got.hits):  # worst first, so the best-ranked definition wins a name clash
            if skill.format == "code":
                observation = self.episode.load_code(skill.body, skill.id)
                load_errors[skill.id] = observation.output if observation.error else None
        for skill, score in got.hits:
            step.skills.append({"id": skill.id, "name": skill.name, "format": skill.format, "score": round(score, 6),
                                "source_task_id": skill.provenance.source_task_id,
                                "source_position": skill.provenance.stream_position,
                                "load_error": load_errors.get(skill.id),
                                **_origin(memory, skill, self.source.library)})
        result.steps.append(step)
        return got

    def section(self, query: str, kind: str, index: int | None) -> tuple[str, SkillActions | None]:
        """Retrieve, then the executor prompt's skills section ('' if none) and the skill actions it offers."""
        got = self.retrieve(query, kind, index)
        memory, cfg, calls = self.source.memory, self.config, self.result.calls
        calls.section = ""
        if memory is None or cfg.top_k <= 0:
            return "", None
        whole = cfg.library_exposure == "whole"
        disclosure = self.disclosure()
        if isinstance(memory, JointMemory) and disclosure is not None and got.blocks is None:
            return self._beside_section(got.hits, memory, disclosure)
        if got.blocks is not None or (disclosure is None and cfg.skill_exec == "inline"
                                      and cfg.library_organization == "flat" and not whole):
            blocks = got.blocks if got.blocks is not None else [full_block(skill) for skill, _ in got.hits]
            calls.skills = blocks  # context fitting may shorten them, the worst-ranked first
            if not blocks:
                return "", None
            listing = "\n".join(b if isinstance(b, str) else b.text for b in blocks)
            if disclosure is not None:  # routed units of an external library: its header, no actions
                calls.section = self._disclosed_header(disclosure, listing, len(blocks))
                return calls.section, None
            return self.prompts.skills_section.render(skills=listing), None
        calls.skills = []
        section, actions = self._skill_actions([skill for skill, _ in got.hits], memory, disclosure)
        if disclosure is not None and actions is not None:
            calls.skills = list(actions.blocks)  # context fitting may shorten them, the worst-ranked first
            calls.section = section  # and, as its last resort, leave the section out
        return section, actions

    def _skill_actions(self, hits: list[Skill], store: SkillStore,
                       disclosure: Disclosure | None) -> tuple[str, SkillActions | None]:
        """The skills section of ``hits`` (from ``store``) shown through the skill actions of the mode and the
        organisation (or under progressive disclosure), and those actions; ('', None) without a skill."""
        cfg = self.config
        whole = cfg.library_exposure == "whole"
        skills = list(store) if whole else hits  # whole: the organised library; the hits are the first view
        if not skills:
            return "", None
        organized = organize_retrieved(cfg.library_organization, skills, self.source.organization)
        if organized.nodes or whole:
            self.result.retrievals[-1].organization = {
                "kind": organized.kind, "built_by": organized.built_by, "nodes": len(organized.nodes),
                "exposure": cfg.library_exposure, "skills": len(skills)}
        workspace = getattr(self.episode, "workspace", None)
        actions = SkillActions(cfg.skill_exec, LibraryView(organized, skills), self.prompts,
                               Path(workspace) if workspace is not None else None, first_view=hits if whole else [],
                               disclosure=disclosure, library_size=len(store),
                               below_floor=self.result.retrievals[-1].below_min_score if self.result.retrievals else 0)
        return actions.section(), actions

    def _beside_section(self, hits: list[tuple[Skill, float]], memory: JointMemory,
                        disclosure: Disclosure) -> tuple[str, SkillActions | None]:
        """The skills section of a library beside the agent's own memory, disclosed progressively: the induced skills
        in full under the paper's header, then the library's under its own header with the skill actions. Context
        fitting may shorten every skill (the worst-ranked of both first) and, last, leave the library's part out."""
        calls = self.result.calls
        own = {skill.id: full_block(skill) for skill, _ in hits if not memory.from_library(skill.id)}
        library = [skill for skill, _ in hits if memory.from_library(skill.id)]
        own_section = self.prompts.skills_section.render(skills="\n".join(b.text for b in own.values())) if own else ""
        library_section, actions = self._skill_actions(library, memory.library, disclosure)
        disclosed = iter(actions.blocks if actions is not None else [])
        if actions is not None and len(actions.blocks) == len(library):  # in rank order, both kinds together
            calls.skills = [own[skill.id] if skill.id in own else next(disclosed) for skill, _ in hits]
        else:
            calls.skills = [*own.values(), *disclosed]
        calls.section = library_section
        return own_section + library_section, actions  # the paper's section ends with a blank line

    def disclosure(self) -> Disclosure | None:
        """Progressive disclosure of the library (None under ``full``, the default outside a stream's external
        library). A page of ``load_skill`` / ``read_skill_file`` is ``skill_page_chars`` characters, at most half as
        many as the model's window has tokens (about an eighth of the window), at least 500."""
        cfg = self.config
        if cfg.skill_disclosure != "progressive":
            return None
        name = one_line(self.source.library or "memory", 100)
        window = context_window(self.source.model)
        page = cfg.skill_page_chars if window is None else max(500, min(cfg.skill_page_chars, window // 2))
        return Disclosure(name, inline_body_chars=cfg.inline_body_chars, page_chars=page,
                          origin=self.disclosure_origin())

    def disclosure_origin(self) -> DisclosureOrigin:
        """Whose skills the memory holds: a library beside the agent's own (a `JointMemory`), a library (read-only,
        or named), or the agent's own memory."""
        memory = self.source.memory
        if isinstance(memory, JointMemory):
            return "beside"
        return "library" if self.source.library is not None or (memory is not None and memory.read_only) else "memory"

    def _disclosed_header(self, disclosure: Disclosure, listing: str, shown: int) -> str:
        memory = self.source.memory
        size = len(memory) if memory is not None else 0
        summary = (f"{disclosure.holder} holds {size} skill{'s' if size != 1 else ''}; the parts of them routed to "
                   f"this task are shown ({shown}).")
        section: Prompt = getattr(self.prompts, DISCLOSURE_SECTIONS[disclosure.origin])
        return section.render(library=f"`{disclosure.library}`", summary=summary, listing=listing, actions="")

    # ----------------------------------------------------------------- writing
    @property
    def writes(self) -> bool:
        """Whether skills are written (an inducer and a writable memory)."""
        memory = self.source.memory
        return self.source.inducer is not None and memory is not None and not memory.read_only

    @property
    def needs_verdict(self) -> bool:
        """Whether induction waits for the task's verdict (`InductionConfig.needs_verdict`)."""
        inducer = self.source.inducer
        return inducer is not None and inducer.config.needs_verdict

    @property
    def writes_sets(self) -> bool:
        """Whether one set of skills is written per task (``skills_per_task`` at subtask level)."""
        inducer = self.source.inducer
        return inducer is not None and inducer.config.skills_per_task is not None and self.config.level == "subtask"

    def induce(self, goal: str, actions: list[ActionStep], index: int | None) -> None:
        """Induce one skill from a finished (sub-)trajectory and store it (or keep it for the verdict); nothing
        without `writes` or when no code was executed (there is no procedure to learn from)."""
        if not self.writes or not any(step.action is not None for step in actions):
            return
        if self.writes_sets:  # the set is induced from the whole task: its gate applies to the whole task
            self.deferred.append(_Deferred(goal, list(actions), index))
        elif self._due(goal, actions, index):
            if self.needs_verdict:
                self.deferred.append(_Deferred(goal, list(actions), index))
            else:
                self._induce(goal, actions, index, None)

    def induce_deferred(self, succeeded: bool) -> None:
        """Induce the (sub-)trajectories kept for the verdict, each with ``succeeded``."""
        pending, self.deferred = self.deferred, []
        if not pending or not self.writes_sets:
            for item in pending:
                self._induce(item.goal, item.actions, item.index, succeeded)
            return
        goal = self.episode.task.instruction + "\n\nSubtasks it was carried out in:\n" + "\n".join(
            f"{n}. {item.goal}" for n, item in enumerate(pending, start=1))
        actions = [step for item in pending for step in item.actions]
        if self._due(goal, actions, None):
            self._induce(goal, actions, None, succeeded, whole_task=True)

    def _due(self, goal: str, actions: list[ActionStep], index: int | None) -> bool:
        """Ask the harness whether to induce from this trajectory; a refusal is recorded as an `InductionStep`."""
        assert self.source.inducer is not None
        due = self.harness.induction_due(InductionView(goal, actions, self.episode.docs()))
        if isinstance(due.stop, Refuse):
            self.result.steps.append(InductionStep(subtask_index=index, prompt_id=self.source.inducer.prompt_id,
                                                   status=due.stop.reason, reason=due.stop.message,
                                                   guards=due.records))
        return not isinstance(due.stop, Refuse)

    def _induce(self, goal: str, actions: list[ActionStep], index: int | None, succeeded: bool | None, *,
                whole_task: bool = False) -> None:
        """One induction call (a set of skills for ``whole_task``) and the store of what it gives."""
        inducer, episode, calls = self.source.inducer, self.episode, self.result.calls
        assert inducer is not None
        instruction = episode.task.instruction
        provenance = Provenance(source_task_id=episode.task.id, subtask_index=None if whole_task else index,
                                **self.origin)
        limits = inducer.config
        trajectory = TrajectoryText(actions, limits.max_observation_chars, limits.max_trajectory_chars)
        try:
            if whole_task:
                values = instance_values(instruction, trajectory.render(), episode.docs())
                induced = inducer.induce_set(goal, trajectory, level=self.config.level, calls=calls,
                                             provenance=provenance, succeeded=bool(succeeded), values=values)
            else:
                values = instance_values(f"{instruction}\n{goal}", trajectory.render(), episode.docs())
                induced = [inducer.induce(goal, trajectory, level=self.config.level, calls=calls,
                                          provenance=provenance, succeeded=succeeded, values=values)]
        except ContextExceeded as exc:
            self.result.steps.append(InductionStep(subtask_index=index, prompt_id=inducer.prompt_id,
                                                   status="context_exceeded", reason=exc.message))
            return
        for one in induced:
            self._store(one, goal, actions, index)

    def _store(self, induced: Induced, goal: str, actions: list[ActionStep], index: int | None) -> None:
        """Log one induction attempt and add its skill to memory (unless a guard refuses it)."""
        memory = self.source.memory
        assert memory is not None
        step = InductionStep(subtask_index=index, prompt_id=induced.prompt_id, status=induced.status,
                             reason=induced.error, reply=induced.reply, prompt_tokens=induced.prompt_tokens,
                             completion_tokens=induced.completion_tokens)
        skill: Skill | None = induced.skill
        if skill is not None:
            checked = self.harness.skill_induced(InductionView(goal, actions, self.episode.docs()), skill)
            step.guards, skill = checked.records, checked.value
            if isinstance(checked.stop, Refuse):
                step.status, step.reason, skill = checked.stop.reason, checked.stop.message, None
        if skill is not None:
            added = memory.add(skill)
            step.status, step.skill_id, step.target_id = added.action, added.skill_id, added.target_id
            step.skill_name = skill.name
            step.reason = "; ".join(part for part in (added.reason, induced.error) if part)
        self.result.steps.append(step)
