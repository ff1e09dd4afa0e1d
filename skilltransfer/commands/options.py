"""The CLI's one vocabulary: each option name has one meaning, one short form and one kind in every command.

`VOCABULARY` says what each shared name means: the help of every use starts with its phrase (a test walks every
command and checks it, with the short forms and kinds). `DEPRECATED` maps old spellings, kept as hidden options
that warn, to the names that replaced them. The options several commands share are defined here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from skilltransfer.util.terminal import echo

MODEL_PANEL = "Model"


@dataclass(frozen=True)
class Term:
    """One option name's meaning: ``phrase`` starts the help of every use; ``short`` is its one short form."""

    phrase: str
    short: str | None = None


VOCABULARY: dict[str, Term] = {
    "--out": Term("Output", "-o"),
    "--limit": Term("Only the first N", "-n"),
    "--progress": Term("Show progress"),
    "--config": Term("A YAML file of spec keys"),
    "--set": Term("Override a spec key", "-c"),
    "--allow-import": Term("Let a spec file or -c name a module:Class env of this module"),
    "--allow-key-to": Term("Let an endpoint on this host that a spec file names receive your"),
    "--seed": Term("Seed of this command's random draws"),
    "--env-seed": Term("Env generation seed"),
    "--order-seed": Term("Stream order seed"),
    "--model": Term("The model", "-m"),
    "--base-url": Term("OpenAI-compatible endpoint"),
    "--api-key": Term("API key"),
    "--temperature": Term("Sampling temperature"),
    "--max-tokens": Term("Most completion tokens per call"),
    "--context-window": Term("The model's context window in tokens"),
    "--cache": Term("SQLite response cache"),
    "--cache-mode": Term("Response cache mode"),
    "--retry-budget": Term("Seconds a model call keeps retrying"),
    "--embed-cache": Term("Cache embeddings on disk"),
    "--embedder": Term("Embedder"),
    "--format": Term("Format"),
    "--env": Term("Env:"),
    "--condition": Term("Condition:"),
    "--library": Term("Frozen skill library"),
    "--reuse": Term("Skill reuse"),
    "--sandbox": Term("Run agent code in the sandbox"),
    "--workdir": Term("Where episode workspaces are created"),
    "--split": Term("Only tasks of this split"),
    "--stream": Term("A curated stream of the env"),
    "--json": Term("Print as JSON"),
    "--max-chars": Term("Cut"),
    "--retries": Term("Re-asks after an unusable reply"),
    "--task": Term("A task: its number in the stream (1-based) or its id"),
    "--port": Term("Port"),
    "--max-connections": Term("Most requests in flight per endpoint"),
    "--token-limit": Term("Stop starting tasks once this invocation's tasks used"),
    "--cost-limit": Term("Stop starting tasks once this invocation's tasks cost"),
    "--top-k": Term("Skills retrieved per query"),
    "--skill": Term("A skill of the library"),
    "--tasks": Term("Task instructions"),
    "--field": Term("Task text field"),
    "--price": Term("The model's price"),
    "--lenient": Term("Also read model-written SKILL.md files the format refuses"),
}
"""Option name -> its meaning, for every name more than one command uses (and those that had two meanings)."""

DEPRECATED: dict[str, str] = {
    "--task-limit": "--limit",
    "--quiet": "--no-progress",
    "-q": "--no-progress",
    "--model-name": "--model <id>@<url> (or openai/<id>, local:<file.gguf>)",
    "--script": "--model scripted:<file>",
    "--no-cache": "--no-embed-cache",
    "--ctx": "--context-window",
    "--mode": "--reuse",
    "--seeds": "--seed-units",
}
"""Old spelling -> what replaced it. Old spellings still work as hidden options that print a warning, except where
the old name now has another meaning (``run --seed``, ``report --cache``, ``grid --config key=value``: see
`DEPRECATED_MEANINGS`)."""

DEPRECATED_MEANINGS: dict[tuple[str, str], str] = {
    ("run", "--seed"): "--env-seed",
    ("envs list", "--seed"): "--env-seed",
    ("envs show", "--seed"): "--env-seed",
    ("grid", "--config"): "-c/--set (for key=value); --config now takes a YAML file",
    ("report", "--cache"): "the embedding cache is on by default (--no-embed-cache turns it off)",
}
"""(command, name) -> what replaced a name's old meaning in that command (the name itself now means what
`VOCABULARY` says)."""


def warn_deprecated(old: str, new: str) -> None:
    """One ``warning:`` line on stderr: ``old`` still works, ``new`` is the spelling to use."""
    echo(f"warning: {old} is deprecated; use {new}", err=True)


def take_deprecated(old: str, value: object, current: object = None) -> object:
    """``value`` (given under the old name ``old``, warned about) unless the new name gave ``current``."""
    if value is None or value is False:
        return current
    warn_deprecated(old, DEPRECATED[old])
    return current if current is not None else value


# ----------------------------------------------------------------------------------------------- shared options
# A shared flag is declared here (or in an option group) and nowhere else; where its help names what the command
# does with it, a command passes that help to the flag's function below (tests/house/test_command_bodies.py holds it).
def limit_option(help: str, *, min: int = 1) -> Any:
    """``--limit``/``-n``: only the first N of what ``help`` names (at least ``min``)."""
    return typer.Option("--limit", "-n", min=min, help=help)


def embedder_option(help: str, *, panel: str | None = None) -> Any:
    """``--embedder``: the embedder, as ``help`` says what it embeds."""
    return typer.Option("--embedder", help=help, rich_help_panel=panel)


def progress_option(help: str, *, panel: str | None = None) -> Any:
    """``--progress/--no-progress``: show progress, as ``help`` says how."""
    return typer.Option("--progress/--no-progress", help=help, rich_help_panel=panel)


