"""Does a script a skill ships start? (issue 59; `skilltransfer.metrics.executability`.)

`ScriptStarter` writes each skill's package as an agent would be given it (``SKILL.md``'s folder with the text files
the reader loaded) into the workspace of one sandbox worker (`SandboxRunner`: on a root harness, private namespaces
with no network, a private uid, limits), and runs a ``.py`` file there as ``python <script> --help`` from its
package folder, stdin empty, for at most ``timeout_s`` seconds. The verdict: ``ok`` (it ended without a Python
traceback, whatever its exit code: a script that checks its arguments and exits has started), ``running`` (still
running at the limit: it started), ``missing_module`` (its traceback is a ``ModuleNotFoundError`` / ``ImportError``:
a dependency this machine lacks, which says little about the skill), ``error`` (another traceback: the exception's
line is the detail). Whatever the script prints stays in the pipes of its own process; the verdict comes back on
the worker's channel under a fresh random marker, so a script cannot forge it.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

from skilltransfer.sandbox.runner import SandboxRunner
from skilltransfer.sandbox.scratch import scratch_dir
from skilltransfer.sandbox.values import Limits, SandboxError
from skilltransfer.skill import INSTRUCTION_FILE, Skill

DEFAULT_TIMEOUT_S = 10.0
_MISSING = ("ModuleNotFoundError", "ImportError")
_CODE = """
import json as _json, subprocess as _subprocess, sys as _sys
try:
    _done = _subprocess.run([_sys.executable, {script!r}, "--help"], cwd={folder!r}, stdin=_subprocess.DEVNULL,
                            capture_output=True, timeout={timeout!r})
    _verdict = {{"rc": _done.returncode, "err": _done.stderr.decode("utf-8", "replace")[-4000:]}}
except _subprocess.TimeoutExpired:
    _verdict = {{"timeout": True}}
print({marker!r} + _json.dumps(_verdict))
"""


def classify(verdict: dict[str, object]) -> tuple[str, str]:
    """(status, detail) from what the worker saw: the exit code and the tail of stderr, or a timeout."""
    if verdict.get("timeout"):
        return "running", "still running at the time limit"
    err = str(verdict.get("err", ""))
    code = verdict.get("rc")
    if "Traceback (most recent call last)" not in err:
        return "ok", f"exited {code}"
    last = next((line.strip() for line in reversed(err.splitlines()) if line.strip()), "")
    name = last.split(":", 1)[0].rsplit(".", 1)[-1]
    return ("missing_module" if name in _MISSING else "error"), last[:200]


class ScriptStarter:
    """Starts shipped scripts in one sandbox worker (module docstring); a `ScriptRunner`. Close it when done.

    Args:
        timeout_s: how long one script may run.
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.workspace = scratch_dir("scripts-")
        self._runner: SandboxRunner | None = None
        self._written: dict[str, Path] = {}
        self.runs = 0

    def _package(self, skill: Skill) -> Path:
        key = skill.id or skill.name
        if key not in self._written:
            folder = self.workspace / f"p{len(self._written)}"
            folder.mkdir()
            (folder / INSTRUCTION_FILE).write_text(skill.body, encoding="utf-8")
            for path, text in skill.resources.items():  # names checked by the reader (no "..", no absolute path)
                target = folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            self._written[key] = folder
        return self._written[key]

    def __call__(self, skill: Skill, path: str) -> tuple[str, str]:
        if path not in skill.resources:
            return "unchecked", "its text was not loaded"
        folder = self._package(skill)
        if self._runner is None:
            limits = Limits(wall_s=self.timeout_s + 20, cpu_s=self.timeout_s + 20)
            try:
                self._runner = SandboxRunner(self.workspace, limits=limits)
            except SandboxError as exc:
                return "error", f"the sandbox could not start: {exc}".replace("\n", " ")
        marker = f"@@script-check-{secrets.token_hex(8)}@@"
        code = _CODE.format(script=str(folder / path), folder=str(folder), timeout=self.timeout_s, marker=marker)
        self.runs += 1
        result = self._runner.execute(code)
        line = next((row for row in result.output.splitlines() if row.startswith(marker)), None)
        if line is None:
            return "error", (result.error or "no verdict from the sandbox").splitlines()[0][:200]
        try:
            verdict = json.loads(line[len(marker):])
        except json.JSONDecodeError:
            return "error", "unreadable verdict from the sandbox"
        return classify(verdict)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        shutil.rmtree(self.workspace, ignore_errors=True)
