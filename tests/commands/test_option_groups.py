"""Option groups: a group's flags are declared once, stand in the command's help where the group is taken, and reach
the command as one collected value; every command that takes a model takes the one model group."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from skilltransfer.commands.option_groups import MODEL, ModelOptions, OptionGroup, model_group, with_groups
from skilltransfer.commands.options import ModelString


def _pair(first: Annotated[int, typer.Option(help="First.")] = 1,
          second: Annotated[str, typer.Option(help="Second.")] = "b") -> tuple[int, str]:
    return first, second


PAIR = OptionGroup(_pair)


def test_a_group_stands_where_it_is_taken_and_is_collected() -> None:
    seen: dict[str, Any] = {}

    @with_groups
    def command(name: Annotated[str, typer.Option(help="Name.")] = "x", *,
                pair: Annotated[tuple[int, str], PAIR],
                last: Annotated[bool, typer.Option(help="Last.")] = False) -> None:
        seen.update(name=name, pair=pair, last=last)

    assert list(inspect.signature(command).parameters) == ["name", "first", "second", "last"]
    app = typer.Typer()
    app.command()(command)
    done = CliRunner().invoke(app, ["--second", "z", "--last"])
    assert done.exit_code == 0, done.output
    assert seen == {"name": "x", "pair": (1, "z"), "last": True}
    help_text = CliRunner().invoke(app, ["--help"]).output
    assert help_text.index("--name") < help_text.index("--first") < help_text.index("--second") < \
        help_text.index("--last")


def test_an_option_named_twice_is_refused() -> None:
    with pytest.raises(TypeError, match="options named twice: first"):
        @with_groups
        def command(first: int = 0, *, pair: Annotated[tuple[int, str], PAIR]) -> None:
            pass


def test_the_model_group_collects_one_model_options() -> None:
    options = MODEL.collect(model="m@http://h/v1", temperature=0.5, cache=None, retry_budget=3.0)
    assert options == ModelOptions(spec="m@http://h/v1", temperature=0.5, retry_budget_s=3.0)
    names = {p.name for p in MODEL.parameters}
    assert "max_tokens" not in names
    assert {"model", "base_url", "model_name", "script"} <= names
    with_cap = model_group(max_tokens="Most completion tokens per call.")
    assert [p.name for p in with_cap.parameters] == [p.name for p in inspect.signature(
        with_cap.collect).parameters.values()]
    with pytest.raises(TypeError, match="no option 'top_k'"):
        MODEL.with_option("top_k", ModelString)


def test_every_command_that_takes_a_model_takes_the_model_group() -> None:
    """Each command with ``--model`` has every option of the group, as the group declares it (help, kind,
    panel); a command that copied the flags would drift from it."""
    from skilltransfer.cli import app

    root = typer.main.get_command(app)
    declared = {p.name: p.annotation.__metadata__[0] for p in MODEL.parameters}
    commands = []
    for name in ["run", "evolve", "judge", "library"]:
        command = root.get_command(None, name)
        found = [(f"library {sub}", command.get_command(None, sub)) for sub in command.list_commands(None)] \
            if hasattr(command, "list_commands") else [(name, command)]
        commands += [(path, c) for path, c in found if any("--model" in p.opts for p in c.params)]
    assert sorted(path for path, _ in commands) == ["evolve", "judge", "library decompose", "library organize",
                                                   "library route", "run"]
    for path, command in commands:
        params = {p.name: p for p in command.params}
        for name, info in declared.items():
            assert params[name].help == info.help, f"{path} --{name}"
            assert params[name].hidden == info.hidden, f"{path} --{name}"
            assert params[name].rich_help_panel == info.rich_help_panel, f"{path} --{name}"
