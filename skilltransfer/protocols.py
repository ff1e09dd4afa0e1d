"""The Protocols that connect skilltransfer's parts, and the small value types they exchange.

Concrete classes never inherit from these; they only have to match the shape (structural typing).
Data flows one way: task -> agent <-> (ChatModel, Episode) -> trajectory -> induction -> SkillStore;
SkillStore -> retrieval -> agent; run logs -> metrics -> reports.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from skilltransfer.memory.skill import Skill

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


@runtime_checkable
class ChatModel(Protocol):
    """A chat LLM policy.

    Optional members (not part of the structural check; read with ``getattr`` through wrappers by
    ``skilltransfer.llm.context``): ``context_window: int | None``, the most tokens (prompt + completion) one call may
    use (None: unknown), and ``count_prompt_tokens(messages) -> int``, the prompt tokens as the server counts them.
    """

    def complete(self, messages: list[Message], **params: Any) -> Completion: ...


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
    """A skill memory: add with dedup/pruning, retrieve by description similarity, persist."""

    def add(self, skill: Skill) -> Any: ...

    def retrieve(self, query: str, k: int = 5) -> list[tuple[Skill, float]]: ...

    def remove(self, skill_id: str) -> None: ...

    def save(self, path: Any) -> None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Skill]: ...


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


@runtime_checkable
class Episode(Protocol):
    """A running task: execute actions (Python code), read docs, evaluate the final state."""

    task: TaskSpec

    def step(self, action: str) -> Observation: ...

    def docs(self) -> str: ...

    def load_code(self, source: str) -> Observation: ...

    def evaluate(self) -> Score: ...

    def close(self) -> None: ...


@runtime_checkable
class Env(Protocol):
    """An environment: a task set and a way to start episodes."""

    name: str

    def tasks(self) -> Sequence[TaskSpec]: ...

    def start(self, task: TaskSpec) -> Episode: ...
