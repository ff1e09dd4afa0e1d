"""The model description: `ModelConfig`, the one typed value of a model (how to reach or start a chat model and how to
call it), built once from a model string and the flags or spec keys that refine it (the CLI's `ModelOptions.config`,
a stream's `ModelSpec`: this plus a label); `make_model` builds the model from it, the grid and a run pass it on as
it is.

Model strings, as people write them (``--model openai/gpt-4o``, ``--model Qwen/Qwen2.5-7B@http://gpu:8000/v1``,
``--model local``, ``--model scripted:replies.jsonl``, ``--model mypkg.models:MyChat``; `parse_model_string`):

- ``local`` or ``local:<file.gguf>``: the embedded llama.cpp model (the bundled one, or that GGUF file).
- ``openai`` or ``openai/<id>``: OpenAI's API (https://api.openai.com/v1, key from OPENAI_API_KEY) unless
  ``--base-url`` or OPENAI_BASE_URL names another endpoint.
- ``<id>@<url>`` (also written ``vllm/<id>@<url>`` or ``openai/<id>@<url>``): model ``<id>`` at any
  OpenAI-compatible endpoint (vLLM, llama.cpp's server, the mock server, ...).
- ``<url>`` or ``vllm/<url>``: the only model that endpoint serves (read from its ``/v1/models``).
- ``scripted:<file.jsonl>``: the scripted test double replaying that file's replies.
- ``<module>:<Class>``: your own chat-model class, importable from ``sys.path`` (docs/models.md: what it must do;
  a spec file names one only with ``--allow-import <module>``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skilltransfer.errors import InputError, validation_message
from skilltransfer.llm.cache import CACHE_MODE_ALIASES, CacheMode, ResponseCache
from skilltransfer.llm.chain import CachedModel
from skilltransfer.protocols import ChatModel
from skilltransfer.util import secrets
from skilltransfer.util.imports import load_target, resolve
from skilltransfer.util.urls import split_at_url

ModelName = Literal["local", "openai", "scripted"]
MODELS: dict[str, str] = {
    "local": "skilltransfer.llm.local:LocalModel",
    "openai": "skilltransfer.llm.openai_client:OpenAIChatModel",
    "scripted": "skilltransfer.llm.testing:ScriptedModel",
}
"""Registry: model name -> ``module:Class``. A ``name`` may also be a ``module:Class`` target of its own (an open
registry: any class meeting `skilltransfer.protocols.ChatModel`, docs/models.md)."""
assert tuple(MODELS) == get_args(ModelName)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110's token)."""


# --------------------------------------------------------------------------------------------- model strings
OPENAI_URL = "https://api.openai.com/v1"
"""The endpoint of ``openai`` / ``openai/<id>`` when no other endpoint is configured."""
FORMS = ("openai/<id>", "<id>@<url> (any OpenAI-compatible endpoint; also vllm/<id>@<url>)",
         "<url> (the endpoint's only model)", "local[:<file.gguf>]", "scripted:<file.jsonl>",
         "<module>:<Class> (your own chat-model class)")
"""The model string forms, as error messages list them."""
_PROVIDERS = ("openai/", "vllm/")
CLASS_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""A ``module:Class`` target (dotted names on both sides)."""


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://")) and bool(text.split("://", 1)[1].strip("/"))


def parse_model_string(text: str, *, flag: str = "--model") -> dict[str, str]:
    """The `ModelConfig` fields a model string sets (``name``, and ``model``, ``base_url``, ``script`` as given;
    ``name`` is a registry name or a ``module:Class`` target).

    Raises:
        InputError: a string of none of the forms (the message lists them and names ``flag``).
    """
    spec = text.strip()
    if spec in ("local", "openai", "scripted"):
        return {"name": spec}
    for name, field in (("local:", "model"), ("scripted:", "script")):
        if spec.startswith(name):
            value = spec[len(name):].strip()
            if not value:
                raise InputError(f"{flag} {text!r}: give a file after {name!r} ({name}<file>)")
            return {"name": name[:-1], field: value}
    provider = next((p for p in _PROVIDERS if spec.startswith(p)), "")
    rest = spec[len(provider):]
    at_url = split_at_url(rest)
    if at_url is not None:
        model_id, url = at_url
        if not model_id:
            return {"name": "openai", "base_url": url}
        return {"name": "openai", "model": model_id, "base_url": url}
    if _is_url(rest):
        return {"name": "openai", "base_url": rest}
    if provider and rest.strip():
        return {"name": "openai", "model": rest.strip()}
    if CLASS_TARGET.match(spec):
        return {"name": spec}
    raise InputError(f"{flag} {text!r} is not a model string; write one of: {', '.join(FORMS)}")


# --------------------------------------------------------------------------------------------- the description
class Price(BaseModel):
    """A model's price in US dollars per million tokens; reasoning tokens are completion tokens, billed as output."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    input: float = Field(ge=0)
    """Dollars per million prompt tokens."""
    output: float = Field(ge=0)
    """Dollars per million completion tokens (reasoning included)."""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The dollars these tokens cost."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


