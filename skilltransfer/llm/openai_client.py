"""A ChatModel over any OpenAI-compatible endpoint: retries, a per-endpoint concurrency limit, usage fallback, and
what it knows of the context window (configured, probed once from ``/v1/models``, or learnt from a refusal).

The endpoint's own answer, asked once (``GET <base_url>/models``), and the check a run or grid makes with it before
its first task.

`probe_endpoint` asks and returns the answer as a value (`EndpointProbe`) that travels to everyone who needs it, so a
run asks once (a grid: once per endpoint): the check (`check_endpoint`: the endpoint answers, the key is accepted),
the model id a run records when none is given (`served_model`: the endpoint's only model) and the client's context
window (`EndpointProbe.window`; ``make_model(config, probe=...)``). A client built without a probe asks once itself,
for both. The answer is untrusted input: bounded in size, depth and time, and read field by field.

The check takes a few seconds where a dead endpoint would otherwise cost a model call's whole retry budget (300 s by
default) before its error line, after the run folder is made. Only what proves the endpoint unusable fails: no
connection, a timeout, 401/403, a model list refused as too large or malformed. An endpoint that answers ``/models``
with another status (some gateways do not serve it) passes: its first call says what is wrong.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.llm.chain import Retry
from skilltransfer.llm.config import OPENAI_URL, ModelConfig
from skilltransfer.llm.context import (
    PromptCounter,
    approx_tokens,
    classify_context_error,
    estimate_tokens,
    window_from_models,
)
from skilltransfer.llm.reasoning import split_reply
from skilltransfer.llm.retry import (
    ModelCallError,
    RetryPolicy,
    TransientModelError,
    requested_wait,
)
from skilltransfer.llm.strict import DROPPED, ParamAdapter, cut_at_stop, rejected_parameter
from skilltransfer.protocols import Completion, Message
from skilltransfer.util.http_client import (
    MAX_LISTING_BYTES,
    Answer,
    HttpClient,
    HttpFailure,
    HttpStatusError,
    encode_json,
    fetch_json,
    openai_headers,
    shown_url,
)

PROBE_TIMEOUT_S = 10.0
"""How long a probe waits for the model list by default (the run's check waits `CHECK_TIMEOUT_S`)."""
CHECK_TIMEOUT_S = 5.0
"""How long the check before a run waits for an endpoint's answer."""
EndpointKey = tuple[str, str | None, tuple[tuple[str, str], ...]]
"""An endpoint as the check tells endpoints apart: its URL, key and extra headers."""
_Model = TypeVar("_Model", bound=ModelConfig)


@dataclass(frozen=True)
class EndpointProbe:
    """An endpoint's answer to ``GET <base_url>/models`` (or why there is none).

    Attributes:
        base_url: the endpoint asked (without a trailing ``/``).
        payload: the parsed answer; None when none was read.
        error: why none was read (an `OSError` of `skilltransfer.util.http_client`: no answer, an HTTP status, not
            JSON, too large); None when it answered.
    """

    base_url: str
    payload: Any = None
    error: OSError | None = None

    @property
    def served(self) -> list[str]:
        """The model ids the answer lists (none when it did not answer with a model list)."""
        entries = self.payload.get("data") if isinstance(self.payload, dict) else None
        if not isinstance(entries, list):
            return []
        return [str(e["id"]) for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    @property
    def llama_cpp(self) -> bool:
        """Whether the answer is llama.cpp's server's (its entries carry ``meta``; its running window is asked from
        ``/props``)."""
        entries = self.payload.get("data") if isinstance(self.payload, dict) else None
        return isinstance(entries, list) and any(isinstance(e, dict) and "meta" in e for e in entries)

    def window(self, model: str | None) -> int | None:
        """The context window the answer reports for ``model`` (else for its first entry); None: unknown."""
        return window_from_models(self.payload, model) if self.error is None else None

    def only_model(self) -> str:
        """The id of the one model the endpoint serves.

        Raises:
            InputError: it did not answer with a model list, or serves none or several (naming them and the flag
                that chooses one).
        """
        shown = shown_url(self.base_url)
        if self.error is not None or not isinstance(self.payload, dict) or not isinstance(self.payload.get("data"),
                                                                                           list):
            why = f": {self.error}" if self.error is not None else " did not answer with a model list"
            raise InputError(f"cannot read the model list of {shown} (GET {shown}/models{why}); give the model id: "
                             f"--model <id>@{shown} (or set SKILLTRANSFER_MODEL)")
        ids = self.served
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise InputError(f"the endpoint {shown} serves no model; give one: --model <id>@{shown}")
        listed = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
        raise InputError(f"the endpoint {shown} serves several models ({listed}); choose one: --model {ids[0]}@{shown}")


def probe_endpoint(base_url: str, api_key: str | None = None, headers: Mapping[str, str] | None = None, *,
                   timeout_s: float = PROBE_TIMEOUT_S, max_bytes: int = MAX_LISTING_BYTES,
                   client: HttpClient | None = None) -> EndpointProbe:
    """Ask ``GET <base_url>/models`` once; never raises (a failure is the probe's ``error``).

    Args:
        api_key, headers: the model's key and extra headers (``ModelConfig.headers``).
        timeout_s: the whole request's deadline.
        client: the endpoint's HTTP client to ask with (default: a new connection).
    """
    url = base_url.rstrip("/")
    try:  # bounded in size, depth and total time: a dripping, flooding or deep reply is an error, not a hang
        payload = fetch_json(f"{url}/models", openai_headers(api_key, headers), deadline_s=timeout_s,
                             max_bytes=max_bytes, client=client)
    except OSError as exc:
        return EndpointProbe(url, error=exc)
    return EndpointProbe(url, payload)


# --------------------------------------------------------------------------------------------- the check
def model_string(model: ModelConfig) -> str:
    """The model as a ``--model`` string: ``openai/<id>``, ``<id>@<url>``, ``<url>`` or the registry name (the URL
    without credentials)."""
    name = _name(model)
    if name != "openai":
        return name if not model.model else f"{name}:{model.model}"
    url = shown_url(model.resolved_base_url() or OPENAI_URL)  # no credentials in a message
    model_id = model.resolved_model()
    if url == OPENAI_URL:
        return f"openai/{model_id}" if model_id else "openai"
    return f"{model_id}@{url}" if model_id else url


def _name(model: ModelConfig) -> str:
    return model.name or ("openai" if model.resolved_base_url() else "local")


def _endpoint_url(model: ModelConfig) -> str:
    """The URL ``model`` is served from (OpenAI's when none is set), without a trailing ``/``."""
    return (model.resolved_base_url() or OPENAI_URL).rstrip("/")


def _replays_cache(model: ModelConfig) -> bool:
    """Whether ``model`` is replayed from a read-only cache (its run never needs the endpoint to answer)."""
    return bool(model.cache_path and model.cache_mode == "ro")


def endpoint_key(model: ModelConfig, *, replayed: bool = False) -> EndpointKey | None:
    """The endpoint ``model`` is served from, when the check asks it (an "openai" model at an http(s) URL, not
    replayed from a read-only cache unless ``replayed``); None otherwise."""
    if _name(model) != "openai" or (_replays_cache(model) and not replayed):
        return None
    url = _endpoint_url(model)
    if not url.startswith(("http://", "https://")):
        return None  # building the client says what is wrong with it
    return url, model.resolved_api_key(), tuple(sorted(model.headers.items()))


def check_endpoint(model: ModelConfig, *, timeout_s: float = CHECK_TIMEOUT_S,
                   replayed: bool = False) -> EndpointProbe | None:
    """Check that ``model``'s endpoint answers and has the key it needs (see the module docstring); its answer, or
    None for a model that has no endpoint to ask (`endpoint_key`). ``replayed``: a model replayed from a read-only
    cache, which the check leaves alone, is asked too (its answer returned unjudged: `served_model` needs its id).

    Raises:
        InputError: one line naming the model string and what was tried.
    """
    key = endpoint_key(model, replayed=replayed)
    if key is None:
        return None
    url, api_key, _ = key
    judged = not _replays_cache(model)  # a replayed cache is asked for its answer alone
    where = f"model {model_string(model)!r}"
    if judged and url == OPENAI_URL and not api_key:
        raise InputError(f"{where} needs an API key: set OPENAI_API_KEY or give --api-key (or -c models.<label>."
                         "api_key=...)")
    probe = probe_endpoint(url, api_key, model.headers, timeout_s=timeout_s, max_bytes=1 << 20)
    if not judged:
        return probe
    shown = shown_url(f"{url}/models")
    exc = probe.error
    if isinstance(exc, HttpStatusError) and exc.status in (401, 403):
        raise InputError(f"{where}: the endpoint refused the API key (GET {shown}: HTTP {exc.status}); check "
                         "OPENAI_API_KEY or --api-key")
    if isinstance(exc, untrusted.UntrustedFileError) and not exc.reason.startswith("not JSON"):
        raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc.reason})")
    if isinstance(exc, HttpFailure):
        if exc.kind in ("too_large", "bad_response"):
            raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc})")
        raise InputError(f"{where}: the endpoint does not answer (tried GET {shown} for {timeout_s:g} s: "
                         f"{exc}); start the server or fix --model / --base-url")
    return probe  # answered (another status, or not JSON: its first call tells)


