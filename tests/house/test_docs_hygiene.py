"""The docs print no author's local paths and no removed CLI spellings (the deprecated ones `--help` no longer
lists): what a reader copies works on their machine; and no test names a path of this machine outside the
repository (a folder beside it is found from the repository's root, as ``conftest.SHARED`` is)."""

from __future__ import annotations

import re
from pathlib import Path

from skilltransfer.commands.options import DEPRECATED

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"])
LOCAL = re.compile(r"(?<![\w.])/(?:work|home|Users|root)/[\w.-]+")
TESTS = sorted(path for path in ROOT.joinpath("tests").rglob("*.py") if "data" not in path.relative_to(ROOT).parts)
"""Every test module, helper and conftest, in every folder of tests/ (tests/data holds fixtures, not tests)."""
IN_A_WORLD = {("test_integrity.py", "/home/bomb-"): "a path of the office world's own file system, written by the "
                                                    "agent under test",
              ("test_docs_hygiene.py", "/home/bomb-"): "the line above",
              ("test_validation_diagnostics.py", "/root/out.csv"): "a path a skill's text names (an absolute path "
                                                                   "the executability check must not count)",
              ("test_validation_diagnostics.py", "/root/data.csv"): "a script's error message in a planted skill",
              ("test_docs_hygiene.py", "/root/out.csv"): "the lines above",
              ("test_docs_hygiene.py", "/root/data.csv"): "the lines above"}
"""(test file, path) -> why the path is not this machine's."""
KEPT = {"changelog.md"}
"""Pages that may name old spellings (the changelog says what changed)."""


def test_no_local_paths_in_docs():
    found = [f"{page.relative_to(ROOT)}:{n}: {m.group(0)}" for page in PAGES
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) for m in LOCAL.finditer(line)]
    assert not found, "\n".join(found)


def test_no_removed_flags_in_docs():
    spellings = [old for old in DEPRECATED if old.startswith("--")]
    pattern = re.compile("|".join(re.escape(old) + r"(?![\w-])" for old in spellings))
    found = [f"{page.relative_to(ROOT)}:{n}: {m.group(0)}" for page in PAGES if page.name not in KEPT
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) for m in pattern.finditer(line)]
    assert not found, "\n".join(found)


def test_no_local_paths_in_tests():
    assert Path(__file__).resolve() in TESTS  # the walk reaches the test folders
    assert ROOT / "tests" / "conftest.py" in TESTS
    found = [f"{test.relative_to(ROOT)}:{n}: {m.group(0)}" for test in TESTS
             for n, line in enumerate(test.read_text(encoding="utf-8").splitlines(), 1) for m in LOCAL.finditer(line)
             if (test.name, m.group(0)) not in IN_A_WORLD]
    assert not found, "find these from the repository's root (see conftest.SHARED):\n" + "\n".join(found)