class ModelConfig(BaseModel):
    """How to reach (or start) a chat model and how to call it (frozen: a value passed from the CLI or a spec to the
    client as it is). Unset fields fall back to env vars / defaults."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    name: str | None = None
    """Registry name: "local", "openai" or "scripted", or ``module:Class`` (your own chat-model class, built with
    this config: docs/models.md); None: "openai" if an endpoint is configured, else "local"."""
    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (env: OPENAI_BASE_URL)."""
    api_key: str | None = None
    """API key for the endpoint (env: OPENAI_API_KEY); local servers accept any value."""
    model: str | None = None
    """Model id sent to the endpoint (env: SKILLTRANSFER_MODEL); for "local", a GGUF path overrides the bundled one."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Sampling params sent with every call (temperature, top_p, max_tokens, seed, stop, ...)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra JSON merged into the request body (e.g. reasoning_effort, chat_template_kwargs)."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    """Most completion tokens (reasoning included) of every call of this model: sent as ``params.max_tokens``
    (renamed ``max_completion_tokens`` for an endpoint that wants that name), unless ``params`` sets one. None: no
    cap from the model (a role may still set one; see docs/models.md)."""
    reasoning_effort: str | None = None
    """A reasoning model's effort (``minimal``, ``low``, ``medium``, ``high``): sent as ``extra_body.reasoning_effort``
    unless ``extra_body`` sets it."""
    timeout_s: float = Field(default=600.0, gt=0)
    """The deadline of one request, in seconds: connecting, sending and the complete answer together (every wait is
    cut to what is left of it). A request past it is a transient failure, retried like a 5xx within
    ``retry_budget_s``. The default leaves room for long reasoning answers (about 60k tokens at 100 tokens/s); for a
    slow server, set it above ``max_completion_tokens`` / its tokens per second per request (docs/models.md)."""
    max_answer_mib: float = Field(default=64.0, gt=0)
    """The largest answer accepted from the endpoint, in MiB (decoded): a larger one is refused as it arrives, never
    held whole, and retried like a 5xx. Far above a real answer (100k tokens are under 1 MiB), far below memory."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request to the endpoint, over the ``Authorization`` and the ``OpenAI-Organization``
    / ``OpenAI-Project`` headers (from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``) sent by default. Not recorded in a
    run's ``config.json`` (they may hold keys)."""
    retry_budget_s: float = Field(default=300.0, ge=0)
    """How long one call keeps retrying 429/5xx/timeouts/connection errors/unparsable bodies (seconds from its first
    attempt), so a run rides out a rate-limit window or a short outage; then a clear error."""
    max_retries: int | None = Field(default=None, ge=0)
    """Most retries after the first attempt, whichever of this and retry_budget_s ends first; None: the budget only."""
    backoff_base_s: float = Field(default=1.0, ge=0)
    """First backoff window; doubles each retry (full jitter: a uniform wait in the window), capped by backoff_max_s.
    0 disables waits (tests; set max_retries too, or a down endpoint is called in a tight loop for the budget)."""
    backoff_max_s: float = Field(default=30.0, ge=0)
    """Cap on one backoff wait. A server's Retry-After (seconds or HTTP date) is honoured even when longer; one that
    lies beyond the remaining budget ends the call at once."""
    max_concurrency: int = Field(default=32, ge=1)
    """At most this many requests in flight per endpoint in this process (shared by all models on that URL); the
    default suits a local vLLM or llama.cpp server, which batches many requests (``--max-connections``; lower it for
    a rate-limited API)."""
    tokenizer: str | None = None
    """Local path to a Hugging Face tokenizer.json (or its folder) used to count tokens when the server reports none."""
    cache_path: str | None = None
    """SQLite response cache file; None disables caching."""
    cache_mode: CacheMode = "rw"
    """off, rw (read-write: resume without paying twice) or ro (replay: a miss is an error)."""
    context_window: int | None = Field(default=None, ge=256)
    """The model's context window in tokens (env: SKILLTRANSFER_CONTEXT_WINDOW). "openai": None asks the endpoint's
    ``/v1/models`` once (vLLM ``max_model_len``, llama.cpp ``n_ctx``, ...), else the window is unknown (no fitting).
    "local": the embedded server's context size (overrides ``ctx``)."""
    ctx: int = 8192
    """Context size for the embedded local server (llama.cpp n_ctx)."""
    threads: int | None = None
    """Embedded server CPU threads; None = $SKILLTRANSFER_LLAMA_THREADS, else all cores (1 is faster on a busy box)."""
    ram_cache: bool = True
    """Embedded server: keep the last prompts' KV states in RAM so a role's next call resumes from its own prefix
    after another role's call (see `LocalServer`)."""
    script: str | None = None
    """For the "scripted" test double: a JSONL file of replies (strings in order, or match/reply rules)."""
    price: Price | None = None
    """Dollars per million input/output tokens (``price: {input: 2.5, output: 10}``): runs then record each task's
    cost and ``--cost-limit`` applies. Not sent anywhere; None: costs are not computed."""

    @field_validator("cache_mode", mode="before")
    @classmethod
    def _cache_mode_spelling(cls, mode: Any) -> Any:
        if isinstance(mode, str) and mode.strip().lower() not in CACHE_MODE_ALIASES:
            raise ValueError(f"unknown cache mode {mode!r}; choose one of: off, rw (read-write), ro (read-only/replay)")
        return CACHE_MODE_ALIASES[mode.strip().lower()] if isinstance(mode, str) else mode

    @field_validator("name")
    @classmethod
    def _known_name(cls, name: str | None) -> str | None:
        if name is not None and name not in MODELS and not CLASS_TARGET.match(name):  # the class is imported on use
            raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}, or module:Class")
        return name

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name!r} is not an HTTP token (letters, digits, -, _ and the like)")
            if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
                raise ValueError(f"header {name!r}: its value must be text on one line")
        return headers

    @field_validator("params")
    @classmethod
    def _sane_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        temperature = params.get("temperature")
        if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature < math.inf):
            raise ValueError(f"temperature must be a number >= 0, got {temperature}")
        max_tokens = params.get("max_tokens")
        if max_tokens is not None and not (isinstance(max_tokens, int) and max_tokens >= 1):
            raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens}")
        return params

    @model_validator(mode="before")
    @classmethod
    def _fold_shortcuts(cls, data: Any) -> Any:
        """``max_completion_tokens`` into ``params.max_tokens``, ``reasoning_effort`` into ``extra_body``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        cap, effort = data.get("max_completion_tokens"), data.get("reasoning_effort")
        params, extra = data.get("params"), data.get("extra_body")
        if cap is not None and (params is None or isinstance(params, dict)):
            params = dict(params or {})
            if "max_tokens" not in params and "max_completion_tokens" not in params:
                params["max_tokens"] = cap
            data["params"] = params
        if effort is not None and (extra is None or isinstance(extra, dict)):
            data["extra_body"] = {"reasoning_effort": effort, **(extra or {})}
        return data

    @model_validator(mode="after")
    def _script_is_scripted(self) -> ModelConfig:
        if self.script is not None and self.name != "scripted":
            raise ValueError("script is only for the scripted test double: set its name to scripted "
                             "(run: --model scripted)")
        return self

    def resolved_base_url(self) -> str | None:
        """The endpoint from the config, else OPENAI_BASE_URL, else None."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or None

    def resolved_api_key(self) -> str | None:
        """The key from the config, else OPENAI_API_KEY, else None; a line break around it trimmed with a warning
        (`skilltransfer.util.secrets.api_key`).

        Raises:
            InputError: a key with a line break, space or control character inside (not shown).
        """
        if self.api_key:
            return secrets.api_key(self.api_key, "the model's api_key (--api-key)")
        return secrets.api_key(os.environ.get("OPENAI_API_KEY"))

    def resolved_context_window(self) -> int | None:
        """The window from the config, else SKILLTRANSFER_CONTEXT_WINDOW, else None.

        Raises:
            InputError: the env var is not an integer >= 256.
        """
        if self.context_window is not None:
            return self.context_window
        raw = os.environ.get("SKILLTRANSFER_CONTEXT_WINDOW", "").strip()
        if not raw:
            return None
        if not raw.isdigit() or int(raw) < 256:
            raise InputError(f"SKILLTRANSFER_CONTEXT_WINDOW must be an integer >= 256, got {raw!r}")
        return int(raw)

    def resolved_model(self) -> str | None:
        """The model id from the config, else SKILLTRANSFER_MODEL, else None."""
        return self.model or os.environ.get("SKILLTRANSFER_MODEL") or None


