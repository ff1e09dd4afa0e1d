"""make_model: names, defaults, config validation, the scripted test double from the CLI side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from skilltransfer.errors import InputError
from skilltransfer.llm import MODELS, ModelConfig, make_model
from skilltransfer.llm.chain import CachedModel
from skilltransfer.llm.local import LocalModel
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.testing import ScriptedModel
from skilltransfer.protocols import ChatModel

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SKILLTRANSFER_MODEL"):
        monkeypatch.delenv(var, raising=False)


def test_unknown_name_lists_the_choices() -> None:
    with pytest.raises(InputError, match=r"unknown model 'gpt-x'; choose one of: local, openai, scripted"):
        make_model("gpt-x")
    assert set(MODELS) == {"local", "openai", "scripted"}


def test_default_is_local_without_an_endpoint_and_openai_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    local = make_model()
    assert isinstance(local, LocalModel)  # nothing is started until the first call
    assert local.server.process is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    remote = make_model(model="some-model")
    assert isinstance(remote, OpenAIChatModel)
    assert remote.base_url == "http://127.0.0.1:9/v1"


def test_config_objects_dicts_and_overrides() -> None:
    cfg = ModelConfig(name="openai", base_url="http://127.0.0.1:9/v1", model="m", params={"temperature": 0.2})
    model = make_model(cfg, max_concurrency=3)
    assert isinstance(model, OpenAIChatModel)
    assert model.config.max_concurrency == 3
    assert model.request_body(HI, max_tokens=5) == {"model": "m", "messages": HI, "temperature": 0.2, "max_tokens": 5}
    assert isinstance(make_model({"name": "openai", "base_url": "http://x/v1", "model": "m"}), OpenAIChatModel)


def test_bad_config_fields_name_the_field() -> None:
    with pytest.raises(InputError, match="'max_retries'"):
        make_model({"name": "openai", "max_retries": "many"})
    with pytest.raises(InputError, match="'colour'"):
        make_model({"colour": "blue"})
    with pytest.raises(InputError, match="'cache_mode': unknown cache mode 'maybe'; choose one of: off, rw"):
        make_model("scripted", outputs=["x"], cache_mode="maybe")


def test_every_config_field_is_documented() -> None:
    for name, field in ModelConfig.model_fields.items():
        assert field.description, f"ModelConfig.{name} has no docstring"


def test_scripted_only_by_name_with_outputs_or_a_script_file(tmp_path: Path) -> None:
    model = make_model("scripted", outputs=["a", "b"])
    assert isinstance(model, ScriptedModel)
    assert isinstance(model, ChatModel)
    assert [model.complete(HI).text, model.complete(HI).text] == ["a", "b"]
    with pytest.raises(InputError, match="--model scripted:<file.jsonl>"):
        make_model("scripted")
    script = tmp_path / "s.jsonl"
    script.write_text('{"match": "hi", "reply": "hello"}\n')
    assert make_model("scripted", script=str(script)).complete(HI).text == "hello"


def test_the_factory_knows_the_test_doubles_by_name_only() -> None:
    """The run and grid commands and a real endpoint's model load nothing of ``skilltransfer.llm.testing``; asking
    for ``scripted`` loads it through the registry's ``module:Class`` string (a fresh interpreter: these tests import
    the doubles themselves)."""
    code = ("import json, sys\n"
            "import skilltransfer.cli, skilltransfer.commands.run, skilltransfer.runner.launch\n"
            "import skilltransfer.runner.grid\n"
            "from skilltransfer.llm import make_model\n"
            "doubles = lambda: sorted(m for m in sys.modules if m.startswith('skilltransfer.llm.testing'))\n"
            "make_model('qwen3@http://127.0.0.1:9/v1')\n"
            "before = doubles()\n"
            "make_model('scripted', outputs=['x'])\n"
            "print(json.dumps([before, doubles()]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert "skilltransfer.llm.testing.scripted" in after


def test_a_script_file_is_read_by_the_double(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('"one"\n{"text": "two"}\n')
    model = ScriptedModel.from_script(script, model="m")
    assert [model.complete(HI).text, model.complete(HI).text, model.model] == ["one", "two", "m"]
    script.write_text("not json\n")
    with pytest.raises(InputError, match=r"s\.jsonl:1: not JSON"):
        make_model(f"scripted:{script}")


def test_cache_path_wraps_the_model(tmp_path: Path) -> None:
    model = make_model("scripted", outputs=["a"], cache_path=str(tmp_path / "c.sqlite"))
    assert isinstance(model, CachedModel)
    assert model.complete(HI).text == "a"
    assert len(model.cache) == 1


def test_make_model_takes_the_clis_model_strings() -> None:
    model = make_model("qwen3@http://127.0.0.1:9/v1")  # as --model writes it; nothing is called
    assert model.model == "qwen3"  # type: ignore[attr-defined]
    assert model.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="is not a model string"):
        make_model("qwen3@ftp://host")
