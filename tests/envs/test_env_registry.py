"""The env registry, stream orders and ``skilltransfer envs list|show`` (with a fake env, independent of real envs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.envs import registry
from skilltransfer.errors import InputError
from skilltransfer.protocols import TaskSpec


class FakeEnv:
    """A registry test double: six tasks over two splits and three difficulties."""

    name = "fake"

    def __init__(self, *, seed: int = 0, source: str | None = None, **kwargs: Any) -> None:
        self.seed = seed
        self.source = source
        self.kwargs = kwargs

    def tasks(self, split: str | None = None) -> list[TaskSpec]:
        tasks = [TaskSpec(id=f"fake-{i}", instruction=f"Do   thing\n{i}", difficulty=1 + i % 3, template=f"tpl{i % 2}",
                          split="dev" if i < 2 else "test", metadata={"subprocedures": []}) for i in range(6)]
        return [task for task in tasks if split is None or task.split == split]


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "ENVS", {"fake": "test_env_registry:FakeEnv",
                                           "broken": "skilltransfer.envs.no_such_module:Env"})
    monkeypatch.setattr(registry, "OFFICEBENCH_CLASS", "test_env_registry:FakeEnv")
    monkeypatch.delenv(registry.OFFICEBENCH_ENV_VAR, raising=False)


def _tasks(n: int) -> list[TaskSpec]:
    return [TaskSpec(id=f"t{i:03d}", instruction="x", difficulty=1, template="a") for i in range(n)]


def test_real_registry_names() -> None:
    assert registry.ENVS == {"apps": "skilltransfer.envs.apps:AppsEnv", "office": "skilltransfer.envs.office:OfficeEnv",
                             "datasci": "skilltransfer.envs.datasci:DataSciEnv",
                             "scienceworld": "skilltransfer.envs.scienceworld:ScienceWorldEnv"}
    with pytest.raises(InputError, match=r"^Unknown env 'x'\. Available: apps, office, datasci, scienceworld$"):
        registry.get_env("x")


def test_get_env_passes_kwargs(fake_registry: None) -> None:
    env = registry.get_env("fake", seed=3, sandboxed=False)
    assert isinstance(env, FakeEnv)
    assert env.seed == 3
    assert env.kwargs == {"sandboxed": False}


def test_unimportable_env_is_an_input_error(fake_registry: None) -> None:
    with pytest.raises(InputError, match="'broken'.*not available.*ModuleNotFoundError"):
        registry.get_env("broken")


def test_officebench_source(fake_registry: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = registry.get_env(f"officebench:{tmp_path}", workdir=tmp_path)
    assert env.source == f"officebench:{tmp_path}"
    with pytest.raises(InputError, match="does not exist"):
        registry.get_env(f"officebench:{tmp_path / 'missing'}")
    monkeypatch.chdir(tmp_path)  # no ../shared/officebench/tasks here
    with pytest.raises(InputError, match="OFFICEBENCH_ROOT"):
        registry.get_env("officebench")
    monkeypatch.setenv(registry.OFFICEBENCH_ENV_VAR, str(tmp_path))
    assert registry.get_env("officebench").source == f"officebench:{tmp_path}"


def test_no_officebench_folder_is_guessed_beside_the_repository(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Only $OFFICEBENCH_ROOT says where the real tasks are: a ``../shared`` folder of this project's own machines
    is no user-facing default."""
    monkeypatch.delenv(registry.OFFICEBENCH_ENV_VAR, raising=False)
    repo = tmp_path / "repo"
    (tmp_path / "shared" / "officebench" / "tasks").mkdir(parents=True)
    repo.mkdir()
    monkeypatch.chdir(repo)
    assert registry.officebench_root() is None
    with pytest.raises(InputError, match="git clone https://github.com/zlwang-cs/OfficeBench"):
        registry.get_env("officebench")


def test_stream_order_canonical_and_deterministic() -> None:
    tasks = _tasks(30)
    canonical = registry.stream_order(tasks)
    assert canonical == registry.stream_order(list(reversed(tasks)), order_seed=0)  # input order does not matter
    assert sorted(t.id for t in canonical) == [t.id for t in tasks]
    assert [t.id for t in canonical] != [t.id for t in tasks]  # it is shuffled
    other = registry.stream_order(tasks, order_seed=1)
    assert [t.id for t in other] != [t.id for t in canonical]
    assert other == registry.stream_order(tasks, order_seed=1)
    assert registry.stream_order([]) == []


def test_stream_order_pinned() -> None:
    """The canonical order is part of the results' definition: changing it must be deliberate."""
    assert [t.id for t in registry.stream_order(_tasks(6))] == ["t004", "t002", "t001", "t000", "t005", "t003"]


def test_stream_order_rejects_duplicate_ids() -> None:
    with pytest.raises(InputError, match="t000"):
        registry.stream_order(_tasks(3) + _tasks(2))


def test_summarize_counts_and_unavailable(fake_registry: None) -> None:
    summary = registry.summarize("fake")
    assert summary.available
    assert summary.by_split == {"dev": 2, "test": 4}
    assert summary.by_difficulty == {1: 2, 2: 2, 3: 2}
    assert summary.total == 6
    broken = registry.summarize("broken")
    assert not broken.available
    assert "ModuleNotFoundError" in broken.reason


