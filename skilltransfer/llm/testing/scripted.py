"""`ScriptedModel`: a chat model replaying scripted replies, to drive real agent loops in tests (a documented test
double).

It is registered under the name ``scripted`` and is never used unless asked for by that name
(``make_model("scripted", outputs=[...])`` or ``--model scripted:replies.jsonl``, whose file `from_script` reads).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.context import approx_tokens, messages_tokens
from skilltransfer.llm.testing.script import script_replies
from skilltransfer.protocols import Completion, Message

ScriptFn = Callable[[list[Message]], str]


class ScriptExhausted(InputError, RuntimeError):
    """The scripted model was called more times than it has outputs (its script is too short: one line, exit 2)."""


class ScriptedModel:
    """Replays fixed outputs (a list, consumed in order) or computes them with ``fn(messages) -> str``.

    Args:
        outputs: the replies in order, or a callable from the messages to the reply.
        model: model id reported in completions.
        latency_s: artificial latency per call (sleep), default none.
        context_window: the window it reports (None: unknown); prompts are counted as it reports usage
            (`messages_tokens`).

    Raises:
        ScriptExhausted: on a call after the list is used up.
    """

    def __init__(self, outputs: Sequence[str] | ScriptFn, *, model: str = "scripted", latency_s: float = 0.0,
                 context_window: int | None = None) -> None:
        self._fn: ScriptFn | None = outputs if callable(outputs) else None
        self._outputs = list(outputs) if not callable(outputs) else []
        self.model = model
        self.latency_s = latency_s
        self.context_window = context_window
        self.prompt_count_source = "approx"
        self.calls: list[list[Message]] = []
        self.params: list[dict[str, Any]] = []
        """The sampling parameters of each call, in order."""

    @classmethod
    def from_script(cls, path: str | Path, *, model: str = "scripted") -> ScriptedModel:
        """The double replaying a script file (``--model scripted:<file.jsonl>``; `script_replies`).

        Raises:
            InputError: a missing or bad script file (names the file and line).
        """
        return cls(script_replies(path), model=model)

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """The prompt tokens this double reports for ``messages``."""
        return messages_tokens(messages)

    @property
    def remaining(self) -> int | None:
        """Outputs left (None for a callable script)."""
        return None if self._fn is not None else len(self._outputs) - len(self.calls)

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        start = time.perf_counter()
        index = len(self.calls)
        self.params.append(dict(params))
        if self._fn is not None:
            self.calls.append(list(messages))
            text = self._fn(list(messages))
        else:
            if index >= len(self._outputs):
                raise ScriptExhausted(f"scripted model ran out of replies after {len(self._outputs)} calls; "
                                      "add replies (or a default rule) to its script")
            self.calls.append(list(messages))
            text = self._outputs[index]
        if self.latency_s:
            time.sleep(self.latency_s)
        return Completion(text=text, finish_reason="stop", prompt_tokens=messages_tokens(messages),
                          completion_tokens=approx_tokens(text), latency_s=time.perf_counter() - start,
                          model=self.model, usage_source="approx",
                          raw_request={"messages": list(messages), **params}, raw_response={"text": text})
