"""Fail fast: ``run`` and ``grid`` check the endpoint (and the key where one is needed) before the first task, with one
``error:`` line naming the model string and what was tried, and leave no run folder behind."""

from __future__ import annotations

import socket

import pytest
import yaml
from helpers_cli import ALLOW_TINY, TINY, main_cli
from helpers_tinyenv import CounterScript

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model
from skilltransfer.llm.openai_client import check_endpoint, model_string
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import RunFolder
from skilltransfer.settings.config import ModelSpec
from skilltransfer.settings.recorded import read_run_settings


def dead_url() -> str:
    """An http URL on a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_model_strings():
    assert model_string(ModelSpec(name="openai", model="gpt-4o")) == "openai/gpt-4o"
    assert model_string(ModelSpec(name="openai", model="qwen3", base_url="http://h:8000/v1")) == "qwen3@http://h:8000/v1"
    assert model_string(ModelSpec(name="scripted", script="x.jsonl")) == "scripted"


def test_a_dead_endpoint_is_one_line(monkeypatch):
    url = dead_url()
    with pytest.raises(InputError) as caught:
        check_endpoint(ModelSpec(name="openai", model="qwen3", base_url=url))
    message = str(caught.value)
    assert f"model 'qwen3@{url}'" in message
    assert f"GET {url}/models" in message
    assert "does not answer" in message


def test_the_openai_api_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InputError, match="model 'openai/gpt-4o' needs an API key: set OPENAI_API_KEY"):
        check_endpoint(ModelSpec(name="openai", model="gpt-4o"))


def test_a_live_endpoint_passes_and_lists_its_models():
    with MockServer(CounterScript()) as server:
        info = check_endpoint(ModelSpec(name="openai", model="mock", base_url=server.url))
    assert info is not None
    assert info.served == ["mock"]


def test_run_against_a_dead_endpoint_fails_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    url = dead_url()
    out = tmp_path / "runs" / "r"
    code, _, err = main_cli(["run", "--env", TINY, "--condition", "task", "--model", f"qwen3@{url}",
                             "--out", str(out), "--no-sandbox", "--no-progress"], monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert f"qwen3@{url}" in lines[0]
    assert "/models" in lines[0]
    assert not out.exists()


def test_run_with_openai_and_no_key_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "runs" / "r"
    code, _, err = main_cli(["run", "--env", TINY, "--condition", "task", "--model", "openai/gpt-4o",
                             "--out", str(out), "--no-sandbox", "--no-progress"], monkeypatch, capsys)
    assert code == 2
    assert "error: model 'openai/gpt-4o' needs an API key" in err
    assert not out.exists()


def test_grid_against_a_dead_endpoint_writes_nothing(tmp_path, monkeypatch, capsys):
    url = dead_url()
    spec = {"name": "t", "out": str(tmp_path / "out"), "envs": {"a": {"env": TINY, "args": {"targets": [3]}}},
            "models": {"m": {"name": "openai", "base_url": url, "model": "qwen3"}}, "conditions": ["task"],
            "embedder": "hash:64"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, _, err = main_cli(["grid", str(path), "--no-progress", *ALLOW_TINY], monkeypatch, capsys)
    assert code == 2
    assert err.strip().count("\n") == 0
    assert f"qwen3@{url}" in err
    assert not (tmp_path / "out").exists()


def test_a_run_asks_the_model_list_once(tmp_path, monkeypatch, capsys):
    """One ``GET /v1/models`` per run: the check, the model id a run records when none is given and the client's
    context window all read the one answer (before: 2 with ``<id>@<url>``, 3 with ``<url>``)."""
    with MockServer(CounterScript(), context_window=8192) as server:
        for form, out in ((f"mock@{server.url}", tmp_path / "with-id"), (server.url, tmp_path / "no-id")):
            server.model_list_requests = 0
            code, _, err = main_cli(["run", "--env", TINY, "--condition", "task", "--model", form, "--limit", "2",
                                     "--out", str(out), "--no-sandbox", "--no-progress"], monkeypatch, capsys)
            assert code == 0, err
            assert server.model_list_requests == 1, form
            assert read_run_settings(RunFolder(out)).config.model.model == "mock"  # the no-id form: the served id
        assert len(server.requests) >= 4  # the tasks ran through the endpoint


def test_a_grid_of_two_streams_on_one_endpoint_asks_the_model_list_once(tmp_path, monkeypatch, capsys):
    with MockServer(CounterScript(), context_window=8192) as server:
        spec = {"name": "t", "out": str(tmp_path / "out"), "envs": {"a": {"env": TINY, "args": {"targets": [3, 4]}}},
                "models": {"m": {"name": "openai", "base_url": server.url, "model": "mock"}},
                "conditions": ["task", "task+text"], "embedder": "hash:64"}
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        code, _, err = main_cli(["grid", str(path), "--no-progress", *ALLOW_TINY], monkeypatch, capsys)
        assert code == 0, err
        assert server.model_list_requests == 1
    assert sorted(p.parent.name for p in (tmp_path / "out").rglob("results.jsonl")) == ["task", "task+text"]


def test_the_client_reads_the_window_from_the_runs_probe():
    with MockServer(CounterScript(), context_window=4096) as server:
        probe = check_endpoint(ModelSpec(name="openai", model="mock", base_url=server.url))
        assert probe is not None
        assert server.model_list_requests == 1
        model = make_model(ModelSpec(name="openai", model="mock", base_url=server.url), probe=probe, cache=False)
        assert model.context_window == 4096  # type: ignore[attr-defined]
        assert server.model_list_requests == 1
        alone = make_model(ModelSpec(name="openai", base_url=server.url), cache=False)  # no probe, no id: asks once
        assert alone.model == "mock"
        assert alone.context_window == 4096
        assert server.model_list_requests == 2


def test_a_replayed_cache_without_a_model_id_asks_the_endpoint_for_it_alone(tmp_path, monkeypatch):
    """A read-only cache is never checked (its run replays offline), but a model with no id still asks the endpoint's
    one model (`served_model`); a dead endpoint then names the flag that gives the id instead of the check's line."""
    from skilltransfer.llm.openai_client import served_model

    monkeypatch.delenv("SKILLTRANSFER_MODEL", raising=False)
    cache = {"cache_path": str(tmp_path / "cache.sqlite"), "cache_mode": "ro"}
    with MockServer(CounterScript()) as server:
        model, probe = served_model(ModelSpec(name="openai", base_url=server.url, **cache))
    assert (model.model, probe is not None and probe.served) == ("mock", ["mock"])
    url = dead_url()
    with pytest.raises(InputError, match=f"cannot read the model list of {url}.*give the model id: --model <id>@"):
        served_model(ModelSpec(name="openai", base_url=url, **cache))
    given, probe = served_model(ModelSpec(name="openai", model="m", base_url=url, **cache))
    assert (given.model, probe) == ("m", None)  # an id given: nothing asked
