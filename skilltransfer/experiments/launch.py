"""What ``skilltransfer run`` does, as library functions: build the env, the model and the embedder from user
options, pick the stream, and run it with a progress display (`skilltransfer.experiments.progress`).

Env specs: a registered name (``apps``, ``office``, ``datasci``), real OfficeBench (``officebench[:<tasks folder>]``),
or ``module:Class`` for your own env class (importable from ``sys.path``; it needs ``tasks()`` and ``start(task)``,
see ``skilltransfer/envs/base.py``). The class gets ``seed``, ``sandboxed`` and ``workdir`` (when set) if its
constructor accepts them, plus any ``--env-arg key=value`` (values parsed as JSON when they parse, else kept as
strings; checked against the constructor's parameters and annotations by `check_env_args`).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import time
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError
from rich.console import Console

from skilltransfer.envs.registry import ENVS, OFFICEBENCH, OFFICEBENCH_CLASS, env_class, get_env, stream_order
from skilltransfer.errors import InputError, check_output_path
from skilltransfer.experiments.config import StreamConfig, parse_condition
from skilltransfer.experiments.progress import StreamProgress
from skilltransfer.experiments.runlog import RunFolder
from skilltransfer.experiments.stream import StreamSummary, run_stream
from skilltransfer.protocols import TaskSpec
from skilltransfer.util.imports import resolve

_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


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


@dataclass
class EnvOptions:
    """The env flags of ``skilltransfer run``."""

    spec: str
    seed: int = 0
    sandboxed: bool = True
    workdir: str | None = None
    args: list[str] = field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        """``--env-arg key=value`` pairs as constructor keyword arguments."""
        out: dict[str, Any] = {}
        for item in self.args:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip().isidentifier():
                raise InputError(f"--env-arg must be key=value with a Python identifier key, got {item!r}")
            try:
                out[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                out[key.strip()] = raw
        return out

    def label(self) -> str:
        """Short env label for the default run folder."""
        if self.spec.startswith(OFFICEBENCH):
            return OFFICEBENCH
        return self.spec.rpartition(":")[2] if ":" in self.spec else self.spec

    def record(self) -> str:
        """What ``config.json`` records: the spec, seed and env args."""
        extra = {"seed": self.seed, **self.kwargs()}
        return f"{self.spec} {json.dumps(extra, sort_keys=True)}"


def sanitise(text: str) -> str:
    """A file-name-safe form of a label (runs of unsafe characters become '_')."""
    return _SAFE.sub("_", text).strip("._") or "run"


def default_out(env: EnvOptions, condition: str, model: ModelOptions, runs_dir: str | Path = "runs", *,
                stream: str | None = None) -> Path:
    """``runs/<env>[-<stream>]-<condition>-<model>``, sanitised."""
    label = f"{env.label()}-{stream}" if stream else env.label()
    return Path(runs_dir) / sanitise(f"{label}-{condition.strip().lower()}-{model.label()}")


def make_env(options: EnvOptions) -> Any:
    """Instantiate the env named by ``options.spec`` (see the module docstring) from the ``run`` flags."""
    defaults: dict[str, Any] = {"seed": options.seed, "sandboxed": options.sandboxed}
    if options.workdir is not None:
        Path(options.workdir).mkdir(parents=True, exist_ok=True)
        defaults["workdir"] = Path(options.workdir)
    return build_env(options.spec, options.kwargs(), defaults)


def env_class_of(spec: str) -> Any:
    """The class (or factory) behind an env spec: a registry name, ``officebench[:path]`` or ``module:Class``.

    Raises:
        InputError: an unknown name, or a target that cannot be imported or called.
    """
    if spec in ENVS:
        return env_class(spec)
    officebench = spec == OFFICEBENCH or spec.startswith(OFFICEBENCH + ":")
    if ":" not in spec and not officebench:
        raise InputError(f"Unknown env {spec!r}. Available: {', '.join(ENVS)}, {OFFICEBENCH}[:<tasks folder>] "
                         "or module:Class")
    try:
        cls = resolve(OFFICEBENCH_CLASS if officebench else spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"env class {spec!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    try:
        inspect.signature(cls)
    except (TypeError, ValueError):
        raise InputError(f"env {spec!r} is not a class: give module:Class of an env class") from None
    return cls


def check_env_args(cls: Any, kwargs: dict[str, Any], spec: str) -> dict[str, Any]:
    """``kwargs`` checked against the constructor of ``cls``: names it takes, values of its annotated types.

    Values are validated (and coerced) as pydantic's lax mode does: ``"3"`` becomes 3 for an ``int`` parameter,
    ``"abc"`` is refused. Unannotated or ``Any`` parameters take anything.

    Raises:
        InputError: an argument the constructor does not take, or a value of the wrong type (both named).
    """
    signature = inspect.signature(cls)
    try:
        signature.bind_partial(**kwargs)
    except TypeError as exc:
        raise InputError(f"env {spec!r} refused its arguments: {exc}") from None
    try:
        hints = typing.get_type_hints(cls.__init__ if isinstance(cls, type) else cls)
    except Exception:  # noqa: BLE001 - annotations that do not resolve: the constructor judges the values
        hints = {}
    checked = dict(kwargs)
    for key, value in kwargs.items():
        if key not in hints or key not in signature.parameters:
            continue
        try:
            checked[key] = TypeAdapter(hints[key]).validate_python(value)
        except ValidationError as exc:
            raise InputError(f"env {spec!r}: argument {key}={json.dumps(value, default=str)}: "
                             f"{exc.errors()[0]['msg']}") from None
        except PydanticSchemaGenerationError:
            continue
    return checked


def build_env(spec: str, kwargs: dict[str, Any], defaults: dict[str, Any] | None = None) -> Any:
    """An env by registry name, ``officebench[:path]`` or ``module:Class`` (a plug-in env class).

    Args:
        spec: the env spec.
        kwargs: constructor arguments, always passed (checked by `check_env_args`).
        defaults: arguments (seed, sandboxed, workdir) passed to a plug-in class only if its constructor takes them;
            ``seed`` is not passed to the real OfficeBench source.

    Raises:
        InputError: unknown name, a class that cannot be imported, or constructor arguments it refuses.
    """
    defaults = dict(defaults or {})
    cls = env_class_of(spec)
    kwargs = check_env_args(cls, kwargs, spec)
    if spec in ENVS:
        return get_env(spec, **{**defaults, **kwargs})
    if spec == OFFICEBENCH or spec.startswith(OFFICEBENCH + ":"):
        defaults.pop("seed", None)
        return get_env(spec, **{**defaults, **kwargs})
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        defaults = {k: v for k, v in defaults.items() if k in params}
    try:
        env = cls(**{**defaults, **kwargs})
    except TypeError as exc:
        raise InputError(f"env {spec!r} refused its arguments: {exc}") from None
    if not callable(getattr(env, "tasks", None)) or not callable(getattr(env, "start", None)):
        raise InputError(f"env {spec!r} needs tasks() and start(task) methods")
    return env


def select_tasks(env: Any, *, order_seed: int = 0, limit: int | None = None, split: str | None = None,
                 stream: str | None = None) -> list[TaskSpec]:
    """The stream: ``env.tasks(split)`` in the order of ``order_seed`` (see ``stream_order``), cut to ``limit``.

    ``stream`` names one of the env's curated streams (``env.streams``: name -> task ids in order) instead: its tasks
    in the listed order (``order_seed`` 0) or reshuffled (another seed), then cut to ``limit``.
    """
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be >= 1, got {limit}")
    if stream is not None:
        ordered = named_stream(env, stream, split)
        if order_seed != 0:
            ordered = stream_order(ordered, order_seed)
        return ordered[:limit] if limit is not None else ordered
    tasks = list(env.tasks(split) if split else env.tasks())
    if not tasks:
        raise InputError(f"the env has no tasks{f' in split {split!r}' if split else ''}")
    ordered = stream_order(tasks, order_seed)
    return ordered[:limit] if limit is not None else ordered


def named_stream(env: Any, name: str, split: str | None = None) -> list[TaskSpec]:
    """The tasks of the env's curated stream ``name``, in its order.

    Raises:
        InputError: the env has no such stream (the choices are listed), or it names a task the env lacks.
    """
    streams: dict[str, tuple[str, ...]] = dict(getattr(env, "streams", {}) or {})
    if name not in streams:
        choices = ", ".join(streams) if streams else "none (this env defines no named streams)"
        raise InputError(f"unknown stream {name!r}; choose one of: {choices}")
    by_id = {task.id: task for task in (env.tasks(split) if split else env.tasks())}
    missing = [task_id for task_id in streams[name] if task_id not in by_id]
    if missing:
        raise InputError(f"stream {name!r} names tasks this env{f' split {split!r}' if split else ''} lacks: "
                         f"{', '.join(missing[:3])}")
    return [by_id[task_id] for task_id in streams[name]]


def single_thread_faiss() -> None:
    """Search the (small) skill memory on one thread: FAISS's OpenMP threads only compete with the model server for
    the cores (measured: ~27 ms per search on a busy 2-core machine, under 1 ms on one thread)."""
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss-cpu is a core dependency
        return
    faiss.omp_set_num_threads(1)


@dataclass
class LaunchResult:
    """What ``launch`` did: the stream summary, the stream's tasks and the wall time of this invocation."""

    summary: StreamSummary
    tasks: list[TaskSpec]
    wall_s: float


