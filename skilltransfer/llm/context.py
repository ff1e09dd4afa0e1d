"""What the model layer knows about context windows: the window itself, prompt token counts, and context-length errors.

A chat model may expose two optional members (read with `context_window` and `count_prompt_tokens` here, which follow
wrappers' ``inner`` chain, so wrappers need not forward them):

- ``context_window: int | None``: the most tokens (prompt + completion) one call may use; None = unknown/unlimited.
- ``count_prompt_tokens(messages) -> int``: the prompt tokens of a chat as the server counts them (chat template
  included). Models without it are counted with `PromptCounter` over `estimate_tokens`.

An endpoint's refusal of an over-long prompt (HTTP 400/413/422 with a context-length wording) becomes a
`ContextLengthError` (see `classify_context_error`), never a retry.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from skilltransfer.llm.retry import ModelCallError
from skilltransfer.protocols import ChatModel, Message

PER_MESSAGE_TOKENS = 8
"""Chat-template tokens assumed per message until a server's usage shows the real overhead (ChatML uses 5 per
message plus 3 for the assistant header)."""

_PIECE = re.compile(r" ?[^\W\d_]+|\d|\s+|.", re.DOTALL)


def approx_tokens(text: str) -> int:
    """The plainest approximation of a token count, ceil(characters / 4): what a client without a tokenizer reports
    as usage when the server reports none, and what the test doubles (scripted model, mock server) count."""
    return (len(text) + 3) // 4


def messages_tokens(messages: Sequence[Message]) -> int:
    """`approx_tokens` of a chat: content tokens plus 4 per message for role/format overhead."""
    return sum(approx_tokens(str(m.get("content", ""))) + 4 for m in messages)


def estimate_tokens(text: str) -> int:
    """An estimate of a BPE tokenizer's count, for models that cannot count (no server tokenizer, no tokenizer.json).

    A run of L letters (with its leading space) counts 1 + (L - 3) // 4, each digit 1 (Qwen, Llama 3 and GPT-4
    tokenizers split numbers into single digits or triples), each run of whitespace 1 and every other character 1.
    Measured against the Qwen2.5 tokenizer on the bundled envs' docs, API docs, observations, CSV files, code and
    prose: 0.57-0.99 of the estimate (digit-heavy CSV is the tightest). Random letter strings (base64, random ids)
    are undercounted (1.7-2.8x); `PromptCounter` raises its scale when a server's usage shows that.
    """
    count = 0
    for match in _PIECE.finditer(text):
        piece = match.group()
        letters = len(piece) - (piece[0] == " ")
        count += 1 + max(0, letters - 3) // 4 if letters > 1 and piece[-1].isalpha() else 1
    return count


class ContextLengthError(ModelCallError):
    """An endpoint refused a request because prompt + completion exceed the model's context window.

    Args:
        message: the one-line error.
        window: the window the endpoint reported, if its message said.
        requested: the tokens the request needed, if the message said.
    """

    def __init__(self, message: str, *, window: int | None = None, requested: int | None = None) -> None:
        super().__init__(message)
        self.window = window
        self.requested = requested


_CONTEXT_WORDINGS = re.compile(
    r"context[ _]length[ _]exceeded|exceed_context_size_error|maximum context length|context window|"
    r"maximum model length|exceeds? (?:the )?(?:available |maximum )?context|prompt is too long|"
    r"inputs`? tokens \+ `?max_new_tokens`? must be|too many tokens", re.IGNORECASE)
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # OpenAI, vLLM, llama-cpp-python
    re.compile(r"maximum model length (?:is |of )?(\d+)", re.IGNORECASE),  # vLLM (decoder prompt longer than ...)
    re.compile(r"context size \((\d+) tokens\)", re.IGNORECASE),  # llama.cpp server
    re.compile(r"context window of (\d+)", re.IGNORECASE),  # llama-cpp-python's raw error
    re.compile(r"must be <= (\d+)", re.IGNORECASE),  # text-generation-inference
    re.compile(r"tokens? > (\d+) maximum", re.IGNORECASE),  # Anthropic-style gateways
)
_REQUESTED_PATTERNS = (
    re.compile(r"you requested (\d+) tokens", re.IGNORECASE),
    re.compile(r"resulted in (\d+) tokens", re.IGNORECASE),
    re.compile(r"request \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"requested tokens \((\d+)\)", re.IGNORECASE),
    re.compile(r"prompt is too long: (\d+)", re.IGNORECASE),
    re.compile(r"\(length (\d+)\) is longer than", re.IGNORECASE),
)


def _first_int(patterns: Sequence[re.Pattern[str]], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def classify_context_error(status: int, message: str, body: Any = None) -> ContextLengthError | None:
    """A `ContextLengthError` when an HTTP error says the prompt does not fit, else None.

    Recognises the wordings of OpenAI (``context_length_exceeded``), vLLM ("maximum context length is N tokens.
    However, you requested M tokens", "longer than the maximum model length of N", "'max_tokens' ... is too large"),
    llama.cpp's server (``exceed_context_size_error`` with ``n_ctx``), llama-cpp-python, text-generation-inference
    and Anthropic-style gateways.

    Args:
        status: the HTTP status (400, 413, 422, and 500 which older llama.cpp servers send).
        message: the error message.
        body: the parsed JSON body, if any (``n_ctx``/``n_prompt_tokens`` fields are read from it).
    """
    if status not in (400, 413, 422, 500):
        return None
    blob = json.dumps(body, default=str) if body is not None else ""
    text = f"{message} {blob}"
    if not _CONTEXT_WORDINGS.search(text):
        return None
    fields = body.get("error", body) if isinstance(body, dict) else {}
    fields = fields if isinstance(fields, dict) else {}
    window = fields.get("n_ctx") if isinstance(fields.get("n_ctx"), int) else _first_int(_WINDOW_PATTERNS, text)
    requested = fields.get("n_prompt_tokens") if isinstance(fields.get("n_prompt_tokens"), int) \
        else _first_int(_REQUESTED_PATTERNS, text)
    return ContextLengthError(f"the prompt does not fit the model's context window (HTTP {status}: "
                              f"{' '.join(message.split())[:240]})", window=window, requested=requested)


def window_from_models(payload: Any, model: str | None = None) -> int | None:
    """The context window a ``GET /v1/models`` answer reports for ``model`` (else for its first entry), or None.

    Fields read, in order: ``max_model_len`` (vLLM), ``context_window`` (Groq and gateways), ``context_length``
    (OpenRouter, LM Studio), ``max_context_length``, and llama.cpp's ``meta.n_ctx`` / ``meta.n_ctx_train``.
    """
    entries = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(entries, list) or not entries:
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = next((e for e in entries if e.get("id") == model), entries[0] if entries else None)
    if chosen is None:
        return None
    meta = chosen.get("meta") if isinstance(chosen.get("meta"), dict) else {}
    for value in (chosen.get("max_model_len"), chosen.get("context_window"), chosen.get("context_length"),
                  chosen.get("max_context_length"), meta.get("n_ctx"), meta.get("n_ctx_train")):
        if isinstance(value, int) and value > 0:
            return value
    return None


class PromptCounter:
    """Counts a chat's prompt tokens: per-message content counts (cached by content) plus a chat-template overhead
    per message that is learnt from the server's reported usage.

    Args:
        count_text: counts one text's tokens (a server's tokenizer, a local tokenizer.json, or `estimate_tokens`).
        exact: whether ``count_text`` is the model's own tokenizer. Exact counts learn the per-message overhead
            from usage (the largest seen); estimates instead learn a scale factor (never below 1), so an estimate
            that proved low is raised for the rest of the run.
        cache_size: content counts kept.
    """

    def __init__(self, count_text: Callable[[str], int] = estimate_tokens, *, exact: bool = False,
                 cache_size: int = 4096) -> None:
        self.count_text = count_text
        self.exact = exact
        self.per_message: int | None = None
        """Learnt template tokens per message (None: `PER_MESSAGE_TOKENS` until usage is seen)."""
        self.scale = 1.0
        self.cache_size = cache_size
        self._cache: dict[str, int] = {}
        self._lock = threading.Lock()

    def content_tokens(self, text: str) -> int:
        """Tokens of one message's content (cached)."""
        key = hashlib.sha1(text.encode("utf-8", "replace")).hexdigest() if len(text) > 64 else text
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        count = self.count_text(text)
        with self._lock:
            if len(self._cache) >= self.cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = count
        return count

    def count(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of a chat (content + template overhead)."""
        content = sum(self.content_tokens(str(m.get("content") or "")) for m in messages)
        per_message = self.per_message if self.per_message is not None else PER_MESSAGE_TOKENS
        return math.ceil(content * self.scale) + per_message * len(messages)

    def observe(self, messages: Sequence[Message], prompt_tokens: int) -> None:
        """Learn from a server's reported prompt tokens for ``messages`` (only ever makes counts safer)."""
        if not messages or prompt_tokens <= 0:
            return
        content = sum(self.content_tokens(str(m.get("content") or "")) for m in messages)
        if self.exact:
            overhead = math.ceil(max(0, prompt_tokens - content) / len(messages))
            self.per_message = overhead if self.per_message is None else max(self.per_message, overhead)
        elif content > 0:
            per_message = self.per_message if self.per_message is not None else PER_MESSAGE_TOKENS
            needed = (prompt_tokens - per_message * len(messages)) / content
            self.scale = max(self.scale, needed)


def model_chain(model: ChatModel | None, depth: int = 8) -> Iterator[Any]:
    """``model``, then the models it wraps (``.inner``), innermost last."""
    seen = 0
    part: Any = model
    while part is not None and seen < depth:
        yield part
        part = part.__dict__.get("inner") if hasattr(part, "__dict__") else None
        seen += 1


def _member(model: ChatModel | None, name: str) -> Any:
    for part in model_chain(model):
        try:
            value = getattr(type(part), name, None) or part.__dict__.get(name)
        except AttributeError:
            value = None
        if value is not None:
            return getattr(part, name)
    return None


def context_window(model: ChatModel) -> int | None:
    """The model's context window (its own or a wrapped model's ``context_window``), or None when unknown."""
    value = _member(model, "context_window")
    return int(value) if isinstance(value, int) and value > 0 else None


_FALLBACK = PromptCounter()


def count_prompt_tokens(model: ChatModel | None, messages: Sequence[Message]) -> tuple[int, str]:
    """(prompt tokens, how they were counted) of ``messages`` for ``model``: the model's ``prompt_count_source``
    ("server" tokenizer, local "tokenizer", "estimate", ...) when it counts, else "estimate"."""
    counter = _member(model, "count_prompt_tokens")
    if callable(counter):
        return int(counter(list(messages))), str(_member(model, "prompt_count_source") or "model")
    return _FALLBACK.count(messages), "estimate"


def configured_params(model: ChatModel) -> dict[str, Any]:
    """The sampling params a model sends with every call (``config.params`` of the model or a wrapped one)."""
    for part in model_chain(model):
        params = getattr(getattr(part, "config", None), "params", None)
        if isinstance(params, dict):
            return params
    return {}
