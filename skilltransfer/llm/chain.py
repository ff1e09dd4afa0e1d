"""The one chain around a model call: every layer a call passes, declared here, in the order in which they wrap.

A stream's model is a client (`skilltransfer.llm.openai_client.OpenAIChatModel`, the embedded model, or any
`ChatModel`) inside these layers. A call enters at the outermost; each layer does one job and hands the call on
(outermost first, with who puts it on):

1. `LoggedModel`: a retriever role's call goes through the task's call log, fitted to the window and recorded as
   the agent's own calls are (the agent, ``agents/skill_io.py``).
2. `TimedModel`: the running task's deadline (``agent.task_timeout_s``) is checked before the call (the stream's
   build, ``runner/stream_build.py``, when a timeout is set; the clock is ``runner/clock.py``'s `TaskClock`).
3. `ReportingModel`: each completion is told to a listener: the served model ids the run records (the stream, with
   ``log/provenance.py``'s `ServedModels`), then the progress bar (``run``, ``runner/progress.py``).
4. `LimitedModel`: a slot of a cluster-wide concurrency limit is held during the call (the Ray backend,
   ``runner/ray_backend.py``).
5. `CachedModel`: the response cache answers from disk or records the answer (``--cache``; ``llm/config.py``'s
   `with_response_cache`).

Inside the client (`OpenAIChatModel.complete`), each request then passes, in this order: the parameter adapter's
rounds (``llm/strict.py``: a parameter the endpoint refused is adapted and the request sent again); `Retry`
(transient failures retried within the retry budget, on ``tenacity``); the endpoint's slot (``max_concurrency``
calls in flight per endpoint in the process, held per attempt); and the HTTP request (``util/http_client.py``).

A layer wraps only a layer further down the list, or a model that is no layer: `Layer` refuses another order with a
``TypeError``, so the order above is the order every command builds. Everything a layer does not do itself is the
inner model's (``layer.context_window`` is the client's); `skilltransfer.llm.context.model_chain` walks the chain.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Protocol, TypeVar

import tenacity

from skilltransfer.llm.cache import CacheMiss, ResponseCache, request_key
from skilltransfer.llm.context import ContextLengthError
from skilltransfer.llm.retry import ModelCallError, RetryPolicy, TransientModelError
from skilltransfer.protocols import ChatModel, Completion, Message, ModelCalls

T = TypeVar("T")
log = logging.getLogger(__name__)

_sleep: Callable[[float], None] = time.sleep
"""How retries wait (module-level so that tests can swap in a fake clock)."""
_now: Callable[[], float] = time.monotonic
"""The clock the retry budget is measured on."""
LOUD_WAIT_S = 10.0
"""Retries that wait at least this long are logged as warnings (shorter ones at INFO)."""


class Layer:
    """One job around a model call (see the module docstring); every other member is the inner model's.

    Raises:
        TypeError: ``inner`` is a layer that the chain puts outside this one.
    """

    rank: ClassVar[int] = 0
    """The layer's place in `ORDER` (set there)."""

    def __init__(self, inner: ChatModel) -> None:
        if isinstance(inner, Layer) and inner.rank < self.rank:
            raise TypeError(f"{type(self).__name__} cannot wrap {type(inner).__name__}: the chain's order is "
                            f"{' > '.join(layer.__name__ for layer in ORDER)} (outermost first)")
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a half-built or unpickled layer)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        raise NotImplementedError


class LoggedModel(Layer):
    """A role's calls through the task's call log (`ModelCalls`: fitted to the window, recorded with the agent's
    own calls), for a caller that knows no agent (a `SkillRetriever`'s verifier or router).

    Args:
        inner: the role's model.
        calls: the task's call log.
        role: the role the calls are recorded under.
        overflow: what ``calls`` raises for a prompt that cannot fit (the agent's ``ContextExceeded``); the caller
            gets `ContextLengthError` instead, which the model layer's callers understand.
    """

    def __init__(self, inner: ChatModel, calls: ModelCalls, role: str, overflow: type[Exception]) -> None:
        super().__init__(inner)
        self.calls, self.role, self.overflow = calls, role, overflow

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        try:
            return self.calls.complete(self.inner, messages, self.role, **params)
        except self.overflow as exc:
            raise ContextLengthError(str(exc)) from exc