def build_config(data: dict[str, Any]) -> ModelConfig:
    """Validate a dict into a `ModelConfig` (cache mode spellings normalised).

    Raises:
        InputError: naming the first bad or unknown field.
    """
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"model config {validation_message(exc, model=ModelConfig)}") from None


# --------------------------------------------------------------------------------------------- building the model
def default_model_name(config: ModelConfig) -> str:
    """"openai" when an endpoint is configured (config or OPENAI_BASE_URL), else "local"."""
    return "openai" if config.resolved_base_url() else "local"


def model_class(name: str) -> Any:
    """The class behind a model name: a registry name, or a ``module:Class`` target (imported: its module's code runs),
    checked to be a class with a ``complete`` method.

    Raises:
        InputError: an unknown name, a target that cannot be imported, or one that is no chat-model class.
    """
    if name in MODELS:
        return resolve(MODELS[name])
    if ":" not in name:
        raise InputError(f"Unknown model {name!r}. Available: {', '.join(MODELS)}, or module:Class")
    cls = load_target(name, what="model class")
    if not isinstance(cls, type) or not callable(getattr(cls, "complete", None)):
        raise InputError(f"model class {name!r} is not a chat-model class: it needs a complete(messages, **params) "
                         "method returning a Completion (docs/models.md)")
    return cls


