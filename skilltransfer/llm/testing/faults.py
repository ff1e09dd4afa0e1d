"""`FaultyModel`: a seeded fault-injecting wrapper around any ChatModel (a documented test double).

Transport faults (rate_limit, server_error, timeout) raise `TransientModelError` as the real client's requests do,
so the chain's retry layer retries them (``Retry(policy, what=...)(lambda: model.complete(messages))``,
`skilltransfer.llm.chain.Retry`); content faults (garbage_text, truncated) return a damaged answer, as a real
model sometimes does, so agent loops can be tested against them.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Sequence
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.retry import TransientModelError
from skilltransfer.protocols import ChatModel, Completion, Message

WRAPPER_FAULTS = ("rate_limit", "server_error", "timeout", "garbage_text", "truncated")


class FaultyModel:
    """Injects faults into ``rate`` of the calls to ``inner`` (or follows ``plan`` for the first calls).

    Args:
        inner: the wrapped ChatModel.
        rate: chance in [0, 1] that a call gets a fault.
        kinds: the faults to draw from (see `WRAPPER_FAULTS`).
        seed: seeds the draws, so a run's faults are reproducible.
        plan: faults for the first calls in order (None = none), before ``rate`` applies.
        retry_after_s: the Retry-After carried by injected rate limits.
    """

    def __init__(self, inner: ChatModel, *, rate: float = 0.1, kinds: Sequence[str] = WRAPPER_FAULTS, seed: int = 0,
                 plan: Sequence[str | None] = (), retry_after_s: float | None = None) -> None:
        for kind in [*kinds, *(k for k in plan if k is not None)]:
            if kind not in WRAPPER_FAULTS:
                raise InputError(f"Unknown fault kind {kind!r}. Available: {', '.join(WRAPPER_FAULTS)}")
        if not 0.0 <= rate <= 1.0:
            raise InputError(f"fault rate must be in [0, 1], got {rate}")
        self.inner = inner
        self.rate, self.kinds, self.plan = rate, tuple(kinds), list(plan)
        self.retry_after_s = retry_after_s
        self.model = getattr(inner, "model", "faulty")
        self.faults: list[str] = []
        """Every fault injected, in order."""
        self.calls = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def _draw(self) -> str | None:
        with self._lock:
            index = self.calls
            self.calls += 1
            if index < len(self.plan):
                fault = self.plan[index]
            elif self.kinds and self._rng.random() < self.rate:
                fault = self._rng.choice(self.kinds)
            else:
                fault = None
            if fault is not None:
                self.faults.append(fault)
            return fault

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        fault = self._draw()
        if fault == "rate_limit":
            raise TransientModelError("rate_limit", "injected 429 Too Many Requests", retry_after_s=self.retry_after_s)
        if fault == "server_error":
            raise TransientModelError("server_error", "injected HTTP 500")
        if fault == "timeout":
            raise TransientModelError("timeout", "injected timeout")
        completion: Completion = self.inner.complete(messages, **params)
        if fault == "garbage_text":
            with self._lock:
                junk = "".join(self._rng.choice("#@%&*!?~^ abcxyz0123") for _ in range(max(8, len(completion.text))))
            return dataclasses.replace(completion, text=junk)
        if fault == "truncated":
            return dataclasses.replace(completion, text=completion.text[: len(completion.text) // 2],
                                       finish_reason="length")
        return completion
