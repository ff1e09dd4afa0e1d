"""The model flags every command that calls a model shares (``run``, ``evolve``, ``judge``, ``library
organize|decompose|route``; defined in `skilltransfer.commands.options`), turned into `ModelConfig` fields."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skilltransfer.commands.options import take_deprecated
from skilltransfer.errors import InputError


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

    def identity(self) -> dict[str, str]:
        """The fields ``--model`` (with the deprecated ``--model-name``/``--script`` and ``--base-url``) sets:
        ``name``, ``model``, ``base_url``, ``script``.

        Raises:
            InputError: an unreadable model string, or two flags setting one thing differently.
        """
        from skilltransfer.llm.modelstring import parse_model_string

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

    def config(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields these options set (for ``make_model``)."""
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
        data: dict[str, Any] = {**self.identity(), "api_key": self.api_key, "cache_path": self.cache,
                                "cache_mode": self.cache_mode, "retry_budget_s": self.retry_budget_s,
                                "context_window": self.context_window}
        data = {k: v for k, v in data.items() if v is not None}
        if params:
            data["params"] = params
        return data

    def spec_keys(self) -> dict[str, Any]:
        """The run spec keys these options set (``model.name``, ``model.model``, ...; None: not given)."""
        keys: dict[str, Any] = {f"model.{k}": v for k, v in self.identity().items()}
        keys.update({"model.api_key": self.api_key, "model.params.temperature": self.temperature,
                     "model.params.max_tokens": self.max_tokens, "model.context_window": self.context_window,
                     "model.cache_path": self.cache, "model.cache_mode": self.cache_mode,
                     "model.retry_budget_s": self.retry_budget_s})
        return keys

    def resolved_name(self) -> str:
        """The registry name ``make_model`` will use ("openai" when an endpoint is configured, else "local")."""
        from skilltransfer.llm import ModelConfig, default_model_name

        fields = self.identity()
        return fields.get("name") or default_model_name(ModelConfig(base_url=fields.get("base_url")))

    def label(self) -> str:
        """Short model label for the default run folder: the model id if given, else the registry name."""
        return self.identity().get("model") or self.resolved_name()

    def record(self) -> str:
        """What a report records: ``name[:model id]`` plus sampling params and a given context window (no
        endpoint, key or cache, so a run may resume against another endpoint serving the same model)."""
        model = self.identity().get("model")
        label = f"{self.resolved_name()}:{model}" if model else self.resolved_name()
        params = self.config().get("params", {})
        window = [f"context_window={self.context_window}"] if self.context_window is not None else []
        return " ".join([label, *(f"{k}={v}" for k, v in sorted(params.items())), *window])


def with_served_model(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (ModelConfig fields) with the model id filled in from the endpoint's ``/v1/models`` when the model
    is an OpenAI-compatible endpoint's, no id is given (flag, config or SKILLTRANSFER_MODEL) and it serves one."""
    from skilltransfer.llm import ModelConfig, default_model_name
    from skilltransfer.llm.config import build_config
    from skilltransfer.llm.modelstring import OPENAI_URL, only_served_model

    built: ModelConfig = build_config(config)
    name = built.name or default_model_name(built)
    url = built.resolved_base_url()
    if name != "openai" or built.resolved_model() or not url or url == OPENAI_URL:
        return config
    return {**config, "model": only_served_model(url, built.resolved_api_key())}
