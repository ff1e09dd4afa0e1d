"""A library of any size: retrieval through an IVF index that says what it trades, a frozen library that skips the
deduplication search no cosine can pass, a model folder whose dimension is known without loading it, and front
matter parsed by libyaml with the same refusals (the timings: benchmarks/library_scale.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skilltransfer import untrusted
from skilltransfer.memory import Skill, SkillMemory
from skilltransfer.memory.ann import IVF_MIN_SKILLS, uses_ivf
from skilltransfer.memory.embedders import (
    BATCH_TOKENS,
    MAX_BATCH,
    SentenceTransformerEmbedder,
    batches,
    declared_dim,
)


class TableEmbedder:
    """A test double: each text ``skill N`` / ``query N`` has a fixed vector."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors, self.id, self.dim = vectors, "table:test", 32

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    rows = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, centres.shape[1]))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def memories() -> tuple[SkillMemory, SkillMemory, np.ndarray]:
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((40, 32))
    skills, queries = clustered(rng, 4000, centres), clustered(rng, 100, centres)
    table = {f"skill {i}": v for i, v in enumerate(skills)}
    made = []
    for index in ("flat", "ivf"):
        memory = SkillMemory(TableEmbedder(table), dedup_threshold=1.01, validate_code=False, index=index)
        memory.add_many([Skill(id=f"s{i}", name=f"s{i}", description=f"skill {i}", body="-") for i in range(4000)])
        made.append(memory)
    return made[0], made[1], queries


def test_ivf_says_what_it_trades_and_keeps_exact_scores(memories):
    flat, ivf, queries = memories
    assert flat.index_info().exact
    info = ivf.index_info()
    assert not info.exact
    assert info.kind == "ivf"
    assert info.nprobe is not None
    assert info.nlist is not None
    assert info.nprobe < info.nlist
    assert info.recall_at_5 is not None
    assert 0.9 <= info.recall_at_5 <= 1.0
    assert "approximate, recall@5" in info.line()
    truth, found = flat.search_vectors(queries, 5), ivf.search_vectors(queries, 5)
    hits = sum(len({s.id for s, _ in a} & {s.id for s, _ in b}) for a, b in zip(truth, found, strict=True))
    assert hits / 500 >= 0.9
    for row, got in zip(queries, found, strict=True):  # the scores returned are the exact cosines
        for skill, score in got:
            assert score == pytest.approx(float(flat.vector(skill.id) @ row), abs=1e-5)


def test_ivf_follows_adds_and_removes(memories):
    _, ivf, _ = memories
    copy = ivf.filter(lambda skill: skill.id != "s7")
    copy.config = copy.config.model_copy(update={"index": "ivf"})
    target = copy.vector("s8")
    assert copy.search_vectors(target[None, :], 1)[0][0][0].id == "s8"
    copy.remove("s8")
    assert all(skill.id != "s8" for skill, _ in copy.search_vectors(target[None, :], 5)[0])
    assert "index" in copy.manifest()
    assert copy.manifest()["index"]["kind"] == "ivf"


def test_auto_is_exact_below_the_limit():
    assert not uses_ivf("auto", IVF_MIN_SKILLS - 1)
    assert uses_ivf("auto", IVF_MIN_SKILLS)
    assert not uses_ivf("flat", 10 * IVF_MIN_SKILLS)
    assert uses_ivf("ivf", 10)


def test_a_frozen_library_skips_the_dedup_search(monkeypatch):
    calls = []
    table = {"a": np.eye(32)[0], "b": np.eye(32)[0]}  # identical: a 0.95 threshold would merge them
    memory = SkillMemory(TableEmbedder(table), dedup_threshold=1.01, validate_code=False)
    original = memory._index.search
    monkeypatch.setattr(memory._index, "search", lambda *a, **k: calls.append(1) or original(*a, **k))
    memory.add_many([Skill(id="a", name="a", description="a", body="x"), Skill(id="b", name="b", description="b",
                                                                                body="y")])
    assert len(memory) == 2
    assert not calls


def test_a_model_folder_s_dimension_without_loading_it(tmp_path: Path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384}))
    assert declared_dim(tmp_path) is None  # a dense layer that does not say: ask the model
    (tmp_path / "2_Dense" / "config.json").write_text(json.dumps({"out_features": 128}))
    assert declared_dim(tmp_path) == 128
    embedder = SentenceTransformerEmbedder(tmp_path, name="fake")
    assert (embedder.dim, embedder.id) == (128, "st:fake")  # no weights in the folder: nothing was loaded
    assert embedder._model is None


def test_batches_hold_many_short_texts_and_few_long_ones():
    texts = ["a short skill description"] * 600 + ["word " * 300] * 70 + [""]
    got = batches(texts)
    assert sorted(i for batch in got for i in batch) == list(range(len(texts)))
    assert max(len(batch) for batch in got) == MAX_BATCH
    long = [batch for batch in got if any(len(texts[i]) > 1000 for i in batch)]
    assert all(len(batch) * 256 <= BATCH_TOKENS for batch in long)
    assert got[0][0] == len(texts) - 1  # shortest first


@pytest.mark.parametrize("text", ["name: a\ndescription: 'one: two'\nmetadata:\n  tags: [x, y]\n",
                                  "a: 1\nb: [1, {c: d}]\n", "", "k: |\n  line one\n  line two\n"])
def test_libyaml_and_pure_python_parse_alike(text: str, monkeypatch):
    fast = untrusted.parse_yaml(text)
    monkeypatch.setattr(untrusted, "_C_LOADER", None)
    assert untrusted.parse_yaml(text) == fast


@pytest.mark.parametrize(("text", "reason"), [("a: &x 1\nb: *x\n", "anchors"), ("k: " + "[" * 200, "nests more than"),
                                              ("a: [1\n", "invalid YAML"), ("--- 1\n--- 2\n", "another document")])
def test_both_parsers_refuse_alike(text: str, reason: str, monkeypatch):
    with pytest.raises(untrusted.UntrustedFileError, match=reason):
        untrusted.parse_yaml(text, max_depth=20)
    monkeypatch.setattr(untrusted, "_C_LOADER", None)
    with pytest.raises(untrusted.UntrustedFileError, match=reason):
        untrusted.parse_yaml(text, max_depth=20)
