"""Environments by name, the real OfficeBench source, and the canonical task-stream order.

Names map to dotted class paths, imported only when asked for, so an env that fails to import does not break the
others. Installed plug-ins add names: an entry point in the group ``skilltransfer.envs`` (`PLUGIN_GROUP`, e.g.
``myenv = mypkg.envs:MyEnv`` in the package's ``[project.entry-points."skilltransfer.envs"]``) is an env of that
name (`plugin_envs`; a registered name wins over a plug-in of the same name). ``officebench:<tasks folder>`` (or
``officebench`` alone, using ``$OFFICEBENCH_ROOT``: the ``tasks`` folder of a clone of
https://github.com/zlwang-cs/OfficeBench) selects the real OfficeBench tasks, run by the office env.
"""

from __future__ import annotations

import inspect
import os
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.protocols import TaskSpec
from skilltransfer.util.imports import resolve

ENVS: dict[str, str] = {
    "apps": "skilltransfer.envs.apps:AppsEnv",
    "office": "skilltransfer.envs.office:OfficeEnv",
    "datasci": "skilltransfer.envs.datasci:DataSciEnv",
    "scienceworld": "skilltransfer.envs.scienceworld:ScienceWorldEnv",
}
"""Env name -> ``"module:Class"``."""

PLUGIN_GROUP = "skilltransfer.envs"
"""The entry-point group of installed env plug-ins (name -> ``module:Class``)."""

OFFICEBENCH = "officebench"
OFFICEBENCH_CLASS = "skilltransfer.envs.office:OfficeEnv"
OFFICEBENCH_ENV_VAR = "OFFICEBENCH_ROOT"
OFFICEBENCH_REPO = "https://github.com/zlwang-cs/OfficeBench"
"""Where the real OfficeBench tasks come from: ``git clone`` it and point ``$OFFICEBENCH_ROOT`` at its ``tasks``."""

CANONICAL_ORDER_SEED = 0
"""The stream order every reported result uses unless an experiment asks for another ``order_seed``."""


def officebench_root() -> Path | None:
    """The real OfficeBench tasks folder: ``$OFFICEBENCH_ROOT`` if set, else None (no folder beside the working
    directory is guessed at)."""
    configured = os.environ.get(OFFICEBENCH_ENV_VAR)
    return Path(configured).expanduser() if configured else None


def _officebench_source(name: str) -> str:
    _, _, raw = name.partition(":")
    if raw:
        path = Path(raw).expanduser()
    else:
        found = officebench_root()
        if found is None:
            raise InputError(f"env 'officebench' needs the OfficeBench tasks folder: git clone {OFFICEBENCH_REPO} "
                             f"and set ${OFFICEBENCH_ENV_VAR} to its tasks folder, or use 'officebench:<tasks folder>'")
        path = found
    if not path.is_dir():
        raise InputError("OfficeBench tasks folder does not exist", path=path)
    return f"{OFFICEBENCH}:{path}"


def plugin_envs() -> dict[str, str]:
    """The installed env plug-ins: entry-point name -> ``module:Class``, sorted by name (names the registry or
    OfficeBench already use, and names holding ``:``, are left out: a plug-in never shadows a bundled env)."""
    try:
        points = metadata.entry_points(group=PLUGIN_GROUP)
    except Exception:  # noqa: BLE001 - broken package metadata must not break the bundled envs
        return {}
    return {point.name: point.value for point in sorted(points, key=lambda p: p.name)
            if point.name not in ENVS and point.name != OFFICEBENCH and ":" not in point.name}


def env_target(name: str) -> str | None:
    """The ``module:Class`` behind a registered or installed (plug-in) env name; None for any other name (a name
    holding ``:`` is never a plug-in's, so the installed packages' entry points are not read for it)."""
    if name in ENVS or ":" in name:
        return ENVS.get(name)
    return plugin_envs().get(name)


def env_class(name: str) -> type:
    """The class registered under ``name``, or the class of the installed plug-in of that name.

    Raises:
        InputError: unknown name, or the env's module cannot be imported (the reason is given).
    """
    target = env_target(name)
    if target is None:
        raise InputError(f"Unknown env {name!r}. Available: {', '.join([*ENVS, *plugin_envs()])}")
    try:
        if name in ENVS:
            return resolve(target)
        loaded = metadata.EntryPoint(name=name, value=target, group=PLUGIN_GROUP).load()
    except (ImportError, AttributeError, ValueError) as exc:
        plugin = "" if name in ENVS else f"plug-in, entry point in {PLUGIN_GROUP}: "
        raise InputError(f"env {name!r} ({plugin}{target}) is not available: {type(exc).__name__}: {exc}") from exc
    return check_env_shape(loaded, name)