LOOPBACK_HOSTS = ("localhost", "::1")
"""This machine's names (and every 127.x.y.z address): an endpoint here receives the environment's key freely."""


def env_key_host(model: ModelConfig) -> str | None:
    """The host that would receive ``OPENAI_API_KEY`` from the environment when ``model`` is called, where that is
    not the key's own endpoint: None when the model has a key of its own (``api_key``), the environment has none, or
    the endpoint is OpenAI's, ``OPENAI_BASE_URL``'s or on this machine."""
    if _name(model) != "openai" or model.api_key or not os.environ.get("OPENAI_API_KEY", "").strip():
        return None
    url = _endpoint_url(model)
    if url in (OPENAI_URL, (os.environ.get("OPENAI_BASE_URL") or "").strip().rstrip("/")):
        return None
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    return None if not host or host in LOOPBACK_HOSTS or host.startswith("127.") else host


def check_key_destinations(models: Iterable[tuple[str, ModelConfig]], *, named: Collection[str],
                           allowed: Collection[str]) -> None:
    """Refuse to send the environment's ``OPENAI_API_KEY`` to an endpoint a spec file names (`env_key_host`), unless
    the user named that endpoint on the command line (``named``: URLs of ``--model``, ``--base-url`` and ``-c``) or
    allowed its host (``allowed``: ``--allow-key-to HOST``). A stranger's spec that sets ``base_url`` would otherwise
    receive the user's key in its first request.

    Raises:
        InputError: naming the field (``where`` of each model), the endpoint (without credentials) and the flag.
    """
    given = {url.rstrip("/") for url in named}
    hosts = {host.lower() for host in allowed}
    for where, model in models:
        host = env_key_host(model)
        url = (model.resolved_base_url() or "").rstrip("/")
        if host is None or host in hosts or url in given:
            continue
        raise InputError(f"{where}: the spec sends your OPENAI_API_KEY (from the environment) to {shown_url(url)}; "
                         f"if you trust that endpoint, allow it with --allow-key-to {host}, or give its key in the "
                         "spec (api_key) or name it with --model / -c")


