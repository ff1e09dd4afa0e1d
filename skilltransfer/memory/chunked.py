"""Embedding texts longer than the embedder's window whole, by chunks.

sentence-transformers cuts a text at the model's ``max_seq_length`` (256 word pieces for all-MiniLM-L6-v2) without a
word, so a long instruction or skill body is embedded by its first ~200 words only. `ChunkedEmbedder` reads it whole:
the text is split at line ends into chunks of at most ``window`` tokens of the embedder's own tokenizer (the model's
``max_seq_length`` less its two special tokens; a line longer than that is split between words, a word longer than
that between characters), every chunk is embedded by the wrapped embedder (so its cache serves the chunks), and the
text's vector is the token-weighted mean of its chunks' vectors, L2-normalised. An embedder without a tokenizer
(the hashing test double, an endpoint) counts words instead, `WORDS_PER_CHUNK` per chunk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer.protocols import Embedder

WORDS_PER_CHUNK = 200
"""Chunk size, in words, for an embedder whose tokenizer is unknown."""


@dataclass(frozen=True)
class TokenWindow:
    """How an embedder counts tokens and how many one chunk may hold."""

    count: Callable[[str], int]
    window: int
    unit: str
    """"tokens" (the embedder's tokenizer) or "words"."""


def _innermost(embedder: Any) -> Any:
    seen = 0
    while hasattr(embedder, "inner") and seen < 10:  # EmbedderWrapper chain (cache, locks)
        embedder = embedder.inner
        seen += 1
    return embedder


def _folder_tokenizer(folder: Path) -> tuple[Any, int | None]:
    """A sentence-transformers folder's tokenizer and ``max_seq_length`` (from ``sentence_bert_config.json``), read
    without loading the model (a run whose embeddings are all cached never loads torch)."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError):
        return None, None
    length = None
    config = folder / "sentence_bert_config.json"
    if config.is_file():
        try:
            value = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
        except (OSError, ValueError, AttributeError):
            value = None
        length = value if isinstance(value, int) else None
    return tokenizer, length


def token_window(embedder: Embedder) -> TokenWindow:
    """The embedder's tokenizer and window when it is a sentence-transformers model (through wrappers; the model
    itself need not be loaded), else a word count with `WORDS_PER_CHUNK`."""
    inner = _innermost(embedder)
    model = getattr(inner, "_model", None)
    tokenizer = getattr(model, "tokenizer", None)
    length = getattr(model, "max_seq_length", None)
    folder = getattr(inner, "path", None)
    if tokenizer is None and isinstance(folder, Path) and folder.is_dir():
        tokenizer, length = _folder_tokenizer(folder)
    if tokenizer is not None and isinstance(length, int) and length > 8:
        def count(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])

        return TokenWindow(count, length - 2, "tokens")
    return TokenWindow(lambda text: len(text.split()), WORDS_PER_CHUNK, "words")


def _split_long(line: str, window: TokenWindow) -> list[tuple[str, int]]:
    """A line over the window as pieces within it: words packed greedily; a word over it cut by characters."""
    pieces: list[tuple[str, int]] = []
    current: list[str] = []
    size = 0
    for word in line.split():
        cost = window.count(word)
        if cost > window.window:  # one "word" longer than a chunk (a URL, base64): cut by characters
            if current:
                pieces.append((" ".join(current), size))
                current, size = [], 0
            step = max(1, len(word) * window.window // cost)
            pieces.extend((word[i:i + step], window.count(word[i:i + step])) for i in range(0, len(word), step))
            continue
        if current and size + cost > window.window:
            pieces.append((" ".join(current), size))
            current, size = [], 0
        current.append(word)
        size += cost
    if current:
        pieces.append((" ".join(current), size))
    return pieces


def chunk_text(text: str, window: TokenWindow) -> list[tuple[str, int]]:
    """``text`` as (chunk, tokens) pairs, each within ``window.window`` tokens, split at line ends (module docstring);
    one empty chunk for a text without words."""
    chunks: list[tuple[str, int]] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        cost = window.count(line)
        if cost > window.window:
            if current:
                chunks.append(("\n".join(current), size))
                current, size = [], 0
            chunks.extend(_split_long(line, window))
            continue
        if current and size + cost > window.window:
            chunks.append(("\n".join(current), size))
            current, size = [], 0
        current.append(line)
        size += cost
    if current:
        chunks.append(("\n".join(current), size))
    return chunks or [(text.strip(), 0)]


class ChunkedEmbedder:
    """An embedder that reads every text whole (module docstring). ``id`` is ``chunked:<inner id>``; ``long_texts``
    counts the texts embedded so far that were over one window (and so would have been cut).

    Args:
        inner: the embedder that embeds each chunk (a cached one keeps reruns fast).
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.window = token_window(inner)
        self.long_texts = 0
        self.texts = 0

    @property
    def id(self) -> str:
        return f"chunked:{self.inner.id}"

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def chunks(self, text: str) -> list[tuple[str, int]]:
        """The chunks ``text`` is embedded by."""
        return chunk_text(text, self.window)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        pieces: list[str] = []
        owners: list[int] = []
        weights: list[float] = []
        for row, text in enumerate(texts):
            chunks = self.chunks(text)
            self.texts += 1
            self.long_texts += len(chunks) > 1
            for chunk, tokens in chunks:
                pieces.append(chunk)
                owners.append(row)
                weights.append(float(max(tokens, 1)))
        vectors = np.asarray(self.inner.embed(pieces), dtype=np.float32)
        np.add.at(out, np.asarray(owners), vectors * np.asarray(weights, dtype=np.float32)[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(out / norms, dtype=np.float32)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
