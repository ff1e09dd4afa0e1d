"""The model layer: chat models behind one `ChatModel` protocol, built by `make_model`.

Names: ``local`` (the embedded llama.cpp model; the default when no endpoint is configured), ``openai`` (any
OpenAI-compatible endpoint; a model id is required), ``scripted`` (a test double; only when asked for by name) and
``module:Class`` (your own class meeting `ChatModel`, built as ``Class(config)``; docs/models.md). A configured
``cache_path`` wraps the model in the SQLite response cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.config import MODELS, ModelConfig, build_config
from skilltransfer.llm.endpoint import EndpointProbe
from skilltransfer.protocols import ChatModel
from skilltransfer.util.imports import load_target, resolve

__all__ = ["MODELS", "ModelConfig", "default_model_name", "make_model", "model_class"]


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
               outputs: Sequence[str] | Callable[..., str] | None = None, probe: EndpointProbe | None = None,
               **overrides: Any) -> ChatModel:
    """Build a chat model from a name, a `ModelConfig` or a config dict.

    Args:
        spec: "local" | "openai" | "scripted", a model string as ``--model`` takes it (``qwen3@http://host:8000/v1``,
            ``openai/gpt-4o``, ``local:<file.gguf>``, ``scripted:<file.jsonl>``, ``mypkg.models:MyChat``;
            `skilltransfer.llm.modelstring`), a `ModelConfig` (used as it is), a dict of its fields, or None (the
            default model).
        outputs: replies for "scripted" (a list or a callable), instead of ``config.script``.
        probe: the endpoint's answer to ``GET /models`` when the caller asked already (an "openai" model then
            asks no more; `skilltransfer.llm.endpoint`).
        **overrides: `ModelConfig` fields that override ``spec``'s.

    Returns:
        The model, wrapped in a `CachedModel` when ``cache_path`` is set and ``cache_mode`` is not "off".

    Raises:
        InputError: unknown name, bad config field, or a missing setting (says which flag/env var to set).
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(spec, ModelConfig) and not given:
        return _built(spec, outputs, probe)
    if isinstance(spec, ModelConfig):
        data = spec.model_dump(exclude_unset=True)
    elif isinstance(spec, dict):
        data = dict(spec)
    elif isinstance(spec, str):
        from skilltransfer.llm.modelstring import parse_model_string

        plain = not any(mark in spec for mark in "@/:")  # a registry name (an unknown one lists the choices)
        data = {"name": spec} if plain else dict(parse_model_string(spec, flag="make_model"))
    elif spec is None:
        data = {}
    else:
        raise InputError(f"model spec must be a name or a config, got {type(spec).__name__}")
    return _built(build_config({**data, **given}), outputs, probe)


def _built(config: ModelConfig, outputs: Sequence[str] | Callable[..., str] | None,
           probe: EndpointProbe | None) -> ChatModel:
    name = config.name or default_model_name(config)
    cls = model_class(name)
    if name == "scripted":
        if outputs is None:
            if not config.script:
                raise InputError("model 'scripted' (a test double) needs replies: --model scripted:<file.jsonl>")
            from skilltransfer.llm.script import script_replies

            outputs = script_replies(config.script)
        model: Any = cls(outputs, model=config.model or "scripted")
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
    if config.cache_path and config.cache_mode != "off":
        from skilltransfer.llm.cache import CachedModel, ResponseCache

        model = CachedModel(model, ResponseCache(config.cache_path, config.cache_mode))
    chat_model: ChatModel = model
    return chat_model
