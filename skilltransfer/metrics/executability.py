"""Executability checks a sandbox can make without a model (issue 59; docs/external-validity.md): do the files a
skill's SKILL.md names exist in its package, do the code blocks of its body parse, do the scripts it ships parse and
start.

The static part is here (it reads only the `Skill`: its body, its package's file list and the text the reader loaded);
starting a script is the sandbox's (`skilltransfer.sandbox.script_check`), handed in as a `ScriptRunner`. Nothing
here runs a skill's code: Python is parsed with the ``ast`` module, shell with ``bash -n`` (which reads, never runs).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal

from skilltransfer.skill import INSTRUCTION_FILE, Skill
from skilltransfer.util import pyast

PACKAGE_FOLDERS = ("scripts", "references", "reference", "assets", "templates", "examples", "resources", "lib", "bin",
                   "tools")
"""First folders of a path that a SKILL.md body names as a file of its own package."""
PYTHON_BLOCKS = ("python", "py", "python3")
SHELL_BLOCKS = ("bash", "sh", "shell", "zsh")
SCRIPT_SUFFIXES = (".py", ".sh")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(PACKAGE_FOLDERS) + r")/[\w.\-/]*[\w-]\.[A-Za-z0-9]{1,8})(?![\w/])")
_FENCE = re.compile(r"^(`{3,}|~{3,})[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_PROMPT = re.compile(r"^\s*\$ ", re.MULTILINE)
ScriptStatus = Literal["ok", "running", "missing_module", "error", "syntax", "unchecked"]
"""How a shipped script fared: ``ok`` (ended without a Python traceback), ``running`` (still running at the time
limit: it started), ``missing_module`` (its traceback is a missing module: the environment's, left out of the share),
``error`` (another traceback, or the sandbox could not run it), ``syntax`` (does not parse), ``unchecked`` (its text
was not loaded, or it was not run)."""
ScriptRunner = Callable[[Skill, str], tuple[str, str]]
"""Starts one script of a skill's package (path relative to the package) and says how it fared (a `ScriptStatus`)
with a one-line detail (`skilltransfer.sandbox.script_check.ScriptStarter`)."""
_STATUSES: tuple[ScriptStatus, ...] = ("ok", "running", "missing_module", "error", "syntax", "unchecked")


def _normal(path: str) -> str | None:
    """A relative package path as the package's file list spells it, or None when it is no relative path."""
    path = path.strip().split("#", 1)[0].split("?", 1)[0]
    if not path or "://" in path or path.startswith(("/", "~", "mailto:")) or any(c in path for c in "<>{}$*|"):
        return None
    parts = [part for part in PurePosixPath(path).parts if part not in (".", "")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def named_files(body: str) -> list[str]:
    """The relative package paths a SKILL.md body names, in order of first mention: markdown link targets (relative
    paths with a file suffix) and paths below one of `PACKAGE_FOLDERS`."""
    found: dict[str, None] = {}
    for match in _LINK.finditer(body):
        path = _normal(match.group(1))
        if path is not None and "." in path.rsplit("/", 1)[-1]:
            found.setdefault(path)
    for match in _PATH.finditer(body):
        path = _normal(match.group(1))
        if path is not None:
            found.setdefault(path)
    return list(found)


def code_blocks(body: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a body marked as Python or shell: (language, code), language ``python``/``shell``."""
    out = []
    for match in _FENCE.finditer(body):
        tag = match.group(2).lower()
        if tag in PYTHON_BLOCKS:
            out.append(("python", match.group(3)))
        elif tag in SHELL_BLOCKS:
            out.append(("shell", _PROMPT.sub("", match.group(3))))
    return out


def python_parses(source: str) -> bool:
    try:
        pyast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def shell_parses(source: str) -> bool | None:
    """``bash -n`` over the source (read, never run); None when bash is not installed."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        done = subprocess.run([bash, "-n"], input=source.encode("utf-8", errors="replace"), capture_output=True,
                              timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@dataclass
class ScriptCheck:
    """One shipped script and how it fared."""

    path: str
    status: ScriptStatus
    detail: str = ""


@dataclass
class SkillChecks:
    """The executability checks of one skill."""

    named: list[str] = field(default_factory=list)
    """Relative paths the body names."""
    missing: list[str] = field(default_factory=list)
    """Of those, the paths that are not a file of the package."""
    blocks: int = 0
    """Python and shell code blocks of the body (shell ones counted only when bash is installed)."""
    bad_blocks: int = 0
    """Of those, the blocks that do not parse."""
    scripts: list[ScriptCheck] = field(default_factory=list)

    @property
    def scripts_counted(self) -> list[ScriptCheck]:
        """The scripts that enter the share: parsed and, where run, not a missing module."""
        return [s for s in self.scripts if s.status in ("ok", "running", "error", "syntax")]

    @property
    def scripts_failed(self) -> list[ScriptCheck]:
        return [s for s in self.scripts if s.status in ("error", "syntax")]

    @property
    def passes(self) -> bool:
        """Every check that applies passes."""
        return not self.missing and not self.bad_blocks and not self.scripts_failed


def check_skill(skill: Skill, run_script: ScriptRunner | None = None) -> SkillChecks:
    """The checks of one skill: the files its body names (against its package's file list; a skill without a package,
    from a JSONL library, names files that cannot exist), its code blocks, and its ``.py``/``.sh`` files (parsed from
    the text the reader loaded; a ``.py`` one started by ``run_script`` when given)."""
    checks = SkillChecks()
    files = {item.path for item in skill.package.files} if skill.package is not None else set(skill.resources)
    files.add(INSTRUCTION_FILE)
    checks.named = named_files(skill.body)
    checks.missing = [path for path in checks.named if path not in files]
    for language, code in code_blocks(skill.body):
        ok = python_parses(code) if language == "python" else shell_parses(code)
        if ok is None:
            continue
        checks.blocks += 1
        checks.bad_blocks += not ok
    for path in sorted(files):
        if not path.endswith(SCRIPT_SUFFIXES):
            continue
        text = skill.resources.get(path)
        if text is None:
            checks.scripts.append(ScriptCheck(path, "unchecked", "its text was not loaded"))
            continue
        parsed = python_parses(text) if path.endswith(".py") else shell_parses(text)
        if parsed is None:
            checks.scripts.append(ScriptCheck(path, "unchecked", "bash is not installed"))
        elif not parsed:
            checks.scripts.append(ScriptCheck(path, "syntax", "does not parse"))
        elif path.endswith(".sh"):
            checks.scripts.append(ScriptCheck(path, "ok", "parsed (shell scripts are not run)"))
        elif run_script is None:
            checks.scripts.append(ScriptCheck(path, "ok", "parsed, not run (no sandbox asked for)"))
        else:
            status, detail = run_script(skill, path)
            known = next((s for s in _STATUSES if s == status), None)
            checks.scripts.append(ScriptCheck(path, known or "error", detail if known else f"{status}: {detail}"))
    return checks


@dataclass
class ExecutabilitySummary:
    """A library's executability diagnostics (docs/external-validity.md)."""

    named_files_exist: float
    code_blocks_parse: float
    scripts_start: float
    exec_checks: float
    named: int
    missing: int
    blocks: int
    bad_blocks: int
    scripts: int
    scripts_failed: int
    missing_module: int
    unchecked: int


def summarise(checks: Sequence[SkillChecks]) -> ExecutabilitySummary:
    """The library-level shares over its skills' checks (1 where nothing was there to check)."""
    named = sum(len(c.named) for c in checks)
    missing = sum(len(c.missing) for c in checks)
    blocks = sum(c.blocks for c in checks)
    bad = sum(c.bad_blocks for c in checks)
    counted = sum(len(c.scripts_counted) for c in checks)
    failed = sum(len(c.scripts_failed) for c in checks)
    return ExecutabilitySummary(
        named_files_exist=1.0 - missing / named if named else 1.0,
        code_blocks_parse=1.0 - bad / blocks if blocks else 1.0,
        scripts_start=1.0 - failed / counted if counted else 1.0,
        exec_checks=sum(c.passes for c in checks) / len(checks) if checks else 1.0,
        named=named, missing=missing, blocks=blocks, bad_blocks=bad, scripts=counted, scripts_failed=failed,
        missing_module=sum(s.status == "missing_module" for c in checks for s in c.scripts),
        unchecked=sum(s.status == "unchecked" for c in checks for s in c.scripts))
