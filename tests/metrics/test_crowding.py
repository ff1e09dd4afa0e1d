"""Crowding (`skilltransfer.metrics.crowding`): nearest neighbours, confusability, bands, clusters and near misses,
against brute force and hand-built libraries whose cosines are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skilltransfer.metrics.crowding import (
    DEFAULT_BAND,
    Band,
    confusability,
    crowded_clusters,
    crowding,
    linked_pairs,
    near_miss_candidates,
    near_misses,
    nearest_neighbours,
    normalized,
)


def _at(cosine: float) -> np.ndarray:
    """A unit vector in the (e0, e1) plane at ``cosine`` to e0."""
    return np.array([cosine, math.sqrt(1 - cosine ** 2), 0.0, 0.0], dtype=np.float32)


def test_nearest_neighbours_match_brute_force_in_blocks() -> None:
    rng = np.random.default_rng(3)
    vectors = normalized(rng.normal(size=(157, 12)))
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    for k in (1, 3):
        indices, cosines = nearest_neighbours(vectors, k, block=40)  # blocks that do not divide n
        for i in range(len(vectors)):
            expected = np.lexsort((np.arange(len(vectors)), -sims[i]))[:k]
            assert indices[i].tolist() == expected.tolist()
            assert np.allclose(cosines[i], sims[i, expected], atol=1e-6)
    assert np.allclose(confusability(vectors, block=40), np.max(sims, axis=1), atol=1e-6)


def test_ties_go_to_the_lower_index_and_small_libraries_have_no_neighbour() -> None:
    twins = normalized(np.array([[1, 0], [1, 0], [1, 0], [0, 1]], dtype=np.float32))
    indices, _ = nearest_neighbours(twins, 1)
    assert indices[:, 0].tolist() == [1, 0, 0, 0]
    indices, cosines = nearest_neighbours(twins[:1], 3)
    assert indices.shape == (1, 0)
    assert cosines.shape == (1, 0)
    assert np.isnan(confusability(twins[:1])).all()
    assert nearest_neighbours(twins, 10)[0].shape == (4, 3)  # k capped at n - 1


def test_band_labels_both_ends_included() -> None:
    band = Band(0.55, 0.75)
    assert [band.label(c) for c in (0.5, 0.55, 0.7, 0.75, 0.76, float("nan"))] == [
        "clear", "crowded", "crowded", "crowded", "near-duplicate", "clear"]
    assert DEFAULT_BAND == band
    with pytest.raises(ValueError, match="low <= high"):
        Band(0.8, 0.6)


def test_clusters_link_at_the_lower_end_and_count_near_duplicates() -> None:
    # e0-v1 at 0.6 (crowded), v2-v3 at 0.9 (near-duplicates), v4 alone
    e0 = np.array([1, 0, 0, 0, 0, 0], dtype=np.float32)
    v1 = np.array([0.6, 0.8, 0, 0, 0, 0], dtype=np.float32)
    v2 = np.array([0, 0, 1, 0, 0, 0], dtype=np.float32)
    v3 = np.array([0, 0, 0.9, math.sqrt(1 - 0.81), 0, 0], dtype=np.float32)
    v4 = np.array([0, 0, 0, 0, 1, 0], dtype=np.float32)
    vectors = np.stack([v4, e0, v1, v2, v3])  # the lone skill first: clusters are ordered, not the input
    assert [(i, j) for i, j, _ in linked_pairs(vectors, 0.55)] == [(1, 2), (3, 4)]
    clusters = crowded_clusters(vectors)
    assert [c.members for c in clusters] == [[1, 2], [3, 4]]
    assert [c.near_duplicate_links for c in clusters] == [0, 1]
    assert clusters[1].max_cosine == pytest.approx(0.9, abs=1e-5)
    report = crowding(["lone", "a", "b", "c", "d"], vectors)
    by_id = {row.id: row for row in report.skills}
    assert by_id["a"].neighbour_id == "b"
    assert by_id["a"].cosine == pytest.approx(0.6, abs=1e-5)
    assert (by_id["a"].label, by_id["c"].label, by_id["lone"].label) == ("crowded", "near-duplicate", "clear")
    assert (by_id["a"].cluster, by_id["c"].cluster, by_id["lone"].cluster) == (0, 1, None)
    assert report.counts() == {"clear": 1, "crowded": 2, "near_duplicate": 2, "in_clusters": 4, "clusters": 2}
    saved = report.to_dict()
    assert saved["band"] == [0.55, 0.75]
    assert saved["cluster_members"] == [["a", "b"], ["c", "d"]]
    assert "0.55" in saved["rule"]


def test_a_wider_band_merges_clusters_and_an_empty_library_has_none() -> None:
    vectors = np.stack([_at(1.0), _at(0.6), _at(0.2)])
    assert [c.members for c in crowded_clusters(vectors, Band(0.1, 0.75))] == [[0, 1, 2]]
    assert crowded_clusters(np.zeros((0, 4), dtype=np.float32)) == []
    assert crowding([], np.zeros((0, 4), dtype=np.float32)).counts()["clusters"] == 0
    with pytest.raises(ValueError, match="2 ids for 3"):
        crowding(["a", "b"], vectors)


def test_near_miss_candidates_lie_in_the_band_highest_first() -> None:
    corpus = np.stack([_at(c) for c in (0.9, 0.74, 0.6, 0.55, 0.5, 0.6, 1.0)])
    target = _at(1.0)
    got = near_miss_candidates(target, corpus)
    assert [row for row, _ in got] == [1, 2, 5, 3]  # 0.9 and 1.0 are too close, 0.5 too far; ties by index
    assert all(DEFAULT_BAND.contains(round(c, 5)) for _, c in got)
    assert [row for row, _ in near_miss_candidates(target, corpus, exclude=[2], limit=2)] == [1, 5]
    assert near_miss_candidates(target, corpus, Band(-1.0, -0.5)) == []
    both = near_misses(np.stack([target, _at(0.0)]), corpus, limit=1)
    assert [row for row, _ in both[0]] == [1]
    assert len(both) == 2
