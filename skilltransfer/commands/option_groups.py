"""Option groups: flags declared once, collected into one value, taken by every command that needs them.

A group is a function whose parameters are its options (Typer ``Annotated`` options) and whose return value is what
a command receives, e.g. `MODEL`: the model flags -> one `ModelOptions` (the flags as given, turned once into the
typed model description, `ModelConfig`, or into a run's spec keys). A command takes a group with one parameter
``name: Annotated[T, GROUP]`` and the decorator `with_groups`; Typer sees the group's options at that place (so each
help panel keeps its order), and the command is called with the collected value.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

from skilltransfer.commands.options import (
    MODEL_PANEL,
    AllowImport,
    AllowKeyTo,
    ApiKey,
    BaseUrl,
    CacheMode,
    ConfigFile,
    ContextWindow,
    CostLimit,
    MaxConnections,
    ModelNameOld,
    ModelString,
    Overrides,
    ResponseCache,
    RetryBudget,
    ScriptOld,
    Temperature,
    TokenLimit,
    max_tokens_option,
    take_deprecated,
)
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
        """The sampling params the flags set (``temperature``, ``max_tokens``); their ranges are the flags' own
        (``min=``) and `ModelConfig`'s, which checks them where the model is described."""
        given = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        return {key: value for key, value in given.items() if value is not None}

    def config(self) -> ModelConfig:
        """The typed model description these options give (for ``make_model``: ``make_model(options.config())``).

        Raises:
            InputError: see `string_fields`; a bad value (`build_config` names it).
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


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class OptionGroup(Generic[T]):
    """Options declared once: ``collect``'s parameters are the options, its return value what a command gets."""

    collect: Callable[..., T]
    parameters: tuple[inspect.Parameter, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.parameters:
            found = inspect.signature(self.collect, eval_str=True).parameters.values()
            object.__setattr__(self, "parameters", tuple(p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                                                         for p in found))

    def with_option(self, name: str, annotation: Any | None, default: Any = None) -> OptionGroup[T]:
        """This group with its option ``name`` declared as ``annotation`` (None: without that option)."""
        if name not in {p.name for p in self.parameters}:
            raise TypeError(f"option group {self.collect.__name__} has no option {name!r}")
        parameters = tuple(p if p.name != name else p.replace(annotation=annotation, default=default)
                           for p in self.parameters if p.name != name or annotation is not None)
        if not parameters:
            raise TypeError(f"option group {self.collect.__name__} would have no option left")
        return OptionGroup(self.collect, parameters)


def with_groups(function: F) -> F:
    """``function`` with each parameter ``name: Annotated[T, OptionGroup]`` replaced (for Typer) by the group's
    options, and called with ``name`` = the group's collected value. Groups are collected in signature order.

    Raises:
        TypeError: an option of a group has the name of another parameter of ``function``.
    """
    signature = inspect.signature(function, eval_str=True)
    groups: dict[str, OptionGroup[Any]] = {}
    shown: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        group = _group_of(parameter.annotation)
        if group is None:
            shown.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        groups[parameter.name] = group
        shown += group.parameters
    names = [p.name for p in shown]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise TypeError(f"{function.__name__}: options named twice: {', '.join(clashes)}")

    @functools.wraps(function)
    def wrapper(**values: Any) -> Any:
        for name, group in groups.items():
            values[name] = group.collect(**{p.name: values.pop(p.name, p.default) for p in group.parameters})
        return function(**values)

    wrapper.__signature__ = signature.replace(parameters=shown)  # type: ignore[attr-defined]  # what Typer reads
    wrapper.__annotations__ = {p.name: p.annotation for p in shown if p.annotation is not p.empty}
    if signature.return_annotation is not signature.empty:
        wrapper.__annotations__["return"] = signature.return_annotation
    return typing.cast(F, wrapper)


def _group_of(annotation: Any) -> OptionGroup[Any] | None:
    if typing.get_origin(annotation) is not Annotated:
        return None
    return next((item for item in annotation.__metadata__ if isinstance(item, OptionGroup)), None)


# ---------------------------------------------------------------------------------------------------- the groups
def _model_options(
    model: ModelString = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    model_name: ModelNameOld = None,
    temperature: Temperature = None,
    max_tokens: int | None = None,
    context_window: ContextWindow = None,
    cache: ResponseCache = None,
    cache_mode: CacheMode = None,
    script: ScriptOld = None,
    retry_budget: RetryBudget = None,
) -> ModelOptions:
    return ModelOptions(spec=model, base_url=base_url, api_key=api_key, model=model_name, temperature=temperature,
                        max_tokens=max_tokens, context_window=context_window, cache=str(cache) if cache else None,
                        cache_mode=cache_mode, script=str(script) if script else None, retry_budget_s=retry_budget)


def model_group(max_tokens: str | None = None) -> OptionGroup[ModelOptions]:
    """The model flags (``--model``, ``--base-url``, ``--api-key``, ``--temperature``, ``--context-window``,
    ``--cache``, ``--cache-mode``, ``--retry-budget``, the deprecated ``--model-name`` and ``--script``) as one
    `ModelOptions`; with ``max_tokens`` (its help: what the command's default is), also ``--max-tokens``, a limit
    the model applies to every call. A command whose ``--max-tokens`` is not the model's declares its own."""
    if max_tokens is None:
        return MODEL
    option = max_tokens_option(max_tokens, panel=MODEL_PANEL)
    return OptionGroup(_model_options).with_option("max_tokens", Annotated[int | None, option])


MODEL: OptionGroup[ModelOptions] = OptionGroup(_model_options).with_option("max_tokens", None)
"""The model flags without ``--max-tokens`` (`model_group`)."""


@dataclass(frozen=True)
class SpecLayers:
    """What a run spec is layered from besides the flags: ``--config FILE``, then each ``-c``; and the modules a
    ``module:Class`` env of those may import."""

    config: Path | None
    overrides: list[str]
    allow_import: list[str]
    allow_key_to: list[str] = field(default_factory=list)
    """Hosts a spec file's endpoints may send the environment's key to (`check_key_destinations`)."""

    def check_key_destinations(self, models: list[tuple[str, Any]], model: ModelOptions | None = None) -> None:
        """Refuse a ``--config`` file's endpoint that would receive ``OPENAI_API_KEY`` from the environment
        (`skilltransfer.llm.openai_client.check_key_destinations`); endpoints named by the model flags or ``-c`` are
        the user's own."""
        if self.config is None:
            return
        from skilltransfer.llm.openai_client import check_key_destinations

        given = [*(self.overrides or []), *([model.spec or "", model.base_url or ""] if model is not None else [])]
        check_key_destinations(models, named=urls_in(given), allowed=self.allow_key_to)


def urls_in(texts: list[str]) -> list[str]:
    """Every http(s) URL in ``texts`` (model strings, ``-c`` settings)."""
    return [url.rstrip("/") for text in texts for url in re.findall(r"https?://[^\s,'\"}\]]+", text)]


def _spec_layers(config: ConfigFile = None, overrides: Overrides = None, allow_import: AllowImport = None,
                 allow_key_to: AllowKeyTo = None) -> SpecLayers:
    return SpecLayers(config, overrides or [], allow_import or [], allow_key_to or [])


SPEC: OptionGroup[SpecLayers] = OptionGroup(_spec_layers)
"""``--config``, ``-c/--set``, ``--allow-import`` and ``--allow-key-to`` (``run``, ``evolve``)."""


@dataclass(frozen=True)
class Spending:
    """How far this invocation may go: token and dollar limits, and requests in flight per endpoint."""

    token_limit: int | None
    cost_limit: float | None
    max_connections: int | None


def _spending(token_limit: TokenLimit = None, cost_limit: CostLimit = None,
              max_connections: MaxConnections = None) -> Spending:
    return Spending(token_limit, cost_limit, max_connections)


SPENDING: OptionGroup[Spending] = OptionGroup(_spending)
"""``--token-limit``, ``--cost-limit`` and ``--max-connections`` (``run``, ``grid``)."""
