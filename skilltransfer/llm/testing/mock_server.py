"""A mock OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks (a documented test double).

It answers ``POST /v1/chat/completions`` and ``GET /v1/models`` (plus ``GET /stats``: requests, model-list requests,
most in flight, the times of the first request and the last answer; ``?reset=1`` restarts the high-water mark and
the times) with configurable latency, token rate, injected faults and scripted replies, so the real ``openai`` client
path is exercised end to end::

    with MockServer(replies=["Thought: ...", "complete_task()"], latency_s=0.2) as server:
        model = server.model()  # or make_model("openai", base_url=server.url, model="mock")

Replies are a list (served in order; running out answers HTTP 400), a callable ``fn(messages) -> str | dict``
(run in-process, one call at a time), or a JSONL file (see `skilltransfer.llm.testing.script.load_replies`). Without
replies it echoes the last message.
With ``context_window`` it enforces a context limit like a real server: prompt tokens (`messages_tokens`) plus
``max_tokens`` above the window answer HTTP 400 with vLLM's (default), OpenAI's or llama.cpp's error body, and
``/v1/models`` reports the window as vLLM does (``max_model_len``) unless ``advertise_window=False``.

Run standalone: ``python -m skilltransfer.llm.testing.mock_server --port 8011 --latency-ms 200 --replies
replies.jsonl``; ``--roles`` instead answers every agent role in its reply format
(`skilltransfer.llm.testing.roleplay`), e.g. ``--roles fail_rate=0.2`` or ``--roles induce=0`` (nothing can be induced
from its replies).

With ``reasoning`` it answers as a reasoning model does, the same answers after ``reasoning_tokens`` tokens of
reasoning that count against the request's ``max_tokens`` / ``max_completion_tokens`` as on a real server (a budget
spent inside the reasoning ends the reply with finish_reason "length" and no answer). `REASONING_STYLES`:

- ``think``: vLLM without a reasoning parser: ``<think>reasoning</think>answer`` in ``content`` (an unclosed
  ``<think>`` when cut by the length limit);
- ``reasoning`` / ``reasoning_content``: vLLM with ``--reasoning-parser`` (recent / older versions): the reasoning in
  that message field, the answer alone in ``content``;
- ``openai``: OpenAI's reasoning models: HTTP 400 naming the parameter for ``max_tokens`` (wants
  ``max_completion_tokens``), ``stop`` and a ``temperature`` other than 1 (OpenAI's error body), no reasoning text,
  its size in ``usage.completion_tokens_details.reasoning_tokens``.

The reasoning text carries `REASONING_MARKER` and lines every parser of the toolkit would take for an answer
(``SUBTASK:``, ``DECISION:``, ``VERDICT:``, a code block, a skill ``NAME:``), so a reasoning leak changes what the
agent does and shows in its prompts.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from skilltransfer.errors import InputError
from skilltransfer.llm.context import approx_tokens, messages_tokens
from skilltransfer.llm.testing.script import ReplyRule, load_replies, rules_to_fn
from skilltransfer.protocols import Message
from skilltransfer.util.server_thread import ServerThread
from skilltransfer.util.terminal import echo

if TYPE_CHECKING:
    from skilltransfer.llm.openai_client import OpenAIChatModel

TRANSPORT_FAULTS = ("rate_limit", "server_error", "timeout", "disconnect", "garbage")
"""Faults a client should retry: HTTP 429 (with Retry-After), HTTP 500, no answer, a dropped connection, non-JSON."""
CONTENT_FAULTS = ("garbage_text", "truncated")
"""Faults delivered as a normal answer: junk content, or content cut short with finish_reason "length"."""
FAULT_KINDS = TRANSPORT_FAULTS + CONTENT_FAULTS
CONTEXT_ERROR_STYLES = ("vllm", "openai", "llamacpp")
REASONING_STYLES = ("think", "reasoning", "reasoning_content", "openai")
REASONING_MARKER = "REASONING-ONLY-7f3a"
"""Appears in every reasoning text the mock server sends, and nowhere else."""
_REASONING_LINES = (f"{REASONING_MARKER}: let me think about what is asked before answering.",
                    "SUBTASK: a subtask only the reasoning proposed", "DECISION: REJECT", "VERDICT: A",
                    "NAME: leaked_reasoning_skill", "```python\nprint('leaked from the reasoning')\n```")


def reasoning_text(tokens: int) -> str:
    """A reasoning text of about ``tokens`` tokens (`approx_tokens`) made of `_REASONING_LINES`."""
    lines: list[str] = []
    while approx_tokens("\n".join(lines)) < tokens:
        lines.append(_REASONING_LINES[len(lines) % len(_REASONING_LINES)])
    return "\n".join(lines)[: max(4, tokens * 4)]

ReplyFn = Callable[[list[Message]], "str | dict[str, Any]"]


def _echo(messages: list[Message]) -> str:
    return "echo: " + (str(messages[-1].get("content") or "") if messages else "")


class MockServer:
    """The mock endpoint, served from a background thread; use as a context manager.

    Args:
        replies: a list (in order), a callable ``fn(messages) -> str | {"text", "finish_reason"}``, rules, or a
            JSONL path; None echoes the last message.
        latency_s: fixed delay before each answer.
        tokens_per_s: if set, adds completion_tokens / tokens_per_s to each answer's delay.
        fault_rate: chance in [0, 1] that a request gets a fault drawn from ``fault_kinds`` (seeded).
        fault_kinds: the faults to draw from (see `FAULT_KINDS`).
        fault_plan: faults for the first requests in order (None = no fault), applied before ``fault_rate``.
        fault_fn: called per request after ``fault_plan``; a fault kind to inject or None (e.g. an outage window
            on a fake clock), before ``fault_rate``.
        seed: seeds fault draws and garbage text.
        report_usage: False omits ``usage`` (clients must count tokens themselves).
        api_key: if set, requests without ``Authorization: Bearer <api_key>`` get 401.
        models: if set, requests for other model ids get 404.
        retry_after_s: the Retry-After header sent with 429s: seconds, or a string sent as is (an HTTP date).
        hang_s: how long a "timeout" fault stalls before answering.
        context_window: enforce this context limit (None: unlimited).
        context_error: the wording of a context-limit refusal: "vllm", "openai" or "llamacpp".
        advertise_window: report ``context_window`` in ``/v1/models``.
        reasoning: answer as a reasoning model of this style (`REASONING_STYLES`; None: a plain model).
        reasoning_tokens: the reasoning's length in tokens.
        port: 0 picks a free port.
    """

    def __init__(self, replies: Sequence[str] | Sequence[ReplyRule] | ReplyFn | str | Path | None = None, *,
                 latency_s: float = 0.0, tokens_per_s: float | None = None, fault_rate: float = 0.0,
                 fault_kinds: Sequence[str] = TRANSPORT_FAULTS, fault_plan: Sequence[str | None] = (),
                 fault_fn: Callable[[], str | None] | None = None, seed: int = 0, report_usage: bool = True,
                 api_key: str | None = None, models: Sequence[str] | None = None, retry_after_s: float | str = 0.0,
                 hang_s: float = 30.0, context_window: int | None = None, context_error: str = "vllm",
                 advertise_window: bool = True, reasoning: str | None = None, reasoning_tokens: int = 120,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        for kind in [*fault_kinds, *(k for k in fault_plan if k is not None)]:
            if kind not in FAULT_KINDS:
                raise InputError(f"Unknown fault kind {kind!r}. Available: {', '.join(FAULT_KINDS)}")
        if context_error not in CONTEXT_ERROR_STYLES:
            raise InputError(f"Unknown context error style {context_error!r}. Available: "
                             f"{', '.join(CONTEXT_ERROR_STYLES)}")
        if reasoning is not None and reasoning not in REASONING_STYLES:
            raise InputError(f"Unknown reasoning style {reasoning!r}. Available: {', '.join(REASONING_STYLES)}")
        if isinstance(replies, str | Path):
            replies = load_replies(replies)
        self._fn: ReplyFn | None = None
        self._queue: list[str] = []
        if replies is None:
            self._fn = _echo
        elif callable(replies):
            self._fn = replies
        elif replies and isinstance(replies[0], ReplyRule):
            self._fn = rules_to_fn(replies)  # type: ignore[arg-type]
        else:
            self._queue = [str(r) for r in replies]
        self.latency_s, self.tokens_per_s = latency_s, tokens_per_s
        self.fault_rate, self.fault_kinds, self.fault_plan = fault_rate, tuple(fault_kinds), list(fault_plan)
        self.fault_fn = fault_fn
        self.report_usage, self.api_key = report_usage, api_key
        self.models = list(models) if models is not None else None
        self.retry_after_s, self.hang_s = retry_after_s, hang_s
        self.context_window, self.context_error, self.advertise_window = context_window, context_error, \
            advertise_window
        self.context_refusals = 0
        self.reasoning, self.reasoning_tokens = reasoning, max(1, reasoning_tokens)
        self.embedding_requests: list[dict[str, Any]] = []
        """Every ``/v1/embeddings`` request body, in order."""
        self.model_list_requests = 0
        """``GET /v1/models`` requests answered (a run asks once: tests count them)."""
        self.rejected: list[str] = []
        """The parameters of every request refused as unsupported (``reasoning="openai"``), in order."""
        """Requests refused because they did not fit ``context_window``."""
        self.host, self.port = host, port
        self._rng = random.Random(seed)
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.faults: list[str] = []
        """Every fault injected, in order."""
        self.in_flight = 0
        self.max_in_flight = 0
        """Most chat requests in progress at once (measured here, at the server)."""
        self.first_request_at: float | None = None
        self.last_answer_at: float | None = None
        """Unix times of the first chat request and the last answer since the start (or the last stats reset)."""
        self._served = 0
        self._next_reply = 0
        self._server = ServerThread("mock-openai-server")
        self._script_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mock-script")
        """Runs reply callables one at a time, in arrival order, off the event loop (they need not be thread-safe)."""

    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def model(self, **overrides: Any) -> OpenAIChatModel:
        """A real `OpenAIChatModel` for this server with zero backoff waits and at most 8 retries (tests);
        ``overrides`` are config fields."""
        from skilltransfer.llm.config import ModelConfig
        from skilltransfer.llm.openai_client import OpenAIChatModel

        fields: dict[str, Any] = {"base_url": self.url, "model": (self.models or ["mock"])[0],
                                  "api_key": self.api_key or "mock", "backoff_base_s": 0.0, "backoff_max_s": 0.0,
                                  "max_retries": 8, **overrides}
        return OpenAIChatModel(ModelConfig(**fields))

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def start(self) -> MockServer:
        """Start serving in a daemon thread; returns once the port is bound."""
        self.port = self._server.start(self._app, self.host, self.port, backlog=1024)
        return self

    def stop(self) -> None:
        """Stop serving (stalled "timeout" handlers are cancelled)."""
        self._server.stop()
        self._script_pool.shutdown(wait=False)

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/health", self._health)
        app.router.add_get("/stats", self._stats)
        return app

    # -- handlers --------------------------------------------------------------------------------------------------
    async def _health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _stats(self, request: web.Request) -> web.Response:
        stats = {"requests": len(self.requests), "model_lists": self.model_list_requests,
                 "max_in_flight": self.max_in_flight, "in_flight": self.in_flight,
                 "faults": len(self.faults), "first_request_at": self.first_request_at,
                 "last_answer_at": self.last_answer_at}
        if request.query.get("reset"):
            self.max_in_flight = self.in_flight
            self.first_request_at = self.last_answer_at = None
        return web.json_response(stats)

    async def _embeddings(self, request: web.Request) -> web.Response:
        """``POST /v1/embeddings``: a deterministic 32-dimensional hashed bag of words per input text."""
        body = await request.json()
        self.embedding_requests.append(body)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            return _error(400, "invalid_request_error", "'input' must be a non-empty string or list of them")
        data = [{"object": "embedding", "index": i, "embedding": _bag_of_words(t)} for i, t in enumerate(texts)]
        tokens = sum(approx_tokens(t) for t in texts)
        return web.json_response({"object": "list", "data": data, "model": body.get("model", "mock"),
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def _models(self, _request: web.Request) -> web.Response:
        self.model_list_requests += 1
        ids = self.models or ["mock"]
        extra = {"max_model_len": self.context_window} if self.context_window and self.advertise_window else {}
        return web.json_response({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "mock", **extra}
                                                             for i in ids]})

    def _context_refusal(self, messages: list[Message], max_tokens: Any) -> web.Response | None:
        """The 400 a real server sends when prompt + completion exceed ``context_window`` (None when it fits)."""
        if self.context_window is None:
            return None
        prompt = messages_tokens(messages)
        completion = max_tokens if isinstance(max_tokens, int) else 0
        window = self.context_window
        if prompt + completion <= window:
            return None
        self.context_refusals += 1
        if self.context_error == "llamacpp":
            return web.json_response({"error": {
                "code": 400, "message": f"request ({prompt} tokens) exceeds the available context size ({window} "
                                        "tokens), try increasing it",
                "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": window}}, status=400)
        if self.context_error == "openai":
            return _error(400, "context_length_exceeded",
                          f"This model's maximum context length is {window} tokens. However, your messages resulted "
                          f"in {prompt + completion} tokens. Please reduce the length of the messages.")
        return web.json_response({
            "object": "error", "type": "BadRequestError", "param": None, "code": 400,
            "message": f"This model's maximum context length is {window} tokens. However, you requested "
                       f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                       "Please reduce the length of the messages or completion."}, status=400)

    def _next_fault(self) -> str | None:
        index = len(self.requests) - 1
        if index < len(self.fault_plan):
            return self.fault_plan[index]
        if self.fault_fn is not None and (fault := self.fault_fn()) is not None:
            return fault
        if self.fault_rate > 0 and self.fault_kinds and self._rng.random() < self.fault_rate:
            return self._rng.choice(self.fault_kinds)
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.first_request_at is None:
            self.first_request_at = time.time()
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1
            self.last_answer_at = time.time()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid_api_key", "Incorrect API key provided")
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "invalid_request_error", "body is not JSON")
        self.requests.append(body)
        model = str(body.get("model", ""))
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "invalid_request_error", "'messages' must be a non-empty list")
        if self.models is not None and model not in self.models:
            return _error(404, "model_not_found", f"The model '{model}' does not exist")
        refusal = self._strict_refusal(body) or \
            self._context_refusal(messages, body.get("max_tokens") or body.get("max_completion_tokens"))
        if refusal is not None:
            return refusal
        fault = self._next_fault()
        if fault is not None:
            self.faults.append(fault)
        if fault == "rate_limit":
            return _error(429, "rate_limit_exceeded", "Rate limit reached",
                          headers={"Retry-After": self.retry_after_s if isinstance(self.retry_after_s, str)
                                   else f"{self.retry_after_s:g}"})
        if fault == "server_error":
            return _error(500, "server_error", "The server had an error while processing your request")
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
        if fault == "disconnect":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if fault == "garbage":
            return web.Response(status=200, text="<html>502 Bad Gateway</html>\x00{{", content_type="application/json")
        try:
            reply = await self._reply(messages)
        except (LookupError, IndexError) as exc:
            return _error(400, "script_exhausted", f"mock server: {exc}")
        text, finish = (reply.get("text", ""), reply.get("finish_reason", "stop")) if isinstance(reply, dict) \
            else (str(reply), "stop")
        if fault == "garbage_text":
            text = "".join(self._rng.choice("#@%&*!?~^ abcxyz0123") for _ in range(max(8, len(text))))
        elif fault == "truncated":
            text, finish = text[: max(0, len(text) // 2)], "length"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        thought = reasoning_text(self.reasoning_tokens) if self.reasoning else ""
        thought_tokens = approx_tokens(thought)
        if isinstance(max_tokens, int) and thought_tokens >= max_tokens:  # the budget is spent inside the reasoning
            thought, thought_tokens, text, finish = thought[: max_tokens * 4], max_tokens, "", "length"
        elif isinstance(max_tokens, int) and thought_tokens + approx_tokens(text) > max_tokens:
            text, finish = text[: (max_tokens - thought_tokens) * 4], "length"
        completion_tokens = approx_tokens(text) + thought_tokens
        delay = self.latency_s + (completion_tokens / self.tokens_per_s if self.tokens_per_s else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        self._served += 1
        payload: dict[str, Any] = {
            "id": f"chatcmpl-mock-{self._served}", "object": "chat.completion", "created": int(time.time()),
            "model": model or "mock", "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "message": self._message(text, thought, finish), "finish_reason": finish}],
        }
        if self.report_usage:
            prompt_tokens = messages_tokens(messages)
            payload["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens}
            if self.reasoning == "openai":
                payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": thought_tokens}
        return web.json_response(payload)

    def _message(self, text: str, thought: str, finish: str) -> dict[str, Any]:
        """The answer's message in this server's reasoning style."""
        if self.reasoning == "think":
            closed = not (finish == "length" and not text)
            return {"role": "assistant", "content": f"<think>\n{thought}\n</think>\n\n{text}" if closed
                    else f"<think>\n{thought}"}
        if self.reasoning in ("reasoning", "reasoning_content"):
            return {"role": "assistant", "content": text or None, self.reasoning: thought}
        return {"role": "assistant", "content": text}

    def _strict_refusal(self, body: dict[str, Any]) -> web.Response | None:
        """OpenAI's 400 for a parameter its reasoning models reject (``reasoning="openai"``), else None."""
        if self.reasoning != "openai":
            return None
        extra = body.get("extra_body")
        sent = {**body, **(extra if isinstance(extra, dict) else {})}
        if "max_tokens" in sent:
            param, code = "max_tokens", "unsupported_parameter"
            message = ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                       "'max_completion_tokens' instead.")
        elif "stop" in sent:
            param, code = "stop", "unsupported_parameter"
            message = "Unsupported parameter: 'stop' is not supported with this model."
        elif "temperature" in sent and sent["temperature"] != 1:
            param, code = "temperature", "unsupported_value"
            message = (f"Unsupported value: 'temperature' does not support {float(sent['temperature'])} with this "
                       "model. Only the default (1) value is supported.")
        else:
            return None
        self.rejected.append(param)
        return web.json_response({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                             "code": code}}, status=400)

    async def _reply(self, messages: list[Message]) -> str | dict[str, Any]:
        if self._fn is not None:
            return await asyncio.get_running_loop().run_in_executor(self._script_pool, self._fn, messages)
        index = self._next_reply
        if index >= len(self._queue):
            raise LookupError(f"script exhausted after {len(self._queue)} replies")
        self._next_reply += 1
        return self._queue[index]


