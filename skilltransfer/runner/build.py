"""Building a stream's parts from its `StreamConfig`: the env and its task stream (`open_stream`, through
`skilltransfer.envs.opening`, which says what an env spec may name), its frozen library, and the embedder.

Importing a module runs its code, so the CLI imports a ``module:Class`` named in a spec file or a ``-c`` only when
the user allowed that module on the command line (``--allow-import MODULE``; `check_env_name` with
``allowed_imports``); Python callers (``allowed_imports=None``) are trusted code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from skilltransfer.envs.opening import env_class_of, is_officebench, open_env, select_tasks
from skilltransfer.envs.registry import ENVS, PLUGIN_GROUP, env_target
from skilltransfer.errors import InputError
from skilltransfer.log import memory_folder
from skilltransfer.memory.embedders import EmbedderWrapper
from skilltransfer.memory.library import MANIFEST, SKILL_FILE, SKILLS_JSONL, LibraryRead, read_jsonl, read_library
from skilltransfer.memory.package import DEFAULT_RESOURCE_BYTES
from skilltransfer.memory.snapshots import snapshot_library
from skilltransfer.protocols import Embedder, Env, TaskSpec
from skilltransfer.settings.config import EnvSpec, StreamConfig
from skilltransfer.skill import Skill

ALLOW_IMPORT = "--allow-import"
"""The flag that lets a spec file or ``-c`` name a ``module:Class`` env or model of that module (``grid``, ``run``)."""


# --------------------------------------------------------------------------------------------- envs
def imported_module(spec: str) -> str | None:
    """The module an env spec makes the harness import of its own choosing: ``module`` of ``module:Class``; None for
    a registered env, an installed plug-in or ``officebench[:path]`` (their code is the toolkit's or the user's)."""
    if spec in ENVS or is_officebench(spec) or ":" not in spec or env_target(spec) is not None:
        return None
    return spec.partition(":")[0].strip() or None  # no module: nothing to import


def import_allowed(module: str, allowed: Collection[str]) -> bool:
    """Whether ``--allow-import`` items ``allowed`` cover ``module``: the module itself or a package above it (an item
    given as ``module:Class`` counts as its module)."""
    names = {item.partition(":")[0].strip() for item in allowed}
    return any(module == name or module.startswith(name + ".") for name in names if name)


def check_env_name(name: str, where: str, allowed_imports: Collection[str] | None = None) -> None:
    """Refuse an env spec that names no env (``where`` names the spec key), without building the env.

    Args:
        allowed_imports: the modules the user allowed on the command line (``--allow-import``): a ``module:Class``
            of any other module is refused before it is imported. None: the caller is trusted code (the Python API),
            any importable module may be named.

    Raises:
        InputError: an unknown name, a module not allowed, or a plug-in class that cannot be imported.
    """
    if name in ENVS or is_officebench(name):
        return
    _check_import("env", name, imported_module(name), where, allowed_imports, env_class_of,
                  instead=f"install the env as a plug-in (an entry point in {PLUGIN_GROUP}) and name it")


def check_model_name(name: str | None, where: str, allowed_imports: Collection[str] | None = None) -> None:
    """Refuse a model entry's ``name`` that is a ``module:Class`` of a module the user did not allow, as
    `check_env_name` does for envs (importing a module runs its code); an allowed one is imported and checked to be a
    chat-model class (`skilltransfer.llm.model_class`). Registry names pass (checked when the spec is read).

    Raises:
        InputError: naming ``where``, the module and ``--allow-import``; or a class that cannot be used.
    """
    if name is None or ":" not in name:
        return
    from skilltransfer.llm import model_class

    _check_import("model", name, name.partition(":")[0].strip(), where, allowed_imports, model_class,
                  instead=f"give it on the command line (--model {name})")


def _check_import(what: str, name: str, module: str | None, where: str, allowed_imports: Collection[str] | None,
                  load: Callable[[str], Any], *, instead: str) -> None:
    """Refuse ``name`` (an env or model spec naming ``module``) unless the user allowed ``module``, then ``load`` it
    (an `InputError` of its own is prefixed with ``where``)."""
    if module is not None and allowed_imports is not None and not import_allowed(module, allowed_imports):
        raise InputError(f"field {where!r}: {what} {name!r} would import module {module!r}, which runs its code; a "
                         f"spec file or -c never imports a module you did not name: allow it with {ALLOW_IMPORT} "
                         f"{module}, or {instead}")
    try:
        load(name)
    except InputError as exc:
        raise InputError(f"field {where!r}: {exc}") from None


def build_env(spec: EnvSpec, workdir: Path | None = None) -> Env:
    """The env of ``spec`` (`skilltransfer.envs.opening.open_env`: its ``args`` checked; ``seed``, ``sandboxed`` and
    ``workdir`` when set and the constructor takes them).

    Raises:
        InputError: unknown name, a class that cannot be imported, or constructor arguments it refuses.
    """
    return open_env(spec.name, dict(spec.args), seed=spec.seed, sandboxed=spec.sandboxed, workdir=workdir)


def open_stream(config: StreamConfig, workdir: Path | None = None) -> tuple[Env, list[TaskSpec]]:
    """A stream's env (`build_env`, in ``workdir``) and its tasks as its config selects them
    (`skilltransfer.envs.opening.select_tasks`; an evolution stream lists its three splits,
    `StreamConfig.stream_length`; ``task_positions`` picks some of them).

    Raises:
        InputError: see `build_env` and `select_tasks`; a position past the stream.
    """
    env = build_env(config.env, workdir)
    return env, select_tasks(env, order_seed=config.order_seed, limit=config.stream_length, split=config.env.split,
                             stream=config.env.stream, positions=config.task_positions)


def parse_positions(text: str) -> list[int]:
    """``run --only-tasks N[,M|A-B]...`` (1-based task numbers, ``A-B`` inclusive) as 0-based stream positions.

    Raises:
        InputError: naming ``--only-tasks`` and the bad item.
    """
    out: list[int] = []
    for item in text.split(","):
        start, dash, end = item.strip().partition("-")
        try:
            first = int(start)
            last = int(end) if dash else first
        except ValueError:
            raise InputError(f"--only-tasks: {item.strip()!r} is not N or A-B (1-based task numbers, e.g. 1,4,6-8)"
                             ) from None
        if first < 1 or last < first:
            raise InputError(f"--only-tasks: {item.strip()!r} is not a range of task numbers >= 1 (A-B with A <= B)")
        out += range(first - 1, last)
    if len(set(out)) != len(out):
        raise InputError(f"--only-tasks: {text!r} names a task twice")
    return out


# --------------------------------------------------------------------------------------------- libraries
def saved_memory_size(path: str | Path) -> int | None:
    """How many skills a run's saved memory folder holds (None: not a saved memory folder)."""
    folder = Path(path)
    if not (folder / MANIFEST).is_file() or not (folder / SKILLS_JSONL).is_file():
        return None
    return len(read_jsonl(SKILLS_JSONL, root=folder))


