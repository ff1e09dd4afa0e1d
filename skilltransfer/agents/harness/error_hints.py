"""Error hints: an ``AttributeError`` for ``<object>.<name>`` where the docs document other ``<object>.<api>(`` calls
gets a note listing those APIs (the 1.5B model invented ``delete_file``, ``file_exists``, ``exists`` on office and
repeated them until stuck); a ``ModuleNotFoundError`` for a name the docs use as an object (``import apis.files``)
gets a note that it is already defined and must not be imported. Switch: ``agent.error_hints``."""

from __future__ import annotations

import re

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, Rewrite, RunLike
from skilltransfer.log import ActionStep

_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")
_NO_ATTRIBUTE = re.compile(r"AttributeError: '\w+' object has no attribute '(\w+)'")


def import_hint(output: str, docs: str) -> str:
    """A note for code that imports a name the env provides as an object (``import apis`` -> ModuleNotFoundError)."""
    missing = _NO_MODULE.search(output)
    if missing is None:
        return ""
    name = missing.group(1).split(".")[0]
    if not re.search(rf"\b{re.escape(name)}\.", docs):
        return ""
    return (f"\n(note: `{name}` is not a module you can import: it is an object already defined in your namespace. "
            f"Do not import it; call it directly, e.g. `{name}.<name>(...)` as the documentation shows.)")


def api_hint(output: str, code: str, docs: str) -> str:
    """A note for a call of an API the docs do not list (``apis.excel.delete_file`` -> AttributeError): the object's
    documented APIs, found in the docs as ``<object>.<name>(``; "" when the docs list none for it."""
    missing = _NO_ATTRIBUTE.search(output)
    if missing is None:
        return ""
    name = missing.group(1)
    called = re.search(rf"\b([A-Za-z_]\w*(?:\.\w+)*)\.{re.escape(name)}\b", code)
    if called is None:
        return ""
    owner = called.group(1)
    documented = sorted(set(re.findall(rf"\b{re.escape(owner)}\.(\w+)\(", docs)) - {name})
    if not documented:
        return ""
    return (f"\n(note: `{owner}` has no API `{name}`. Its documented APIs are: {', '.join(documented)}. Use one of "
            "them; do not invent API names.)")


class ErrorHints(Guard):
    name = "error_hints"

    def step_observed(self, run: RunLike, step: ActionStep, *, ran: bool) -> Decision:
        if not ran or not step.error or step.action is None:
            return ACCEPT
        docs = run.messages[0]["content"]
        hints = import_hint(step.observation, docs) + api_hint(step.observation, step.action, docs)
        return Rewrite(step.observation + hints, "error_hint") if hints else ACCEPT