class Deadline(Protocol):
    """The running task's deadline (the stream's ``TaskClock``)."""

    def check(self) -> None:
        """Raises once the deadline has passed."""


class TimedModel(Layer):
    """Checks the task's deadline before each call (a task past it ends before it asks the model again)."""

    def __init__(self, inner: ChatModel, deadline: Deadline) -> None:
        super().__init__(inner)
        self.deadline = deadline

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        self.deadline.check()
        return self.inner.complete(messages, **params)


class ReportingModel(Layer):
    """Tells ``listener`` of each completion (the run's served models, the progress bar)."""

    def __init__(self, inner: ChatModel, listener: Callable[[Completion], None]) -> None:
        super().__init__(inner)
        self.listener = listener

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        completion = self.inner.complete(messages, **params)
        self.listener(completion)
        return completion


class LimitedModel(Layer):
    """Holds ``slot`` (a context manager: one place of a concurrency limit shared beyond this process) during each
    call."""

    def __init__(self, inner: ChatModel, slot: AbstractContextManager[Any]) -> None:
        super().__init__(inner)
        self.slot = slot

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        with self.slot:
            return self.inner.complete(messages, **params)


class CachedModel(Layer):
    """Answers from a `ResponseCache` (``skilltransfer.llm.cache``: modes, keys), asking ``inner`` on a miss.

    Args:
        inner: the model paid on a miss (in ro mode it is never called).
        cache: the store.
    """

    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        super().__init__(inner)
        self.cache = cache
        self.model = getattr(inner, "model", "?")
        self.hits = 0
        self.misses = 0
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def request_body(self, messages: list[Message], **params: Any) -> dict[str, Any]:
        """The full request the inner model would send (its own ``request_body`` when it has one)."""
        if hasattr(self.inner, "request_body"):
            body: dict[str, Any] = self.inner.request_body(messages, **params)
            return body
        return {"model": self.model, "messages": list(messages), **params}

    @property
    def context_window(self) -> int | None:
        """The inner model's window, recorded; a replay answers the recorded one without asking the model."""
        from skilltransfer.llm.context import context_window

        known, value = self.cache.fact("context_window")
        if self.cache.mode == "ro":
            return value
        window = context_window(self.inner)
        if not known or value != window:
            self.cache.put_fact("context_window", window)
        return window

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """The inner model's count of a prompt, recorded by the messages' hash; a replay answers the recorded count
        (or `estimate_tokens`' when the prompt was never counted)."""
        from skilltransfer.llm.context import count_prompt_tokens

        key = "tokens:" + request_key({"messages": list(messages)})
        known, value = self.cache.fact(key)
        if known and value is not None:
            return int(value)
        if self.cache.mode == "ro":
            return count_prompt_tokens(None, messages)[0]
        count = count_prompt_tokens(self.inner, messages)[0]
        self.cache.put_fact(key, count)
        return count

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        request = self.request_body(messages, **params)
        key = request_key(request)
        with self._lock:
            seq = self._seen.get(key, 0)
            self._seen[key] = seq + 1
        hit = self.cache.get(key, seq)
        if hit is not None:
            with self._lock:
                self.hits += 1
            return hit
        with self._lock:
            self.misses += 1
        if self.cache.mode == "ro":
            raise CacheMiss(f"replay cache has no answer for request {key[:12]} (#{seq}, model {self.model}, "
                            f"{len(messages)} messages); record it with cache mode rw", path=self.cache.path)
        completion: Completion = self.inner.complete(messages, **params)
        self.cache.put(key, seq, request, completion)
        return completion

    def close(self) -> None:
        """Close the cache and the inner model."""
        self.cache.close()
        if hasattr(self.inner, "close"):
            self.inner.close()


ORDER: tuple[type[Layer], ...] = (LoggedModel, TimedModel, ReportingModel, LimitedModel, CachedModel)
"""The layers, outermost first (the module docstring says why each stands where it does)."""
for _rank, _layer in enumerate(ORDER):
    _layer.rank = _rank


