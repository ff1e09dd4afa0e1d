"""Running the CLI in-process against the mock server over the counter world (a test helper)."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest
from typer.testing import CliRunner

from skilltransfer.cli import app, main
from skilltransfer.errors import InputError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.log import TrajectoryLog

TINY = "helpers_tinyenv:TinyEnv"
ALLOW_TINY = ("--allow-import", "helpers_tinyenv")
"""What ``grid`` and ``run`` need to import the module of `TINY` named in a spec file or a ``-c`` (a spec alone
imports no module; ``run --env TINY`` is the user's own and needs none)."""


def cli(*args: str) -> object:
    """Invoke the CLI in-process; user errors surface as the raised InputError."""
    result = CliRunner().invoke(app, list(args))
    if isinstance(result.exception, InputError):
        raise result.exception
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def run_tiny(server: MockServer, out, condition: str, targets=(3, 5, 2), *extra: str) -> object:
    """``skilltransfer run`` of the counter world against ``server`` (hash embedder, no sandbox, no bar)."""
    return cli("run", "--env", TINY, "--condition", condition, "--model", "openai/mock", "--base-url", server.url,
               "--api-key", "x", "--embedder", "hash:128", "--out", str(out),
               "--env-arg", f"targets={json.dumps(list(targets))}", "--no-sandbox", "--no-progress", *extra)


def records_of(path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def trajectory_of(path, record) -> TrajectoryLog:
    return TrajectoryLog.model_validate_json((path / record["trajectory"]).read_text())


def main_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the console entry point (``skilltransfer.cli.main``, with its one-line errors) on ``argv``; returns
    (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["skilltransfer", *argv])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def main_output(*args: str) -> tuple[int, str]:
    """Run the console entry point in-process on ``args``; returns (exit code, stdout + stderr). Unlike `main_cli` it
    needs no function-scoped fixture, so a module-scoped fixture can use it."""
    output = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(output), \
            contextlib.redirect_stderr(output):
        patch.setattr(sys, "argv", ["skilltransfer", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, output.getvalue()
