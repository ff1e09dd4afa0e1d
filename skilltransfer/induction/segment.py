"""Subtask segmentation of a finished trajectory that has no plan of its own (another agent's, read from ATIF): the
subtask level's unit of induction when no planner chose the subtasks.

`Segmenter` asks the model once (``prompts/segment.md``: the goal and the numbered steps) for ``SUBTASK a-b: goal``
lines; `parse_segments` keeps the lines whose step ranges are inside the trajectory and in order (a range that
overlaps the one before it is left out, steps no line covers are not induced from). A reply with no usable line
gives one subtask, the whole trajectory with the task's goal, and a note saying so: the task level's unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from skilltransfer.induction.inducer import INDUCTION_PROMPTS
from skilltransfer.protocols import ChatModel, ModelCalls, Trajectory
from skilltransfer.util.prompts import load_prompt

SEGMENT_ROLE = "segmentation"
"""The role its model call is recorded under."""
_LINE = re.compile(r"^[ \t>*_#-]*SUBTASK[ \t*_]*(\d+)(?:[ \t]*(?:-|–|to)[ \t]*(\d+))?[ \t*_]*:[ \t*_]*(.+?)[ \t*_]*$",
                   re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class Segment:
    """Steps ``first`` to ``last`` (1-based, inclusive) of a trajectory and the subtask goal they reach."""

    first: int
    last: int
    goal: str


@dataclass
class Segmentation:
    """The subtasks of one trajectory, the model's reply and what was left out of it."""

    segments: list[Segment]
    reply: str = ""
    notes: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


def parse_segments(reply: str, n_steps: int) -> tuple[list[Segment], list[str]]:
    """The usable ``SUBTASK a-b: goal`` lines of ``reply`` for a trajectory of ``n_steps`` steps, and a note for each
    line left out (see the module docstring)."""
    segments: list[Segment] = []
    notes: list[str] = []
    for match in _LINE.finditer(reply):
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        goal = " ".join(match.group(3).split())
        if not 1 <= first <= last <= n_steps:
            notes.append(f"SUBTASK {first}-{last}: outside steps 1-{n_steps} (left out)")
        elif segments and first <= segments[-1].last:
            notes.append(f"SUBTASK {first}-{last}: overlaps the one before it (left out)")
        elif goal:
            segments.append(Segment(first, last, goal))
    covered = sum(s.last - s.first + 1 for s in segments)
    if segments and covered < n_steps:
        notes.append(f"{n_steps - covered} of {n_steps} steps are in no subtask (not induced from)")
    return segments, notes


class Segmenter:
    """Splits a trajectory into subtasks with a chat model (see the module docstring).

    Args:
        model: the chat model (the inducer's).
        prompt_dir: a folder of replacement prompt files (``segment.md``, ``segment_user.md``).
        params: extra sampling parameters for its call.
    """

    def __init__(self, model: ChatModel, *, prompt_dir: str | Path | None = None,
                 params: dict[str, object] | None = None) -> None:
        self.model = model
        self.system = load_prompt("segment", prompt_dir, default_folder=INDUCTION_PROMPTS)
        self.user = load_prompt("segment_user", prompt_dir, default_folder=INDUCTION_PROMPTS)
        self.params = dict(params or {})

    @property
    def prompt_id(self) -> str:
        return self.system.id

    def segment(self, goal: str, trajectory: Trajectory, *, calls: ModelCalls) -> Segmentation:
        """The subtasks of ``trajectory`` (``goal``: the task's instruction); one call, recorded in ``calls``.

        Raises:
            ContextExceeded: the prompt cannot fit the model's window even with the trajectory elided.
        """
        n = trajectory.n_steps
        if n <= 1:
            return Segmentation([Segment(1, max(n, 1), goal.strip())], notes=["one step: one subtask, no call"])
        messages = [{"role": "system", "content": self.system.text},
                    {"role": "user", "content": self.user.render(goal=goal.strip(), steps=n,
                                                                 trajectory=trajectory.render())}]
        completion = calls.complete(self.model, messages, SEGMENT_ROLE, trajectory=trajectory, **self.params)
        segments, notes = parse_segments(completion.text, n)
        if not segments:
            notes.append("no usable SUBTASK line in the reply: the whole trajectory is one subtask")
            segments = [Segment(1, n, goal.strip())]
        return Segmentation(segments, completion.text, notes, int(completion.prompt_tokens),
                            int(completion.completion_tokens))


__all__ = ["SEGMENT_ROLE", "Segment", "Segmentation", "Segmenter", "parse_segments"]