def context_window_option(help: str, *, min: int = 256, panel: str | None = None) -> Any:
    """``--context-window``: the model's context window in tokens (at least ``min``), as ``help`` says."""
    return typer.Option("--context-window", min=min, help=help, rich_help_panel=panel)


def max_tokens_option(help: str, *, min: int = 1, panel: str | None = None) -> Any:
    """``--max-tokens``: most completion tokens per call, of the calls ``help`` names (at least ``min``)."""
    return typer.Option("--max-tokens", min=min, help=help, rich_help_panel=panel)


ModelString = Annotated[str | None, typer.Option(
    "--model", "-m", help="The model: openai/<id>, <id>@<url> (any OpenAI-compatible endpoint, e.g. "
    "Qwen/Qwen2.5-7B@http://gpu:8000/v1), <url> (its only model), local[:<file.gguf>] (embedded) or "
    "scripted:<file> (test double). Default: the endpoint of OPENAI_BASE_URL, else local.",
    rich_help_panel=MODEL_PANEL)]
BaseUrl = Annotated[str | None, typer.Option(
    "--base-url", help="OpenAI-compatible endpoint, when --model does not name one (env: OPENAI_BASE_URL).",
    rich_help_panel=MODEL_PANEL)]
ApiKey = Annotated[str | None, typer.Option("--api-key", help="API key (env: OPENAI_API_KEY).",
                                            rich_help_panel=MODEL_PANEL)]
Temperature = Annotated[float | None, typer.Option("--temperature", min=0, help="Sampling temperature.",
                                                   rich_help_panel=MODEL_PANEL)]
ContextWindow = Annotated[int | None, context_window_option(
    "The model's context window in tokens (env: SKILLTRANSFER_CONTEXT_WINDOW). Default: asked from the endpoint's "
    "/v1/models; for local, the server's context size.", panel=MODEL_PANEL)]
ResponseCache = Annotated[Path | None, typer.Option(
    "--cache", help="SQLite response cache file (a rerun pays nothing twice).", rich_help_panel=MODEL_PANEL)]
CacheMode = Annotated[Literal["rw", "ro", "off"] | None, typer.Option(
    "--cache-mode", help="Response cache mode: rw (default), ro (replay: a miss is an error) or off.",
    rich_help_panel=MODEL_PANEL)]
RetryBudget = Annotated[float | None, typer.Option(
    "--retry-budget", min=0, help="Seconds a model call keeps retrying rate limits, 5xx and connection errors "
    "(default 300).", rich_help_panel=MODEL_PANEL)]
ModelNameOld = Annotated[str | None, typer.Option("--model-name", hidden=True, help="Deprecated: the model id "
                                                  "(use --model <id>@<url>).")]
ScriptOld = Annotated[Path | None, typer.Option("--script", hidden=True, help="Deprecated: the scripted double's "
                                                "replies (use --model scripted:<file>).")]

MaxConnections = Annotated[int | None, typer.Option(
    "--max-connections", min=1, help="Most requests in flight per endpoint (default 32, for a local vLLM or "
    "llama.cpp server; lower it for a rate-limited API); a stream of independent tasks (no skill memory) runs up to "
    "this many of them at once (at most 16).", rich_help_panel=MODEL_PANEL)]
TokenLimit = Annotated[int | None, typer.Option(
    "--token-limit", min=1, help="Stop starting tasks once this invocation's tasks used this many tokens (prompt + "
    "completion); running tasks finish and are kept, rerunning resumes.")]
CostLimit = Annotated[float | None, typer.Option(
    "--cost-limit", min=0, help="Stop starting tasks once this invocation's tasks cost this many dollars at the "
    "model's price (models.<label>.price, needed); running tasks finish and are kept, rerunning resumes.")]
Progress = Annotated[bool, progress_option("Show progress (one line per task without a terminal).")]
QuietOld = Annotated[bool, typer.Option("--quiet", "-q", hidden=True, help="Deprecated: --no-progress.")]
ConfigFile = Annotated[Path | None, typer.Option("--config", help="A YAML file of spec keys (env, model, condition, "
                                                 "agent, limits, ...), layered under -c and the flags.")]
ConfigFiles = Annotated[list[str] | None, typer.Option("--config", help="A YAML file of spec keys merged over the "
                                                       "spec; repeatable.")]
Overrides = Annotated[list[str] | None, typer.Option("--set", "-c", help="Override a spec key: key.path=value (a "
                                                     "YAML value), or a YAML file merged in; repeatable, applied "
                                                     "in order.")]
AllowImport = Annotated[list[str] | None, typer.Option(
    "--allow-import", metavar="MODULE", help="Let a spec file or -c name a module:Class env of this module (or a "
    "module below this package): importing a module runs its code, so a spec alone imports none; repeatable.")]
AllowKeyTo = Annotated[list[str] | None, typer.Option(
    "--allow-key-to", metavar="HOST", help="Let an endpoint on this host that a spec file names receive your "
    "OPENAI_API_KEY from the environment (without it such a spec is refused: a stranger's spec would get your key); "
    "repeatable.")]
EmbedCache = Annotated[bool, typer.Option("--embed-cache/--no-embed-cache", help="Cache embeddings on disk "
                                          "(a rerun embeds nothing twice).", rich_help_panel="Advanced")]
NoCacheOld = Annotated[bool, typer.Option("--no-cache", hidden=True, help="Deprecated: --no-embed-cache.")]
EmbedCacheOld = Annotated[bool, typer.Option("--cache", hidden=True, help="Deprecated: the embedding cache is on by "
                                             "default.")]
"""``report --cache``: its old meaning (`DEPRECATED_MEANINGS`)."""
