"""The embedder a run's skills are scored with: the run's own (from its config), or one the user names."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from skilltransfer.errors import InputError
from skilltransfer.log import CONFIG
from skilltransfer.memory.embedders import EmbedderWrapper, HashEmbedder, make_embedder
from skilltransfer.report.runs import RunLog

_HASH_ID = re.compile(r"hash:dim=(\d+):char=([01])")
_KNOWN_IDS = {"st:all-MiniLM-L6-v2": "minilm"}
"""Embedder ids whose spec can be recovered without the config's ``embedder`` field."""


class MemoEmbedder(EmbedderWrapper):
    """Wraps an embedder with an in-memory cache by text (the runs of one env share their task instructions)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._rows: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if missing:
            self._rows.update(zip(missing, np.asarray(self.inner.embed(missing), dtype=np.float32), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[t] for t in texts])


class EmbedderResolver:
    """Builds (once per spec, with an in-memory text cache) the embedder of each run.

    Args:
        override: an embedder spec for every run (``minilm``, ``hash:DIM``, a model folder) instead of the runs' own.
        cache: passed to ``make_embedder`` (an on-disk embedding cache).
    """

    def __init__(self, override: str | None = None, *, cache: bool = False) -> None:
        self.override = override
        self.cache = cache
        self._built: dict[str, Any] = {}

    def _build(self, spec: str) -> Any:
        if spec not in self._built:
            match = _HASH_ID.fullmatch(spec)
            if match:  # an id of the HashEmbedder test double, rebuilt exactly
                inner: Any = HashEmbedder(int(match.group(1)), char_ngrams=match.group(2) == "1")
            else:
                inner = make_embedder(spec, cache=self.cache)
            self._built[spec] = MemoEmbedder(inner)
        return self._built[spec]

    def __call__(self, run: RunLog) -> Any:
        """The embedder for ``run``.

        Raises:
            InputError: the run's embedder cannot be rebuilt from its config (pass ``--embedder``), or the rebuilt
                one has another id than the run recorded.
        """
        if self.override:
            return self._build(self.override)
        recorded = run.log.embedder_id
        spec = run.log.config.embedder.strip() or (recorded if recorded and _HASH_ID.fullmatch(recorded) else None)
        spec = spec or _KNOWN_IDS.get(recorded or "")
        if not spec:
            raise InputError(f"cannot tell which embedder the run used (embedder id {recorded!r}); pass --embedder",
                             path=run.path / CONFIG)
        embedder = self._build(spec)
        if recorded and str(embedder.id) != recorded:
            raise InputError(f"embedder {spec!r} has id {embedder.id!r} but the run recorded {recorded!r}; "
                             "pass --embedder to score with another one", path=run.path / CONFIG)
        return embedder
