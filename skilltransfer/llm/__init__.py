"""The model layer: chat models behind one `ChatModel` protocol, built by `make_model`.

Names: ``local`` (the embedded llama.cpp model; the default when no endpoint is configured), ``openai`` (any
OpenAI-compatible endpoint; a model id is required), ``scripted`` (a test double; only when asked for by name) and
``module:Class`` (your own class meeting `ChatModel`, built as ``Class(config)``; docs/models.md). A configured
``cache_path`` wraps the model in the SQLite response cache.
"""

from __future__ import annotations

from skilltransfer.llm.config import (
    MODELS,
    ModelConfig,
    default_model_name,
    make_model,
    model_class,
    parse_model_string,
    with_response_cache,
)

__all__ = ["MODELS", "ModelConfig", "default_model_name", "make_model", "model_class", "parse_model_string",
           "with_response_cache"]