def make_model(spec: str | ModelConfig | dict[str, Any] | None = None, *,
               outputs: Sequence[str] | Callable[..., str] | None = None, probe: Any = None,
               cache: bool = True, **overrides: Any) -> ChatModel:
    """Build a chat model from a name, a `ModelConfig` or a config dict.

    Args:
        spec: "local" | "openai" | "scripted", a model string as ``--model`` takes it (``qwen3@http://host:8000/v1``,
            ``openai/gpt-4o``, ``local:<file.gguf>``, ``scripted:<file.jsonl>``, ``mypkg.models:MyChat``;
            `parse_model_string`), a `ModelConfig` (used as it is), a dict of its fields, or None (the
            default model).
        outputs: replies for "scripted" (a list or a callable), instead of ``config.script``.
        probe: the endpoint's answer to ``GET /models`` when the caller asked already (an "openai" model then
            asks no more): a `skilltransfer.llm.openai_client.EndpointProbe` (typed loosely here: the endpoint module
            reads `ModelConfig`, so this one names it not).
        cache: wrap the model in its response cache (False: the bare client, e.g. one shared by a grid's streams,
            each of which wraps it with `with_response_cache`: replay order is per stream).
        **overrides: `ModelConfig` fields that override ``spec``'s.

    Returns:
        The model, wrapped in a `CachedModel` when ``cache_path`` is set and ``cache_mode`` is not "off".

    Raises:
        InputError: unknown name, bad config field, or a missing setting (says which flag/env var to set).
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(spec, ModelConfig) and not given:
        return _built(spec, outputs, probe, cache)
    if isinstance(spec, ModelConfig):
        data = spec.model_dump(exclude_unset=True)
    elif isinstance(spec, dict):
        data = dict(spec)
    elif isinstance(spec, str):
        plain = not any(mark in spec for mark in "@/:")  # a registry name (an unknown one lists the choices)
        data = {"name": spec} if plain else dict(parse_model_string(spec, flag="make_model"))
    elif spec is None:
        data = {}
    else:
        raise InputError(f"model spec must be a name or a config, got {type(spec).__name__}")
    return _built(build_config({**data, **given}), outputs, probe, cache)


def with_response_cache(model: ChatModel, config: ModelConfig) -> ChatModel:
    """``model`` wrapped in ``config``'s response cache (a `CachedModel`) when ``cache_path`` is set and
    ``cache_mode`` is not "off"; else ``model``."""
    if not config.cache_path or config.cache_mode == "off":
        return model
    return CachedModel(model, ResponseCache(config.cache_path, config.cache_mode))


def _built(config: ModelConfig, outputs: Sequence[str] | Callable[..., str] | None,
           probe: Any, cache: bool) -> ChatModel:
    name = config.name or default_model_name(config)
    cls = model_class(name)
    if name == "scripted":  # the test double, known here by its registry name only (never imported)
        if outputs is not None:
            model: Any = cls(outputs, model=config.model or "scripted")
        elif config.script:
            model = cls.from_script(config.script, model=config.model or "scripted")
        else:
            raise InputError("model 'scripted' (a test double) needs replies: --model scripted:<file.jsonl>")
    elif name == "openai":
        model = cls(config, probe=probe)
    elif name in MODELS:
        model = cls(config)
    else:  # your own class (docs/models.md): one argument, the config
        try:
            model = cls(config)
        except TypeError as exc:
            raise InputError(f"model class {name!r} refused its config (it is built as {name.rpartition(':')[2]}"
                             f"(config), config a ModelConfig): {exc}") from None
    return with_response_cache(model, config) if cache else model
