"""The model flags of the commands that call a model outside a stream (``library organize|decompose|route``,
``judge``): the same flags as ``run``, turned into a `ModelConfig` for `skilltransfer.llm.make_model`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skilltransfer.errors import InputError


@dataclass
class ModelOptions:
    """The model flags of ``skilltransfer run`` (None: not given)."""

    name: str | None = None
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

    def config(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields these options set (for ``make_model``)."""
        if self.script is not None and self.name != "scripted":
            raise InputError("--script is only for the scripted test double: add --model scripted")
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
        data: dict[str, Any] = {"name": self.name, "base_url": self.base_url, "api_key": self.api_key,
                                "model": self.model, "cache_path": self.cache, "cache_mode": self.cache_mode,
                                "script": self.script, "retry_budget_s": self.retry_budget_s,
                                "context_window": self.context_window}
        data = {k: v for k, v in data.items() if v is not None}
        if params:
            data["params"] = params
        return data

    def resolved_name(self) -> str:
        """The registry name ``make_model`` will use ("openai" when an endpoint is configured, else "local")."""
        from skilltransfer.llm import ModelConfig, default_model_name

        return self.name or default_model_name(ModelConfig(base_url=self.base_url))

    def label(self) -> str:
        """Short model label for the default run folder: the model id if given, else the registry name."""
        return self.model or self.resolved_name()

    def record(self) -> str:
        """What ``config.json`` records: ``name[:model id]`` plus sampling params and a given context window (no
        endpoint, key or cache, so a run may resume against another endpoint serving the same model)."""
        label = f"{self.resolved_name()}:{self.model}" if self.model else self.resolved_name()
        params = self.config().get("params", {})
        window = [f"context_window={self.context_window}"] if self.context_window is not None else []
        return " ".join([label, *(f"{k}={v}" for k, v in sorted(params.items())), *window])

