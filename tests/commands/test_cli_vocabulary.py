"""One vocabulary across commands: the test walks every command of the CLI and reads its options.

A name means one thing everywhere (every use's help starts with its `VOCABULARY` phrase; its kind, flag or value
of one type, is the same), one meaning has one name (no other option's help starts with a phrase of another name),
a short form belongs to one name, and hidden options are the deprecated spellings `DEPRECATED` lists.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from skilltransfer.cli import COMMANDS, app
from skilltransfer.commands.options import DEPRECATED, DEPRECATED_MEANINGS, VOCABULARY


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if hasattr(command, "list_commands"):
        for name in command.list_commands(None):
            yield from _commands(command.get_command(None, name), (*path, name))
    else:
        yield " ".join(path), command


def _options() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    out = []
    for path, command in _commands(root):
        out += [(path, p) for p in command.params if type(p).__name__.endswith("Option") and path]
    return out


OPTIONS = _options()


def _long(option: Any) -> str:
    return next(o for o in option.opts if o.startswith("--"))


def _kind(option: Any) -> str:
    """flag, int, float, text or choice (a repeatable option is of its items' kind; a path is text)."""
    if option.is_flag:
        return "flag"
    bare = re.sub(r"^list\[(.*)\]$", r"\1", option.bare_type())
    return "choice" if "Literal" in bare else {"Path": "text", "str": "text"}.get(bare, bare)


def _starts_with(help_text: str, phrase: str) -> bool:
    return re.match(re.escape(phrase) + r"(?=[\s:;,.(]|$)", help_text) is not None


def test_every_command_is_walked() -> None:
    commands = {path.split()[0] for path, _ in OPTIONS}
    assert set(COMMANDS) - {"show"} <= commands | {"serve"}
    assert len(OPTIONS) > 100


def test_hidden_options_are_deprecated_spellings() -> None:
    for path, option in OPTIONS:
        if not option.hidden:
            for name in option.opts + option.secondary_opts:
                assert name not in DEPRECATED, f"{path}: {name} is deprecated ({DEPRECATED[name]}) but visible"
            continue
        for name in option.opts:
            assert name in DEPRECATED or (path, name) in DEPRECATED_MEANINGS, (
                f"{path}: hidden option {name} is not a deprecated spelling (add it to DEPRECATED)")


def test_one_name_one_meaning() -> None:
    """A name used by two commands is in the vocabulary, and every use's help starts with its phrase."""
    uses: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for path, option in OPTIONS:
        if not option.hidden:
            uses[_long(option)].append((path, option))
    problems = []
    for name, used in sorted(uses.items()):
        if len(used) > 1 and name not in VOCABULARY:
            problems.append(f"{name} is used by {', '.join(p for p, _ in used)}: add its one meaning to VOCABULARY")
            continue
        if name not in VOCABULARY:
            continue
        term = VOCABULARY[name]
        for path, option in used:
            if not _starts_with(option.help or "", term.phrase):
                problems.append(f"{path} {name}: help {option.help!r} does not start with {term.phrase!r}")
            shorts = sorted(o for o in option.opts if not o.startswith("--"))
            if shorts != ([term.short] if term.short else []):
                problems.append(f"{path} {name}: short forms {shorts}, the vocabulary says {term.short}")
        kinds = {(_kind(o), tuple(o.secondary_opts)) for _, o in used}
        if len(kinds) > 1:
            problems.append(f"{name} is of several kinds: {sorted(kinds)}")
    assert not problems, "\n".join(problems)


def test_one_meaning_one_name() -> None:
    """No option says, under another name, what a vocabulary name means; a short form belongs to one name."""
    phrases = [term.phrase for term in VOCABULARY.values()]
    assert len(set(phrases)) == len(phrases)
    problems = []
    shorts: dict[str, set[str]] = defaultdict(set)
    for path, option in OPTIONS:
        if option.hidden:
            continue
        name = _long(option)
        for other, term in VOCABULARY.items():
            if other != name and _starts_with(option.help or "", term.phrase):
                problems.append(f"{path} {name}: its help starts with {term.phrase!r}, the meaning of {other}")
        for short in (o for o in option.opts if not o.startswith("--")):
            shorts[short].add(name)
    problems += [f"short form {s} names {sorted(n)}" for s, n in shorts.items() if len(n) > 1]
    assert not problems, "\n".join(problems)


def test_choices_are_listed_not_free_strings() -> None:
    """Options whose help lists the values they take are choices (a typo fails at parse time, naming them)."""
    listed = {("judge", "--orders"), ("score", "--specificity"), ("score", "--skill-text"), ("report", "--metric"),
              ("report", "--utility-binning"), ("library organize", "--as"), ("library route", "--reuse"),
              ("evolve", "--reuse"), ("run", "--reuse"), ("grid", "--backend"), ("judge", "--cache-mode"),
              ("run", "--cache-mode")}
    found = {(path, _long(o)): _kind(o) for path, o in OPTIONS}
    assert {key: found[key] for key in listed} == dict.fromkeys(listed, "choice")


PROBE = """
import sys
from skilltransfer.cli import main
own, sys.argv = sys.argv[1], ["skilltransfer", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
heavy = {"numpy", "torch", "pandas", "matplotlib", "openai", "faiss", "scipy", "sentence_transformers"}
found = {m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy}
found |= {m for m in sys.modules if m.startswith("skilltransfer.commands.") and m not in (own, OPTIONS)}
print("HEAVY", sorted(found), file=sys.stderr)
""".replace("OPTIONS", repr("skilltransfer.commands.options"))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["report", "--help"]])
def test_help_and_version_start_without_heavy_imports(argv: list[str]) -> None:
    """``skilltransfer --help`` / ``--version`` import no command module, numpy or the model clients; ``report
    --help`` imports its own module only (it defers its numeric and plotting stack to the run)."""
    own = f"skilltransfer.commands.{argv[0]}" if len(argv) > 1 else "-"
    done = subprocess.run([sys.executable, "-c", PROBE, own, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stderr, done.stderr
    assert ("skilltransfer 0" in done.stdout) if argv == ["--version"] else ("Usage" in done.stdout)


def test_command_table_matches_the_commands() -> None:
    """`COMMANDS`' one-line help (what ``--help`` lists without importing) names a command that loads."""
    root = typer.main.get_command(app)
    for name in COMMANDS:
        command = root.get_command(None, name)
        assert command is not None
        assert command.name == name


def test_every_run_shortcut_flag_is_a_parameter_of_run() -> None:
    """``run`` reads its shortcut flags by the names in `FLAG_KEYS` (one list, issue 40): each is a parameter."""
    import inspect

    from skilltransfer.commands.run import FLAG_KEYS, run

    assert set(FLAG_KEYS) <= set(inspect.signature(run).parameters)
