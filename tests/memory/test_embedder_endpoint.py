"""Embeddings through an OpenAI-compatible endpoint (the mock server's ``/v1/embeddings``): batched, normalised,
cached on disk, and recorded in a run's ``config.json``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers_cli import main_cli

from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.llm.testing.roleplay import RolePlay
from skilltransfer.memory.embedders import make_embedder
from skilltransfer.memory.endpoint_embedder import EndpointEmbedder, parse_endpoint_spec


def test_specs() -> None:
    assert parse_endpoint_spec("openai/text-embedding-3-small") == ("text-embedding-3-small",
                                                                     "https://api.openai.com/v1")
    assert parse_endpoint_spec("BAAI/bge-m3@http://gpu:8000/v1/") == ("BAAI/bge-m3", "http://gpu:8000/v1")
    assert parse_endpoint_spec("vllm/e5@http://h:1/v1") == ("e5", "http://h:1/v1")
    for bad in ("openai/", "@http://h/v1", "vllm/e5"):
        with pytest.raises(InputError, match="openai/<id>"):
            parse_endpoint_spec(bad)


def test_batched_normalised_and_cached(tmp_path) -> None:
    texts = [f"text number {i} about mail" for i in range(150)]
    with MockServer() as server:
        embedder = EndpointEmbedder("mock-embed", server.url, batch_size=64, backoff_base_s=0)
        first = embedder.embed(texts)
        assert [len(r["input"]) for r in server.embedding_requests] == [64, 64, 22]
        assert first.shape == (150, 32)
        assert first.dtype == np.float32
        assert np.allclose(np.linalg.norm(first, axis=1), 1.0)
        assert embedder.id == "api:mock-embed"
        cached = make_embedder(f"mock-embed@{server.url}", cache=tmp_path / "e.sqlite")
        cached.embed(texts)
        sent = len(server.embedding_requests)
        again = cached.embed(texts)
        assert len(server.embedding_requests) == sent  # every vector from the disk cache
        assert np.allclose(again, first)


def test_a_refused_model_is_one_line(tmp_path) -> None:
    with MockServer() as server:
        embedder = EndpointEmbedder("m", server.url + "/nowhere", backoff_base_s=0, max_retries=0)
        with pytest.raises(InputError, match="embedding endpoint"):
            embedder.embed(["x"])


def test_a_run_retrieves_through_the_endpoint_and_records_it(tmp_path, monkeypatch, capsys) -> None:
    with MockServer(RolePlay()) as server:
        code, stdout, stderr = main_cli(
            ["run", "--env", "apps", "--limit", "2", "--condition", "subtask+text", "--harness", "paper",
             "--model", f"mock@{server.url}", "--api-key", "x", "--embedder", f"mock-embed@{server.url}",
             "--no-sandbox", "--no-progress", "--out", str(tmp_path / "run")], monkeypatch, capsys)
        embedded = len(server.embedding_requests)
    assert code == 0, stderr[-2000:]
    assert embedded > 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["embedder"] == f"mock-embed@{server.url}"
    assert config["embedder_id"] == "api:mock-embed"