def check_endpoints(models: Iterable[ModelConfig], *,
                    timeout_s: float = CHECK_TIMEOUT_S) -> dict[EndpointKey, EndpointProbe]:
    """`check_endpoint` once for each distinct endpoint (`endpoint_key`) of ``models``; the first failure raises."""
    out: dict[EndpointKey, EndpointProbe] = {}
    for model in models:
        key = endpoint_key(model)
        if key is not None and key not in out:
            probe = check_endpoint(model, timeout_s=timeout_s)
            if probe is not None:
                out[key] = probe
    return out


def served_model(model: _Model, *, timeout_s: float = CHECK_TIMEOUT_S) -> tuple[_Model, EndpointProbe | None]:
    """``model``'s endpoint checked (`check_endpoint`: one ``GET /models``) and ``model`` with its model id read from
    the answer when none is given (flag, spec or SKILLTRANSFER_MODEL) and the endpoint is not OpenAI's: its only
    model, so a run records (and the report tells apart) the model it ran; and the answer (None for a model with no
    endpoint to ask; asked for the id alone when the check does not ask, as for a replayed cache).

    Raises:
        InputError: see `check_endpoint`; no id is given and the endpoint serves none or several (naming them), or
            gave no model list.
    """
    url = _endpoint_url(model)
    needs_id = _name(model) == "openai" and not model.resolved_model() and url != OPENAI_URL \
        and url.startswith(("http://", "https://"))
    probe = check_endpoint(model, timeout_s=timeout_s, replayed=needs_id)  # a replayed cache is asked for the id alone
    if not needs_id or probe is None:
        return model, probe
    return model.model_copy(update={"model": probe.only_model()}), probe


