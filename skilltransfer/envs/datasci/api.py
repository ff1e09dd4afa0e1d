"""The datasci env's API overview for the agent (harness side); the apps themselves are in ``datasci_tools``."""

from __future__ import annotations

import inspect

from skilltransfer.envs.datasci.datasci_tools.apps import FilesApp, setup

__all__ = ["docs_text", "setup"]


def docs_text() -> str:
    """Compact API overview shown to the agent (``Episode.docs()``)."""
    lines = ["Data-science tasks: answer questions over the data files in data/<domain>/ (CSV, JSON, README.md).",
             "pandas and numpy are importable; paths are relative to the working directory.",
             "Finish with complete_task(answer=...) (a number, a string or a list, as the question asks).", "",
             "apis.files:"]
    for name in ("list_domains", "list_files", "describe", "read_text"):
        fn = getattr(FilesApp, name)
        sig = str(inspect.signature(fn)).replace("(self, ", "(").replace("(self)", "()")
        lines.append(f"  {name}{sig}: {(inspect.getdoc(fn) or '').splitlines()[0]}")
    lines.append("apis.api_docs: show_app_descriptions(), show_api_descriptions(app_name), "
                 "show_api_doc(app_name, api_name)")
    return "\n".join(lines)
