"""An env opened from its spec and its task stream chosen.

An env spec is a registered name (``apps``, ``office``, ``datasci``, ``scienceworld``), the name of an installed
plug-in (an entry point in the group ``skilltransfer.envs``), real OfficeBench (``officebench[:<tasks folder>]``), or
``module:Class`` for your own env class (importable from ``sys.path``; it needs ``tasks()`` and ``start(task)``, see
``skilltransfer/envs/base.py``). The class gets ``seed``, ``sandboxed`` and ``workdir`` (when set) if its constructor
accepts them, plus the ``args`` (checked against the constructor's parameters and annotations by `check_env_args`).
Its stream (`select_tasks`) is its tasks in the canonical order (`skilltransfer.envs.registry.stream_order`) or one
of its curated streams, cut to a limit, optionally picked by position.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

from skilltransfer.envs.registry import (
    ENVS,
    OFFICEBENCH,
    OFFICEBENCH_CLASS,
    check_env_shape,
    env_class,
    env_target,
    get_env,
    stream_order,
)
from skilltransfer.errors import InputError
from skilltransfer.protocols import Env, TaskSpec
from skilltransfer.util.imports import load_target

ENV_CHOICES = ("apps, office, datasci, scienceworld, officebench[:<tasks folder>], an installed plug-in's name, or "
               "module:Class")


def is_officebench(name: str) -> bool:
    """Whether an env spec names real OfficeBench (``officebench[:<tasks folder>]``)."""
    return name == OFFICEBENCH or name.startswith(OFFICEBENCH + ":")


def env_class_of(spec: str) -> Any:
    """The class (or factory) behind an env spec: a registry name, an installed plug-in's name,
    ``officebench[:path]`` or ``module:Class``; checked for its shape (a class with ``tasks`` and ``start``) before
    anything calls it.

    Raises:
        InputError: an unknown name, or a target that cannot be imported or called.
    """
    if spec in ENVS:
        return env_class(spec)
    plugin = not is_officebench(spec) and env_target(spec) is not None
    if ":" not in spec and not is_officebench(spec) and not plugin:
        raise InputError(f"unknown env {spec!r}; choose one of: {ENV_CHOICES}")
    if plugin:
        return env_class(spec)  # checked for its shape
    return check_env_shape(load_target(OFFICEBENCH_CLASS if is_officebench(spec) else spec, what="env class"), spec)


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
        hints = typing.get_type_hints(cls.__init__ if isinstance(cls, type) else cls)  # type: ignore[misc]
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


def open_env(name: str, args: dict[str, Any] | None = None, *, seed: int | None = None,
             sandboxed: bool | None = None, workdir: Path | None = None) -> Env:
    """The env named ``name`` (see the module docstring): its ``args`` always passed (checked, `check_env_args`);
    ``seed``, ``sandboxed`` and ``workdir`` when set and the constructor takes them (a registered env takes all
    three; real OfficeBench no ``seed``).

    Raises:
        InputError: unknown name, a class that cannot be imported, or constructor arguments it refuses.
    """
    cls = env_class_of(name)
    kwargs = check_env_args(cls, dict(args or {}), name)
    defaults = {k: v for k, v in {"seed": seed, "sandboxed": sandboxed, "workdir": workdir}.items()
                if v is not None}
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    if name in ENVS or is_officebench(name):
        if is_officebench(name):
            defaults.pop("seed", None)
        env: Env = get_env(name, **{**defaults, **kwargs})
        return env
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        defaults = {k: v for k, v in defaults.items() if k in params}
    try:
        env = cls(**{**defaults, **kwargs})
    except TypeError as exc:
        raise InputError(f"env {name!r} refused its arguments: {exc}") from None
    if not callable(getattr(env, "tasks", None)) or not callable(getattr(env, "start", None)):
        raise InputError(f"env {name!r} needs tasks() and start(task) methods")
    return env


# --------------------------------------------------------------------------------------------- tasks
def select_tasks(env: Env, *, order_seed: int = 0, limit: int | None = None, split: str | None = None,
                 stream: str | None = None, positions: Sequence[int] | None = None) -> list[TaskSpec]:
    """The stream: ``env.tasks(split)`` in the order of ``order_seed`` (see ``stream_order``), cut to ``limit``, then
    the tasks at ``positions`` when given (`pick_positions`).

    ``stream`` names one of the env's curated streams (``env.streams``: name -> task ids in order) instead: its tasks
    in the listed order (``order_seed`` 0) or reshuffled (another seed), then cut to ``limit``.

    Raises:
        InputError: a limit below 1, an env without tasks, see `named_stream` and `pick_positions`.
    """
    if limit is not None and limit < 1:
        raise InputError(f"the task limit must be >= 1, got {limit}")
    if stream is not None:
        ordered = named_stream(env, stream, split)
        if order_seed != 0:
            ordered = stream_order(ordered, order_seed)
    else:
        tasks = list(_tasks(env, split))
        if not tasks:
            raise InputError(f"the env has no tasks{f' in split {split!r}' if split else ''}")
        ordered = stream_order(tasks, order_seed)
    ordered = ordered[:limit] if limit is not None else ordered
    return pick_positions(ordered, positions) if positions is not None else ordered


def pick_positions(tasks: list[TaskSpec], positions: Sequence[int]) -> list[TaskSpec]:
    """The tasks at ``positions`` (0-based), in the order given.

    Raises:
        InputError: a position outside the stream, or a repeated one.
    """
    bad = [p for p in positions if not 0 <= p < len(tasks)]
    if bad:
        raise InputError(f"task_positions: position {bad[0]} is outside the stream's {len(tasks)} tasks (positions "
                         f"are 0-based: 0..{len(tasks) - 1})")
    if len(set(positions)) != len(positions):
        raise InputError("task_positions: a position is repeated")
    return [tasks[p] for p in positions]


def _tasks(env: Env, split: str | None) -> Any:
    return env.tasks(split) if split else env.tasks()  # type: ignore[call-arg]  # a split is an env's extension


def named_stream(env: Env, name: str, split: str | None = None) -> list[TaskSpec]:
    """The tasks of the env's curated stream ``name``, in its order.

    Raises:
        InputError: the env has no such stream (the choices are listed), or it names a task the env lacks.
    """
    streams: dict[str, tuple[str, ...]] = dict(getattr(env, "streams", {}) or {})
    if name not in streams:
        choices = ", ".join(streams) if streams else "none (this env defines no named streams)"
        raise InputError(f"unknown stream {name!r}; choose one of: {choices}")
    by_id = {task.id: task for task in _tasks(env, split)}
    missing = [task_id for task_id in streams[name] if task_id not in by_id]
    if missing:
        raise InputError(f"stream {name!r} names tasks this env{f' split {split!r}' if split else ''} lacks: "
                         f"{', '.join(missing[:3])}")
    return [by_id[task_id] for task_id in streams[name]]