_T = TypeVar("_T")

_SETTING = {"timeout": " (the model's timeout_s)", "too_large": " (the model's max_answer_mib)"}
"""The setting that bounds a failure of each kind, named in its message."""
_LIMITERS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_LIMITERS_LOCK = threading.Lock()


def endpoint_limiter(base_url: str, max_concurrency: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore of an endpoint: all models on one URL with one limit share it."""
    key = (base_url.rstrip("/"), max(1, max_concurrency))
    with _LIMITERS_LOCK:
        if key not in _LIMITERS:
            _LIMITERS[key] = threading.BoundedSemaphore(max(1, max_concurrency))
        return _LIMITERS[key]


class TokenCounter:
    """Counts tokens with a local Hugging Face tokenizer.json if given, else with `approx_tokens` (chars / 4).

    Prompt tokens are the sum over messages of content tokens plus 4 per message (role/format overhead).

    Args:
        tokenizer: path to a tokenizer.json or a folder holding one; None uses the approximation.
    """

    def __init__(self, tokenizer: str | None = None) -> None:
        self._tok: Any = None
        self.source = "approx"
        if tokenizer:
            path = Path(tokenizer)
            if path.is_dir():
                path = path / "tokenizer.json"
            if not path.is_file():
                raise InputError(f"tokenizer: {path} does not exist; give a tokenizer.json path or leave it unset")
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(str(path))
            self.source = "tokenizer"

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if self._tok is None:
            return approx_tokens(text)
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_messages(self, messages: list[Message]) -> int:
        """Prompt tokens of a chat."""
        return sum(self.count(str(m.get("content") or "")) + 4 for m in messages)


def error_body(reply: Answer) -> tuple[Any, str]:
    """(body, message) of an error answer as the OpenAI SDK reads it: the parsed JSON (else the text), and
    ``Error code: N`` followed by the body's ``error.message`` when it has one."""
    text = reply.text.strip()
    message = f"Error code: {reply.status}"
    try:
        body: Any = reply.json()
    except ValueError:
        return text, message
    error = body.get("error", body) if isinstance(body, dict) else None
    detail = error.get("message") if isinstance(error, dict) else None
    return body, f"{message} - {detail}" if isinstance(detail, str) and detail else message


class ParamRejected(Exception):
    """An endpoint refused a request for a parameter `ParamAdapter` can adapt (internal to the client)."""

    def __init__(self, param: str) -> None:
        super().__init__(param)
        self.param = param


def build_request_body(config: ModelConfig, model: str, messages: list[Message],
                       params: dict[str, Any]) -> dict[str, Any]:
    """The request for ``messages``: the config's params and extra body, overridden by the call's ``params``."""
    merged = {**config.params, **params}
    extra = {**config.extra_body, **merged.pop("extra_body", {})}
    body: dict[str, Any] = {"model": model, "messages": list(messages), **merged}
    if extra:
        body["extra_body"] = extra
    return body


class OpenAIChatModel:
    """Chat completions over an OpenAI-compatible HTTP endpoint (vLLM, llama.cpp server, OpenAI, the mock server).

    Each request has a deadline (``timeout_s``: connecting, sending and the complete answer) and a size bound
    (``max_answer_mib``), both enforced as the answer arrives (`skilltransfer.util.http_client`). Transient failures
    (429, 5xx, a passed deadline, an answer over the bound, dropped connections, unparsable bodies) are retried with
    exponential backoff and full jitter, honouring Retry-After, for up to ``retry_budget_s`` per call; a bad key
    (401/403), an unknown model (404), a rejected request (4xx) or a spent retry budget raise a one-line
    `ModelCallError` (an `InputError`). At most ``max_concurrency`` calls per endpoint are in flight across all
    threads of the process.

    Args:
        config: endpoint, key, model id, params, timeouts, retry and concurrency settings.
        sleep: the wait function used between retries (default: `skilltransfer.llm.chain`'s; tests pass a recorder).
        probe: the endpoint's answer to ``GET /models`` when the caller asked already (a run's endpoint check):
            the served model id and the context window are read from it. Without it the client asks once, when it
            first needs either.
    """

    def __init__(self, config: ModelConfig, *, sleep: Callable[[float], None] | None = None,
                 probe: EndpointProbe | None = None) -> None:
        base_url = config.resolved_base_url() or OPENAI_URL
        if not base_url.startswith(("http://", "https://")) or not base_url.split("://", 1)[1].strip("/"):
            raise InputError(f"model 'openai': endpoint {base_url!r} is not an http(s) URL: set --base-url or "
                             "OPENAI_BASE_URL to e.g. http://127.0.0.1:8000/v1")
        model = config.resolved_model()
        if not model and base_url == OPENAI_URL:
            raise InputError("model 'openai' needs a model id: --model openai/<id> (e.g. openai/gpt-4o), or "
                             "--model <id>@<url> for another endpoint (--base-url / OPENAI_BASE_URL), or set "
                             "SKILLTRANSFER_MODEL")
        self._http = HttpClient(base_url, openai_headers(config.resolved_api_key(), config.headers),
                                deadline_s=config.timeout_s, max_bytes=int(config.max_answer_mib * (1 << 20)))
        self.config = config
        self.base_url = base_url
        self._probe = probe if probe is not None and probe.base_url == base_url.rstrip("/") else None
        if not model:  # the endpoint's only model, else an error naming what it serves
            try:
                model = self.probe().only_model()
            except InputError:
                self._http.close()
                raise
        self.shown_url = shown_url(base_url)
        """The endpoint as messages name it (without credentials)."""
        self.model = model
        self.policy = RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_max_s,
                                  budget_s=config.retry_budget_s)
        self.retry = Retry(self.policy, what=f"model endpoint {self.shown_url}", sleep=sleep)
        """Retries each request's transient failures (`skilltransfer.llm.chain`: where it stands in the chain)."""
        self.counter = TokenCounter(config.tokenizer)
        exact = self.counter.source == "tokenizer"
        self.prompt_counter = PromptCounter(self.counter.count if exact else estimate_tokens, exact=exact)
        """Counts prompts for context fitting (learns the chat-template overhead from the server's usage)."""
        self.prompt_count_source = "tokenizer" if exact else "estimate"
        self._window = config.resolved_context_window()
        self._probed = self._window is not None
        self._window_lock = threading.Lock()
        self._limiter = endpoint_limiter(base_url, config.max_concurrency)
        self.adapter = ParamAdapter(model, {"max_tokens": "max_completion_tokens"} if base_url == OPENAI_URL else None)
        """The parameters this endpoint rejected and what is sent instead (`skilltransfer.llm.strict`)."""

    def request_body(self, messages: list[Message], **params: Any) -> dict[str, Any]:
        """The full request (model, messages, params, extra_body): what is sent, logged and cache-keyed."""
        return build_request_body(self.config, self.model, messages, params)

    @property
    def context_window(self) -> int | None:
        """The configured window, else what ``/v1/models`` reports (asked once), lowered to what a context-length
        refusal reported; None when unknown."""
        if not self._probed:
            with self._window_lock:
                if not self._probed:
                    self._window = self._probe_window()
                    self._probed = True
        return self._window

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """Prompt tokens of ``messages``: tokenizer.json counts if configured, else `estimate_tokens`, plus the
        per-message template overhead (both corrected by the server's reported usage)."""
        return self.prompt_counter.count(messages)

    def probe(self) -> EndpointProbe:
        """The endpoint's answer to ``GET /models``: the one given, else asked once (`probe_endpoint`)."""
        if self._probe is None:  # asked from the constructor or under the window's lock: once
            self._probe = probe_endpoint(self.base_url, timeout_s=min(10.0, self.config.timeout_s),
                                         max_bytes=min(MAX_LISTING_BYTES, self._http.max_bytes), client=self._http)
        return self._probe

    def _probe_window(self) -> int | None:
        """The window ``/v1/models`` reports (for llama.cpp's server, ``/props``' running n_ctx); unknown on any
        failure."""
        probe = self.probe()
        if probe.llama_cpp:
            try:  # llama.cpp's server: the running context size, which may be below n_ctx_train
                props = fetch_json(f"{self.base_url.rstrip('/').removesuffix('/v1')}/props", client=self._http,
                                   deadline_s=min(10.0, self.config.timeout_s),
                                   max_bytes=min(MAX_LISTING_BYTES, self._http.max_bytes))
                n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") or props.get("n_ctx")
                if isinstance(n_ctx, int) and n_ctx > 0:
                    return n_ctx
            except (OSError, ValueError, AttributeError):
                pass
        return probe.window(self.model)

    def _learn_window(self, window: int | None) -> None:
        if window is None:
            return
        with self._window_lock:
            self._probed = True
            self._window = window if self._window is None else min(self._window, window)

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        """One chat completion: the reasoning split from the answer, rejected parameters adapted (see the module
        docs of `skilltransfer.llm.reasoning` and `skilltransfer.llm.strict`)."""
        body = self.request_body(messages, **params)
        start = time.perf_counter()
        attempts = 0
        sent = body

        def attempt() -> Any:
            nonlocal attempts, sent
            attempts += 1
            with self._limiter:
                sent = self.adapter.apply(body)
                return self._send(sent)

        for _ in range(len(body) + len(body.get("extra_body") or {}) + 1):  # each round adapts one more parameter
            serial = self.adapter.unconfirmed(self.adapter.apply(body))
            with self.adapter.learning if serial else nullcontext():
                try:
                    response = self.retry(attempt)
                except ParamRejected as exc:
                    self.adapter.learn(exc.param)
                    continue
                self.adapter.confirm(sent)
                break
        else:  # pragma: no cover (every round removes a parameter from the request)
            raise ModelCallError(f"model endpoint {self.shown_url} kept refusing the request's parameters")
        latency = time.perf_counter() - start
        choice = response["choices"][0]
        text, reasoning = split_reply(_typed(choice, "message", dict) or {})
        finish = _typed(choice, "finish_reason", str)
        if "stop" in body and "stop" not in sent and self.adapter.changes.get("stop") == DROPPED:
            text, cut = cut_at_stop(text, body["stop"])  # the server no longer stops there: cut as it would
            finish = "stop" if cut else finish
        usage = _typed(response, "usage", dict) or {}
        served_prompt = _count(usage.get("prompt_tokens"))
        if served_prompt is not None:
            prompt_tokens, completion_tokens, source = served_prompt, _count(usage.get("completion_tokens")) or 0, \
                "server"
            self.prompt_counter.observe(messages, prompt_tokens)
        else:
            prompt_tokens = self.counter.count_messages(messages)
            completion_tokens, source = self.counter.count(text) + self.counter.count(reasoning), self.counter.source
        served = _count((_typed(usage, "completion_tokens_details", dict) or {}).get("reasoning_tokens"))
        reasoning_tokens = served if served is not None else (self.counter.count(reasoning) if reasoning else 0)
        return Completion(text=text, finish_reason=finish, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens, latency_s=latency,
                          model=_typed(response, "model", str) or self.model,
                          usage_source=source, raw_request=sent, raw_response=response,
                          attempts=attempts, reasoning=reasoning, reasoning_tokens=reasoning_tokens)

    def _send(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST the request; the answer's JSON object, or the error its status and body mean."""
        # As the OpenAI SDK sends ``create(model=..., extra_body=...)``: the model, then every field as given.
        fields = {key: value for key, value in body.items() if key != "extra_body"}
        try:
            reply = self._http.post_json("/chat/completions", encode_json({**fields, **(body.get("extra_body") or {})}))
        except HttpFailure as exc:
            raise TransientModelError(exc.kind, f"{exc}{_SETTING.get(exc.kind, '')}") from None
        if 300 <= reply.status < 400:  # not followed: a POST's redirect is an endpoint URL to correct
            raise ModelCallError(f"model endpoint {self.shown_url} redirects (HTTP {reply.status}) to "
                                 f"{_short(reply.headers.get('location') or '?')}: set the endpoint URL to where it "
                                 "points")
        if reply.status >= 400:
            raise self._refusal(reply, body)
        try:
            response = reply.json()
        except ValueError as exc:
            raise TransientModelError("bad_response", f"unparsable response ({_short(str(exc))})") from exc
        choices = response.get("choices") if isinstance(response, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TransientModelError("bad_response", "response has no choices")
        return cast(dict[str, Any], response)

    def _refusal(self, reply: Answer, body: dict[str, Any]) -> Exception:
        """The error an HTTP error status means (mapped as the OpenAI SDK's exception classes were)."""
        status = reply.status
        if status == 429:
            return TransientModelError("rate_limit", "429 Too Many Requests",
                                       retry_after_s=requested_wait(reply.headers))
        if status == 401:
            return ModelCallError(f"model endpoint {self.shown_url} rejected the API key (401): "
                                  "set OPENAI_API_KEY or --api-key")
        if status == 403:
            return ModelCallError(f"model endpoint {self.shown_url} denied access (403): "
                                  "check OPENAI_API_KEY / --api-key")
        if status == 404:
            return ModelCallError(f"model endpoint {self.shown_url} has no model {self.model!r} (404): "
                                  "choose another: --model <id>@<url>, or check the URL ends in /v1")
        error, message = error_body(reply)
        param = rejected_parameter(status, error, message, body)
        if param is not None:
            return ParamRejected(param)
        too_long = classify_context_error(status, message, error)
        if too_long is not None:
            self._learn_window(too_long.window)
            return too_long
        if status >= 500 or status == 408:
            return TransientModelError("server_error", f"HTTP {status}", retry_after_s=requested_wait(reply.headers))
        return ModelCallError(f"model endpoint {self.shown_url} refused the request "
                              f"(HTTP {status}: {_short(message)})")

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()


def _typed(mapping: dict[str, Any], key: str, kind: type[_T]) -> _T | None:
    """``mapping[key]`` when it is a ``kind`` (an answer's fields are the server's to get wrong), else None."""
    value = mapping.get(key)
    return value if isinstance(value, kind) else None


def _count(value: Any) -> int | None:
    """A token count the server reported (an int, not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
