"""What ``skilltransfer run`` does, as library functions: its spec is a one-stream grid spec (the ``--config`` YAML,
``-c`` overrides and the flags, layered as for ``grid``), expanded by the grid's planner (`plan.one_stream`), built
and run by the grid's code (`build`, `stream.run_stream`), with a progress display (`progress`)."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError, check_output_path
from skilltransfer.llm import make_model
from skilltransfer.llm.openai_client import EndpointProbe, served_model
from skilltransfer.log import CONFIG, RESULTS, TRAJECTORIES, RunFolder
from skilltransfer.protocols import ChatModel, Embedder, Env, TaskSpec
from skilltransfer.runner.budget import Budget
from skilltransfer.runner.build import build_embedder, open_stream, single_thread_faiss
from skilltransfer.runner.guard import GuardedEnv
from skilltransfer.runner.plan import one_stream
from skilltransfer.runner.progress import StreamProgress
from skilltransfer.runner.spec import load_run_spec
from skilltransfer.runner.stream import StreamSummary, parallel_width, run_stream
from skilltransfer.runner.stream_build import StreamInputs, prepare_stream, retrieval_note
from skilltransfer.settings.config import StreamConfig
from skilltransfer.settings.recorded import check_settings
from skilltransfer.util.terminal import Console

RUN_DEFAULTS: dict[str, Any] = {"env": {"sandboxed": True}}
"""``run``'s own defaults, below the ``--config`` YAML: agent code runs in the sandbox unless ``--no-sandbox``."""
_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def sanitise(text: str) -> str:
    """A file-name-safe form of a label (runs of unsafe characters become '_')."""
    return _SAFE.sub("_", text).strip("._") or "run"


def default_folder(config: StreamConfig, runs_dir: str | Path = "runs") -> Path:
    """``runs/<env>[-<stream>]-<condition>[-<coordination>]-<model>``, sanitised (model: its id if given, else the
    registry name)."""
    env = config.env.display_label + (f"-{config.env.stream}" if config.env.stream else "")
    condition = config.condition + (f"-{config.coordination}" if config.coordination != "none" else "")
    return Path(runs_dir) / sanitise(f"{env}-{condition}-{config.model.display_label}")


def run_spec(config_file: Path | None = None, overrides: Sequence[str] = (), flags: dict[str, Any] | None = None,
             out: Path | None = None, allowed_imports: Collection[str] | None = None) -> StreamConfig:
    """The stream ``run`` runs: `RUN_DEFAULTS`, the ``--config`` YAML, the ``-c`` overrides, then the flags (key path ->
    value; None: not given), logging to ``out``, else the spec's ``out``, else `default_folder`. Embeddings are
    cached on disk unless the spec says ``embedder_cache: false`` or the embedder is the hash test double.
    ``allowed_imports``: the modules a ``module:Class`` env or model may import (`load_spec`; None: any); a
    ``model.name`` flag (``--model module:Class``) adds its own module.

    Raises:
        InputError: a bad file, key or value; a spec with several streams.
    """
    typed = (flags or {}).get("model.name")  # --model module:Class typed on the command line allows its module
    if allowed_imports is not None and isinstance(typed, str) and ":" in typed:
        allowed_imports = [*allowed_imports, typed.partition(":")[0]]
    grid = load_run_spec(config_file, list(overrides), dict(flags or {}), base=RUN_DEFAULTS,
                         allowed_imports=allowed_imports)
    phase = grid.phases[0]
    config = one_stream(grid, Path("runs/run"))
    if "embedder_cache" not in phase.model_fields_set:
        config = config.model_copy(update={"embedder_cache": not config.embedder.startswith("hash")})
    folder = out or (Path(grid.out) if grid.out else default_folder(config))
    return config.model_copy(update={"run": folder.name, "runs_dir": str(folder.parent)})


@dataclass
class LaunchResult:
    """What ``launch`` did: the stream summary, the stream's tasks and the wall time of this invocation."""

    summary: StreamSummary
    tasks: list[TaskSpec]
    wall_s: float


