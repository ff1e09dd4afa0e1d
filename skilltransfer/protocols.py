"""The Protocols that connect skilltransfer's parts, and the small value types they exchange.

Concrete classes never inherit from these; they only have to match the shape (structural typing).
Data flows one way: task -> agent <-> (ChatModel, Episode) -> trajectory -> induction -> SkillStore;
SkillStore -> retrieval -> agent; run logs -> metrics -> reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from skilltransfer.skill import AddResult, Skill

Message = dict[str, Any]
"""An OpenAI-style chat message: {"role": "system"|"user"|"assistant", "content": str}."""


@dataclass(frozen=True)
class Completion:
    """One model call's answer and its accounting (the efficiency metrics are computed from these)."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str
    usage_source: str = "server"
    """Where the token counts came from: "server", "tokenizer" or "approx"."""
    raw_request: dict[str, Any] = field(default_factory=dict)
    raw_response: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1
    """How many requests this answer took (retries included)."""
    cached: bool = False
    """True when the answer was served from the response cache (latency_s is then the original call's)."""
    reasoning: str = ""
    """What a reasoning model thought before answering, split from ``text`` (`skilltransfer.llm.reasoning`): kept in
    the run log beside the reply, never parsed, never sent back to a model."""
    reasoning_tokens: int = 0
    """Completion tokens spent reasoning (included in ``completion_tokens``): the server's
    ``completion_tokens_details.reasoning_tokens`` where given, else counted from ``reasoning``."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat LLM policy. Its optional members are `SizedChatModel`'s."""

    def complete(self, messages: list[Message], **params: Any) -> Completion: ...


@runtime_checkable
class SizedChatModel(ChatModel, Protocol):
    """A chat model that knows its context window and how the server counts a prompt (both optional for a
    `ChatModel`; ``skilltransfer.llm.context`` reads them through wrappers' ``inner`` chain, so wrappers need not
    forward them)."""

    @property
    def context_window(self) -> int | None:
        """The most tokens (prompt + completion) one call may use; None: unknown."""
        ...

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """The prompt tokens of ``messages`` as the server counts them (chat template included)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors, one row per text."""

    @property
    def id(self) -> str:
        """A stable identifier (model name/path and settings); a saved index refuses other ids."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class SkillStore(Protocol):
    """A skill memory: add with dedup/pruning, retrieve by description similarity, usage statistics, persist.

    ``read_only`` is a frozen library: the agent does not induce into it (``add``/``remove`` would raise).
    """

    read_only: bool

    def add(self, skill: Skill) -> AddResult: ...

    def retrieve(self, query: str, k: int = 5) -> list[tuple[Skill, float]]: ...

    def record_retrieval(self, skill_ids: Iterable[str], success: bool) -> None:
        """Count one retrieval of each skill, and a success of the retrieving task when ``success``."""
        ...

    def remove(self, skill_id: str) -> None: ...

    def save(self, path: str | Path) -> Path: ...

    def __contains__(self, skill_id: object) -> bool: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Skill]: ...


@dataclass
class Retrieval:
    """What a `SkillRetriever` gives the agent for one (sub)task query."""

    hits: list[tuple[Skill, float]]
    """The skills retrieved (code skills are loaded into the episode's namespace), best first."""
    blocks: list[str] | None = None
    """The skills section's blocks in order; None: each hit's ``Skill.render()`` (flat reuse)."""
    log: dict[str, Any] | None = None
    """What retrieval did (e.g. a routing log), recorded with the (sub)task's retrieval step."""


class SkillRetriever(Protocol):
    """Chooses what enters a (sub)task's skills section (flat top-k by default; see ``skilltransfer.lens``).

    ``models(role)`` is the agent's model behind the task's call log, its calls recorded under ``role``.
    """

    def retrieve(self, query: str, k: int, models: Callable[[str], ChatModel]) -> Retrieval: ...


@runtime_checkable
class RetrievalMask(Protocol):
    """A retriever that draws over the plain top-k after the harness has shaped it (e.g. its retrieval floor): the
    agent retrieves as without a retriever, lets the harness rewrite the hits, then calls ``mask``."""

    def mask(self, got: Retrieval) -> Retrieval: ...


class Trajectory(Protocol):
    """A (sub-)trajectory rendered inside one message (summarizer, induction), which context fitting may re-render
    with its oldest steps elided."""

    @property
    def n_steps(self) -> int: ...

    def render(self, elided_observations: int = 0, elided_replies: int = 0, *, dropped: int = 0) -> str: ...


class ModelCalls(Protocol):
    """The one way a task's model calls go (every role): fit the prompt to the window, call, record the call."""

    def complete(self, model: ChatModel, messages: list[Message], role: str, *, trajectory: Trajectory | None = None,
                 **params: Any) -> Completion:
        """Raises ``skilltransfer.agents.ContextExceeded`` when the prompt cannot fit."""
        ...


@dataclass(frozen=True)
class TaskSpec:
    """One task of an environment's stream."""

    id: str
    instruction: str
    difficulty: int
    template: str
    apps: tuple[str, ...] = ()
    split: str = "test"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One requirement of an evaluator and whether it held."""

    requirement: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Score:
    """An episode's evaluation: reward in [0, 1], success, and the individual checks."""

    reward: float
    success: bool
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Observation:
    """What the environment returns for one action."""

    output: str
    error: bool = False
    done: bool = False
    """True once the agent has called the env's completion function."""
    skill_calls: dict[str, int] = field(default_factory=dict, hash=False)
    """Calls the action made of the functions of each code skill loaded with its id (skill id -> calls), as the
    sandbox recorded them (`skilltransfer.sandbox.runtime.skilluse`: a measurement the code under test could forge)."""


@runtime_checkable
class Episode(Protocol):
    """A running task: execute actions (Python code), read docs, evaluate the final state."""

    task: TaskSpec

    def step(self, action: str) -> Observation: ...

    def docs(self) -> str: ...

    def load_code(self, source: str, skill_id: str | None = None) -> Observation: ...

    def evaluate(self) -> Score: ...

    def close(self) -> None: ...


@runtime_checkable
class Env(Protocol):
    """An environment: a task set and a way to start episodes. An env whose episodes cannot run side by side (one
    simulator) says so with a class attribute ``concurrent_episodes = False``; a stream then runs its tasks one at a
    time even when they are independent."""

    name: str

    def tasks(self) -> Sequence[TaskSpec]: ...

    def start(self, task: TaskSpec) -> Episode: ...