def launch(env: Any, model: Any, config: StreamConfig, tasks: Sequence[TaskSpec], *, embedder: Any = None,
           progress: bool = True, console: Console | None = None, heartbeat_s: float = 30.0) -> LaunchResult:
    """Run (or resume) a stream with a progress bar, closing the model and embedder afterwards.

    Args:
        env: the environment.
        model: the chat model (closed at the end when it has ``close()``).
        config: the stream settings.
        tasks: the stream, in order.
        embedder: the retrieval embedder (closed at the end when it has ``close()``).
        progress: draw the progress bar.
        console: where to draw (default stderr).
        heartbeat_s: without a terminal, least seconds between heartbeat lines while a task runs.
    """
    parse_condition(config.condition)
    single_thread_faiss()
    start = time.perf_counter()
    try:
        done = [r for r in RunFolder(config.path).read_records() if r.task_id in {t.id for t in tasks}]
        if progress:
            with StreamProgress(len(tasks), done, console, heartbeat_s=heartbeat_s) as bar:
                summary = run_stream(env, bar.watch(model), config, embedder=embedder, tasks=tasks, on_task=bar,
                                     on_event=bar.on_event)
        else:
            summary = run_stream(env, model, config, embedder=embedder, tasks=tasks)
    finally:
        for part in (model, embedder):
            close = getattr(part, "close", None)
            if close is not None:
                close()
    return LaunchResult(summary, list(tasks), time.perf_counter() - start)


