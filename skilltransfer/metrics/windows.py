"""Per-context-window accounting (study "Subagents vs Agent Skills" §3.1, §4): what a task's main agent and each
subagent it spawned consumed, and what they exchanged.

A task runs in one *main* window and, when skills run as subagents, one more window per subagent call. Each window
counts its model calls, prompt and completion tokens and its peak context (the largest single prompt). A subagent
window also counts its *communication*: the tokens the caller sent it (the inputs), the tokens it returned to the
caller (its output) and the tokens of the prompt it was seeded with (the skill's instructions plus the inputs). Its
communication is the seed prompt plus the output: the inputs are inside the seed, so they count once. The task's peak
context is the largest over all windows; its communication share is communication tokens / all tokens.
The agent layer fills a `ContextAccount` per task; reports read it back with `ContextAccount.from_dict`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

WindowKind = Literal["main", "subagent"]


@dataclass
class ContextWindow:
    """One context window's consumption."""

    kind: WindowKind = "main"
    label: str = "main"
    """"main", or the name of the skill the subagent ran."""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    peak_context: int = 0
    """The largest single prompt of this window (tokens)."""
    sent_tokens: int = 0
    """Subagent: tokens the caller sent it (the inputs argument)."""
    returned_tokens: int = 0
    """Subagent: tokens it returned to the caller."""
    seed_tokens: int = 0
    """Subagent: tokens of the prompt it was seeded with (skill instructions and inputs)."""

    def record_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Count one model call of this window."""
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.peak_context = max(self.peak_context, prompt_tokens)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def communication_tokens(self) -> int:
        """The seed prompt (which holds the inputs sent) + the output returned (0 for the main window); the inputs
        count once (a seed shorter than them, as in hand-made accounts, counts the inputs instead)."""
        return max(self.seed_tokens, self.sent_tokens) + self.returned_tokens

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_tokens": self.total_tokens,
                "communication_tokens": self.communication_tokens}


@dataclass
class ContextAccount:
    """A task's context windows (the main one first) and its skill actions."""

    windows: list[ContextWindow] = field(default_factory=lambda: [ContextWindow()])
    skill_loads: int = 0
    """Agent-skill loads (a skill's instructions put into the caller's context)."""
    nodes_opened: int = 0
    """Routing nodes opened in a hierarchical library."""
    file_reads: int = 0
    """``read_skill_file`` calls answered (a skill's file, folder or part of its instructions; progressive
    disclosure)."""

    @property
    def main(self) -> ContextWindow:
        return self.windows[0]

    def open_subagent(self, skill: str, *, sent_tokens: int = 0, seed_tokens: int = 0) -> ContextWindow:
        """A new subagent window for ``skill``, appended and returned for its calls to be recorded."""
        window = ContextWindow("subagent", skill, sent_tokens=sent_tokens, seed_tokens=seed_tokens)
        self.windows.append(window)
        return window

    @property
    def subagent_calls(self) -> int:
        return sum(1 for window in self.windows if window.kind == "subagent")

    @property
    def peak_context(self) -> int:
        """The largest single prompt over all windows."""
        return max(window.peak_context for window in self.windows)

    @property
    def total_tokens(self) -> int:
        return sum(window.total_tokens for window in self.windows)

    @property
    def communication_tokens(self) -> int:
        return sum(window.communication_tokens for window in self.windows)

    @property
    def communication_share(self) -> float:
        """Communication tokens / all tokens (0.0 when nothing was spent)."""
        total = self.total_tokens
        return self.communication_tokens / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"windows": [window.to_dict() for window in self.windows], "skill_loads": self.skill_loads,
                "nodes_opened": self.nodes_opened, "file_reads": self.file_reads, "subagent_calls": self.subagent_calls,
                "peak_context": self.peak_context, "total_tokens": self.total_tokens,
                "communication_tokens": self.communication_tokens, "communication_share": self.communication_share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextAccount:
        """Read back `to_dict` output (derived figures are recomputed, not trusted)."""
        names = {f.name for f in dataclasses.fields(ContextWindow)}
        windows = [ContextWindow(**{k: v for k, v in w.items() if k in names}) for w in data.get("windows", [])]
        return cls(windows=windows or [ContextWindow()], skill_loads=int(data.get("skill_loads", 0)),
                   nodes_opened=int(data.get("nodes_opened", 0)), file_reads=int(data.get("file_reads", 0)))
