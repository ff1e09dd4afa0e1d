"""The lens roles' prompt files (``skilltransfer/lens/prompts/*.md``): decomposer, verifier, rewriter, writer."""

from __future__ import annotations

from pathlib import Path

from skilltransfer.templates import PromptTemplate, read_template

LENS_PROMPTS = Path(__file__).resolve().parent / "prompts"


def lens_prompt(name: str, folder: str | Path | None = None) -> PromptTemplate:
    """The prompt ``name`` from ``folder`` (a user's replacements) or the packaged lens prompts."""
    return read_template(name, LENS_PROMPTS, folder)
