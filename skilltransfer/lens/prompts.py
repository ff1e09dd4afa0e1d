"""The lens roles' prompt files (``skilltransfer/lens/prompts/*.md``): decomposer, verifier, rewriter, writer."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from skilltransfer.util.prompts import Prompt, load_prompt

LENS_PROMPTS = Path(__file__).resolve().parent / "prompts"


@lru_cache(maxsize=256)
def lens_prompt(name: str, folder: str | Path | None = None) -> Prompt:
    """The prompt ``name`` from ``folder`` (a user's replacements) or the packaged lens prompts (read once per
    process: routing asks for its prompts on every query)."""
    return load_prompt(name, folder, default_folder=LENS_PROMPTS)
