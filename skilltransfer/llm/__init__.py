"""The model layer: chat models behind one `ChatModel` protocol, built by `make_model`.

Names: ``local`` (the embedded llama.cpp model; the default when no endpoint is configured), ``openai`` (any
OpenAI-compatible endpoint; a model id is required) and ``scripted`` (a test double; only when asked for by name).
A configured ``cache_path`` wraps the model in the SQLite response cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.config import MODELS, ModelConfig, build_config
from skilltransfer.protocols import ChatModel
from skilltransfer.util.imports import resolve

__all__ = ["MODELS", "ModelConfig", "default_model_name", "make_model"]


def default_model_name(config: ModelConfig) -> str:
    """"openai" when an endpoint is configured (config or OPENAI_BASE_URL), else "local"."""
    return "openai" if config.resolved_base_url() else "local"


def _load(name: str) -> Any:
    try:
        target = MODELS[name]
    except KeyError:
        raise InputError(f"Unknown model {name!r}. Available: {', '.join(MODELS)}") from None
    return resolve(target)


def make_model(spec: str | ModelConfig | dict[str, Any] | None = None, *,
               outputs: Sequence[str] | Callable[..., str] | None = None, **overrides: Any) -> ChatModel:
    """Build a chat model from a name, a `ModelConfig` or a config dict.

    Args:
        spec: "local" | "openai" | "scripted", a model string as ``--model`` takes it (``qwen3@http://host:8000/v1``,
            ``openai/gpt-4o``, ``local:<file.gguf>``, ``scripted:<file.jsonl>``; `skilltransfer.llm.modelstring`),
            a `ModelConfig`, a dict of its fields, or None (the default model).
        outputs: replies for "scripted" (a list or a callable), instead of ``config.script``.
        **overrides: `ModelConfig` fields that override ``spec``'s.

    Returns:
        The model, wrapped in a `CachedModel` when ``cache_path`` is set and ``cache_mode`` is not "off".

    Raises:
        InputError: unknown name, bad config field, or a missing setting (says which flag/env var to set).
    """
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
    data.update({k: v for k, v in overrides.items() if v is not None})
    config = build_config(data)
    name = config.name or default_model_name(config)
    cls = _load(name)
    if name == "scripted":
        if outputs is None:
            if not config.script:
                raise InputError("model 'scripted' (a test double) needs replies: --model scripted:<file.jsonl>")
            from skilltransfer.llm.script import script_replies

            outputs = script_replies(config.script)
        model: Any = cls(outputs, model=config.model or "scripted")
    else:
        model = cls(config)
    if config.cache_path and config.cache_mode != "off":
        from skilltransfer.llm.cache import CachedModel, ResponseCache

        model = CachedModel(model, ResponseCache(config.cache_path, config.cache_mode))
    chat_model: ChatModel = model
    return chat_model