def read_frozen_library(library: str | Path, *, resource_bytes: int = DEFAULT_RESOURCE_BYTES,
                        lenient: bool = False) -> LibraryRead:
    """A frozen library as read (`read_library`): the skills that could be read, each one that could not named in
    `LibraryRead.unreadable` (``run`` and ``grid`` print them at start). A run's saved memory that holds none gives
    none: the stream it comes from induced nothing, a result the reading stream runs with (no skills); any other
    empty library is refused.

    Raises:
        InputError: see `read_library`.
    """
    if saved_memory_size(library) == 0:
        return LibraryRead(Path(library), [])
    return read_library(library, resource_bytes=resource_bytes, lenient=lenient)


def external_library(config: StreamConfig) -> bool:
    """Whether the stream's library is an external one: a SKILL.md folder or file, or a .jsonl; not a run's saved
    memory (``manifest.json``) nor a ``library_snapshot`` of a run. Only an external library is disclosed
    progressively by default (`skilltransfer.agents.disclosure`): induced skills are shown as the paper shows them."""
    if config.library is None or config.library_snapshot is not None:
        return False
    return not (Path(config.library) / MANIFEST).is_file()


def agent_library_name(library: str | Path) -> str:
    """A library's name as the agent is told it: its folder or file name (a SKILL.md file: its folder's)."""
    path = Path(library)
    if path.name == SKILL_FILE:
        path = path.parent
    return path.resolve().name if path.name in ("", ".", "..") else path.name


def library_skills(library: str | Path, *, resource_bytes: int = DEFAULT_RESOURCE_BYTES,
                   lenient: bool = False) -> list[Skill]:
    """The skills of a frozen library (`read_frozen_library`).

    Raises:
        InputError: see `read_library`.
    """
    return read_frozen_library(library, resource_bytes=resource_bytes, lenient=lenient).skills


def stream_library_read(config: StreamConfig) -> LibraryRead | None:
    """A stream's frozen library as read (`read_frozen_library`, with its ``library_resource_bytes``), or its
    ``library_snapshot`` (`snapshot_library`); None without a library.

    Raises:
        InputError: see `read_library` and `snapshot_library`.
    """
    if config.library is None:
        return None
    if config.library_snapshot is not None:
        snapshot = snapshot_library(memory_folder(config.library), config.library_snapshot)
        return LibraryRead(Path(config.library), snapshot)
    return read_frozen_library(config.library, resource_bytes=config.library_resource_bytes,
                               lenient=config.library_lenient)


def stream_library(config: StreamConfig) -> list[Skill] | None:
    """The skills of a stream's frozen library (`stream_library_read`); None without a library.

    Raises:
        InputError: see `read_library` and `snapshot_library`.
    """
    read = stream_library_read(config)
    return None if read is None else read.skills


# --------------------------------------------------------------------------------------------- embedder
def build_embedder(config: StreamConfig) -> Embedder:
    """The stream's retrieval embedder (``embedder``, with the disk cache when ``embedder_cache``)."""
    from skilltransfer.memory.embedders import make_embedder

    return make_embedder(config.embedder, cache=config.embedder_cache)


class LockedEmbedder(EmbedderWrapper):
    """An embedder shared by threads: one ``embed`` at a time (tokenizers are not re-entrant)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        with self._lock:
            return self.inner.embed(texts)


def single_thread_faiss() -> None:
    """Search the (small) skill memory on one thread: FAISS's OpenMP threads only compete with the model server for
    the cores (measured: ~27 ms per search on a busy 2-core machine, under 1 ms on one thread)."""
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss-cpu is a core dependency
        return
    faiss.omp_set_num_threads(1)