class _StopWhen(tenacity.stop.stop_base):
    """A tenacity stop condition given as a function of the retry state."""

    def __init__(self, when: Callable[[tenacity.RetryCallState], bool]) -> None:
        self.when = when

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.when(retry_state)


class Retry:
    """Calls an attempt and retries its `TransientModelError` within ``policy`` (the client's requests, the endpoint
    embedder's batches), on ``tenacity``.

    A retry happens while fewer than ``max_retries`` were made and the budget (``budget_s`` from the first attempt)
    is not spent; the wait is the policy's jittered backoff, at least the server's Retry-After, cut so that the last
    attempt happens at the deadline. A Retry-After beyond what is left of the budget ends the call at once (retrying
    earlier would only be refused again). Any other error passes through at once.

    Args:
        policy: the limits and the backoff.
        what: names the endpoint in the log lines and the final error.
        sleep: the wait function (default: this module's ``_sleep``).
    """

    def __init__(self, policy: RetryPolicy, *, what: str, sleep: Callable[[float], None] | None = None) -> None:
        self.policy, self.what, self.sleep = policy, what, sleep

    def __call__(self, attempt: Callable[[], T]) -> T:
        """``attempt()``'s result, after as many retries as the policy allows.

        Raises:
            ModelCallError: the policy ended the retries; says what failed last and what to change.
        """
        policy, start = self.policy, _now()
        spent = {"s": 0.0}  # the time from the first attempt to the latest failure

        def failed(state: tenacity.RetryCallState) -> TransientModelError:
            error = state.outcome.exception() if state.outcome is not None else None
            assert isinstance(error, TransientModelError)
            return error

        def note_failure(state: tenacity.RetryCallState) -> None:
            spent["s"] = _now() - start

        def wait(state: tenacity.RetryCallState) -> float:
            planned = policy.wait_s(state.attempt_number - 1, failed(state).retry_after_s)
            return max(0.0, min(planned, policy.budget_s - spent["s"]))

        def why_stop(state: tenacity.RetryCallState) -> str | None:
            error, left = failed(state), policy.budget_s - spent["s"]
            if policy.max_retries is not None and state.attempt_number > policy.max_retries:
                return f"raise max_retries (now {policy.max_retries})"
            if left <= 0:
                return f"raise retry_budget_s (now {policy.budget_s:g} s)"
            if error.retry_after_s is not None and policy.waits and error.retry_after_s > left:
                return (f"the server asked to retry after {error.retry_after_s:.0f} s, beyond the {left:.0f} s left "
                        f"of retry_budget_s ({policy.budget_s:g} s)")
            return None

        def give_up(state: tenacity.RetryCallState) -> T:
            error, reason = failed(state), why_stop(state)
            hint = ("is the server running? set --base-url / OPENAI_BASE_URL to a reachable endpoint"
                    if error.kind == "connection" else f"retry later or {reason}")
            raise ModelCallError(f"{self.what} failed after {state.attempt_number} attempts (last: {error.kind}: "
                                 f"{error}) in {spent['s']:.0f} s; {hint}") from error

        def announce(state: tenacity.RetryCallState) -> None:
            error, pause = failed(state), state.upcoming_sleep
            log.log(logging.WARNING if pause >= LOUD_WAIT_S else logging.INFO,
                    "%s: %s (%s); retry %d in %.0f s (%.0f of %g s retry budget spent)",
                    self.what, error.kind, error, state.attempt_number, pause, spent["s"], policy.budget_s)

        def pause(seconds: float) -> None:
            if seconds > 0:
                (self.sleep or _sleep)(seconds)

        stop: tenacity.stop.stop_base = _StopWhen(lambda state: why_stop(state) is not None)
        if policy.max_retries is not None:
            stop = tenacity.stop_after_attempt(policy.max_retries + 1) | stop
        retrying = tenacity.Retrying(retry=tenacity.retry_if_exception_type(TransientModelError), after=note_failure,
                                     wait=wait, stop=stop, retry_error_callback=give_up, before_sleep=announce,
                                     sleep=pause)
        return retrying(attempt)
