"""Embedders: hash test double, on-disk cache, spec parsing, and (slow) the real MiniLM model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skilltransfer.errors import InputError
from skilltransfer.memory.embedders import CachedEmbedder, HashEmbedder, default_cache_dir, make_embedder
from skilltransfer.protocols import Embedder


class CountingEmbedder:
    """Wraps HashEmbedder and counts how many texts reach it."""

    def __init__(self, dim: int = 32) -> None:
        self.inner = HashEmbedder(dim)
        self.calls: list[list[str]] = []

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_hash_embedder_is_deterministic_normalised_float32() -> None:
    texts = ["Send an email to Alice", "compute the total of a column", "x"]
    first = HashEmbedder(64).embed(texts)
    second = HashEmbedder(64).embed(texts)
    assert first.dtype == np.float32
    assert first.shape == (3, 64)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)


def test_hash_embedder_similar_texts_are_closer() -> None:
    emb = HashEmbedder(256)
    base, near, far = emb.embed(["send an email to a contact", "send an email to the manager",
                                 "sum the numbers in a spreadsheet column"])
    assert float(base @ near) > float(base @ far) + 0.2


def test_hash_embedder_id_depends_on_settings_and_matches_protocol() -> None:
    assert HashEmbedder(64).id != HashEmbedder(128).id
    assert HashEmbedder(64).id != HashEmbedder(64, char_ngrams=False).id
    assert isinstance(HashEmbedder(8), Embedder)
    assert HashEmbedder(16).embed([]).shape == (0, 16)


def test_cache_counts_hits_and_misses_and_persists(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    db = tmp_path / "cache" / "emb.sqlite"
    cached = CachedEmbedder(inner, db)
    first = cached.embed(["a b", "c d", "a b"])
    assert (cached.hits, cached.misses) == (0, 3)
    assert inner.calls == [["a b", "c d"]]  # duplicates within a call are embedded once
    again = cached.embed(["c d", "e f"])
    assert (cached.hits, cached.misses) == (1, 4)
    assert inner.calls[-1] == ["e f"]
    np.testing.assert_array_equal(again[0], first[1])
    cached.close()

    inner2 = CountingEmbedder()
    reopened = CachedEmbedder(inner2, db)
    out = reopened.embed(["a b", "e f"])
    assert (reopened.hits, reopened.misses) == (2, 0)
    assert inner2.calls == []
    np.testing.assert_array_equal(out, HashEmbedder(32).embed(["a b", "e f"]))
    assert reopened.id == inner2.id
    assert reopened.dim == 32
    reopened.close()


def test_cache_is_keyed_by_embedder_id(tmp_path: Path) -> None:
    db = tmp_path / "emb.sqlite"
    a = CachedEmbedder(HashEmbedder(32), db)
    a.embed(["same text"])
    b = CachedEmbedder(HashEmbedder(32, char_ngrams=False), db)
    out = b.embed(["same text"])
    assert (b.hits, b.misses) == (0, 1)
    np.testing.assert_array_equal(out, HashEmbedder(32, char_ngrams=False).embed(["same text"]))


def test_make_embedder_specs(tmp_path: Path) -> None:
    assert make_embedder("hash").dim == 256
    assert make_embedder("hash:64").dim == 64
    cached = make_embedder("hash:32", cache=tmp_path / "c.sqlite")
    assert isinstance(cached, CachedEmbedder)
    assert (tmp_path / "c.sqlite").exists()


@pytest.mark.parametrize("spec", ["hash:abc", "hash:4", "hash:", "no-such-embedder", "/no/such/model/folder"])
def test_make_embedder_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(InputError, match="embedder"):
        make_embedder(spec)


def test_make_embedder_rejects_folder_that_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="not a sentence-transformers model folder"):
        make_embedder(str(tmp_path))


def test_default_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKILLTRANSFER_CACHE", str(tmp_path / "st"))
    assert default_cache_dir() == tmp_path / "st"
    monkeypatch.delenv("SKILLTRANSFER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "skilltransfer"


@pytest.mark.slow
def test_minilm_loads_offline_and_ranks_paraphrases() -> None:
    emb = make_embedder("minilm")
    assert emb.id == "st:all-MiniLM-L6-v2"
    assert emb.dim == 384
    vectors = emb.embed(["Email the quarterly report to my manager", "Send my boss the report for the quarter",
                         "Plot a histogram of temperatures"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2


def test_model_fingerprint_separates_same_named_folders(tmp_path) -> None:
    from skilltransfer.memory.embedders import model_fingerprint

    for variant, hidden in (("a", 384), ("b", 768)):
        folder = tmp_path / variant / "model"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(f'{{"hidden_size": {hidden}}}')
        (folder / "model.safetensors").write_bytes(b"x" * 10)
    first = model_fingerprint(tmp_path / "a" / "model")
    assert first == model_fingerprint(tmp_path / "a" / "model")
    assert first != model_fingerprint(tmp_path / "b" / "model")
