"""An open model registry: ``--model module:Class`` (and a spec's model entry ``name: module:Class``) builds any class
meeting `skilltransfer.protocols.ChatModel` from outside the package, with the import-consent rule of envs: a spec
file or a ``-c`` alone imports no module the user did not name."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from helpers_cli import ALLOW_TINY, TINY, main_cli

from skilltransfer.errors import InputError
from skilltransfer.llm import make_model
from skilltransfer.llm.config import ModelConfig, parse_model_string
from skilltransfer.log import RunFolder
from skilltransfer.settings.recorded import read_run_settings

MODULE = '''
"""A chat model of a user's own, outside the package: plays the counter world's roles (`CounterScript`)."""
import time

from helpers_tinyenv import CounterScript
from skilltransfer.protocols import Completion


class MyChat:
    built = []

    def __init__(self, config):
        self.config = config
        self.script = CounterScript()
        MyChat.built.append(config)

    def complete(self, messages, **params):
        start = time.perf_counter()
        text = self.script(messages)
        words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return Completion(text=text, finish_reason="stop", prompt_tokens=words, completion_tokens=len(text.split()),
                          latency_s=time.perf_counter() - start, model=f"mychat-{self.config.model or 'default'}",
                          usage_source="approx")


class NotAModel:
    def __init__(self, config):
        pass
'''


@pytest.fixture
def mymod(tmp_path, monkeypatch):
    """``mymod`` on ``sys.path``: a module written to a folder of the test's own, outside the package."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "mymod.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(folder))
    yield
    import sys

    sys.modules.pop("mymod", None)


def test_the_model_string_names_a_class():
    assert parse_model_string("mypkg.models:MyChat") == {"name": "mypkg.models:MyChat"}
    assert ModelConfig(name="mypkg.models:MyChat").name == "mypkg.models:MyChat"  # not imported to validate
    with pytest.raises(InputError, match="not a model string"):
        parse_model_string("llama3:8b")  # an Ollama tag is not a class: the forms are listed


def test_run_a_stream_with_a_model_class_of_ones_own(tmp_path, monkeypatch, capsys, mymod):
    out = tmp_path / "run"
    code, stdout, err = main_cli(["run", "--env", TINY, "--condition", "task+text", "--model", "mymod:MyChat",
                                  "--temperature", "0.2", "--limit", "2", "--embedder", "hash:64", "--out", str(out),
                                  "--no-sandbox", "--no-progress"], monkeypatch, capsys)
    assert code == 0, err
    import mymod as module  # type: ignore[import-not-found]

    built = module.MyChat.built
    assert len(built) == 1
    assert isinstance(built[0], ModelConfig)
    assert built[0].params == {"temperature": 0.2}
    records = RunFolder(out).read_records()
    assert len(records) == 2
    assert all(r.success for r in records)
    assert read_run_settings(RunFolder(out)).config.model.name == "mymod:MyChat"
    assert "mychat-default" in json.dumps(json.loads((out / "config.json").read_text()))  # the id that answered


def test_a_spec_names_a_model_class_only_when_its_module_is_allowed(tmp_path, monkeypatch, capsys, mymod):
    spec = {"name": "t", "out": str(tmp_path / "out"), "envs": {"a": {"env": TINY, "args": {"targets": [3]}}},
            "models": {"mine": {"name": "mymod:MyChat", "model": "m1"}}, "conditions": ["task"], "embedder": "hash:64"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, _, err = main_cli(["grid", str(path), "--no-progress", *ALLOW_TINY], monkeypatch, capsys)
    assert code == 2
    assert "models.mine.name" in err
    assert "--allow-import mymod" in err
    assert not (tmp_path / "out").exists()
    import sys

    assert "mymod" not in sys.modules  # refused before it was imported
    code, _, err = main_cli(["grid", str(path), "--no-progress", *ALLOW_TINY, "--allow-import", "mymod"],
                            monkeypatch, capsys)
    assert code == 0, err
    (folder,) = [p.parent for p in (tmp_path / "out").rglob("results.jsonl")]
    assert [r.success for r in RunFolder(folder).read_records()] == [True]


def test_a_run_config_file_naming_a_class_needs_consent(tmp_path, monkeypatch, capsys, mymod):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"model": {"name": "mymod:MyChat"}}))
    code, _, err = main_cli(["run", "--env", TINY, "--condition", "task", "--config", str(config), "--limit", "1",
                             "--out", str(tmp_path / "r"), "--no-sandbox", "--no-progress"], monkeypatch, capsys)
    assert code == 2
    assert "--allow-import mymod" in err


def test_a_class_that_is_no_chat_model_is_one_error(mymod):
    with pytest.raises(InputError, match="not a chat-model class"):
        make_model("mymod:NotAModel")
    with pytest.raises(InputError, match="cannot be imported"):
        make_model("nosuchmodule_48:MyChat")


def test_the_description_is_one_frozen_value_passed_as_is(mymod):
    """The flags become one `ModelConfig` once; `make_model` hands that very value to the class (no dict between)."""
    from pydantic import ValidationError

    from skilltransfer.commands.option_groups import ModelOptions

    config = ModelOptions(spec="mymod:MyChat", temperature=0.1, context_window=4096).config()
    assert (config.name, config.params, config.context_window) == ("mymod:MyChat", {"temperature": 0.1}, 4096)
    with pytest.raises(ValidationError, match="frozen"):
        config.model = "other"  # type: ignore[misc]
    assert make_model(config).config is config  # type: ignore[attr-defined]