def launch(env: Env, model: ChatModel, config: StreamConfig, tasks: Sequence[TaskSpec], *,
           embedder: Embedder | None = None, progress: bool = True, console: Console | None = None,
           heartbeat_s: float = 30.0, inputs: StreamInputs | None = None,
           budget: Budget | None = None) -> LaunchResult:
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
        inputs: the stream's library and organisation, loaded by `prepare_stream` (None: loaded by the stream).
        budget: a spending limit: once reached no new task starts (``summary.stopped`` says why).
    """
    single_thread_faiss()
    start = time.perf_counter()
    width = parallel_width(config)
    if width > 1:  # independent tasks run side by side: in-process episodes act one at a time
        env = GuardedEnv(env)
    try:
        ids = {t.id for t in tasks}
        done = [r for r in RunFolder(config.path).read_records() if r.task_id in ids]
        with StreamProgress(len(tasks), done, console, heartbeat_s=heartbeat_s) if progress else nullcontext() as bar:
            summary = run_stream(env, bar.watch(model) if bar else model, config, embedder=embedder, tasks=tasks,
                                 on_task=bar, on_event=bar.on_event if bar else None, inputs=inputs, budget=budget,
                                 parallel_tasks=width)
    finally:
        for part in (model, embedder):
            close = getattr(part, "close", None)
            if close is not None:
                close()
    return LaunchResult(summary, list(tasks), time.perf_counter() - start)


def checked_endpoint(config: StreamConfig) -> tuple[StreamConfig, EndpointProbe | None]:
    """The stream's endpoint checked (`check_endpoint`: one ``GET /models``, the run's only one) and the stream with
    the model id it serves filled in when none is given (`served_model`); the answer, for `make_model`.

    Raises:
        InputError: the endpoint does not answer, refuses the key, or serves no single model when one is needed.
    """
    model, probe = served_model(config.model)
    return config.model_copy(update={"model": model}), probe


def run_config(config: StreamConfig, *, workdir: Path | None = None, progress: bool = True,
               console: Console | None = None, heartbeat_s: float = 30.0,
               budget: Budget | None = None) -> LaunchResult:
    """Build the env, stream, model and embedder of ``config`` and run (or resume) it (see `launch`).

    Raises:
        InputError: an unusable run folder or work folder, a bad library, env or model setting (before anything is
            written).
    """
    folder = config.path
    if config.evolution is not None or config.organize:
        raise InputError("evolution and organize run as grid streams (or with skilltransfer evolve / library "
                         "organize), not with run")
    config, probe = checked_endpoint(config)  # a dead endpoint or a missing key: one line in seconds
    check_settings(RunFolder(folder), config)  # a rerun with other settings is refused before anything is built
    check_output_path(folder, flag="--out")
    for name in (CONFIG, RESULTS):
        if (folder / name).exists() and not (folder / name).is_file():
            raise InputError("not a file, so --out is not a run folder; use another --out", path=folder / name)
    if workdir is not None:
        check_output_path(workdir, flag="--workdir")
    inputs = prepare_stream(config)  # a bad library fails here, before the run folder is written; loaded once
    if budget is not None and budget.cost_limit is not None and config.model.price is None:
        raise InputError("--cost-limit needs the model's price: -c 'model.price={input: 2.5, output: 10}' (dollars "
                         "per million input/output tokens)")
    env, tasks = open_stream(config, workdir)
    model = make_model(config.model, probe=probe)
    embedder = build_embedder(config) if config.has_memory else None
    console = console or Console(stderr=True)
    console.print(f"run {folder} | {len(tasks)} tasks | {config.condition_label()} | model {config.model.describe()}"
                  f" | harness {config.harness_label()} ({len(config.agent.guards or ())} features on)",
                  highlight=False, markup=False)  # a label's [tag] is not rich markup
    for note in inputs.library_notes:  # skills not read, files the agent is not shown: said, never recorded
        console.print(f"library: {note}", highlight=False, markup=False, soft_wrap=True)
    retrieval = retrieval_note(config, inputs)
    if retrieval is not None:
        console.print(f"retrieval: {retrieval}", highlight=False, markup=False, soft_wrap=True)
    existed = folder.exists()
    try:
        return launch(env, model, config, tasks, embedder=embedder, progress=progress, console=console,
                      heartbeat_s=heartbeat_s, inputs=inputs, budget=budget)
    except BaseException:
        if not existed and not any((folder / TRAJECTORIES).glob("*")):  # a start that began no task leaves nothing
            shutil.rmtree(folder, ignore_errors=True)
        raise
