"""``skilltransfer serve``: run the embedded llama.cpp model server in the foreground."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from skilltransfer.commands.options import context_window_option, warn_deprecated
from skilltransfer.errors import InputError
from skilltransfer.llm.local import LocalServer
from skilltransfer.util.terminal import echo


def serve_model(model_path: Path | None = None, port: int = 0, ctx: int = 8192, threads: int | None = None,
                *, ram_cache: bool = True, block: bool = True) -> LocalServer:
    """Start the embedded server; with ``block`` keep it running until interrupted, then stop it.

    Returns:
        The started (``block=False``) or stopped (``block=True``) server.
    """
    server = LocalServer(model_path, port=port, ctx=ctx, threads=threads, ram_cache=ram_cache).start()
    echo(f"serving {server.alias} at {server.url} (OPENAI_BASE_URL={server.url}; log: {server.log_path})")
    if not block:
        return server
    process, interrupted = server.process, False
    try:
        while process is not None and process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        server.stop()
    if not interrupted and process is not None and process.returncode not in (0, None):
        raise InputError(f"llama.cpp server stopped with code {process.returncode}: see {server.log_path}: "
                         f"{server.log_tail()}")
    return server


def serve(
    model_path: Annotated[Path | None, typer.Option("--model-path", help="A GGUF file (default: the bundled "
                                                    "Qwen2.5-Coder-1.5B-Instruct Q4_K_M, assembled on first use).")
                          ] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")] = 0,
    ctx: Annotated[int, context_window_option("The model's context window in tokens: the server's context size "
                                              "(reduced if it does not fit in memory).", min=512)] = 8192,
    ctx_old: Annotated[int | None, typer.Option("--ctx", hidden=True, help="Deprecated: --context-window.")] = None,
    threads: Annotated[int | None, typer.Option("--threads", min=1, help="CPU threads (default: all cores).",
                                                rich_help_panel="Advanced")] = None,
    ram_cache: Annotated[bool, typer.Option("--ram-cache/--no-ram-cache", help="Keep the last prompts' KV states "
                                            "in RAM so interleaved conversations resume from their own prefix.",
                                            rich_help_panel="Advanced")] = True,
) -> None:
    """Start the embedded local model server (OpenAI-compatible) and keep it in the foreground."""
    if ctx_old is not None:
        warn_deprecated("--ctx", "--context-window")
        ctx = ctx_old
    serve_model(model_path, port, ctx, threads, ram_cache=ram_cache)
