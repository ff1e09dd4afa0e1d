"""The SQLite response cache: hit/miss, resume, exact replay, read-only misses, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model
from skilltransfer.llm.cache import CacheMiss, ResponseCache, request_key
from skilltransfer.llm.chain import CachedModel
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.llm.testing.mock_server import MockServer

Q1 = [{"role": "user", "content": "first question"}]
Q2 = [{"role": "user", "content": "second question"}]


def test_request_key_is_canonical_and_covers_params() -> None:
    a = {"model": "m", "messages": Q1, "temperature": 0.0, "extra_body": {"x": 1}}
    b = {"extra_body": {"x": 1}, "temperature": 0.0, "messages": Q1, "model": "m"}
    assert request_key(a) == request_key(b)
    assert request_key(a) != request_key({**a, "temperature": 0.5})
    assert request_key(a) != request_key({**a, "model": "other"})
    assert request_key(a) != request_key({**a, "messages": Q2})


def test_miss_then_hit_pays_once(tmp_path: Path) -> None:
    inner = ScriptedModel(["a1", "a2"])
    model = CachedModel(inner, ResponseCache(tmp_path / "c.sqlite"))
    first = model.complete(Q1, temperature=0)
    again = CachedModel(inner, ResponseCache(tmp_path / "c.sqlite")).complete(Q1, temperature=0)
    assert (first.text, first.cached) == ("a1", False)
    assert (again.text, again.cached) == ("a1", True)
    assert again.latency_s == first.latency_s
    assert again.prompt_tokens == first.prompt_tokens
    assert len(inner.calls) == 1
    assert model.complete(Q1, temperature=1).text == "a2"  # other params: a miss
    assert (model.hits, model.misses) == (0, 2)


def test_repeated_identical_requests_replay_in_order(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    recorder = CachedModel(ScriptedModel(["s1", "s2", "s3"]), ResponseCache(path))
    recorded = [recorder.complete(Q1).text for _ in range(3)]
    recorder.close()
    replay = CachedModel(ScriptedModel([]), ResponseCache(path, "read-only"))
    assert [replay.complete(Q1).text for _ in range(3)] == recorded == ["s1", "s2", "s3"]
    with pytest.raises(CacheMiss, match=r"#3.*cache mode rw"):
        replay.complete(Q1)


def test_interrupted_run_resumes_without_paying_twice(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with MockServer(["r1", "r2", "r3"]) as server:
        cfg = {"name": "openai", "base_url": server.url, "model": "mock", "cache_path": str(path)}
        first = make_model(cfg)
        assert first.complete(Q1).text == "r1"  # then the run is interrupted
        resumed = make_model(cfg)
        texts = [resumed.complete(q).text for q in (Q1, Q2)]
        assert len(server.requests) == 2
    assert texts == ["r1", "r2"]
    replay = make_model({**cfg, "cache_mode": "replay", "base_url": "http://127.0.0.1:1/v1"})
    assert [replay.complete(q).text for q in (Q1, Q2)] == texts  # no server needed


def test_read_only_miss_is_an_error_and_never_calls_the_model(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    recorded = CachedModel(ScriptedModel(["x"]), ResponseCache(path)).complete(Q1)
    inner = ScriptedModel(["must not be used"])
    replay = CachedModel(inner, ResponseCache(path, "ro"))
    assert replay.complete(Q1).text == "x"
    with pytest.raises(CacheMiss):
        replay.complete(Q2)
    assert inner.calls == []
    with pytest.raises(InputError, match="read-only"):
        replay.cache.put("k", 0, {}, recorded)


def test_bad_cache_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        ResponseCache(tmp_path / "missing.sqlite", "ro")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(InputError, match="not a response cache"):
        ResponseCache(junk)
    with pytest.raises(InputError, match="Unknown cache mode"):
        ResponseCache(tmp_path / "c.sqlite", "sometimes")


def test_cache_mode_off_passes_through(tmp_path: Path) -> None:
    model = make_model("scripted", outputs=["a"], cache_path=str(tmp_path / "c.sqlite"), cache_mode="off")
    assert isinstance(model, ScriptedModel)
    assert not (tmp_path / "c.sqlite").exists()
