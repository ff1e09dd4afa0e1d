"""The model flags every command that calls a model shares (``run``, ``evolve``, ``judge``, ``library
organize|decompose|route``; defined in `skilltransfer.commands.options`), turned once into the typed model
description, `ModelConfig` (``config``), or into a run's spec keys (``spec_keys``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skilltransfer.commands.options import take_deprecated
from skilltransfer.errors import InputError

if TYPE_CHECKING:
    from skilltransfer.llm.config import ModelConfig


@dataclass
class ModelOptions:
    """The model flags as given (None: not given). ``spec`` is the ``--model`` string; ``model`` and ``script`` are
    the deprecated ``--model-name`` and ``--script``."""

    spec: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    context_window: int | None = None
    cache: str | None = None
    cache_mode: str | None = None
    script: str | None = None
    retry_budget_s: float | None = None

    def __post_init__(self) -> None:
        self.model = take_deprecated("--model-name", self.model)  # type: ignore[assignment]
        self.script = take_deprecated("--script", self.script)  # type: ignore[assignment]

    def string_fields(self) -> dict[str, str]:
        """The fields ``--model`` (with the deprecated ``--model-name``/``--script`` and ``--base-url``) sets, the
        model string parsed once: ``name``, ``model``, ``base_url``, ``script``.

        Raises:
            InputError: an unreadable model string, or two flags setting one thing differently.
        """
        from skilltransfer.llm.config import parse_model_string

        fields = parse_model_string(self.spec) if self.spec is not None else {}
        for key, flag, value in (("model", "--model-name", self.model), ("script", "--script", self.script),
                                 ("base_url", "--base-url", self.base_url)):
            if value is None:
                continue
            if key in fields and fields[key] != value:
                raise InputError(f"--model {self.spec!r} and {flag} {value!r} disagree; give one")
            fields[key] = value
        if "script" in fields and fields.get("name") != "scripted":
            raise InputError("--script is only for the scripted test double: write --model scripted:<file>")
        return fields

    def params(self) -> dict[str, Any]:
        """The sampling params the flags set (``temperature``, ``max_tokens``), checked.

        Raises:
            InputError: a value out of range (naming its flag).
        """
        params: dict[str, Any] = {}
        if self.temperature is not None:
            if not (math.isfinite(self.temperature) and self.temperature >= 0):
                raise InputError(f"--temperature must be a number >= 0, got {self.temperature}")
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            if self.max_tokens < 1:
                raise InputError(f"--max-tokens must be >= 1, got {self.max_tokens}")
            params["max_tokens"] = self.max_tokens
        if self.context_window is not None and self.context_window < 256:
            raise InputError(f"--context-window must be >= 256 tokens, got {self.context_window}")
        return params

    def config(self) -> ModelConfig:
        """The typed model description these options give (for ``make_model``: ``make_model(options.config())``).

        Raises:
            InputError: see `string_fields` and `params`; a bad value (named).
        """
        from skilltransfer.llm.config import build_config

        data: dict[str, Any] = {**self.string_fields(), "api_key": self.api_key, "cache_path": self.cache,
                                "cache_mode": self.cache_mode, "retry_budget_s": self.retry_budget_s,
                                "context_window": self.context_window, "params": self.params() or None}
        return build_config({k: v for k, v in data.items() if v is not None})

    def spec_keys(self) -> dict[str, Any]:
        """The run spec keys these options set (``model.name``, ``model.model``, ...; None: not given)."""
        keys: dict[str, Any] = {f"model.{k}": v for k, v in self.string_fields().items()}
        keys.update({"model.api_key": self.api_key, "model.params.temperature": self.temperature,
                     "model.params.max_tokens": self.max_tokens, "model.context_window": self.context_window,
                     "model.cache_path": self.cache, "model.cache_mode": self.cache_mode,
                     "model.retry_budget_s": self.retry_budget_s})
        return keys

    def resolved_name(self) -> str:
        """The registry name (or ``module:Class``) ``make_model`` will use ("openai" when an endpoint is configured,
        else "local")."""
        from skilltransfer.llm import default_model_name

        config = self.config()
        return config.name or default_model_name(config)

    def label(self) -> str:
        """Short model label for the default run folder: the model id if given, else the registry name."""
        return self.string_fields().get("model") or self.resolved_name()

    def record(self) -> str:
        """What a report records: ``name[:model id]`` plus sampling params and a given context window (no
        endpoint, key or cache, so a run may resume against another endpoint serving the same model)."""
        model = self.string_fields().get("model")
        label = f"{self.resolved_name()}:{model}" if model else self.resolved_name()
        window = [f"context_window={self.context_window}"] if self.context_window is not None else []
        return " ".join([label, *(f"{k}={v}" for k, v in sorted(self.params().items())), *window])
