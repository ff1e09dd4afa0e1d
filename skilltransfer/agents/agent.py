"""The agent of the paper (seed §3.1-3.2) as a library user builds it: `Agent` holds what a stream shares across
tasks (the model, the skill memory, the inducer, the resolved settings, the prompts) and starts one `TaskLoop` per
task (`skilltransfer.agents.loop`), which holds everything that task changes.

    agent = Agent(model, memory=memory, inducer=Inducer(model), level="subtask")
    task = agent.task(episode)          # one object per task
    result = task.run()                 # the loop; the episode is left open
    task.finish(episode.evaluate().success)   # skills that wait for the verdict are written now

``Agent.run(episode)`` is ``agent.task(episode).run()``. Settings are resolved once, here when the caller gives
unresolved ones (`skilltransfer.agents.harness.presets.resolve_for`: ``small-model`` for the embedded model,
``paper`` for any other, as a stream resolves them); a stream passes its resolved settings through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.harness.presets import resolve_for
from skilltransfer.agents.loop import TaskLoop
from skilltransfer.agents.prompts import NO_SUMMARY, AgentPrompts
from skilltransfer.agents.result import AgentEvent, AgentResult
from skilltransfer.agents.skill_io import SkillSource, TaskSkills
from skilltransfer.induction.inducer import Inducer
from skilltransfer.memory.organization import LibraryView
from skilltransfer.protocols import ChatModel, Episode, SkillRetriever, SkillStore

__all__ = ["NO_SUMMARY", "Agent", "AgentEvent", "AgentResult", "TaskLoop"]


class Agent:
    """A task-level (``config.level="task"``) or subtask-level agent: the stream-wide half (see the module docstring).

    Args:
        model: the policy (also used by the planner, summarizer and, usually, the inducer).
        memory: a skill memory (``SkillStore``) to retrieve from; None runs without skills.
        inducer: induces one skill per finished (sub-)trajectory into ``memory`` (``skilltransfer.induction.Inducer``);
            None (or a read-only memory) disables induction.
        config: agent settings, resolved or not (see the module docstring); keyword arguments override its fields.
        on_event: called with each `AgentEvent` of the tasks started later (may be set as the attribute).
        organization: a frozen library organisation (tree/graph) the retrieved skills are shown in; skills it does
            not hold are grouped by source task (`skilltransfer.agents.skill_actions.organize_retrieved`).
        retriever: chooses each (sub)task's skills section from ``memory``; None: the top-k skills by description
            (flat reuse). The agent does not know how it chooses.
        role_models: another model for a role the retriever calls (``{"verifier": m}``); unlisted roles use ``model``.
        library: the name of the frozen library ``memory`` holds (its folder or file name), shown in the header of
            progressive disclosure (``skill_disclosure: progressive``, `skilltransfer.agents.disclosure`).
    """

    def __init__(self, model: ChatModel, *, memory: SkillStore | None = None, inducer: Inducer | None = None,
                 config: AgentConfig | None = None, on_event: Callable[[AgentEvent], None] | None = None,
                 organization: LibraryView | None = None, retriever: SkillRetriever | None = None,
                 role_models: Mapping[str, ChatModel] | None = None, library: str | None = None,
                 **kwargs: Any) -> None:
        given = config or AgentConfig()
        if kwargs:
            given = AgentConfig.model_validate({**given.model_dump(), **kwargs})
        self.config = resolve_for(given, model)
        self.source = SkillSource(model, memory, inducer, retriever, organization, dict(role_models or {}), library)
        self.prompts = AgentPrompts.load(self.config.prompt_dir)
        self.on_event = on_event

    @property
    def model(self) -> ChatModel:
        return self.source.model

    @property
    def memory(self) -> SkillStore | None:
        return self.source.memory

    @memory.setter
    def memory(self, memory: SkillStore | None) -> None:
        """The memory the tasks started from now on read and write (a stream may give each task its own)."""
        self.source = replace(self.source, memory=memory)

    @property
    def inducer(self) -> Inducer | None:
        return self.source.inducer

    def task(self, episode: Episode, *, stream_position: int | None = None, run_id: str | None = None,
             on_event: Callable[[AgentEvent], None] | None = None) -> TaskLoop:
        """A fresh `TaskLoop` for one task (``on_event``: the agent's when None)."""
        return TaskLoop(self.source, self.config, self.prompts, episode,
                        origin={"stream_position": stream_position, "run_id": run_id},
                        on_event=on_event if on_event is not None else self.on_event)

    def run(self, episode: Episode, *, stream_position: int | None = None, run_id: str | None = None) -> AgentResult:
        """Solve one task (``task(episode).run()``); the episode is left open. Induction that waits for the
        task's verdict needs `task` and its ``finish``."""
        return self.task(episode, stream_position=stream_position, run_id=run_id).run()

    def skills(self, episode: Episode, result: AgentResult, harness: Harness, *, stream_position: int | None = None,
               run_id: str | None = None) -> TaskSkills:
        """Reading and writing skills for one task run by another loop (a coordinated task), into ``result``."""
        return TaskSkills(self.source, self.config, self.prompts, episode, result, harness,
                          {"stream_position": stream_position, "run_id": run_id})