def test_cli_envs_list(fake_registry: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(registry.OFFICEBENCH_ENV_VAR, raising=False)
    result = CliRunner().invoke(app, ["envs", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    fake = next(line for line in lines if line.startswith("fake"))
    assert "6 tasks" in fake
    assert "dev=2, test=4" in fake
    assert "1=2, 2=2, 3=2" in fake
    assert any(line.startswith("broken") and "unavailable" in line for line in lines)
    assert any(line.startswith("officebench") and "not configured" in line for line in lines)
    monkeypatch.setenv(registry.OFFICEBENCH_ENV_VAR, str(tmp_path))
    result = CliRunner().invoke(app, ["envs", "list"])
    assert result.exit_code == 0, result.output
    assert f"source: {tmp_path}" in result.output
    assert sum(line.startswith("officebench") for line in result.output.splitlines()) == 1


def test_cli_envs_show(fake_registry: None) -> None:
    result = CliRunner().invoke(app, ["envs", "show", "fake", "--limit", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "fake-0\td1\ttpl0\tDo thing 0"
    assert lines[1].startswith("fake-1\td2\ttpl1")
    assert lines[2] == "... 4 more (use --limit 0 to show all)"
    result = CliRunner().invoke(app, ["envs", "show", "fake", "--limit", "0", "--split", "dev"])
    assert len(result.output.splitlines()) == 2


def test_cli_envs_show_unknown_env(fake_registry: None) -> None:
    result = CliRunner().invoke(app, ["envs", "show", "nope"])
    assert result.exit_code != 0
    assert isinstance(result.exception, InputError)
    assert "Unknown env 'nope'. Available: fake, broken" in str(result.exception)


# --------------------------------------------------------------------------------------------- installed plug-ins
PLUGIN_MODULE = '''
from skilltransfer.protocols import TaskSpec


class PlugEnv:
    """An installed plug-in env: ``size`` tasks; its constructor takes no seed."""

    official_metric = "reward"

    def __init__(self, *, size: int = 2) -> None:
        self.size = size

    def tasks(self, split=None):
        return [TaskSpec(id=f"plug-{i}", instruction="x", difficulty=1, template="p") for i in range(self.size)]

    def start(self, task):
        raise NotImplementedError
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution on ``sys.path`` (a ``.dist-info`` folder, as pip installs one) whose entry points in
    ``skilltransfer.envs`` name an env class, a function (``notenv = os:system``) and a bundled env's name."""
    site = tmp_path / "site"
    info = site / "plugdist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugdist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{registry.PLUGIN_GROUP}]\nplugged = plugenv_mod:PlugEnv\n"
                                           "notenv = os:system\napps = plugenv_mod:PlugEnv\n")
    (site / "plugenv_mod.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_installed_plugin_is_an_env_by_its_entry_point_name(installed_plugin: Path) -> None:
    assert registry.plugin_envs() == {"notenv": "os:system", "plugged": "plugenv_mod:PlugEnv"}  # apps stays bundled
    assert registry.env_target("apps") == registry.ENVS["apps"]
    env = registry.get_env("plugged", seed=3)  # a constructor without seed gets none
    assert [task.id for task in env.tasks()] == ["plug-0", "plug-1"]
    assert registry.official_metric("plugged") == "reward"
    with pytest.raises(InputError, match="'notenv' is not a class with tasks"):  # shape first: never called
        registry.get_env("notenv", command="true")


def test_a_spec_names_a_plugin_with_no_allow_import(installed_plugin: Path, tmp_path: Path) -> None:
    """A spec names a plug-in like a bundled env, even where imports are gated (the CLI); the same class named as
    ``module:Class`` needs its module allowed."""
    from skilltransfer.runner.build import build_env
    from skilltransfer.runner.spec import build_spec, env_entry

    spec = build_spec({"env": {"env": "plugged", "args": {"size": 3}}, "condition": "task"}, allowed_imports=())
    phase = spec.phases[0]
    env = build_env(env_entry(phase, next(iter(phase.envs))), tmp_path / "work")
    assert len(env.tasks()) == 3
    with pytest.raises(InputError, match="field 'envs.plugenv_mod:PlugEnv'.*--allow-import plugenv_mod"):
        build_spec({"env": "plugenv_mod:PlugEnv", "condition": "task"}, allowed_imports=())
    build_spec({"env": "plugenv_mod:PlugEnv", "condition": "task"}, allowed_imports=["plugenv_mod"])
    with pytest.raises(InputError, match="'notenv' is not a class"):
        build_spec({"env": "notenv", "condition": "task"}, allowed_imports=())


def test_cli_envs_list_shows_installed_plugins(installed_plugin: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(registry.OFFICEBENCH_ENV_VAR, raising=False)
    result = CliRunner().invoke(app, ["envs", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    plugged = next(line for line in lines if line.startswith("plugged"))
    assert "2 tasks" in plugged, plugged
    assert "(plug-in plugenv_mod:PlugEnv)" in plugged, plugged
    assert any(line.startswith("notenv") and "not a class" in line for line in lines), lines
    assert sum(line.startswith("apps ") for line in lines) == 1
    result = CliRunner().invoke(app, ["envs", "show", "plugged", "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("plug-0\td1\tp\tx")