@dataclass
class RunRequest:
    """Everything ``skilltransfer run`` was asked to do (see its ``--help`` for each field)."""

    env: EnvOptions
    model: ModelOptions
    condition: str
    out: Path | None = None
    embedder: str = "minilm"
    limit: int | None = None
    order_seed: int = 0
    split: str | None = None
    stream: str | None = None
    library: str | None = None
    library_filter: str | None = None
    induction_prompt: str = "full"
    max_steps: int | None = None
    max_subtasks: int | None = None
    top_k: int | None = None

    @property
    def folder(self) -> Path:
        """The run folder: ``out``, else ``runs/<env>[-<stream>]-<condition>-<model>``."""
        return self.out or default_out(self.env, self.condition, self.model, stream=self.stream)

    def stream_config(self) -> StreamConfig:
        """The validated stream settings.

        Raises:
            InputError: a bad condition, filter, prompt variant or budget (names the flag).
        """
        parse_condition(self.condition)
        if self.library_filter is not None and self.library_filter not in ("top", "bottom"):
            raise InputError(f"--library-filter must be top or bottom, got {self.library_filter!r}")
        if self.library_filter is not None and self.library is None:
            raise InputError("--library-filter needs --library")
        if self.induction_prompt not in ("full", "no_demo", "no_rules"):
            raise InputError(f"--induction-prompt must be full, no_demo or no_rules, got {self.induction_prompt!r}")
        for flag, value in (("--max-steps", self.max_steps), ("--max-subtasks", self.max_subtasks),
                            ("--top-k", self.top_k)):
            if value is not None and value < (0 if flag == "--top-k" else 1):
                raise InputError(f"{flag} must be >= {0 if flag == '--top-k' else 1}, got {value}")
        agent = {k: v for k, v in {"step_limit": self.max_steps, "subtask_limit": self.max_subtasks,
                                   "top_k": self.top_k}.items() if v is not None}
        folder = self.folder
        return StreamConfig.model_validate({
            "run": folder.name, "runs_dir": str(folder.parent), "condition": self.condition.strip().lower(),
            "agent": agent, "induction_variant": self.induction_prompt, "library": self.library,
            "library_filter": self.library_filter, "env": self.env.record(), "model": self.model.record(),
            "embedder": self.embedder})


def run_request(request: RunRequest, *, progress: bool = True, console: Console | None = None,
                heartbeat_s: float = 30.0) -> LaunchResult:
    """Build the env, stream, model and embedder of ``request`` and run (or resume) it (see `launch`)."""
    from skilltransfer.llm import make_model
    from skilltransfer.memory.embedders import make_embedder
    from skilltransfer.memory.library import load_library

    config = request.stream_config()
    check_output_path(request.folder, flag="--out")
    for name in ("config.json", "results.jsonl"):
        if (request.folder / name).exists() and not (request.folder / name).is_file():
            raise InputError("not a file, so --out is not a run folder; use another --out", path=request.folder / name)
    if request.env.workdir is not None:
        check_output_path(request.env.workdir, flag="--workdir")
    if request.library is not None:  # a bad library fails here, before the run folder is written
        load_library(request.library)
    env = make_env(request.env)
    tasks = select_tasks(env, order_seed=request.order_seed, limit=request.limit, split=request.split,
                         stream=request.stream)
    model = make_model(request.model.config())
    _, fmt = parse_condition(request.condition)
    embedder = None
    if fmt is not None or request.library is not None:
        embedder = make_embedder(request.embedder, cache=not request.embedder.startswith("hash"))
    console = console or Console(stderr=True)
    console.print(f"run {request.folder} | {len(tasks)} tasks | {config.condition} | model {config.model}",
                  highlight=False)
    return launch(env, model, config, tasks, embedder=embedder, progress=progress, console=console,
                  heartbeat_s=heartbeat_s)