def check_env_shape(cls: Any, spec: str) -> Any:
    """``cls`` if it is an env class: a class with ``tasks()`` and ``start(task)`` whose constructor can be read. Shape
    first, call later: a spec naming a function (``os:system``) must never be called with its args.

    Raises:
        InputError: anything else (``spec`` named).
    """
    if not inspect.isclass(cls) or not all(callable(inspect.getattr_static(cls, name, None))
                                           for name in ("tasks", "start")):
        raise InputError(f"env {spec!r} is not a class with tasks() and start(task) methods (an env class); "
                         "give a registered env name or module:Class of an env class")
    try:
        inspect.signature(cls)
    except (TypeError, ValueError):
        raise InputError(f"env {spec!r} is not a class: give module:Class of an env class") from None
    return cls


def get_env(name: str, **kwargs: Any) -> Any:
    """Instantiate an env by name (``apps``, ``office``, ``datasci``, an installed plug-in) or real OfficeBench
    (``officebench[:<path>]``).

    Args:
        name: a registered or plug-in name, or an OfficeBench source.
        **kwargs: passed to the env's constructor (``seed``, ``workdir``, ``sandboxed``, ``limits``, ...; a plug-in
            gets those its constructor takes).
    """
    if name == OFFICEBENCH or name.startswith(OFFICEBENCH + ":"):
        source = _officebench_source(name)
        try:
            cls = resolve(OFFICEBENCH_CLASS)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"env 'officebench' ({OFFICEBENCH_CLASS}) is not available: {exc}") from exc
        return cls(source=source, **kwargs)
    cls = env_class(name)
    if name not in ENVS:
        params = inspect.signature(cls).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            kwargs = {k: v for k, v in kwargs.items() if k in params}
    return cls(**kwargs)


def official_metric(name: str) -> str:
    """The official score of env ``name`` (a registry name or ``officebench[:<path>]``): its class's
    ``official_metric`` (``success`` or ``reward``; an installed plug-in's too); ``success`` for a ``module:Class``
    (a report never imports a module a run log names), a class that declares none or one that cannot be imported."""
    officebench = name == OFFICEBENCH or name.startswith(OFFICEBENCH + ":")
    if not officebench and (":" in name or env_target(name) is None):
        return "success"
    try:
        declared = getattr(resolve(OFFICEBENCH_CLASS) if officebench else env_class(name), "official_metric",
                           "success")
    except Exception:  # noqa: BLE001 - a plug-in that fails to import must not break a report
        return "success"
    return declared if declared in ("success", "reward") else "success"


def stream_order(tasks: Iterable[TaskSpec], order_seed: int = CANONICAL_ORDER_SEED) -> list[TaskSpec]:
    """The order in which a skill-transfer run sees ``tasks``.

    Tasks are first sorted by id (so the result does not depend on how they were listed), then shuffled with
    ``random.Random(order_seed)``. Seed 0 is the canonical order; other seeds give alternative orders for
    order-sensitivity studies. Deterministic across runs and platforms.
    """
    ordered = sorted(tasks, key=lambda task: task.id)
    ids = [task.id for task in ordered]
    if len(set(ids)) != len(ids):
        duplicate = next(task_id for task_id, count in Counter(ids).items() if count > 1)
        raise InputError(f"task ids must be unique; {duplicate!r} appears more than once")
    random.Random(order_seed).shuffle(ordered)
    return ordered


@dataclass
class EnvSummary:
    """What ``envs list`` shows for one env."""

    name: str
    target: str
    available: bool
    reason: str = ""
    by_split: dict[str, int] = field(default_factory=dict)
    by_difficulty: dict[int, int] = field(default_factory=dict)
    streams: dict[str, int] = field(default_factory=dict)
    """Curated streams (``env.streams``): name -> number of tasks."""

    @property
    def total(self) -> int:
        return sum(self.by_split.values())


def summarize(name: str, **kwargs: Any) -> EnvSummary:
    """Task counts of an env by split and difficulty, or why it is unavailable (never raises for a broken env)."""
    target = env_target(name) or OFFICEBENCH_CLASS
    try:
        env = get_env(name, **kwargs)
        tasks = list(env.tasks())
    except Exception as exc:  # noqa: BLE001 - an env under construction must not break the listing
        reason = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        return EnvSummary(name, target, available=False, reason=reason.splitlines()[0] if reason else "")
    return EnvSummary(name, target, available=True,
                      by_split=dict(sorted(Counter(task.split for task in tasks).items())),
                      by_difficulty=dict(sorted(Counter(task.difficulty for task in tasks).items())),
                      streams={k: len(v) for k, v in (getattr(env, "streams", None) or {}).items()})