def _bag_of_words(text: str, dim: int = 32) -> list[float]:
    vector = [0.0] * dim
    for word in text.lower().split():
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    vector[0] += 0.01  # never the zero vector
    return vector


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": code, "code": code}}, status=status,
                             headers=headers)


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m skilltransfer.llm.testing.mock_server",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one, printed at start)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-s", type=float, default=None)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--faults", default=",".join(TRANSPORT_FAULTS), help="comma-separated fault kinds")
    parser.add_argument("--replies", default=None, help="JSONL file of replies or rules (default: echo)")
    parser.add_argument("--roles", default=None, metavar="SETTINGS",
                        help="answer every agent role in its format (role play); SETTINGS: comma-separated "
                             "induce=0|1, fail_rate=F, seed=N, or '' for the defaults")
    parser.add_argument("--no-usage", action="store_true", help="omit usage from answers")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context-window", type=int, default=None, help="refuse prompts over this many tokens")
    parser.add_argument("--context-error", default="vllm", help="refusal wording: vllm, openai or llamacpp")
    parser.add_argument("--reasoning", default=None, choices=REASONING_STYLES,
                        help="answer as a reasoning model: think (<think> in content), reasoning / reasoning_content "
                             "(vLLM's reasoning parser), openai (strict API: 400s, reasoning tokens counted)")
    parser.add_argument("--reasoning-tokens", type=int, default=120, help="reasoning length in tokens")
    args = parser.parse_args(argv)
    if args.roles is not None and args.replies is not None:
        parser.exit(2, "error: give --replies or --roles, not both\n")
    try:
        replies: Any = args.replies
        if args.roles is not None:
            from skilltransfer.llm.testing.roleplay import make_role_play

            replies = make_role_play(args.roles)
        server = MockServer(replies, latency_s=args.latency_ms / 1000, tokens_per_s=args.tokens_per_s,
                            fault_rate=args.fault_rate, fault_kinds=[k for k in args.faults.split(",") if k],
                            seed=args.seed, report_usage=not args.no_usage, api_key=args.api_key, port=args.port,
                            context_window=args.context_window, context_error=args.context_error,
                            reasoning=args.reasoning, reasoning_tokens=args.reasoning_tokens)
    except (InputError, ValueError) as exc:
        parser.exit(2, f"error: {exc}\n")
    with server:
        echo(f"mock OpenAI server at {server.url}")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
